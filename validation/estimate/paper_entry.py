"""A paper's validation entry: which constants its bound needs, how to measure them, what it can sweep,
and how to evaluate its bound at the measured constants.

Each paper with a bound that can be evaluated defines ``VALIDATION = Validation(...)`` in
``fedbound.validation.estimate.validate_<paper>`` and points to it from its registry entry
(``Paper.validation = "fedbound.validation.estimate.validate_<paper>:VALIDATION"``).  ``fedbound estimate``
and ``fedbound validate`` are generic over these entries.

Measured quantities (names used in ``constants``, produced by :mod:`fedbound.validation.estimate`):
``initial_gap`` (F(w0) - F*), ``smoothness`` (largest Hessian eigenvalue), ``pl`` (strong convexity by
Lanczos on convex models, the PL ratio's infimum otherwise), ``gradient_bound`` (max ||grad F||),
``dissimilarity`` (NbAFL's B), ``gradient_divergence`` (UDP's xi-bar), ``mean_dissimilarity`` (PADPFL's A),
``lower_curvature`` (PADPFL's rho_-), and DP-PFL's per-client and per-sample constants:
``client_smoothness`` (L), ``client_strong_convexity`` (l), ``client_gradient_bound`` (lambda, B),
``weighted_divergence`` (eps_het), ``hessian_dissimilarity`` (gamma), ``hessian_lipschitz`` (rho),
``sample_gradient_std`` (sigma_G), ``sample_hessian_std`` (sigma_H), ``meta_initial_gap`` (Delta0 of G);
WPFL's ``optimum_spread`` (M) and ``initial_distance`` (``||w0 - w*||^2``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Validation", "QUANTITIES"]

QUANTITIES = ("initial_gap", "smoothness", "pl", "gradient_bound", "dissimilarity", "gradient_divergence",
              "mean_dissimilarity", "lower_curvature", "client_smoothness", "client_strong_convexity",
              "client_gradient_bound", "weighted_divergence", "hessian_dissimilarity", "hessian_lipschitz",
              "sample_gradient_std", "sample_hessian_std", "meta_initial_gap", "initial_distance",
              "optimum_spread")

Terms = Callable[[Mapping[str, Any], str, np.ndarray, str], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Validation:
    """How ``fedbound validate`` checks one paper's bound against training.

    ``constants``: config key -> measured quantity (one of :data:`QUANTITIES`).  ``unmeasured``: config key
    -> why it is not measured (e.g. a design choice such as NbAFL's proximal mu).  ``sweeps``: variable ->
    config key it sets (``--vs T`` sets ``T``).  ``terms(setting, vs, values, method)``: the bound at each
    value as named additive terms (their sum is the bound; the calibrated prediction scales each), NaN where
    the bound is undefined; ``method`` is "paper" (the paper's noise) or "tight".  ``theorem``: the bound's
    name for messages (e.g. "NbAFL (Wei et al. 2020), Theorem 2, eq. (14)").  ``check(setting)``: the
    bound's hypotheses at the measured constants, as sentences (empty: they hold).  ``default_values``:
    the values of ``--vs`` swept when none are given.  ``measured``: the column of a run's last metrics row
    whose gap to ``F*`` the bound is compared with (the engine's ``loss``; e.g. ``global_loss`` where the
    engine reports personalised models and the bound is on the global one).  ``internal``: keys of
    ``constants`` the bound needs that are not config keys (``fedbound estimate --write`` leaves them out).
    ``applies(setting)``: the premises the config alone decides (e.g. what the configured theorem bounds),
    as sentences; when one fails, ``fedbound validate`` says so and measures no constant (only ``F*``, for
    the measured gap).
    """

    constants: Mapping[str, str]
    sweeps: Mapping[str, str]
    terms: Terms
    theorem: str
    unmeasured: Mapping[str, str] = field(default_factory=dict)
    check: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda setting: [])
    default_values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    measured: str = "loss"
    internal: tuple[str, ...] = ()
    applies: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda setting: [])

    def __post_init__(self) -> None:
        bad = [q for q in self.constants.values() if q not in QUANTITIES]
        if bad:
            raise ValueError(f"unknown measured quantities {bad}; known: {', '.join(QUANTITIES)}")
