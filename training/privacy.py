"""The privacy ledger: every round's Gaussian releases, counted by a tight accountant and by the paper's.

Each round the engine turns the plan's views (``plan.View``) into releases: for every client, the noise
multiplier ``z = sigma / sensitivity`` of each release that depends on its data.  Two accountants run
side by side, per client and per adversary group (views of one group compose; the reported epsilon of a
client is its maximum over groups, and ``epsilon_spent`` is the maximum over clients):

Tight (column ``epsilon_spent``), through ``fedbound.accounting``:

* unsampled releases compose exactly: ``k`` Gaussian releases with multipliers ``z_j`` are one Gaussian
  with ``1/z^2 = sum_j 1/z_j^2`` (Dong, Roth & Su 2019, GDP composition), whose exact ``(eps, delta)`` curve
  is the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8);
* sampled releases (``hidden_sampling`` with q < 1) add RDP of the subsampled Gaussian: Poisson sampling
  (Mironov, Talwar & Zhang 2019) or a fixed-size subset without replacement (Wang, Balle & Kasiviswanathan
  2019), as ``View.sampling`` says, and convert with ``rdp_to_dp`` (the unsampled part joins as RDP
  ``alpha / (2 z^2)``);
* and, where a client's history in a group allows it, by PLD as well, and the column reports
  ``min(RDP eps, PLD eps)`` (both are valid upper bounds).  PLD (Meiser & Mohammadi 2018; Koskela et al.
  2020; dp-accounting's ``privacy_loss_distribution``, pessimistic estimate, so an upper bound) applies
  when every Poisson-sampled view of the group has given the client releases of one noise multiplier z and
  one rate q (a view's history changes its z only if the plan changes mid-run): each view is one k-fold
  self-composition of the subsampled Gaussian (add/remove, the relation of the Poisson RDP above), and the
  group's unsampled releases join as the one Gaussian they compose into
  (``fedbound.accounting.pld.composed_pld_epsilon``).  The discretisation makes PLD's stated error
  (releases x discretisation) at most 1 % of the budget ``plan.eps`` (coarser only where PLD would be too
  costly; still an upper bound), and a single view without unsampled releases is evaluated exactly as
  ``fedbound.accounting.pld.pld_calibrate`` evaluated it, so a sigma calibrated exactly by PLD to the
  budget over k releases spends exactly its calibrated eps here.  Sampling without replacement keeps RDP
  only: dp-accounting 0.6 has no PLD of a fixed-size subset (its PLD is for Poisson sampling), and a
  client whose z or q changed keeps RDP.  PLD values are cached in memory by (views' (q, z, k), the
  unsampled multiplier, delta, budget), so a run computes at most one PLD per distinct release count; the
  tight column (per round, per client and at the budget check) is always this min, so it never changes
  accountant from one round to the next.

Paper (column ``epsilon_spent_paper``), ``plan.paper_accountant``:

* ``"classic_linear"``: each release costs the classic Gaussian mechanism's ``eps = c(delta) / z`` with
  ``c = sqrt(2 ln(1.25/delta))`` (Dwork & Roth Thm A.1; NbAFL F4), summed linearly (NbAFL F10, F11;
  ``max_releases`` keeps the ``L`` largest).  With ``paper_amplification="lemma4"`` a q-sampled release
  costs ``-ln(1 - q + q e^{-eps})`` (NbAFL Lemma 4, eq. (56); one-sided, spec 002 E9).
* ``"udp_moments"``: UDP's moments accountant, eq. (16) with the (reversed, spec 003 E5) last step
  of Thm 1: ``eps = sqrt(2 q ln(1/delta) sum_t 1/z_t^2)``, accrued by every client every round.
* ``"rdp"``: RDP of the (Poisson-)subsampled Gaussian for every release, as Opacus does (spec 000 App. A).
* ``"quantized_gaussian"``: WPFL Theorem 1 per upload, composed by basic composition: a client with
  ``n`` uploads spends ``n eps_1`` with ``eps_1`` the smallest eps of one release's bound (46) at
  ``delta_Q / n`` (``fedbound.accounting.qa_gaussian_epsilon`` with ``T0 = 1``, at the client's smallest
  sigma), so the ``n`` uploads together are ``(eps, delta_Q)``; at ``n = T0`` this is Theorem 1 itself.
  Needs ``plan.info`` ``"C"``, ``"R"`` and ``"q"``.  Theorem 1's delta is a per-outcome delta (spec 004
  E17); the tight column counts the Gaussian release before quantization (quantization and bit errors are
  post-processing).
* ``"none"``: no paper accounting.

Which binds: :meth:`PrivacyLedger.check_budget` holds ``plan.eps`` on the tight column, the least of the
valid upper bounds on the mechanism's epsilon, whatever the plan's sigma's were calibrated for; only a plan in
the paper-reproduction mode (``plan.paper_reproduction``, ``[train] paper_reproduction``) binds on the paper's
column (``plan.binding_accountant``).  Checking before each round with quantities that read no record (the
plan's sigma's, the participants) is valid under adaptive composition: per participation pattern the
releases compose as above, and the stopping rule depends on nothing else (for the unsampled part, the
Gaussian-DP filter of Smith & Thakurta 2022, "Fully adaptive composition for Gaussian differential
privacy").  ``fedbound.training.budget`` runs the same ledger over a plan's rounds before training.

Both accountants convert RDP to (eps, delta) over ``plan.orders`` (default ``CALIBRATION_ORDERS``, the
orders ``fedbound.accounting.calibrate_noise`` calibrates on: a sigma calibrated there spends exactly its
eps here).

Nothing here is silent: an epsilon can be ``inf`` (a release with zero noise), never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbound.accounting.calibrate import CALIBRATION_ORDERS as ORDERS
from fedbound.accounting.paper_accountants import PAPER_ACCOUNTANTS as _REGISTERED
from fedbound.accounting.paper_accountants import paper_accountant
from fedbound.errors import CheckpointError, PrivacyBudgetExceeded
from fedbound.training.ledger_history import History, RoundEvent, ViewHistory
from fedbound.training.plan import NoisePlan, View

__all__ = ["Release", "PrivacyLedger", "gaussian_epsilon", "group_pld_epsilon", "epsilons_many",
           "group_epsilons_many", "check_budgets", "releases_many", "ORDERS", "PAPER_ACCOUNTANTS"]

PAPER_ACCOUNTANTS = (*_REGISTERED, "none")


def _accounting():
    import fedbound.accounting as acc

    return acc


def gaussian_epsilon(inv_z2: np.ndarray, delta: float | np.ndarray) -> np.ndarray:
    """Exact epsilon at ``delta`` of a Gaussian mechanism with noise multiplier ``1/sqrt(inv_z2)``.

    ``fedbound.accounting.analytic_gaussian_epsilon`` (Balle & Wang 2018, Thm 8, inverted) on the unique
    ``(inv_z2, delta)`` pairs, in one vectorised root search (``delta`` broadcasts against ``inv_z2``: many
    runs' ledgers at once); ``inv_z2 = 0`` (no release) gives 0, ``inv_z2 = inf`` (no noise) gives ``inf``.
    """
    inv = np.asarray(inv_z2, dtype=np.float64)
    deltas = np.broadcast_to(np.asarray(delta, dtype=np.float64), inv.shape).ravel()
    if deltas.size and np.all(deltas == deltas[0]):  # one delta (one run, or a sweep at one delta)
        uniq, where = np.unique(inv.ravel(), return_inverse=True)
        values = np.column_stack([uniq, np.full(len(uniq), deltas[0])])
    else:
        values, where = np.unique(np.stack([inv.ravel(), deltas], axis=1), axis=0, return_inverse=True)
    eps = np.zeros(len(values))
    eps[np.isinf(values[:, 0])] = np.inf
    live = (values[:, 0] > 0) & np.isfinite(values[:, 0])
    if live.any():
        eps[live] = _accounting().analytic_gaussian_epsilon(1.0 / np.sqrt(values[live, 0]), values[live, 1])
    return eps[np.asarray(where).ravel()].reshape(inv.shape)


def _rdp_to_dp(rdp: np.ndarray, delta: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    """Per-row ``rdp_to_dp`` (unique rows only); all-zero rows give 0, rows with ``inf`` give ``inf``."""
    rows, where = np.unique(rdp, axis=0, return_inverse=True)
    eps = np.zeros(len(rows))
    finite = np.all(np.isfinite(rows), axis=1)
    used = rows.any(axis=1) & finite
    eps[~finite] = np.inf
    if used.any():
        eps[used] = np.atleast_1d(_accounting().rdp_to_dp(orders, rows[used], delta))
    return eps[np.asarray(where).ravel()]


_PLD_CACHE: dict[tuple, float | None] = {}
"""(components, unsampled multiplier, delta, budget) -> PLD eps (None: PLD cannot answer; RDP stands)."""
_PLD_CACHE_SIZE = 4096


def group_pld_epsilon(components: tuple[tuple[float, float, int], ...], inv_z2: float, delta: float,
                      budget: float) -> float | None:
    """PLD eps of one client's group (module docstring): ``components`` ``(q, z, k)`` of its Poisson-sampled
    views, ``inv_z2`` the ``1/z^2`` of its unsampled releases' composed Gaussian (0: none), discretised for
    1 % of ``budget``; cached; None where PLD cannot answer (too costly, delta below its tail cut-off)."""
    key = (components, float(inv_z2), float(delta), float(budget))
    if key not in _PLD_CACHE:
        from fedbound.accounting.pld import composed_pld_epsilon
        from fedbound.errors import DomainError

        gauss = 1.0 / math.sqrt(inv_z2) if inv_z2 > 0 else None
        try:
            value: float | None = composed_pld_epsilon(components, gauss, delta, budget)[0]
        except DomainError:
            value = None
        while len(_PLD_CACHE) >= _PLD_CACHE_SIZE:
            _PLD_CACHE.pop(next(iter(_PLD_CACHE)))
        _PLD_CACHE[key] = value
    return _PLD_CACHE[key]


@dataclass(frozen=True)
class Release:
    """One view's releases in one round: ``z[i]`` for clients whose data they contain (``inf`` elsewhere),
    ``z_all[i]``: the multiplier client ``i`` would have had, ``count`` releases each."""

    view: View
    z: np.ndarray
    z_all: np.ndarray
    count: int


class _ViewAccount:
    """One view's sums for a block of client groups, derived from their history entries (:func:`_derive`):
    what the accountants read.  ``rdp`` is None for a view that is not sampled; ``paper_rdp`` None unless
    the paper accountant writes it."""

    def __init__(self, n: int, n_orders: int, sampled: bool, paper_rdp: bool) -> None:
        self.count = np.zeros(n)
        self.inv_sum = np.zeros(n)
        self.inv_max = np.zeros(n)
        self.rdp = np.zeros((n, n_orders)) if sampled else None
        self.pld_z = np.zeros(n)  # the z of every sampled release (NaN: they differ; RDP only)
        self.pld_q = np.zeros(n)  # their sampling rate
        self.pld_count = np.zeros(n)  # how many
        self.paper_sum = np.zeros(n)
        self.paper_max = np.zeros(n)
        self.paper_count = np.zeros(n)
        self.paper_rdp = np.zeros((n, n_orders)) if paper_rdp else None
        self.sens = np.zeros(n)  # the sensitivity of the group's releases (the largest)


@dataclass(frozen=True)
class Entry:
    """One column of a block's history entries, per group: the release key (rate ``q``, multipliers ``z``
    and ``z_all``, sensitivity ``s``), how many releases ``count`` (0: no entry), and ``live``: releases the
    tight accountant counts (``z`` finite, count > 0)."""

    q: np.ndarray
    z: np.ndarray
    z_all: np.ndarray
    s: np.ndarray
    count: np.ndarray
    live: np.ndarray


def _is_sampled(view: View) -> bool:
    """Are the view's releases hidden behind sampling at a rate below 1 (RDP/PLD, not Gaussian sums)?"""
    return view.hidden_sampling and view.sample_rate < 1.0


