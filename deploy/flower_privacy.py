"""Flower's own accountant beside fedbound's ledger, guarding the same budget.

Flower 1.42 accounts *central* releases: the model aggregate every client (and any eavesdropper of the
broadcast) sees, one Gaussian release per round with noise multiplier z, clients sampled from a population
(``flwr.serverapp.PrivacyConfig``: ``target_delta``, ``population_size``, ``neighboring_relation``,
``sampling_method``, ``max_epsilon``; ``RdpAccountant``, whose ``would_exceed(event)`` tells, before a
release, whether it would push the accountant's epsilon past ``max_epsilon``).  fedbound's plan has such
releases wherever it has a view of kind ``"broadcast"`` (NbAFL's and PADPFL's downlink, DP-FedAvg's
noised average); :func:`privacy_config` writes them as Flower's PrivacyConfig into the app's run config
(``flower.privacy.*``; ``max-epsilon`` is the plan's budget eps), and the ServerApp asks Flower's
accountant, through ``would_exceed``, before every round (:class:`FlowerGuard`), beside fedbound's own
budget check.  ``flower.guard`` says what a "would exceed" does:

* ``"report"`` (the default): the round runs if fedbound's ledger allows it, and the row and summary say
  that Flower's accountant would have stopped it, and why (:func:`difference`).  fedbound's budget binds
  on the least of its valid upper bounds (the tight accountant), and Flower's RDP bound of the same
  releases is never below it: for unsampled Gaussian releases fedbound composes them exactly (one
  Gaussian, ``1/z^2`` summed; Dong, Roth & Su 2019) and converts with the analytic Gaussian mechanism
  (Balle & Wang 2018, Theorem 8), exact; Flower composes Renyi DP (Mironov 2017) at dp-accounting's
  orders and converts RDP to (eps, delta) (Canonne, Kamath & Steinke 2020), an upper bound that exceeds
  the exact eps (the NbAFL demo plan: 54.51 against fedbound's 50.00 for the same 4 releases).  A plan
  calibrated to spend its budget exactly under fedbound's accountant therefore always ends above it under
  Flower's, in the last round or earlier;
* ``"stop"``: Flower's guard binds too: a round that either accountant says would exceed the budget is
  never sent (the rounds done are written, then PrivacyBudgetExceeded, as for fedbound's own budget stop).

Mechanisms without a central release (UDP, DP-PFL: every release is a client's own noised upload or
local step, seen by the server) have nothing for Flower's central accountant to count: no PrivacyConfig
is written, and fedbound's ledger alone guards.  Flower's accountant sees the plan's sampling as it can
model it: K of N without replacement with replace-one neighbours (Wang, Balle & Kasiviswanathan 2019),
Poisson with add-or-remove-one, or no amplification (every round's release counted in full).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["PREFIX", "GUARD_KEY", "GUARDS", "privacy_config", "round_events", "flower_epsilon",
           "FlowerGuard", "difference", "plan_flower_epsilon", "plan_note"]

PREFIX = "flower.privacy."
"""Run config keys of Flower's PrivacyConfig: ``flower.privacy.target-delta`` etc."""

GUARD_KEY = "flower.guard"
GUARDS = ("report", "stop")

_NO_AMP, _WOR, _POISSON = "no-amplification", "without-replacement", "poisson"


def _method(view: Any) -> str:
    if not (view.hidden_sampling and view.sample_rate < 1.0):
        return _NO_AMP
    return _WOR if view.sampling == "without_replacement" else _POISSON


def privacy_config(plan: Any, guard: str = "report") -> dict[str, Any]:
    """The run config keys of Flower's PrivacyConfig for ``plan``'s broadcast releases, and ``flower.guard``
    (module docstring); empty for a plan without broadcast releases or whose broadcasts Flower's accountant
    cannot model together (sampling methods that differ between views)."""
    if guard not in GUARDS:
        raise ConfigError(f"--flower-guard = {guard!r} is outside its valid range: one of "
                          f"{', '.join(GUARDS)}")
    views = [v for v in (plan.views if plan is not None else ()) if v.kind == "broadcast"]
    methods = {_method(v) for v in views}
    if len(methods) != 1:
        return {}
    method = methods.pop()
    return {f"{PREFIX}target-delta": float(plan.delta), f"{PREFIX}population-size": int(plan.num_clients),
            f"{PREFIX}neighboring-relation": "replace-one" if method == _WOR else "add-or-remove-one",
            f"{PREFIX}sampling-method": method, f"{PREFIX}max-epsilon": float(plan.eps), GUARD_KEY: guard}


