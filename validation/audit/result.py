"""What an audit returns: per view (:class:`ViewAudit`), per noise check, stream test and shift check, the
verdict and its reasons (:func:`verdict`; the rules are ``fedbound.validation.audit``'s module docstring)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy.stats import norm

__all__ = ["ViewAudit", "NoiseCheck", "StreamCheck", "ShiftCheck", "AuditResult", "verdict",
           "SHIFT_TOLERANCE"]

SHIFT_TOLERANCE = 1e-4
"""Relative slack of a shift check (float rounding of the noise-free computation)."""


@dataclass(frozen=True)
class ViewAudit:
    """One adversary view's result (``fedbound.validation.audit``'s module docstring)."""

    view: str
    kind: str
    epsilon_lower: float
    epsilon_reported_tight: float
    epsilon_reported_paper: float | None
    epsilon_reported: float
    gaussian_mu: float
    gaussian_epsilon: float
    gaussian_interval: tuple[float, float]
    noise_std_measured: float
    noise_std_planned: float
    shift_measured: float
    sensitivity_assumed: float
    false_positives: int
    false_negatives: int
    held_out: int
    epsilon_independent: float | None = None
    """The target's epsilon recomputed by dp-accounting from the plan (``independent``): the control is
    judged against it."""
    epsilon_independent_low: float | None = None
    independent_method: str = ""
    under_reported: bool = False
    """The ledger reports less than the plan's sigma's, rounds and sampling spend."""
    gdp_mu: float = 0.0
    gdp_epsilon: float = 0.0
    gdp_mu_low: float = 0.0
    gdp_epsilon_low: float = 0.0
    """Nasr et al. 2023's Gaussian-DP estimate and lower bound (``stats.gdp_estimate``)."""
    one_run_epsilon: float | None = None
    one_run_canaries: int | None = None
    one_run_delta: float | None = None
    one_run_reference: float | None = None
    """Steinke, Nasr & Jagielski 2023's one-run lower bound at ``one_run_delta`` (runs with many canaries;
    None otherwise) and the plan's epsilon at that delta (independent), which a correct mechanism's bound
    stays under."""
    control_epsilon_lower: float | None = None
    control_mu: float | None = None
    leak: bool = False
    shift_exceeded: bool = False
    detectable_epsilon: float | None = None
    """The smallest epsilon (of a Gaussian mechanism) whose expected lower bound at these trials exceeds
    the reported epsilon."""
    trials_needed: int | None = None
    """Trials per side at which the control's expected lower bound exceeds the independent epsilon."""
    alpha: float = 0.05
    scores_out: list[float] = field(default_factory=list, repr=False)
    scores_in: list[float] = field(default_factory=list, repr=False)

    @property
    def epsilon_claimed(self) -> float:
        """What the control must beat: the independent epsilon (the ledger's without one)."""
        ind = self.epsilon_independent
        return self.epsilon_reported_tight if ind is None or math.isnan(ind) else ind

    @property
    def control_detected(self) -> bool:
        return (self.control_epsilon_lower or 0.0) > self.epsilon_claimed


@dataclass(frozen=True)
class NoiseCheck:
    """Measured over planned noise std of one stage, for one client (or one round, or the server): the ratio
    and its two-sided chi-square interval at level ``1 - alpha`` (``below``: the interval's top under 1)."""

    stage: str
    planned: float
    measured: float
    ratio_low: float
    ratio_high: float
    dof: int
    alpha: float
    client: int | None = None
    round: int | None = None

    @property
    def below(self) -> bool:
        return self.ratio_high < 1.0

    @property
    def where(self) -> str:
        if self.client is not None and self.client >= 0:
            return f" (client {self.client})"
        return f" (round {self.round + 1})" if self.round is not None else ""


@dataclass(frozen=True)
class StreamCheck:
    """One stream test (``observe``): the t statistic of the cosines between noise of different
    ``relation`` (rounds, clients, trials) and whether it says the draws are correlated at level ``alpha``."""

    stage: str
    relation: str
    statistic: float
    cosines: int
    alpha: float

    @property
    def correlated(self) -> bool:
        return self.statistic > float(norm.isf(self.alpha))