_CLIENT_0 = np.zeros(1, dtype=np.int64)
_PAD_KEY = np.array([[1.0, np.inf, np.inf, 0.0]])  # the key of an empty entry slot: no release
BLOCK_GROUPS = 4096
"""Client groups whose RDP curves are derived at once (bounds the ledger's working set to a few MB)."""
_RDP_CACHE_SIZE = 4096


class PrivacyLedger:
    """Every client's privacy history of one run, by view, and its epsilons (see the module docstring).

    The state is :attr:`history` (``fedbound.training.ledger_history``): each client's release counts per
    distinct release key, clients with identical histories grouped.  Everything per client is derived per
    group when asked for."""

    def __init__(self, plan: NoisePlan) -> None:
        self.plan = plan
        self.orders = ORDERS if plan.orders is None else np.asarray(plan.orders, dtype=np.float64)
        self.history = History.empty(plan.num_clients, [v.name for v in plan.views])
        self._rdp_cache: dict[tuple[str, float, float], np.ndarray] = {}
        self.paper = paper_accountant(plan.paper_accountant)
        self._forget()

    def _forget(self) -> None:
        """No trial pending, nothing kept (what the ledger derives from its plan and history)."""
        self._pending: tuple[list[Release], dict, History] | None = None  # check_budget's trial: releases,
        # its per-group epsilons and the history with them recorded
        self._current: tuple[NoisePlan, History, dict] | None = None  # per-group epsilons of a history
        self._by_group: tuple[tuple[View, ...], dict[str, list[View]]] | None = None
        self._stack: tuple[NoisePlan, tuple | None] | None = None  # (plan, its _stack_key)
        self._sens: tuple[NoisePlan, dict[str, np.ndarray]] | None = None

    # --- releases of a round -------------------------------------------------------------------------
    def releases(self, round_: int, participants: np.ndarray, weights: np.ndarray,
                 plan: NoisePlan | None = None) -> list[Release]:
        """The round's releases, from the plan's sigma's, the participants and their aggregation weights."""
        plan = plan or self.plan
        n = plan.num_clients
        part = np.asarray(participants)
        out = []
        for view in plan.views:
            sigma = plan.stage_sigma(view.stage, round_)
            sens = self._sensitivity(plan, view.stage)
            if view.kind == "broadcast":
                z_all = np.full(n, _broadcast_multiplier(plan, round_, sigma, sens, part, weights))
            else:
                z_all = _upload_multipliers(sigma, sens)
            z = np.full(n, np.inf)
            z[part] = z_all[part]
            out.append(Release(view, z, z_all, view.releases_per_round))
        return out

    def _sensitivity(self, plan: NoisePlan, stage: str) -> np.ndarray:
        """``plan.stage_sensitivity(stage)``, kept per plan (read only)."""
        if self._sens is None or self._sens[0] is not plan:
            self._sens = (plan, {})
        cache = self._sens[1]
        if stage not in cache:
            cache[stage] = plan.stage_sensitivity(stage)
            cache[stage].setflags(write=False)
        return cache[stage]

    # --- bookkeeping -----------------------------------------------------------------------------------
    def _rdp(self, sampling: str, q: float, z: float) -> np.ndarray:
        key = (sampling, q, z)
        if key not in self._rdp_cache:
            acc = _accounting()
            if z == 0:
                value = np.full(len(self.orders), np.inf)
            elif sampling == "without_replacement" and q < 1.0:
                value = acc.rdp_sampled_without_replacement(self.orders, q, z)
            else:
                value = acc.rdp_subsampled_gaussian(self.orders, q, z)
            while len(self._rdp_cache) >= _RDP_CACHE_SIZE:
                self._rdp_cache.pop(next(iter(self._rdp_cache)))
            self._rdp_cache[key] = np.asarray(value, dtype=np.float64)
        return self._rdp_cache[key]

    def _rdp_rows(self, sampling: str, q: float, z: np.ndarray) -> np.ndarray:
        if not len(z):
            return np.zeros((0, len(self.orders)))
        return np.stack([self._rdp(sampling, q, float(v)) for v in z])

    def _events(self, releases: list[Release]) -> list[RoundEvent]:
        keep_all = bool(getattr(self.paper, "reads_z_all", False))
        events = []
        for rel in releases:
            view = rel.view
            z_tight = rel.z_all if view.hidden_sampling and view.hidden_scope == "every_client" else rel.z
            events.append(RoundEvent(view.name, view.sample_rate, z_tight, rel.z_all,
                                     self._sensitivity(self.plan, view.stage), rel.count, keep_all))
        return events

    def _record(self, history: History, releases: list[Release]) -> History:
        """``history`` with ``releases`` recorded (a new history)."""
        return history.record(self._events(releases))

    def commit(self, releases: list[Release]) -> None:
        """Count ``releases``.  After :meth:`check_budget` of the same releases, its trial history and its
        epsilons become the ledger's, so a round's releases are recorded once and its epsilons computed
        once."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is releases:
            self.history = pending[2]
            self._current = (self.plan, self.history, pending[1])
            return
        self.history = self._record(self.history, releases)

    # --- epsilons ------------------------------------------------------------------------------------
    def _groups(self) -> dict[str, list[View]]:
        """The plan's views by adversary group (kept while the plan's views stay the same)."""
        if self._by_group is None or self._by_group[0] is not self.plan.views:
            groups: dict[str, list[View]] = {}
            for view in self.plan.views:
                groups.setdefault(view.group_name, []).append(view)
            self._by_group = (self.plan.views, groups)
        return self._by_group[1]

    def _blocks(self, history: History):
        """Each block of client groups (:data:`BLOCK_GROUPS`) with its views' derived accounts."""
        for lo in range(0, history.groups, BLOCK_GROUPS):
            hi = min(lo + BLOCK_GROUPS, history.groups)
            yield {view.name: _derive(self, view, history.views[view.name], lo, hi)
                   for view in self.plan.views}

    def _tight_parts(self, accounts: dict[str, _ViewAccount]
                     ) -> tuple[dict[str, np.ndarray | None], dict[str, np.ndarray]]:
        """Per adversary group, its tight eps per client group, or None for a group of unsampled releases
        only: their eps is the analytic Gaussian one of the returned ``inv[group]``, left to one batched
        :func:`gaussian_epsilon`."""
        out: dict[str, np.ndarray | None] = {}
        invs: dict[str, np.ndarray] = {}
        for group, views in self._groups().items():
            inv = np.zeros(len(accounts[views[0].name].count))
            for view in views:
                a = accounts[view.name]
                capped = view.max_releases is not None
                inv += np.minimum(a.count, view.max_releases) * a.inv_max if capped else a.inv_sum
            rdps = [accounts[v.name].rdp for v in views if accounts[v.name].rdp is not None]
            if not any(r.any() for r in rdps):
                out[group], invs[group] = None, inv
                continue
            rdp = sum(rdps)
            with np.errstate(invalid="ignore"):
                total = rdp + np.outer(inv, self.orders) / 2.0
            eps = _rdp_to_dp(np.nan_to_num(total, nan=np.inf), self.plan.delta, self.orders)
            out[group] = self._pld_min(eps, [(v, accounts[v.name]) for v in views], inv)
        return out, invs

    def _pld_min(self, eps: np.ndarray, views: list[tuple[View, _ViewAccount]], inv: np.ndarray
                 ) -> np.ndarray:
        """``min(eps, PLD eps)`` per client group of one adversary group whose history PLD can account
        (module docstring)."""
        sampled = [a for v, a in views if a.pld_count.any()]
        if not sampled or any(v.sampling != "poisson" for v, a in views if a.pld_count.any()):
            return eps  # nothing sampled, or sampling without replacement (no PLD in dp-accounting): RDP
        ok = np.isfinite(eps) & np.isfinite(inv) & (eps > 0)
        for a in sampled:
            ok &= (a.pld_count == 0) | (np.isfinite(a.pld_z) & (a.pld_z > 0))
        if not ok.any():
            return eps
        rows = np.column_stack([inv, *(np.column_stack([a.pld_q, a.pld_z, a.pld_count]) for a in sampled)])
        keys, where = np.unique(rows[ok], axis=0, return_inverse=True)
        pld = np.full(len(keys), np.inf)
        for j, key in enumerate(keys):
            parts: dict[tuple[float, float], int] = {}
            for q, z, k in key[1:].reshape(-1, 3):
                if k:
                    parts[(float(q), float(z))] = parts.get((float(q), float(z)), 0) + int(k)
            if parts:
                value = group_pld_epsilon(tuple(sorted((q, z, k) for (q, z), k in parts.items())),
                                          float(key[0]), self.plan.delta, self.plan.eps)
                pld[j] = np.inf if value is None else value
        out = eps.copy()
        out[ok] = np.minimum(eps[ok], pld[np.asarray(where).ravel()])
        return out

    def _paper(self, accounts: dict[str, _ViewAccount]) -> dict[str, np.ndarray] | None:
        """Per adversary group, the paper accountant's eps per client group (None without one)."""
        if self.paper is None:
            return None
        return {group: self.paper.epsilon([accounts[v.name] for v in views], views, self)
                for group, views in self._groups().items()}

    # -- what a paper accountant reads (fedbound.accounting.paper_accountants) -------------------------
    @property
    def delta(self) -> float:
        return self.plan.delta

    @property
    def num_clients(self) -> int:
        return self.plan.num_clients

    @property
    def info(self) -> dict:
        return dict(self.plan.info)

    def rdp_rows(self, sampling: str, q: np.ndarray | float, z: np.ndarray) -> np.ndarray:
        """RDP curves ``(len(z), orders)`` of one release each at rates ``q`` and multipliers ``z`` (cached
        per distinct pair)."""
        q = np.broadcast_to(np.asarray(q, dtype=np.float64), np.shape(z))
        if not len(z):
            return np.zeros((0, len(self.orders)))
        pairs, where = np.unique(np.column_stack([q, z]), axis=0, return_inverse=True)
        table = np.stack([self._rdp(sampling, float(a), float(b)) for a, b in pairs])
        return table[np.asarray(where).ravel()]

    def rdp_to_dp(self, rdp: np.ndarray) -> np.ndarray:
        return _rdp_to_dp(rdp, self.plan.delta, self.orders)

    # -- per client ------------------------------------------------------------------------------------
    def group_epsilons(self, history: History | None = None) -> dict[str, dict[str, np.ndarray]]:
        """:meth:`epsilons` per client group of ``history`` (default the ledger's): ``(groups,)`` arrays;
        client ``i``'s are at ``history.group_of[i]``."""
        if history is None:
            history = self.history
            if self._current is None or self._current[0] is not self.plan or self._current[1] is not history:
                self._current = (self.plan, history, group_epsilons_many([(self, history)])[0])
            return self._current[2]
        return group_epsilons_many([(self, history)])[0]

    def epsilons(self, history: History | None = None) -> dict[str, dict[str, np.ndarray]]:
        """``{"tight": {group: eps per client}, "paper": {...}}`` (``paper`` absent with ``"none"``)."""
        history = self.history if history is None else history
        return _per_client(self.group_epsilons(None if history is self.history else history), history)

    def check_budget(self, releases: list[Release], round_: int) -> None:
        """Raise PrivacyBudgetExceeded if committing ``releases`` would push the binding accountant's epsilon
        (``plan.binding_accountant``: the tight one unless the plan reproduces a paper) over ``plan.eps``
        (relative tolerance 1e-9 for the float sums of a plan that spends exactly eps)."""
        error = check_budgets([(self, releases, round_)])[0]
        if error is not None:
            raise error

    def state_dict(self) -> dict:
        """The history's arrays (``ledger_history.History.state_dict``)."""
        return self.history.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """The state of :meth:`state_dict`; CheckpointError (one line) for a state of another form."""
        history = History.from_state_dict(state, [v.name for v in self.plan.views], self.plan.num_clients)
        if history is None:
            raise CheckpointError("the privacy ledger in this checkpoint was written by an older fedbound "
                                  "(per-client curves, not release histories): delete the checkpoint to "
                                  "restart the run from round 0")
        self.history = history
        self._pending = self._current = None