def _config(keys: Mapping[str, Any]) -> Any:
    from flwr.serverapp import PrivacyConfig
    from flwr.supercore.privacy_accounting import NeighboringRelation, SamplingMethod

    return PrivacyConfig(float(keys[f"{PREFIX}target-delta"]), int(keys[f"{PREFIX}population-size"]),
                         NeighboringRelation(str(keys[f"{PREFIX}neighboring-relation"])),
                         SamplingMethod(str(keys[f"{PREFIX}sampling-method"])),
                         _optional(keys.get(f"{PREFIX}max-epsilon")))


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def round_events(releases: Sequence[Any], sample_size: int, population: int) -> list[list]:
    """The broadcast releases of one round as Flower events ``[z, sample_size, population, method]``
    (``count`` releases each)."""
    out = []
    for rel in releases:
        if rel.view.kind == "broadcast":
            out += [[float(rel.z_all[0]), int(sample_size), int(population), _method(rel.view)]] * rel.count
    return out


def _grouped(events: Sequence[Sequence[Any]]) -> tuple:
    """Identical events composed once with their count (dp-accounting's without-replacement RDP costs
    ~0.5 s per composition); a checkpoint's older ``hidden`` flag (True: K of N) read as its method."""
    counts: dict[tuple, int] = {}
    for z, k, n, how in events:
        method = how if isinstance(how, str) else (_WOR if how else _NO_AMP)
        key = (float(z), int(k), int(n), method)
        counts[key] = counts.get(key, 0) + 1
    return tuple(sorted(counts.items()))


@functools.lru_cache(maxsize=128)
def _accountant(grouped: tuple, keys: tuple) -> Any:
    from flwr.supercore.privacy_accounting import GaussianPrivacyEvent
    from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

    accountant = RdpAccountant(_config(dict(keys)))
    for (z, k, n, _), count in grouped:
        accountant.compose(GaussianPrivacyEvent(z, k, n), count)
    return accountant


def _keys_for(events: Sequence[Sequence[Any]], delta: float, max_epsilon: float | None = None) -> tuple:
    """Run config keys of a PrivacyConfig matching ``events`` (all of one method)."""
    (z, k, n, method), _ = _grouped(events)[0]
    return tuple(sorted({f"{PREFIX}target-delta": float(delta), f"{PREFIX}population-size": n,
                         f"{PREFIX}neighboring-relation": "replace-one" if method == _WOR else
                         "add-or-remove-one", f"{PREFIX}sampling-method": method,
                         f"{PREFIX}max-epsilon": max_epsilon}.items()))


def flower_epsilon(events: Sequence[Sequence[Any]], delta: float) -> float | None:
    """Flower's ``RdpAccountant`` epsilon at ``delta`` over ``events`` (:func:`round_events`; the older
    form ``[z, sample_size, population, hidden]`` too); None without events, with a noiseless release, with
    methods that differ, or where Flower's accountant is not installed."""
    if not events or not all(np.isfinite(e[0]) and e[0] > 0 for e in events):
        return None
    grouped = _grouped(events)
    if len({g[0][3] for g in grouped}) != 1:
        return None
    try:
        return float(_accountant(grouped, _keys_for(events, delta)).get_epsilon(float(delta)))
    except ImportError:  # pragma: no cover - flwr without its accountant
        return None


def plan_flower_epsilon(plan: Any, sample_size: int, rounds: int | None = None
                        ) -> tuple[float | None, float | None]:
    """``(Flower's eps, fedbound's eps)`` of ``plan``'s broadcast releases over its first ``rounds`` rounds
    (default all), each round's sample ``sample_size`` of N, from the plan's own noise and sensitivity
    (what the ServerApp will count, before CRD or a budget stop changes anything); fedbound's is the tight
    accountant's, the largest over the broadcast groups and clients."""
    from fedbound.training.privacy import PrivacyLedger

    ledger = PrivacyLedger(plan)
    participants = np.arange(sample_size)
    weights = np.full(sample_size, 1.0 / sample_size)
    events: list[list] = []
    for t in range(plan.rounds if rounds is None else rounds):
        releases = ledger.releases(t, participants, weights)
        ledger.commit(releases)
        events += round_events(releases, sample_size, plan.num_clients)
    groups = {v.group_name for v in plan.views if v.kind == "broadcast"}
    tight = ledger.epsilons()["tight"]
    ours = max((float(np.max(tight[g])) for g in groups if g in tight), default=None)
    return flower_epsilon(events, plan.delta), ours


