"""UDP's validation entry: Theorem 2 of Wei et al. 2021 (eq. (22)) at measured constants (``fedbound
validate udp``).

Measured: L (smoothness), mu (PL constant), div = xi-bar (the clients' gradient divergence, Assumption 1.5)
and theta0 = F(w0) - F*.  The bound ``A^T Theta + (1 - A^T)(a T + b)`` is split into its optimisation term
``A^T Theta`` and its noise-and-sampling term ``(1 - A^T)(a T + b)``; ``method="tight"`` replaces the noise
of eq. (10) by the tight sigma (fedbound.scheduling.udp.bound_tight).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import udp
from fedbound.errors import FedboundError
from fedbound.scheduling import udp as sched
from fedbound.validation.estimate.paper_entry import Validation

__all__ = ["VALIDATION", "terms", "check"]


def _one(s: Mapping[str, Any], method: str) -> tuple[float, float]:
    try:
        co = sched.coeffs(s)
    except (FedboundError, ValueError):
        return math.nan, math.nan
    T = float(s["T"])
    opt = math.exp(-co["c"] * T) * co["theta0"]
    total = float(sched.bound_tight(s, co, int(T))[0]) if method == "tight" else float(udp.bound(T, co))
    return opt, total - opt


def terms(setting: Mapping[str, Any], vs: str, values: np.ndarray, method: str = "paper"
          ) -> dict[str, np.ndarray]:
    """Eq. (22) at ``vs = values`` as ``{"optimisation": A^T Theta, "noise": (1 - A^T)(a T + b)}``; NaN where
    Assumption 1 or 0 < A < 1 fails."""
    pairs = [_one({**setting, vs: (int(v) if vs in ("T", "K", "N") else float(v))}, method) for v in values]
    arr = np.array(pairs, dtype=float).reshape(-1, 2)
    return {"optimisation": arr[:, 0], "noise": arr[:, 1]}


def check(setting: Mapping[str, Any]) -> list[str]:
    """Assumption 1 and 0 < A < 1 at the measured constants, as sentences (empty when they hold)."""
    try:
        sched.coeffs(setting)
    except (FedboundError, ValueError) as exc:
        return [f"{udp.SHORT}, Theorem 2, eq. (22) does not apply at the measured constants: {exc}"]
    return []


VALIDATION = Validation(
    constants={"L": "smoothness", "mu": "pl", "div": "gradient_divergence", "theta0": "initial_gap"},
    unmeasured={"eta": "the learning rate: a choice of the algorithm, read from the config"},
    sweeps={"T": "T", "eps": "eps", "K": "K"},
    terms=terms,
    check=check,
    theorem=f"{udp.SHORT}, Theorem 2, eq. (22)",
    default_values={"T": (5, 10, 20, 40, 80), "eps": (2, 4, 8, 16, 32), "K": (5, 10, 20, 30, 50)},
)