def _derive(ledger: PrivacyLedger, view: View, vh: ViewHistory, lo: int, hi: int) -> _ViewAccount:
    """The sums every accountant reads, for client groups ``lo:hi`` of one view, from their entries
    (summed in the order of the keys, so equal histories give equal sums bit for bit)."""
    ent, cnt = vh.ent[lo:hi], vh.cnt[lo:hi]
    keys = np.concatenate([vh.keys, _PAD_KEY])
    idx = np.where(ent >= 0, ent, len(vh.keys))
    sampled = _is_sampled(view)
    paper = ledger.paper
    paper_rdp = paper is not None and "paper_rdp" in paper.writes
    acct = _ViewAccount(hi - lo, len(ledger.orders), sampled, paper_rdp)
    live_key = ~np.isinf(keys[:, 1])
    if sampled:
        used, local = np.unique(idx, return_inverse=True)
        table = np.zeros((len(used), len(ledger.orders)))
        for j, k in enumerate(used):
            if live_key[k]:
                table[j] = ledger._rdp(view.sampling, float(keys[k, 0]), float(keys[k, 1]))
        local = np.asarray(local).reshape(idx.shape)
        n_live = np.zeros(hi - lo)
    else:
        with np.errstate(divide="ignore"):
            inv_key = np.where(live_key, 1.0 / np.square(keys[:, 1]), 0.0)
    for col in range(idx.shape[1]):
        i, c = idx[:, col], cnt[:, col]
        live = live_key[i] & (c > 0)
        if sampled:
            acct.rdp += c[:, None] * table[local[:, col]]
            acct.pld_count += np.where(live, c, 0.0)
            n_live += live
            acct.pld_z = np.where(live, keys[i, 1], acct.pld_z)
            acct.pld_q = np.where(live, keys[i, 0], acct.pld_q)
        else:
            acct.count += np.where(live, c, 0.0)
            acct.inv_sum += c * inv_key[i]
            acct.inv_max = np.maximum(acct.inv_max, inv_key[i])
        acct.sens = np.where(live, np.maximum(acct.sens, keys[i, 3]), acct.sens)
        if paper is not None:
            paper.add(acct, view, Entry(keys[i, 0], keys[i, 1], keys[i, 2], keys[i, 3], c, live), sampled,
                      ledger)
    if sampled:
        acct.pld_z = np.where(n_live > 1, np.nan, acct.pld_z)
    return acct


