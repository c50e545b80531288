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
  ``c = sqrt(2 ln(1.25/delta))`` (Dwork & Roth Thm A.1; seed 002 F4), summed linearly (seed 002 F10, F11;
  ``max_releases`` keeps the ``L`` largest).  With ``paper_amplification="lemma4"`` a q-sampled release
  costs ``-ln(1 - q + q e^{-eps})`` (seed 002 Lemma 4, eq. (56); one-sided, spec 002 E9).
* ``"udp_moments"``: seed 003's moments accountant, eq. (16) with the (reversed, spec 003 E5) last step
  of Thm 1: ``eps = sqrt(2 q ln(1/delta) sum_t 1/z_t^2)``, accrued by every client every round.
* ``"rdp"``: RDP of the (Poisson-)subsampled Gaussian for every release, as Opacus does (spec 000 App. A).
* ``"quantized_gaussian"``: seed 004 Theorem 1 per upload, composed by basic composition: a client with
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
from fedbound.errors import PrivacyBudgetExceeded
from fedbound.training.plan import NoisePlan, View

__all__ = ["Release", "PrivacyLedger", "gaussian_epsilon", "group_pld_epsilon", "epsilons_many",
           "check_budgets", "releases_many", "ORDERS", "PAPER_ACCOUNTANTS"]

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
    """Running sums of one view, per client."""

    def __init__(self, n: int, n_orders: int = len(ORDERS)) -> None:
        self.count = np.zeros(n)
        self.inv_sum = np.zeros(n)
        self.inv_max = np.zeros(n)
        self.rdp = np.zeros((n, n_orders))
        self.paper_sum = np.zeros(n)
        self.paper_max = np.zeros(n)
        self.paper_count = np.zeros(n)
        self.paper_rdp = np.zeros((n, n_orders))
        self.pld_z = np.zeros(n)  # the z of every sampled release so far (NaN: they differ; RDP only)
        self.pld_q = np.zeros(n)  # their sampling rate
        self.pld_count = np.zeros(n)  # how many

    def copy(self, fields: tuple[str, ...] | None = None) -> _ViewAccount:
        """A copy; with ``fields`` only those arrays are copied and the others shared (for a trial that
        writes ``fields`` only)."""
        new = _ViewAccount.__new__(_ViewAccount)
        new.__dict__ = {k: v.copy() if fields is None or k in fields else v for k, v in self.__dict__.items()}
        return new


def _is_sampled(view: View) -> bool:
    """Are the view's releases hidden behind sampling at a rate below 1 (RDP/PLD, not Gaussian sums)?"""
    return view.hidden_sampling and view.sample_rate < 1.0


_CLIENT_0 = np.zeros(1, dtype=np.int64)
_SAMPLED_FIELDS = ("rdp", "pld_z", "pld_q", "pld_count")  # what _record writes for a sampled view
_GAUSSIAN_FIELDS = ("count", "inv_sum", "inv_max")  # and for an unsampled one


