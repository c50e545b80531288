"""PADPFL's validation entry: Theorem 2 of Talaei and Izadi 2024 (eq. (46)) at measured constants
(``fedbound validate adaptive``).

Measured: Theta = L(x0) - L*, A (Lemma 1's dissimilarity ``sum_i p_i ||grad l_i|| / ||grad L||``, eq. (15)),
rho (smoothness of the local losses: the largest client Hessian eigenvalue), beta (``||grad L|| <= beta``)
and rho_- (the lower curvature bound of the local losses, 0 when they are convex).  mu (the FedProx
proximal coefficient) and gamma (the local solve's inexactness, eq. (38)) are the algorithm's; R, C and the
impact factors are the setting's.  The bound ``Theta + k_2 T + k_1 T^2/eps + k_0 T^3/eps^2`` is split into
its optimisation part ``Theta + k_2 T`` and its noise part ``k_1 T^2/eps + k_0 T^3/eps^2``;
``method="tight"`` is the planner's Theta + T x Lemma 2's increment with the exactly calibrated effective
noise (:func:`fedbound.scheduling.adaptive.tight_bound`).

The estimators measure the data-weighted loss ``sum_i (n_i/n) l_i``; Theorem 2 bounds ``L = sum_i p_i l_i``
with the impact factors p: the two agree when p_i = n_i/n (:func:`check` says when they do not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import adaptive as ba
from fedbound.errors import FedboundError
from fedbound.validation.estimate.paper_entry import Validation

__all__ = ["VALIDATION", "terms", "check", "theorem_values"]

SHORT = "PADPFL (Talaei and Izadi 2024)"
WEIGHT_RTOL = 1e-9


def _mu(s: Mapping[str, Any]) -> float:
    """The proximal mu training used: the setting's, else Lemma 2's mu* at the assumed constants."""
    from fedbound.validation.recipes.adaptive import proximal_mu as trained_mu

    return trained_mu(s)


def _design(s: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    design = ba.design_from_settings(s)
    return design.phase_rows, np.asarray(design.client_sizes)


def theorem_values(s: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of Theorem 2's objects (``fedbound.bounds.adaptive.BOUND``) for a setting: its loss
    constants, the clip B (config key C), c(delta), mu, and the summaries of the impact factors and sizes."""
    phases, m = _design(s)
    return {**{k: s[k] for k in ("eps", "R", "Theta", "A", "gamma", "rho", "beta") if k in s},
            "B": s["C"], "c": float(ba.gaussian_c(s["delta"])), "mu": _mu(s),
            "rho_minus": s.get("rho_minus", 0.0), **ba.summaries(phases, m)}


def _one(s: Mapping[str, Any], method: str) -> tuple[float, float]:
    try:
        values = theorem_values(s)
        T = float(s["T"])
        optimisation = values["Theta"] + T * float(ba.K2(values))
        if method == "tight":
            from fedbound.scheduling.adaptive import tight_bound

            phases, m = _design(s)
            total = float(tight_bound({**s, "R": int(s.get("R", 1))}, phases, m, values["mu"],
                                      np.array([T]))[0])
        else:
            ev = ba.BOUND.evaluate({**values, "T": T})
            ok = bool(np.all(ev.defined)) and bool(np.all(ev.admissible))
            total = float(ev.value) if ok else math.nan
    except (FedboundError, ValueError):
        return math.nan, math.nan
    return optimisation, total - optimisation


def terms(setting: Mapping[str, Any], vs: str, values: np.ndarray, method: str = "paper"
          ) -> dict[str, np.ndarray]:
    """Theorem 2 (eq. (46)) at ``vs = values`` as ``{"optimisation": Theta + k_2 T, "noise": k_1 T^2/eps +
    k_0 T^3/eps^2}`` (``method="tight"``: the noise part with the exact calibration); NaN where undefined."""
    pairs = [_one({**setting, vs: (int(v) if vs in ("T", "R", "N") else float(v))}, method) for v in values]
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    return {"optimisation": arr[:, 0], "noise": arr[:, 1]}


def check(setting: Mapping[str, Any]) -> list[str]:
    """Theorem 2's hypotheses at the measured constants, as sentences (empty when they hold)."""
    problems = []
    try:
        values = theorem_values(setting)
    except (FedboundError, ValueError) as exc:
        return [f"{SHORT}, Theorem 2, eq. (46) cannot be evaluated at the measured constants: {exc}"]
    mu, rho_minus = values["mu"], values["rho_minus"]
    if mu <= rho_minus:
        problems.append(f"{SHORT}, Lemma 2 (eq. (4)) needs mu_bar = mu - rho_- > 0; at the measured "
                        f"constants mu = {mu:g} and rho_- = {rho_minus:.4g}: the bound does not apply")
    if not 0.0 <= values["gamma"] < 1.0:
        problems.append(f"{SHORT}, eq. (38) needs the local inexactness gamma in [0, 1); gamma = "
                        f"{values['gamma']:g}: the bound does not apply")
    phases, m = _design(setting)
    share = m / m.sum()
    if not np.allclose(phases, share, rtol=WEIGHT_RTOL, atol=0.0):
        problems.append(f"{SHORT}, eq. (1): Theorem 2 bounds L = sum_i p_i l_i with the impact factors p "
                        f"(here {np.unique(np.round(phases, 6)).tolist()}), but the measured gap and "
                        "constants are of the data-weighted loss sum_i (n_i/n) l_i: set ratios so that "
                        "p_i = n_i/n to compare them")
    return problems


VALIDATION = Validation(
    constants={"Theta": "initial_gap", "A": "mean_dissimilarity", "rho": "client_smoothness",
               "beta": "gradient_bound", "rho_minus": "lower_curvature"},
    unmeasured={"mu": "the FedProx proximal coefficient: a choice of the algorithm, read from the config "
                      "(else Lemma 2's mu*, as training uses)",
                "gamma": "the local solve's inexactness (eq. (38)): set by the local solver (local_steps, "
                         "lr); `fedbound train adaptive` logs it per round",
                "l_max": "the largest local loss of Theorem 3 (adaptive impact factors): Theorem 2 is "
                         "validated"},
    sweeps={"T": "T", "eps": "eps", "mu": "mu"},
    terms=terms,
    check=check,
    theorem=f"{SHORT}, Theorem 2, eq. (46)",
    default_values={"T": (2, 5, 10, 20, 40), "eps": (5, 10, 20, 50, 100), "mu": (1, 2, 4, 8, 16)},
)