def group_epsilons_many(jobs: list[tuple[PrivacyLedger, History]], paper: bool = True
                    ) -> list[dict[str, dict[str, np.ndarray]]]:
    """Per-group epsilons of many ``(ledger, history)`` pairs: the analytic Gaussian epsilons of all their
    unsampled adversary groups come from one vectorised root search (:func:`gaussian_epsilon`)."""
    parts: list[dict[str, list]] = []
    papers: list[dict[str, list]] = []
    pending: list[tuple[int, str, int, np.ndarray]] = []  # (job, group, block, inv)
    for j, (ledger, history) in enumerate(jobs):
        tight: dict[str, list] = {}
        by_paper: dict[str, list] = {}
        for b, accounts in enumerate(ledger._blocks(history)):
            eps, invs = ledger._tight_parts(accounts)
            for group, values in eps.items():
                tight.setdefault(group, []).append(values)
                if values is None:
                    pending.append((j, group, b, invs[group]))
            if paper:
                for group, values in (ledger._paper(accounts) or {}).items():
                    by_paper.setdefault(group, []).append(values)
        parts.append(tight)
        papers.append(by_paper)
    if pending:
        invs = [inv for _, _, _, inv in pending]
        deltas = [np.full(len(inv), jobs[j][0].plan.delta) for j, _, _, inv in pending]
        flat = gaussian_epsilon(np.concatenate(invs), np.concatenate(deltas))
        bounds = np.cumsum([0, *(len(inv) for inv in invs)])
        for (j, group, b, _), lo, hi in zip(pending, bounds[:-1], bounds[1:], strict=True):
            parts[j][group][b] = flat[lo:hi]
    out = []
    for tight, by_paper in zip(parts, papers, strict=True):
        result = {"tight": {group: np.concatenate(blocks) for group, blocks in tight.items()}}
        if by_paper:
            result["paper"] = {group: np.concatenate(blocks) for group, blocks in by_paper.items()}
        out.append(result)
    return out