@dataclass(frozen=True)
class ShiftCheck:
    """A noise stage's largest input shift between D and D' for one participant's canary (coupled runs,
    ``fedbound.training.trials.coupled_shifts``) against the sensitivity the ledger assumes."""

    stage: str
    client: int
    shift: float
    sensitivity: float
    calls: int

    @property
    def exceeded(self) -> bool:
        return self.shift > self.sensitivity * (1 + SHIFT_TOLERANCE) + 1e-12


@dataclass(frozen=True)
class AuditResult:
    """The audit of one configured mechanism: per view, the verdict and how it was obtained."""

    paper: str
    verdict: str
    views: tuple[ViewAudit, ...]
    trials: int
    rounds: int
    canary: str
    target_client: int
    target_record: int | None
    delta: float
    budget_accountant: str
    control: bool
    noise_scale: float
    wall_time_s: float
    notes: tuple[str, ...] = ()
    level: str = "record"
    noise_checks: tuple[NoiseCheck, ...] = ()
    reasons: tuple[str, ...] = ()
    seed: int = 0
    natural_shift: float | None = None
    """The canary search's largest shift among natural records (flips and swaps), beside the chosen one's."""
    stages: tuple[str, ...] = ()
    """The plan's stages that add noise in the audited rounds."""
    train_seed: int | None = None
    """The ``[train] seed`` the audited run used (data split, model init)."""
    stream_checks: tuple[StreamCheck, ...] = ()
    shift_checks: tuple[ShiftCheck, ...] = ()
    participants: tuple[tuple[int, float, float], ...] = ()
    """``(client, canary shift, sensitivity)`` of every participant's searched canary."""
    fast_path: str = ""
    """How the trials ran (``experiment``'s module docstring)."""

    def to_dict(self, scores: bool = False) -> dict[str, Any]:
        out = asdict(self)
        for v in out["views"]:
            if not scores:
                v.pop("scores_out"), v.pop("scores_in")
        return out


def verdict(views: list[ViewAudit], checks: list[NoiseCheck], streams: list[StreamCheck],
            shifts: list[ShiftCheck], control: bool, max_trials: int) -> tuple[str, list[str]]:
    """LEAK / underpowered / consistent and why (``fedbound.validation.audit``'s module docstring)."""
    reasons = [f"{v.view}: lower bound {v.epsilon_lower:.3g} > reported epsilon {v.epsilon_reported:.3g}"
               for v in views if v.leak]
    seen = set()
    for v in views:
        if v.under_reported and v.epsilon_independent is not None and v.view not in seen:
            seen.add(v.view)
            reasons.append(f"{v.view}: the ledger reports epsilon {v.epsilon_reported_tight:.4g}, the plan's "
                           f"sigma's, rounds and sampling spend {v.epsilon_independent:.4g} "
                           f"({v.independent_method})")
    reasons += [f"{c.stage} of client {c.client}: noise-free shift {c.shift:.4g} > the sensitivity "
                f"{c.sensitivity:.4g} the ledger assumes" for c in shifts if c.exceeded]
    reasons += [f"{c.stage} noise{c.where}: std {c.ratio_low:.3g}-{c.ratio_high:.3g} x the plan's "
                f"({100 * (1 - c.alpha):.4g} % interval)" for c in checks if c.below]
    reasons += [f"{c.stage} noise: draws correlated across {c.relation} (t = {c.statistic:.3g} over "
                f"{c.cosines} cosines)" for c in streams if c.correlated]
    if reasons:
        return "LEAK: " + "; ".join(reasons), reasons
    if control and not any(v.control_detected for v in views):
        best = min(views, key=lambda v: v.trials_needed or math.inf)
        need = "more than " + str(max_trials) if best.trials_needed is None else str(best.trials_needed)
        smallest = ", ".join(f"{v.view} {v.detectable_epsilon or math.inf:.3g}" for v in views)
        return "underpowered", [
            "the halved-noise control is not detected in any view; smallest epsilon detectable at these "
            f"trials: {smallest}; the control needs about {need} trials per side ({best.view}; "
            "--trials auto)"]
    return "consistent", []
