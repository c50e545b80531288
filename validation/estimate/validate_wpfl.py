"""WPFL's validation entry: Theorem 2 of Zhao et al. 2025 (eq. (27b)) for the global FL model, at measured
constants (``fedbound validate wpfl``).

Theorem 2 bounds the squared distance of the received global model to the optimum after ``t`` rounds,
``E||w_t - w*||^2 <= eps_F^t D + (1 - eps_F^t)/(1 - eps_F) Gamma^max`` (eps_F^max and Gamma^max the
largest of eqs. (28b) and (28a) over the run's schedule: its uplink and downlink element errors, the noise
sigma_DP and the quantization); with ``L``-smooth losses ``F(w) - F* <= (L/2) ||w - w*||^2``, so
``(L/2)`` times the bound bounds the global model's gap, which the engine logs as ``global_loss`` (its
``loss`` is the personalised models').  The downlink errors only add to Gamma, so the bound also holds for
the server's model.

Measured (Assumption 1): mu (each F_n's strong convexity), L (each F_n's smoothness), G0 (the largest
||grad F_n||), M (``max_n ||u_n* - w*||``) and ``D_global = ||w0 - w*||^2``.  G0 and M enter only the
personalised bound (Theorems 3-4, the planner's): they are measured for ``fedbound estimate --write``.  The
rates eta_F, eta_P, lambda are the algorithm's; phi1, phi2, vphi1, vphi2 are the proofs' Young constants
(any positive values give a valid bound).  With the ``proposed`` policy the trained eta_F* (F28) is
computed from the config's mu and L: the bound describes that training only when they are the measured
ones (``fedbound estimate --write``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.errors import FedboundError
from fedbound.validation.estimate.paper_entry import Validation

__all__ = ["VALIDATION", "terms", "check"]

SHORT = "WPFL (Zhao et al. 2025)"


def _schedule(s: Mapping[str, Any], method: str) -> Any:
    from fedbound.validation.recipes.wpfl import full_setting, sigma_for, wpfl_schedule

    full = full_setting(s)
    return wpfl_schedule(full, sigma_for(full, method))


def _contraction(sched: Any) -> float:
    return float(np.max(sched.eps_F))


def _one(s: Mapping[str, Any], method: str) -> tuple[float, float]:
    from fedbound.bounds import wpfl as wb

    try:
        sched = _schedule(s, method)
    except (FedboundError, ValueError):
        return math.nan, math.nan
    rate = _contraction(sched)
    half_l, init = 0.5 * float(s["L"]), float(s.get("D_global", math.nan))  # measured, never configured
    if not (0.0 < rate < 1.0 and math.isfinite(init)):
        return math.nan, math.nan
    total = float(wb.geometric_bound(rate, sched.rounds, init, float(np.max(sched.Gamma))))
    optimisation = rate ** sched.rounds * init
    return half_l * optimisation, half_l * (total - optimisation)


def terms(setting: Mapping[str, Any], vs: str, values: np.ndarray, method: str = "paper"
          ) -> dict[str, np.ndarray]:
    """``(L/2)`` x Theorem 2 (eq. (27b)) after the schedule's rounds at ``vs = values``, as
    ``{"optimisation": (L/2) eps_F^t D, "noise": (L/2) (1 - eps_F^t)/(1 - eps_F) Gamma^max}`` (``method``:
    sigma_DP of Theorem 1, "paper", or the tight calibration); NaN where eps_F^max is not in (0, 1)."""
    pairs = [_one({**setting, vs: (int(v) if vs in ("T", "K", "N", "R") else float(v))}, method)
             for v in values]
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    return {"optimisation": arr[:, 0], "noise": arr[:, 1]}


def check(setting: Mapping[str, Any]) -> list[str]:
    """Theorem 2's hypotheses at the measured constants, as sentences (empty when they hold)."""
    mu, L = float(setting["mu"]), float(setting["L"])
    if mu <= 0:
        return [f"{SHORT}, Assumption 1.1 needs mu-strongly convex losses (mu > 0); the measured smallest "
                f"Hessian eigenvalue is {mu:.4g}: Theorem 2, eq. (27b) does not apply"]
    try:
        sched = _schedule(setting, "paper")
    except (FedboundError, ValueError) as exc:
        return [f"{SHORT}, Theorem 2, eq. (27b) cannot be evaluated at the measured constants: {exc}"]
    rate = _contraction(sched)
    if not 0.0 < rate < 1.0:
        eta = float(np.max(sched.eta_F))
        return [f"{SHORT}, Theorem 2, eq. (27b) needs 0 < eps_F^max < 1 (eq. (28b)); at the measured mu = "
                f"{mu:.4g}, L = {L:.4g} and eta_F = {eta:.4g}, eps_F = {rate:.6g}: the bound does not "
                "contract and does not apply"]
    return []


VALIDATION = Validation(
    constants={"mu": "client_strong_convexity", "L": "client_smoothness", "G0": "client_gradient_bound",
               "M": "optimum_spread", "D_global": "initial_distance"},
    unmeasured={"eta_F": "the FL learning rate: a choice of the algorithm (fixed-rate policies) or eta_F* of "
                         "F28 (proposed policy)",
                "phi1 phi2 vphi1 vphi2": "Young constants of the proofs: any positive values give a valid "
                                         "bound, read from the config",
                "eta_P lam eps_P D0": "the personalised step's rates and target and its initial distance: "
                                      "Theorems 3-4, not the bound validated here"},
    sweeps={"T": "T", "eps": "eps"},
    terms=terms,
    check=check,
    theorem=f"{SHORT}, Theorem 2, eq. (27b) (x L/2: the global model's gap)",
    default_values={"T": (2, 5, 10, 20), "eps": (100, 300, 1000, 3000)},
    measured="global_loss",
    internal=("D_global",),
)