def _per_client(eps: dict[str, dict[str, np.ndarray]], history: History) -> dict[str, dict[str, np.ndarray]]:
    return {column: {group: values[history.group_of] for group, values in groups.items()}
            for column, groups in eps.items()}


def epsilons_many(jobs: list[tuple[PrivacyLedger, History | None]], paper: bool = True
                  ) -> list[dict[str, dict[str, np.ndarray]]]:
    """:meth:`PrivacyLedger.epsilons` of many ``(ledger, history)`` pairs (None: the ledger's own history;
    e.g. every run of a batched sweep in one round), per client: the analytic Gaussian epsilons of all their
    unsampled groups come from one vectorised root search (:func:`gaussian_epsilon`)."""
    jobs = [(ledger, ledger.history if history is None else history) for ledger, history in jobs]
    return [_per_client(eps, history)
            for eps, (_, history) in zip(group_epsilons_many(jobs, paper), jobs, strict=True)]


def _worst(eps: dict[str, np.ndarray] | None) -> float:
    """The largest eps over every client group and adversary group; -inf without an accountant."""
    if not eps:
        return -np.inf
    return float(max(np.max(v) for v in eps.values()))


def check_budgets(items: list[tuple[PrivacyLedger, list[Release], int]]
                  ) -> list[PrivacyBudgetExceeded | None]:
    """:meth:`PrivacyLedger.check_budget` of many ledgers, ``(ledger, releases, round)`` each; each one's
    PrivacyBudgetExceeded (returned, not raised) or None.  Each ledger keeps its trial history and epsilons
    for :meth:`~PrivacyLedger.commit` of the same releases.  The analytic Gaussian epsilons of every ledger
    come from one root search (:func:`group_epsilons_many`); per ledger this is the arithmetic of the ledger
    alone."""
    trials = [ledger._record(ledger.history, releases) for ledger, releases, _ in items]
    all_eps = group_epsilons_many([(item[0], trial) for item, trial in zip(items, trials, strict=True)])
    errors: list[PrivacyBudgetExceeded | None] = []
    for (ledger, releases, round_), trial, eps_all in zip(items, trials, all_eps, strict=True):
        ledger._pending = (releases, eps_all, trial)
        which = ledger.plan.binding_accountant
        worst = _worst(eps_all.get(which))
        errors.append(None if worst <= ledger.plan.eps * (1 + 1e-9) else PrivacyBudgetExceeded(
            f"round {round_ + 1} would spend eps = {worst:.6g} > budget {ledger.plan.eps:g} under the "
            f"{which} accountant, which binds (the noise plan was computed for {ledger.plan.rounds} rounds)"))
    return errors