def plan_note(plan: Any, sample_size: int) -> str | None:
    """A warning when Flower's accountant puts the plan's broadcast releases above the budget: the round
    its guard would stop, both epsilons, why they differ, and what ``--flower-guard`` does; None when it
    agrees the plan fits (or counts nothing)."""
    cfg = privacy_config(plan)
    if not cfg:
        return None
    flower, ours = plan_flower_epsilon(plan, sample_size)
    if flower is None or flower <= plan.eps * (1 + 1e-9):
        return None
    low, high = 0, plan.rounds  # Flower's eps after `low` rounds fits, after `high` it does not
    while high - low > 1:
        mid = (low + high) // 2
        eps_mid = plan_flower_epsilon(plan, sample_size, mid)[0]
        low, high = (mid, high) if eps_mid is not None and eps_mid <= plan.eps else (low, mid)
    why = difference(ours, flower, cfg[f"{PREFIX}sampling-method"])
    return (f"Flower's RdpAccountant puts this plan's {plan.rounds} broadcast releases at eps = {flower:.4g} "
            f"> budget {plan.eps:g} (fedbound's tight eps of them: {ours:.4g}); {why}; its guard "
            f"(would_exceed, max_epsilon = {plan.eps:g}) would stop the run before round {high}: "
            "--flower-guard report (the default) runs on fedbound's ledger and reports it, --flower-guard "
            "stop stops there")


class FlowerGuard:
    """Flower's accountant in the ServerApp: ``check(past, new)`` before a round (Flower's
    ``would_exceed``), ``epsilon(events)`` after it.  Built from the run config's PrivacyConfig keys
    (None where there are none)."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        self.keys = {k: v for k, v in keys.items() if k.startswith(PREFIX)}
        self.mode = str(keys.get(GUARD_KEY, "report"))
        if self.mode not in GUARDS:
            raise ConfigError(f"{GUARD_KEY} = {self.mode!r} is outside its valid range: one of "
                              f"{', '.join(GUARDS)}")
        _config(self.keys)  # a ConfigError-free PrivacyConfig, or Flower's ValueError now

    @classmethod
    def from_run_config(cls, cfg: Mapping[str, Any]) -> FlowerGuard | None:
        return cls(cfg) if f"{PREFIX}max-epsilon" in cfg else None

    @property
    def budget(self) -> float:
        return float(self.keys[f"{PREFIX}max-epsilon"])

    def would_exceed(self, past: Sequence[Sequence[Any]], new: Sequence[Sequence[Any]]) -> bool:
        """Flower's ``RdpAccountant.would_exceed``: would composing this round's ``new`` events after the
        ``past`` ones push Flower's epsilon at ``target_delta`` past ``max_epsilon``?"""
        from flwr.supercore.privacy_accounting import GaussianPrivacyEvent

        if not new or not all(np.isfinite(e[0]) and e[0] > 0 for e in [*past, *new]):
            return False
        before = _accountant(_grouped([*past, *new[:-1]]), tuple(sorted(self.keys.items())))
        z, k, n, _ = new[-1]
        return bool(before.would_exceed(GaussianPrivacyEvent(float(z), int(k), int(n))))

    def epsilon(self, events: Sequence[Sequence[Any]]) -> float | None:
        return flower_epsilon(events, float(self.keys[f"{PREFIX}target-delta"]))


def difference(fedbound_eps: float | None, flower_eps: float | None, method: str | None) -> str:
    """Why Flower's epsilon of the broadcast differs from fedbound's for the same releases, in words."""
    if fedbound_eps is None or flower_eps is None or not math.isfinite(flower_eps):
        return "Flower's accountant counts no release here"
    gap = flower_eps / fedbound_eps - 1.0 if fedbound_eps > 0 else math.inf
    if method == _NO_AMP or method is None:
        why = ("fedbound composes the unsampled Gaussian releases exactly and converts with the analytic "
               "Gaussian mechanism (Balle & Wang 2018); Flower converts Renyi DP to (eps, delta), an upper "
               "bound")
    elif method == _WOR:
        why = ("both compose the RDP of K-of-N sampling without replacement (Wang, Balle & Kasiviswanathan "
               "2019), fedbound at its calibration orders, Flower at dp-accounting's default orders")
    else:
        why = ("fedbound takes the least of RDP and PLD for Poisson sampling; Flower uses RDP alone")
    side = "above" if gap >= 0 else "below"
    return f"Flower's RDP bound is {abs(gap):.1%} {side} fedbound's for the same releases: {why}"