class PrivacyLedger:
    """Per-client, per-view running privacy accounts of one run (see the module docstring)."""

    def __init__(self, plan: NoisePlan) -> None:
        self.plan = plan
        self.orders = ORDERS if plan.orders is None else np.asarray(plan.orders, dtype=np.float64)
        self.accounts = {v.name: _ViewAccount(plan.num_clients, len(self.orders)) for v in plan.views}
        self._rdp_cache: dict[tuple[str, float, float], np.ndarray] = {}
        self.paper = paper_accountant(plan.paper_accountant)
        self._forget()

    def _forget(self) -> None:
        """No trial pending, nothing kept (what the ledger derives from its plan and accounts)."""
        self._pending: tuple[list[Release], dict, dict] | None = None  # check_budget's trial: releases,
        # its epsilons and the accounts with them recorded
        self._current: tuple[NoisePlan, dict] | None = None  # epsilons() of self.accounts under a plan
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
            self._rdp_cache[key] = np.asarray(value, dtype=np.float64)
        return self._rdp_cache[key]

    def _rdp_rows(self, sampling: str, q: float, z: np.ndarray) -> np.ndarray:
        if not len(z):
            return np.zeros((0, len(self.orders)))
        return np.stack([self._rdp(sampling, q, float(v)) for v in z])

    def _record(self, accounts: dict[str, _ViewAccount], releases: list[Release]) -> None:
        for rel in releases:
            acct, view = accounts[rel.view.name], rel.view
            sampled = _is_sampled(view)
            z_tight = rel.z_all if view.hidden_sampling and view.hidden_scope == "every_client" else rel.z
            live = ~np.isinf(z_tight)
            who = slice(None) if live.all() else np.flatnonzero(live)  # every client: no fancy indexing
            if sampled:
                acct.rdp[who] += rel.count * self._rdp_rows(view.sampling, view.sample_rate, z_tight[who])
                z_new, first = z_tight[who], acct.pld_count[who] == 0
                same = (acct.pld_z[who] == z_new) & (acct.pld_q[who] == view.sample_rate)
                acct.pld_z[who] = np.where(first | same, z_new, np.nan)
                acct.pld_q[who] = view.sample_rate
                acct.pld_count[who] += rel.count
            else:
                with np.errstate(divide="ignore"):
                    inv = 1.0 / np.square(z_tight[who])  # who: finite z only
                acct.count[who] += rel.count
                acct.inv_sum[who] += rel.count * inv
                acct.inv_max[who] = np.maximum(acct.inv_max[who], inv)
            if self.paper is not None:
                self.paper.record(acct, view, who, z_tight, rel.z_all, rel.count, sampled, self)

    def _trial(self, releases: list[Release]) -> dict[str, _ViewAccount]:
        """The accounts as :meth:`_record` of ``releases`` may change them: the arrays it writes (its own
        and the paper accountant's ``writes``) copied, the rest shared with :attr:`accounts`."""
        paper = self.paper.writes if self.paper is not None else ()
        writes = {rel.view.name: (_SAMPLED_FIELDS if _is_sampled(rel.view) else _GAUSSIAN_FIELDS) + paper
                  for rel in releases}
        trial = {name: a.copy(writes[name]) if name in writes else a for name, a in self.accounts.items()}
        self._record(trial, releases)
        return trial

    def commit(self, releases: list[Release]) -> None:
        """Count ``releases``.  After :meth:`check_budget` of the same releases, its trial accounts (these
        accounts with the releases recorded) and their epsilons become the ledger's, so a round's releases
        are recorded once and its epsilons computed once."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is releases:
            self.accounts = pending[2]
            self._current = (self.plan, pending[1])
            return
        self._record(self.accounts, releases)
        self._current = None

    # --- epsilons ------------------------------------------------------------------------------------
    def _groups(self) -> dict[str, list[View]]:
        """The plan's views by adversary group (kept while the plan's views stay the same)."""
        if self._by_group is None or self._by_group[0] is not self.plan.views:
            groups: dict[str, list[View]] = {}
            for view in self.plan.views:
                groups.setdefault(view.group_name, []).append(view)
            self._by_group = (self.plan.views, groups)
        return self._by_group[1]

    def _tight_parts(self, accounts: dict[str, _ViewAccount]
                     ) -> tuple[dict[str, np.ndarray | None], dict[str, np.ndarray]]:
        """Per group, its tight eps per client, or None for a group of unsampled releases only: their eps is
        the analytic Gaussian one of the returned ``inv[group]``, left to one batched
        :func:`gaussian_epsilon`."""
        out: dict[str, np.ndarray | None] = {}
        invs: dict[str, np.ndarray] = {}
        for group, views in self._groups().items():
            inv = np.zeros(self.plan.num_clients)
            for view in views:
                a = accounts[view.name]
                if view.max_releases is not None:
                    inv += np.minimum(a.count, view.max_releases) * a.inv_max
                else:
                    inv += a.inv_sum
            if not any(accounts[view.name].rdp.any() for view in views):
                out[group], invs[group] = None, inv
                continue
            rdp = sum(accounts[view.name].rdp for view in views)
            with np.errstate(invalid="ignore"):
                total = rdp + np.outer(inv, self.orders) / 2.0
            eps = _rdp_to_dp(np.nan_to_num(total, nan=np.inf), self.plan.delta, self.orders)
            out[group] = self._pld_min(eps, [(v, accounts[v.name]) for v in views], inv)
        return out, invs

    def _pld_min(self, eps: np.ndarray, views: list[tuple[View, _ViewAccount]], inv: np.ndarray
                 ) -> np.ndarray:
        """``min(eps, PLD eps)`` per client of one group whose history PLD can account (module docstring)."""
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

    def _tight(self, accounts: dict[str, _ViewAccount]) -> dict[str, np.ndarray]:
        return epsilons_many([(self, accounts)], paper=False)[0]["tight"]

    def _paper(self, accounts: dict[str, _ViewAccount]) -> dict[str, np.ndarray] | None:
        """Per adversary group, the paper accountant's eps per client (None without one)."""
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

    def stage_sensitivity(self, stage: str) -> np.ndarray:
        return self.plan.stage_sensitivity(stage)

    def rdp_rows(self, sampling: str, q: float, z: np.ndarray) -> np.ndarray:
        return self._rdp_rows(sampling, q, z)

    def rdp_to_dp(self, rdp: np.ndarray) -> np.ndarray:
        return _rdp_to_dp(rdp, self.plan.delta, self.orders)

    def epsilons(self, accounts: dict[str, _ViewAccount] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """``{"tight": {group: eps per client}, "paper": {...}}`` (``paper`` absent with ``"none"``)."""
        if accounts is None:
            if self._current is None or self._current[0] is not self.plan:
                self._current = (self.plan, epsilons_many([(self, self.accounts)])[0])
            return self._current[1]
        return epsilons_many([(self, accounts)])[0]

    def check_budget(self, releases: list[Release], round_: int) -> None:
        """Raise PrivacyBudgetExceeded if committing ``releases`` would push the binding accountant's epsilon
        (``plan.binding_accountant``: the tight one unless the plan reproduces a paper) over ``plan.eps``
        (relative tolerance 1e-9 for the float sums of a plan that spends exactly eps)."""
        error = check_budgets([(self, releases, round_)])[0]
        if error is not None:
            raise error

    def state_dict(self) -> dict:
        return {name: dict(a.__dict__) for name, a in self.accounts.items()}

    def load_state_dict(self, state: dict) -> None:
        for name, values in state.items():
            acct = self.accounts[name]
            acct.__dict__.update({k: np.array(v) for k, v in values.items()})
            if "pld_count" not in values:  # a checkpoint from before PLD: its sampled history is RDP only
                acct.pld_z = np.where(acct.rdp.any(axis=1), np.nan, 0.0)
                acct.pld_count = np.where(acct.rdp.any(axis=1), 1.0, 0.0)
        self._pending = self._current = None


def epsilons_many(jobs: list[tuple[PrivacyLedger, dict[str, _ViewAccount]]], paper: bool = True
                  ) -> list[dict[str, dict[str, np.ndarray]]]:
    """:meth:`PrivacyLedger.epsilons` of many ``(ledger, accounts)`` pairs (e.g. every run of a batched
    sweep in one round): the analytic Gaussian epsilons of all their unsampled groups come from one
    vectorised root search (:func:`gaussian_epsilon` over every run's clients and deltas at once)."""
    split = [ledger._tight_parts(accounts) for ledger, accounts in jobs]
    parts = [tight for tight, _ in split]
    pending = [(j, group) for j, tight in enumerate(parts) for group, eps in tight.items() if eps is None]
    if pending:
        invs = [split[j][1][group] for j, group in pending]
        deltas = [np.full(len(inv), jobs[j][0].plan.delta) for (j, _), inv in zip(pending, invs, strict=True)]
        flat = gaussian_epsilon(np.concatenate(invs), np.concatenate(deltas))
        bounds = np.cumsum([0, *(len(inv) for inv in invs)])
        for (j, group), lo, hi in zip(pending, bounds[:-1], bounds[1:], strict=True):
            parts[j][group] = flat[lo:hi]
    out = []
    for (ledger, accounts), tight in zip(jobs, parts, strict=True):
        result: dict[str, dict[str, np.ndarray]] = {"tight": tight}
        by_paper = ledger._paper(accounts) if paper else None
        if by_paper is not None:
            result["paper"] = by_paper
        out.append(result)
    return out


def check_budgets(items: list[tuple[PrivacyLedger, list[Release], int]]
                  ) -> list[PrivacyBudgetExceeded | None]:
    """:meth:`PrivacyLedger.check_budget` of many ledgers, ``(ledger, releases, round)`` each; each one's
    PrivacyBudgetExceeded (returned, not raised) or None.  Each ledger keeps its trial accounts and epsilons
    for :meth:`~PrivacyLedger.commit` of the same releases.

    Vectorised over runs: ledgers of one shape (:func:`_stack_key`: a sweep's runs) are recorded and
    accounted as one ledger over all their clients (:class:`_Stack`), and the analytic Gaussian epsilons of
    every ledger come from one root search (:func:`epsilons_many`); per client this is the same arithmetic
    as each ledger alone."""
    jobs, stacks = [], []
    for members in _by_shape([ledger for ledger, _, _ in items]):
        if len(members) > 1:
            stack = _Stack([items[i][0] for i in members], [items[i][1] for i in members])
            stacks.append((members, stack))
            jobs.append((stack.ledger, stack.ledger.accounts))
        else:
            stacks.append((members, None))
            jobs.append((items[members[0]][0], items[members[0]][0]._trial(items[members[0]][1])))
    trials: list[tuple[dict, dict, float] | None] = [None] * len(items)
    for (members, stack), (_, accounts), eps_all in zip(stacks, jobs, epsilons_many(jobs), strict=True):
        if stack is None:
            ledger = items[members[0]][0]
            worst_one = _worst(eps_all.get(ledger.plan.binding_accountant), 1)[0]
            trials[members[0]] = (accounts, eps_all, worst_one)
        else:
            worst = {which: _worst(eps_all.get(which), len(members)) for which in
                     {items[i][0].plan.binding_accountant for i in members}}
            for j, i in enumerate(members):
                trials[i] = (*stack.part(j, eps_all), worst[items[i][0].plan.binding_accountant][j])
    errors: list[PrivacyBudgetExceeded | None] = []
    for (ledger, releases, round_), trial in zip(items, trials, strict=True):
        accounts, eps_all, worst = trial
        ledger._pending = (releases, eps_all, accounts)
        which = ledger.plan.binding_accountant
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


def _worst(eps: dict[str, np.ndarray] | None, runs: int) -> list[float]:
    """The largest eps of each of ``runs`` runs side by side (clients run-major), over every group; -inf
    without an accountant."""
    if eps is None:
        return [-np.inf] * runs
    return np.max([v.reshape(runs, -1).max(axis=1) for v in eps.values()], axis=0).tolist()


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
    plan = ledger.plan
    info = tuple(plan.info.get(k) for k in ledger.paper.reads) if ledger.paper is not None else ()
    try:
        hash(info)
    except TypeError:
        return None
    return (plan.views, plan.num_clients, ledger.orders.tobytes(), plan.delta, plan.eps,
            plan.paper_accountant, info)


class _StackedPlan:
    """What a ledger reads of its plan, for the plans of a :class:`_Stack` side by side."""

    def __init__(self, plans: list[NoisePlan]) -> None:
        first = plans[0]
        self.views, self.delta, self.eps, self.info = first.views, first.delta, first.eps, first.info
        self.num_clients = first.num_clients * len(plans)
        self._plans = plans

    def stage_sensitivity(self, stage: str) -> np.ndarray:
        return np.concatenate([plan.stage_sensitivity(stage) for plan in self._plans])


class _Stack:
    """Ledgers of one shape and their round's releases as one ledger over all their clients (run j's
    clients are ``j n, ..., j n + n - 1``): its accounts are the runs' trial accounts, side by side."""

    def __init__(self, ledgers: list[PrivacyLedger], releases: list[list[Release]]) -> None:
        first = ledgers[0]
        self.n = first.plan.num_clients
        ledger = self.ledger = PrivacyLedger.__new__(PrivacyLedger)
        ledger.plan = _StackedPlan([one.plan for one in ledgers])  # type: ignore[assignment]
        ledger.orders, ledger.paper, ledger._rdp_cache = first.orders, first.paper, first._rdp_cache
        ledger._forget()
        ledger.accounts = {}
        paper = set(first.paper.writes) if first.paper is not None else set()
        sampled_now = {rel.view.name for rel in releases[0] if _is_sampled(rel.view)}
        self.zeros: dict[str, dict[str, np.ndarray]] = {}
        for name, acct in first.accounts.items():
            # fields no run has written (and this round does not write) are zero in every run: one read-only
            # zero for all, not a copy of each (the (n, orders) RDP arrays of unsampled views: most bytes)
            sampled = name in sampled_now or any(one.accounts[name].pld_count.any() for one in ledgers)
            self.zeros[name] = {k: np.broadcast_to(0.0, v.shape) for k, v in acct.__dict__.items()
                                if (k in _SAMPLED_FIELDS and not sampled)
                                or (k.startswith("paper_") and k not in paper)}
            joined = _ViewAccount.__new__(_ViewAccount)
            rows = len(ledgers) * self.n
            joined.__dict__ = {k: np.broadcast_to(0.0, (rows, *v.shape[1:])) if k in self.zeros[name]
                               else np.concatenate([one.accounts[name].__dict__[k] for one in ledgers])
                               for k, v in acct.__dict__.items()}
            ledger.accounts[name] = joined
        together = [Release(rels[0].view, np.concatenate([r.z for r in rels]),
                            np.concatenate([r.z_all for r in rels]), rels[0].count)
                    for rels in zip(*releases, strict=True)]
        ledger._record(ledger.accounts, together)

    def part(self, j: int, eps_all: dict[str, dict[str, np.ndarray]]) -> tuple[dict, dict]:
        """Run ``j``'s trial accounts and epsilons."""
        rows = slice(j * self.n, (j + 1) * self.n)
        accounts = {}
        for name, joined in self.ledger.accounts.items():
            acct = _ViewAccount.__new__(_ViewAccount)
            zeros = self.zeros[name]
            acct.__dict__ = {k: zeros[k] if k in zeros else v[rows] for k, v in joined.__dict__.items()}
            accounts[name] = acct
        return accounts, {column: {group: v[rows] for group, v in by_group.items()}
                          for column, by_group in eps_all.items()}
