"""The budget check before training: the epsilon a plan spends over its rounds, and the noise that would
meet the budget.

:func:`planned_releases` plays the run's rounds without training: each round's participants and aggregation
weights come from the algorithm's own hooks on the run's seeded streams (participation never reads a record,
so these are the very participants the run will have), and the privacy ledger turns them into the round's
releases.  :func:`planned_epsilon` counts them all with a fresh ledger: the tight epsilon (the least of the
valid upper bounds, ``privacy.py``) and the paper's, as the run's ledger will after its last round.

:func:`check_plan` refuses, before anything is trained or released, a plan whose tight epsilon over its
rounds exceeds its budget, in one line naming that epsilon and the sigma that would meet the budget
(:func:`meeting_scale`: every stage's sigma scaled by one factor, found by bisection on the same count);
in the paper-reproduction mode (``plan.paper_reproduction``) it refuses nothing and returns the statement
every output of the run carries (:func:`privacy_statement`).  A plan changed mid-run (UDP's CRD) is checked
as planned; the engine's check before each round stays the guard of what actually runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fedbound.errors import PrivacyBudgetExceeded
from fedbound.training.plan import NoisePlan
from fedbound.training.privacy import PrivacyLedger, Release, epsilons_many

__all__ = ["PlanCheck", "planned_releases", "planned_epsilon", "meeting_scale", "check_plan",
           "privacy_statement", "TOLERANCE"]

TOLERANCE = 1e-9
"""Relative slack of ``eps <= budget`` (the ledger's own: float sums of a plan that spends exactly eps)."""
_SCALE_DIGITS = 1e-3
"""Relative precision of :func:`meeting_scale`."""


@dataclass(frozen=True)
class PlanCheck:
    """What a plan spends over its rounds: the tight (binding unless reproducing a paper) and the paper's
    epsilon, the budget, and the one-line statement (:func:`privacy_statement`)."""

    epsilon: float
    epsilon_paper: float | None
    eps: float
    delta: float
    rounds: int
    statement: str

    @property
    def within_budget(self) -> bool:
        return self.epsilon <= self.eps * (1 + TOLERANCE)


def planned_releases(algorithm, model, data, plan: NoisePlan, seed: int = 0) -> list[list[Release]]:
    """The releases of each of the plan's rounds as the run will make them (module docstring)."""
    import torch

    from fedbound.training.engine import RoundContext, RunOptions, RunState
    from fedbound.training.noise import Streams

    options = RunOptions(seed=seed)
    streams = Streams(seed, torch.device("cpu"))
    ledger = PrivacyLedger(plan)
    out = []
    for t in range(plan.rounds):
        state = RunState(round=t, rounds=plan.rounds, global_params=torch.zeros(0), plan=plan)
        ctx = RoundContext(t, state, model, data, streams, options, None)
        participants = np.asarray(algorithm.participants(ctx), dtype=np.int64)
        weights = np.asarray(algorithm.aggregation_weights(ctx, participants), dtype=np.float64)
        out.append(ledger.releases(t, participants, weights))
    return out


def planned_epsilon(plan: NoisePlan, releases: list[list[Release]], scale: float = 1.0
                    ) -> tuple[float, float | None]:
    """The tight and the paper's epsilon (max over clients and adversaries; the paper's None without one)
    after every round's ``releases``, each noise multiplier times ``scale`` (every stage's sigma scaled)."""
    ledger = PrivacyLedger(plan)
    accounts = ledger.accounts
    for rels in releases:
        if scale != 1.0:
            rels = [replace(r, z=r.z * scale, z_all=r.z_all * scale) for r in rels]
        ledger._record(accounts, rels)
    eps = epsilons_many([(ledger, accounts)], paper=scale == 1.0)[0]
    tight = float(max(np.max(v) for v in eps["tight"].values())) if eps["tight"] else 0.0
    paper = float(max(np.max(v) for v in eps["paper"].values())) if eps.get("paper") else None
    return tight, paper


def meeting_scale(plan: NoisePlan, releases: list[list[Release]]) -> float:
    """The least factor (to 0.1 %, rounded up) by which every sigma must be scaled for the tight epsilon to
    meet ``plan.eps``; inf where no factor does (a release without noise)."""
    budget = plan.eps * (1 + TOLERANCE)

    def meets(s: float) -> bool:
        return planned_epsilon(plan, releases, s)[0] <= budget

    lo, hi = 1.0, 2.0
    while not meets(hi):
        lo, hi = hi, hi * 2.0
        if hi > 2.0**64:
            return math.inf
    while hi / lo > 1.0 + _SCALE_DIGITS:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


def privacy_statement(epsilon: float, eps: float, delta: float, binding: str = "tight") -> str:
    """One line: whether a run (or plan) is (eps, delta)-DP at its stated budget, with its exact epsilon."""
    if math.isfinite(epsilon) and epsilon <= eps * (1 + TOLERANCE):
        return (f"(ε, δ)-DP at the stated budget: exact ε = {epsilon:.4g} <= {eps:g} at δ = {delta:g}"
                + (" (the paper's accountant binds: paper reproduction)" if binding == "paper" else ""))
    return f"not (ε, δ)-DP at the stated budget: exact ε = {epsilon:.4g} > {eps:g} at δ = {delta:g}"


def _sigma_text(plan: NoisePlan, scale: float) -> str:
    parts = []
    for stage, values in plan.sigma.items():
        top = float(np.max(values))
        if top > 0:
            parts.append(f"sigma_{stage} {top:.4g} -> {_round_up(top * scale)}")
    return ", ".join(parts)


def _round_up(value: float) -> str:
    """``value`` to 4 significant digits, rounded up (a sigma that still meets the budget)."""
    if not math.isfinite(value) or value <= 0:
        return f"{value:g}"
    step = 10.0 ** (math.floor(math.log10(value)) - 3)
    return f"{math.ceil(value / step * (1 - 1e-12)) * step:.4g}"


def check_plan(algorithm, model, data, plan: NoisePlan, seed: int = 0, what: str = "this setting"
               ) -> PlanCheck:
    """What ``plan`` spends over its rounds (:class:`PlanCheck`); PrivacyBudgetExceeded, one line naming the
    exact epsilon and the sigma that would meet the budget, when the tight epsilon exceeds it outside the
    paper-reproduction mode (module docstring).  ``what`` names the setting in that line."""
    releases = planned_releases(algorithm, model, data, plan, seed)
    tight, paper = planned_epsilon(plan, releases)
    statement = privacy_statement(tight, plan.eps, plan.delta, plan.binding_accountant)
    check = PlanCheck(tight, paper, plan.eps, plan.delta, plan.rounds, statement)
    if check.within_budget or plan.paper_reproduction:
        return check
    scale = meeting_scale(plan, releases)
    claim = f" (the paper's accountant claims {paper:.4g})" if paper is not None else ""
    fix = (f"scaling every sigma by {scale:.4g} would meet it ({_sigma_text(plan, scale)})"
           if math.isfinite(scale) else "no sigma meets it: a release carries no noise")
    raise PrivacyBudgetExceeded(
        f"{what} is refused before training: its noise spends exact eps = {tight:.4g} > budget "
        f"{plan.eps:g} at delta = {plan.delta:g} over its T = {plan.rounds} rounds{claim}; {fix}; "
        "[train] noise = \"tight\" calibrates it exactly, [train] paper_reproduction = true runs it anyway, "
        "labelled not (eps, delta)-DP")
