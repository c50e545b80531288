"""NbAFL's validation entry: Theorem 2 (eq. (14)) and, under K-client scheduling, Theorem 3 (eq. (17)) of
Wei et al. 2020, evaluated at measured constants (``fedbound validate nbafl``).

Measured: Theta = F(w0) - F*, l (PL constant), beta (``||grad F|| <= beta``, how the proof uses it), rho
(smoothness) and B (Lemma 2's dissimilarity).  mu is the proximal coefficient of the local problem: a choice
of the algorithm, read from the config.  The bound is split into its optimisation term ``P^T Theta`` and its
noise term ``(1 - P^T)/(1 - P) (lambda_1 beta E||n|| + lambda_0 E||n||^2)`` (eq. (51); spec 002 F18); under
scheduling ``Q`` and ``alpha_0, alpha_1`` replace ``P`` and the lambdas (eq. (17)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb
from fedbound.validation.estimate.paper_entry import Validation

__all__ = ["VALIDATION", "terms", "check"]

SHORT = "NbAFL (Wei et al. 2020)"


def _scheduled(s: Mapping[str, Any]) -> bool:
    return s.get("K") is not None and s["K"] < s["N"]


def _contraction(s: Mapping[str, Any], scheduled: bool) -> np.ndarray:
    """P = 1 + 2 l lambda_2 (eq. (14)), or Q = 1 + 2 l alpha_2 under scheduling (eq. (84))."""
    from fedbound.bounds.provable import KEYS

    th = nb.CONTRACTION_Q if scheduled else nb.CONTRACTION_P
    return np.asarray(th.evaluate({k: v for k, v in s.items() if k not in KEYS}).value, dtype=float)


def terms(setting: Mapping[str, Any], vs: str, values: np.ndarray, method: str = "paper"
          ) -> dict[str, np.ndarray]:
    """Theorem 2 (or 3) at ``vs = values`` as ``{"optimisation": P^T Theta, "noise": the rest}``; NaN where
    the bound is undefined or its hypotheses (0 < P < 1) fail.  ``method="tight"``: the bound with the
    exact T-fold Gaussian composition (variant ``tight``).  The noise is the deployed one: the sensitivity
    of ``sensitivity = "provable"`` (the default) enters as its effective clip
    (:func:`fedbound.bounds.provable.for_planner`), as in the planner."""
    from fedbound.bounds import provable

    given = {k: v for k, v in setting.items() if v is not None}
    numeric, _ = provable.for_planner(given, clip_key="C", m=float(given["m"]), paper=SHORT,
                                      assumption="sensitivity 2C/m of eq. (6)")
    s = {"L": 1, **numeric, vs: np.asarray(values, dtype=float)}
    variant = "tight" if method == "tight" else "paper"
    if variant == "tight":
        s = nb.with_tight_z({**s, "z": None}, variant)
    scheduled = vs == "K" or _scheduled(setting)
    th = nb.K_BOUND if scheduled else nb.BOUND
    ev = th.evaluate(s, variant=variant)
    ok = np.asarray(ev.defined) & np.asarray(ev.admissible)
    total = np.where(ok, np.asarray(ev.value, dtype=float), np.nan)
    contraction = np.broadcast_to(_contraction(s, scheduled), total.shape)
    optimisation = np.where(ok, contraction ** np.asarray(s["T"], dtype=float) * s["Theta"], np.nan)
    return {"optimisation": optimisation, "noise": total - optimisation}


def check(setting: Mapping[str, Any]) -> list[str]:
    """Theorem 2's hypotheses at the measured constants, as sentences (empty when they hold)."""
    problems = []
    P = float(np.asarray(_contraction(setting, _scheduled(setting))))
    name = "Q" if _scheduled(setting) else "P"
    if not 0.0 < P < 1.0:
        mu, rho, B = (setting[k] for k in ("mu", "rho", "B"))
        problems.append(f"{SHORT}, Theorem 2, eq. (14) needs 0 < {name} < 1; at the measured constants "
                        f"{name} = {P:.4g} (mu = {mu:g} must exceed rho B (1 + B/2) = "
                        f"{rho * B * (1 + B / 2):.4g}, and 2 l |lambda_2| < 1): the bound does not apply")
    return problems


VALIDATION = Validation(
    constants={"Theta": "initial_gap", "l": "pl", "beta": "gradient_bound", "rho": "smoothness",
               "B": "dissimilarity"},
    unmeasured={"mu": "the proximal coefficient of the local problem: a choice of the algorithm, read from "
                      "the config", "L": "uplink exposures seen by the adversary: a privacy assumption"},
    sweeps={"T": "T", "eps": "eps", "K": "K"},
    terms=terms,
    check=check,
    theorem=f"{SHORT}, Theorem 2, eq. (14)",
    default_values={"T": (2, 5, 10, 20), "eps": (2, 4, 8, 16, 32), "K": (5, 10, 20, 30, 50)},
)