def releases_many(items: list[tuple[PrivacyLedger, int, np.ndarray, np.ndarray]]) -> list[list[Release]]:
    """:meth:`PrivacyLedger.releases` of many runs, ``(ledger, round, participants, weights)`` each: runs
    of one shape (:func:`_stack_key`) get their multipliers from array operations over all of them at once,
    element for element the arithmetic of each run alone."""
    out: list[list[Release] | None] = [None] * len(items)
    for members in _by_shape([ledger for ledger, _, _, _ in items]):
        if len(members) == 1:
            for i in members:
                ledger, round_, part, w = items[i]
                out[i] = ledger.releases(round_, part, w)
            continue
        for i, rels in zip(members, _releases_together([items[i] for i in members]), strict=True):
            out[i] = rels
    return out  # type: ignore[return-value]


def _releases_together(items: list[tuple[PrivacyLedger, int, np.ndarray, np.ndarray]]) -> list[list[Release]]:
    """:func:`releases_many` of runs of one shape (the same views and clients)."""
    runs, n = len(items), items[0][0].plan.num_clients
    parts = [np.asarray(part) for _, _, part, _ in items]
    rows = np.repeat(np.arange(runs), [len(p) for p in parts])
    cols = np.concatenate(parts).astype(np.int64, copy=False)
    out: list[list[Release]] = [[] for _ in items]
    for view in items[0][0].plan.views:
        sigma = np.stack([led.plan.stage_sigma(view.stage, r) for led, r, _, _ in items])
        sens = np.stack([led._sensitivity(led.plan, view.stage) for led, _, _, _ in items])
        if view.kind == "broadcast":
            z_one = [_broadcast_multiplier(led.plan, r, sigma[j], sens[j], parts[j], w)
                     for j, (led, r, _, w) in enumerate(items)]
            z_all = np.repeat(z_one, n).reshape(runs, n)
        else:
            z_all = _upload_multipliers(sigma, sens)
        z = np.full((runs, n), np.inf)
        z[rows, cols] = z_all[rows, cols]
        for j in range(runs):
            out[j].append(Release(view, z[j], z_all[j], view.releases_per_round))
    return out


