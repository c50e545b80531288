"""The audited client's epsilon recomputed without the ledger under audit: from the plan's sigma's, the
rounds, the sampling and the neighbouring relation, composed by dp-accounting's own accountants.

Per adversary group (the plan's views of one ``group`` compose), the target's releases over the audited rounds
(it takes part in every one; ``View`` says what each release is):

* ``upload`` / ``steps``: ``releases_per_round`` Gaussian releases per round with std ``sigma_t`` (the
  target's, the stage's) and replace-one sensitivity ``Delta`` (the audited level's: the ledger plan's stage
  sensitivity; every plan states it for replacing one record, or one client at client level); with
  ``max_releases = L`` the L releases of largest ``Delta / sigma``;
* ``broadcast``: the aggregate, std ``sqrt(sigma_server^2 + sum_j p_j^2 sigma_j^2)`` over the round's
  participants, sensitivity ``p_target Delta_target`` (Wei et al. 2020, Lemma 1);
* hidden sampling at rate ``q``: Poisson (each release a ``PoissonSampledDpEvent``) or a fixed-size subset
  of ``round(q N)`` of ``N`` (``SampledWithoutReplacementDpEvent``).

Accountants (dp-accounting, Google): unsampled Gaussian releases compose into one Gaussian with ``1 / z^2 =
sum_i 1 / z_i^2`` (Dong, Roth & Su 2019, Cor. 3.3), whose epsilon is exact (``gaussian_mechanism.
get_epsilon_gaussian``, Balle & Wang 2018; ``lower = upper``); a group with Poisson sampling composes in a
privacy loss distribution under the replace-one relation (``from_gaussian_mechanism``; Meiser & Mohammadi
2018; Koskela et al. 2020), once pessimistic (an upper bound: ``upper``) and once optimistic (a lower bound:
``lower``; the gap is the discretisation); a group with sampling without replacement, which dp-accounting's
PLD does not model, by its RDP accountant (Wang, Balle & Kasiviswanathan 2019, Thm 27; orders
``_RDP_ORDERS``, every one an upper bound), an upper bound only.  dp-accounting's PLD counts a replace-one
Gaussian release with noise multiplier ``z`` as shifting by ``2``, so each release goes in as ``2 sigma /
Delta``; its RDP as ``sigma / Delta``.

A ledger that reports less than ``lower`` (PLD), or less than ``(1 - RDP_TOLERANCE) upper`` (RDP only),
under-reports: the audit says LEAK.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["IndependentEpsilon", "independent_epsilons", "RDP_TOLERANCE", "PLD_INTERVAL"]

RDP_TOLERANCE = 0.05
"""Relative slack for groups accounted by RDP only (order grids differ between two upper bounds)."""
PLD_INTERVAL = 1e-3
"""dp-accounting's ``value_discretization_interval`` (its error shows as the gap between ``lower`` and
``upper``: about 1e-3 per composed release kind)."""
_RDP_ORDERS = (1.25, 1.5, 1.75, *range(2, 65), 80, 96, 128, 160, 192, 256)


@dataclass(frozen=True)
class IndependentEpsilon:
    """One group's recomputed epsilon: ``upper`` (what the control is judged against), ``lower`` (None for
    RDP), the method, and the events (``(kind, q, multiplier, count)``) it composed."""

    group: str
    upper: float
    lower: float | None
    method: str
    events: tuple[tuple[str, float, float, int], ...]

    def under_reported(self, ledger: float) -> bool:
        """Does ``ledger`` (the ledger's epsilon for this group) fall below what the plan spends?"""
        if math.isnan(self.upper):  # no independent value (module docstring)
            return False
        if not math.isfinite(self.upper):
            return ledger < math.inf
        if self.lower is not None:
            return ledger < self.lower * (1 - 1e-6) - 1e-12
        return ledger < (1 - RDP_TOLERANCE) * self.upper


def _events(view, plan, target: int, participants: np.ndarray, weights: np.ndarray, rounds: int
            ) -> list[tuple[str, float, float, int]]:
    """The target's releases of ``view`` over ``rounds`` as ``(kind, q, sigma / Delta, count)``."""
    sens = float(plan.stage_sensitivity(view.stage)[target])
    part = np.asarray(participants, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    z = []
    for t in range(rounds):
        if view.kind == "broadcast":
            sigma = float(math.sqrt(float(plan.stage_sigma("server", t, np.zeros(1, np.int64))[0]) ** 2
                                    + float(np.sum(w**2 * plan.stage_sigma(view.stage, t, part) ** 2))))
            delta_b = float(w[part == target][0]) * sens
            z.append(sigma / delta_b if delta_b > 0 else math.inf)
        else:
            sigma = float(plan.stage_sigma(view.stage, t, np.array([target]))[0])
            z += [sigma / sens] * view.releases_per_round
    sampled = view.hidden_sampling and view.sample_rate < 1.0
    if view.max_releases is not None and not sampled:
        z = sorted(z)[: int(view.max_releases)]
    kind = ("poisson" if view.sampling == "poisson" else "without_replacement") if sampled else "gaussian"
    out: dict[float, int] = {}
    for value in z:
        out[value] = out.get(value, 0) + 1
    return [(kind, float(view.sample_rate) if sampled else 1.0, value, count) for value, count in out.items()]


def _gaussian(events: Sequence[tuple[str, float, float, int]], delta: float) -> float:
    """The exact epsilon of composed unsampled Gaussian releases (module docstring)."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    inv = 0.0
    for _, _, z, count in events:
        if z == 0:
            return math.inf
        inv += count / z**2 if math.isfinite(z) else 0.0
    return 0.0 if inv == 0 else float(get_epsilon_gaussian(1.0 / math.sqrt(inv), delta))


def _pld(events: Sequence[tuple[str, float, float, int]], delta: float, pessimistic: bool) -> float:
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pld

    total = None
    for _, q, z, count in events:
        if z == 0:
            return math.inf
        if not math.isfinite(z):
            continue
        one = pld.from_gaussian_mechanism(standard_deviation=2.0 * z, sensitivity=1.0, sampling_prob=q,
                                          pessimistic_estimate=pessimistic,
                                          value_discretization_interval=PLD_INTERVAL,
                                          neighboring_relation=NeighboringRelation.REPLACE_ONE,
                                          use_connect_dots=pessimistic)
        one = one.self_compose(count) if count > 1 else one
        total = one if total is None else total.compose(one)
    return 0.0 if total is None else float(total.get_epsilon_for_delta(delta))


def _rdp(events: Sequence[tuple[str, float, float, int]], delta: float, population: int) -> float:
    import dp_accounting
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(_RDP_ORDERS), NeighboringRelation.REPLACE_ONE)
    for kind, q, z, count in events:
        if z == 0:
            return math.inf
        if not math.isfinite(z):
            continue
        gauss = dp_accounting.GaussianDpEvent(z)
        if kind == "without_replacement":
            event = dp_accounting.SampledWithoutReplacementDpEvent(population, max(1, round(q * population)),
                                                                   gauss)
        elif kind == "gaussian":
            event = gauss
        else:  # Poisson under replace-one is not in dp-accounting's RDP: no independent value
            return math.nan
        acc.compose(dp_accounting.SelfComposedDpEvent(event, count))
    return float(acc.get_epsilon(delta))


def independent_epsilons(plan, target: int, participants: np.ndarray, weights: np.ndarray, rounds: int
                         ) -> dict[str, IndependentEpsilon]:
    """Per adversary group of ``plan`` (the ledger's plan at the audited level, each round's sigma's as the
    run used them), the target's epsilon after ``rounds`` rounds (module docstring)."""
    groups: dict[str, list] = {}
    for view in plan.views:
        groups.setdefault(view.group_name, []).append(view)
    out = {}
    for group, views in groups.items():
        events = [e for v in views for e in _events(v, plan, target, participants, weights, rounds)]
        if all(kind == "gaussian" for kind, *_ in events):
            eps = _gaussian(events, plan.delta)
            out[group] = IndependentEpsilon(group, eps, eps, "Gaussian composition, exact (dp-accounting)",
                                            tuple(events))
            continue
        if any(kind == "without_replacement" for kind, *_ in events):
            upper = _rdp(events, plan.delta, plan.num_clients)
            out[group] = IndependentEpsilon(group, upper, None, "RDP (dp-accounting, replace-one)",
                                            tuple(events))
            continue
        out[group] = IndependentEpsilon(group, _pld(events, plan.delta, True),
                                        _pld(events, plan.delta, False), "PLD (dp-accounting, replace-one)",
                                        tuple(events))
    return out
