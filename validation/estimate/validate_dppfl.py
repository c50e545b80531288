"""DP-PFL's validation entry: Theorem 2 of Wei et al. 2023 (eq. (31), strongly convex losses) at measured
constants (``fedbound validate dppfl``).

Measured (:mod:`fedbound.validation.estimate.constants`, per client and per sample as the assumptions state
them): L (16, each F_i's smoothness), rho (17, Hessian Lipschitz), lambda and B (15 and Assumption 1, the
largest ||grad F_i||), l (29, each F_i's strong convexity), eps_het (18) and gamma (19) (gradient and Hessian
dissimilarity, p-weighted), sigma_G and sigma_H (20)-(21) (per-sample gradient and Hessian spread) and
Delta0 = G(w0) - G(w*) of the meta objective G.  eta, beta, C, tau0 and the noise are the algorithm's; S (the
model's parameter count) and m (the smallest support set) are the setting's.

The bound ``zeta^{T tau0} Delta0 + (1 - zeta^{T tau0})/(1 - zeta^{tau0}) E`` is split into its optimisation
term ``zeta^{T tau0} Delta0`` and the accumulated per-round error (noise, clipping, drift and data bias);
``method="tight"`` uses the noise multiplier of the tight calibration
(:func:`fedbound.scheduling.dppfl.sigma_curve`).  Theorem 2 bounds the meta objective's gap G(w_T) - G(w*);
``fedbound validate`` measures the engine's loss, F(w_T) - F* of the meta-model: the two coincide as
eta -> 0 (G(w) = sum_i p_i F_i(w - eta grad F_i(w))).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.errors import FedboundError
from fedbound.validation.estimate.paper_entry import Validation

__all__ = ["VALIDATION", "terms", "check"]

SHORT = "DP-PFL (Wei et al. 2023)"
INTEGER_KEYS = ("T", "tau0", "S", "m", "N")


def _evaluate(s: Mapping[str, Any], method: str) -> Any:
    from fedbound.scheduling import dppfl as sched

    ratio = float(s.get("sigma_ratio", 1.0))
    sigma = sched.sigma_curve(s, float(s["T"]), method, ratio)
    return sched.bound_curve(s, float(s["T"]), sigma, "paper", ratio)


def _one(s: Mapping[str, Any], method: str) -> tuple[float, float]:
    try:
        ev = _evaluate(s, method)
        rest = _evaluate({**s, "Delta0": 0.0}, method)
    except (FedboundError, ValueError):
        return math.nan, math.nan
    if not (bool(np.all(ev.defined)) and bool(np.all(ev.admissible))):
        return math.nan, math.nan
    total, error = float(ev.value), float(rest.value)
    return total - error, error


def terms(setting: Mapping[str, Any], vs: str, values: np.ndarray, method: str = "paper"
          ) -> dict[str, np.ndarray]:
    """The configured bound (Theorem 2, eq. (31), or Theorem 3, eq. (32)) at ``vs = values`` as
    ``{"optimisation": the Delta0 term, "error": the accumulated per-round error}``; NaN where undefined or
    where a hypothesis fails."""
    pairs = [_one({**setting, vs: (int(v) if vs in INTEGER_KEYS else float(v))}, method) for v in values]
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    return {"optimisation": arr[:, 0], "error": arr[:, 1]}


def applies(setting: Mapping[str, Any]) -> list[str]:
    """What the config alone decides: Theorem 3 (``bound = "nonconvex"``, the paper's bound for neural
    networks) bounds a gradient norm, not the gap that validate measures."""
    if setting.get("bound", "nonconvex") != "convex":
        return [f"{SHORT}, Theorem 3, eq. (32) bounds the average squared gradient norm of the meta "
                "objective, not the gap F(w_T) - F* that validate measures: set bound = \"convex\" "
                "(Theorem 2, eq. (31)) on a strongly convex model"]
    return []


def check(setting: Mapping[str, Any]) -> list[str]:
    """The configured theorem's hypotheses at the measured constants, as sentences (empty when they hold)."""
    if applies(setting):
        return applies(setting)
    try:
        ev = _evaluate(setting, "paper")
    except (FedboundError, ValueError) as exc:
        return [f"{SHORT}, Theorem 2, eq. (31) cannot be evaluated at the measured constants: {exc}"]
    problems = [f"{SHORT}, Theorem 2, eq. (31): {cond.message}; at the measured constants {cond.blame} = "
                f"{float(np.max(shown)):.4g}: the bound does not apply".replace("\\", "")
                for cond, shown, _ in ev.failures if cond.severity in ("undefined", "required")]
    return list(dict.fromkeys(problems))


VALIDATION = Validation(
    constants={"L": "client_smoothness", "rho": "hessian_lipschitz", "B": "client_gradient_bound",
               "lam": "client_gradient_bound", "l": "client_strong_convexity",
               "eps_het": "weighted_divergence",
               "gamma_het": "hessian_dissimilarity", "sigma_G": "sample_gradient_std",
               "sigma_H": "sample_hessian_std", "Delta0": "meta_initial_gap"},
    unmeasured={"eta": "the inner (adaptation) learning rate: a choice of the algorithm, read from the "
                       "config",
                "beta": "the outer (meta) learning rate: a choice of the algorithm",
                "C": "the clipping threshold: a choice of the algorithm",
                "tau0": "local epochs per round: a choice of the algorithm",
                "S": "the model's parameter count (the noise dimension): a fact of the architecture, read "
                     "from the config",
                "m": "the smallest support set: a fact of the data split, read from the config"},
    sweeps={"T": "T", "eps": "eps", "C": "C"},
    terms=terms,
    check=check,
    theorem=f"{SHORT}, Theorem 2, eq. (31)",
    default_values={"T": (2, 5, 10, 20, 40), "eps": (5, 10, 20, 50, 100), "C": (0.25, 0.5, 1, 2, 4)},
    applies=applies,
)