def _upload_multipliers(sigma: np.ndarray, sens: np.ndarray) -> np.ndarray:
    """Each client's upload noise multiplier sigma / sensitivity (0 where it adds no noise)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sigma > 0, sigma / sens, 0.0)


def _broadcast_multiplier(plan: NoisePlan, round_: int, sigma: np.ndarray, sens: np.ndarray, part: np.ndarray,
                          weights: np.ndarray) -> float:
    """The broadcast's noise multiplier: the aggregate's noise (server's and the participants' weighted
    uplink noise) over its sensitivity, the largest weighted participant's; inf without participants."""
    w = np.asarray(weights, dtype=np.float64)
    server = float(plan.stage_sigma("server", round_, _CLIENT_0)[0])
    total = math.sqrt(server**2 + float(np.sum(w**2 * sigma[part] ** 2)))
    sensitivity = float(np.max(np.abs(w) * sens[part])) if len(part) else 0.0
    return total / sensitivity if sensitivity > 0 else np.inf


def _by_shape(ledgers: list[PrivacyLedger]) -> list[list[int]]:
    """The positions of ``ledgers`` grouped by :func:`_stack_key` (a ledger without one alone)."""
    shapes: dict[tuple, list[int]] = {}
    for i, ledger in enumerate(ledgers):
        key = _stack_key(ledger)
        shapes.setdefault(key if key is not None else ("alone", i), []).append(i)
    return list(shapes.values())


def _stack_key(ledger: PrivacyLedger) -> tuple | None:
    """What must agree for ledgers to be accounted as one (None: accounted alone); kept per plan."""
    if ledger._stack is None or ledger._stack[0] is not ledger.plan:
        ledger._stack = (ledger.plan, _shape_of(ledger))
    return ledger._stack[1]


def _shape_of(ledger: PrivacyLedger) -> tuple | None:
    """Runs whose releases are computed together: the same views over the same number of clients."""
    return (ledger.plan.views, ledger.plan.num_clients)


