"""PADPFL: priority-based aggregation with client- and server-side DP (PADPFL, spec 001).

M. Talaei, I. Izadi, "Enhancing Federated Learning with Adaptive Differential Privacy and Priority-Based
Aggregation" (arXiv 2406.18491).  PADPFL is NbAFL (Wei et al. 2020) with non-uniform, possibly time-varying
impact
factors ``p_i`` (aggregation weights): every client adds ``sigma_C`` (eq. (8)), the server tops the
broadcast up by ``sigma_S`` (Theorem 1, eq. (13)) and the convergence analysis (Lemmas 1-3, Theorems 2-3)
bounds the optimality gap after T rounds.

Two layers, as in :mod:`fedbound.bounds.nbafl`:

* Theorem objects (upper case: ``SIGMA_CLIENT``, ``SIGMA_SERVER``, ``BOUND`` ...) on scalar summaries of the
  weights and sizes: ``p_max = max_i p_i``, ``S2 = sum_i p_i^2``, ``m_min``/``m_max`` (smallest/largest
  local dataset) and ``N``.  Every formula of the paper depends on p and m only through these.
* Plain functions taking the vectors ``p`` (one row per round for a schedule) and ``m`` and returning floats
  or arrays (the spec's function index, Sec. 3.13), and the
  impact-factor rules of Sec. 3.12 (:mod:`fedbound.bounds.adaptive_impact`, re-exported here).

``c`` (the Gaussian constant) is a parameter of the theorems, so the hand-checkable vectors with ``c = 1``
work; :func:`gaussian_c` gives the paper's ``sqrt(2 ln(1.25/delta))``.  ``B`` is the paper's clip bound on
the model weights (the config key ``C`` of the shared vocabulary).  The divergence constant the paper calls
epsilon in Assumption 1.4 is ``zeta`` here (erratum E7).

Variants (``variant=`` of the theorems; combine with ``+``):

* ``"paper"`` (default): the printed constants of Theorems 2 and 3, eqs. (46)/(50)/(69).
* ``"corrected"`` (E1-E4): k_0 (and k_0') get the factor N that (49) puts into E||n||^2; m_max becomes m_min
  (the sensitivity (10) actually used by the noise (13)); Theorem 3's k_2' loses its spurious 1/m_max.
  Only this reading satisfies bound(T) = Theta + T * per-round increment of Lemma 2 (claim M18).
* ``"noise_dimension"`` (E11): the noise moments (49) with the model dimension d instead of N (exact chi
  moments); changes ``NOISE_MOMENT_1``/``NOISE_MOMENT_2`` only.
* ``"sound"`` (E6): k_2 = max(lambda_2, 0) beta^2 -- the substitution ||grad L||^2 <= beta^2 is only valid
  for lambda_2 >= 0; with the paper's k_2 the non-private bound turns negative for large T (claim M25).

Decisions (where spec and paper differ, checked against the seed text):

* Theorem 1's branch is decided from the radicand with a relative tolerance (spec F19 numerical note,
  :data:`RADICAND_RTOL`), so T = T_th gives exactly 0.  The seed text writes the condition as
  ``T > R sqrt(sum p^2)/max p`` and the same root; the tolerance only changes values below 1e-6 sigma_A.
* lambda_1 = 1 + rho A (1+gamma)/mu_bar (E12): the seed's own derivation (33)-(44) starts with 1, not
  NbAFL's 1/mu.  The limiting case "equal weights = NbAFL" is checked against fedbound.bounds.nbafl, which
  keeps NbAFL's 1/mu; lambda_2 agrees exactly at gamma = 0.
* ``min_i m_i`` is over all clients, including those with p_i = 0 (E22, the literal reading); the optional
  :func:`server_sensitivity_tight` is ``max_i 2 B p_i / m_i``.
* The Gaussian mechanism's guarantee needs a per-release epsilon < 1 (E13); the formulas are evaluated for
  any eps > 0 and the plan shows the tight calibration beside them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.bounds import provable
from fedbound.bounds.adaptive_impact import (
    SIMPLEX_ATOL,
    Design,
    _m_min,
    _sizes,
    design_from_settings,
    impact_factor_change,
    impact_factors_by_size,
    impact_factors_from_ratios,
    impact_factors_from_scores,
    impact_factors_uniform,
    impact_schedule,
    parse_lists,
    redistribute_impact,
    update_impact_factors,
    validate_impact_factors,
    weight_summaries,
)
from fedbound.bounds.lazy import Theory
from fedbound.checks import check_int, check_real, scalar_or_array
from fedbound.errors import DomainError, ParameterError

SEED = "001"
Number = float | np.ndarray

RADICAND_RTOL = 1e-12
"""Relative tolerance of Theorem 1's radicand (spec 001 F19 numerical note): ``sigma_S = 0`` when
``T^2 max p^2 - R^2 sum p^2 <= 1e-12 T^2 max p^2``, so the boundary ``T = T_th`` gives exactly 0."""


_THEORY = Theory("fedbound.bounds.adaptive_theory")
NOTATION = _THEORY.notation()
(GAUSSIAN_C, SIGMA_CLIENT, SERVER_SENSITIVITY, SIGMA_AGG_CLIENT, SIGMA_TOTAL, SIGMA_SERVER,
 THRESHOLD, SIGMA_EFFECTIVE, LAMBDA2, LAMBDA1, LAMBDA0, LAMBDA2_PRIME, LAMBDA1_PRIME,
 NOISE_MOMENT_1, NOISE_MOMENT_2, K2, K1, K0, K2_PRIME, K1_PRIME, K0_PRIME, BOUND,
 BOUND_ADAPTIVE, BOUND_DT, BOUND_D2T) = _THEORY.theorems(
    "GAUSSIAN_C SIGMA_CLIENT SERVER_SENSITIVITY SIGMA_AGG_CLIENT SIGMA_TOTAL SIGMA_SERVER THRESHOLD "
    "SIGMA_EFFECTIVE LAMBDA2 LAMBDA1 LAMBDA0 LAMBDA2_PRIME LAMBDA1_PRIME NOISE_MOMENT_1 NOISE_MOMENT_2 K2 "
    "K1 K0 K2_PRIME K1_PRIME K0_PRIME BOUND BOUND_ADAPTIVE BOUND_DT BOUND_D2T")
THEOREMS = _THEORY.mapping("THEOREMS")
VARIANTS = tuple(NOTATION.variants)
LOSS_CONSTANTS = ("Theta", "A", "gamma", "rho", "mu", "rho_minus", "beta")
ASSUMED_LOSS_CONSTANTS = {
    "Theta": 2.3,
    "A": 1.2,
    "gamma": 0.1,
    "rho": 1.0,
    "beta": 1.0,
    "rho_minus": 0.0,
    "l_max": 2.3,
}
"""Loss constants assumed when a setting gives none (the paper states none, spec 001 E24): Theta = ln 10 ~ 2.3
(a 10-class cross-entropy at initialisation) and the constants of spec 001's test vectors (A = 1.2,
gamma = 0.1, rho = 1, beta = 1), for which Lemma 2's lambda_2 < 0 at mu > 2.49."""


# ---------------------------------------------------------------------------------------------------------
# Noise (Sec. III-A/B, Theorem 1) on the vectors p and m
# ---------------------------------------------------------------------------------------------------------
def gaussian_c(delta: Number) -> Number:
    """``c = sqrt(2 ln(1.25/delta))`` (PADPFL Sec. III-A; spec 001 F7; c(0.01) = 3.10751146009)."""
    return GAUSSIAN_C(delta=delta)


gaussian_constant = gaussian_c


def _c(delta: float, c_value: float | None) -> float:
    if c_value is None:
        return float(gaussian_c(delta))
    return float(check_real("c", c_value, 0.0, low_open=True))


def gaussian_sigma(sensitivity: Number, eps: Number, delta: Number, c: float | None = None) -> Number:
    """``sigma = c Delta f / eps`` (Gaussian mechanism as quoted in PADPFL Sec. III-A; spec 001 F8)."""
    s = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    e = check_real("eps", eps, 0.0, low_open=True)
    return scalar_or_array(_c(delta, c) * s / e)


def client_sensitivity(B: Number, m_i: Number) -> Number:
    """``Delta f_i = 2 B / m_i`` (PADPFL eq. (7); spec 001 F10)."""
    b = check_real("B", B, 0.0, low_open=True)
    return scalar_or_array(2.0 * b / _sizes(m_i))


def client_noise_sigma_personal(
    eps: float, delta: float, B: float, R: int, m_i: Number, c: float | None = None
) -> Number:
    """``sigma_i = 2 B R c / (m_i eps)``: per-client noise before the "united" choice (text before PADPFL
    eq. (8); spec 001 F11)."""
    r = int(check_int("R", R, 1))
    return scalar_or_array(r * np.asarray(gaussian_sigma(client_sensitivity(B, m_i), eps, delta, c)))


def client_noise_sigma(eps: float, delta: float, B: float, R: int, m: Any, c: float | None = None) -> float:
    """``sigma_C = 2 B R c / (min_i m_i eps)``: the united client noise std (PADPFL eq. (8); spec 001 F12).

    ``m``: all local dataset sizes (or the smallest one); independent of p and T (spec 001 E15).
    """
    return float(SIGMA_CLIENT(eps=eps, c=_c(delta, c), B=B, R=R, m_min=_m_min(m)))


def server_sensitivity(B: float, p: Any, m: Any) -> Number:
    """``Delta f = 2 B max_i p_i / min_i m_i`` (PADPFL eq. (10); spec 001 F14); one per row of ``p``."""
    pm, _ = weight_summaries(p)
    return SERVER_SENSITIVITY(B=B, p_max=pm, m_min=_m_min(m))


def server_sensitivity_tight(B: float, p: Any, m: Any) -> Number:
    """``max_i 2 B p_i / m_i``: the aggregate's sensitivity when client i's record moves only x_i (tighter
    than PADPFL eq. (10), which pairs the largest p with the smallest m; spec 001 F14 note)."""
    b = float(check_real("B", B, 0.0, low_open=True))
    arr = validate_impact_factors(p)
    sizes = _sizes(m).astype(float)
    if sizes.shape != arr.shape[-1:]:
        raise ParameterError("m", sizes.shape, f"one size per client ({arr.shape[-1]})")
    return scalar_or_array(np.max(2.0 * b * arr / sizes, axis=-1))


def aggregated_client_noise_sigma(p: Any, sigma_c: Any) -> Number:
    """``sigma_AC = sqrt(sum_i p_i^2 sigma_Ci^2)`` (PADPFL eq. (12); spec 001 F16); ``sigma_c`` a scalar or
    one std per client."""
    s = check_real("sigma_c", sigma_c, 0.0)
    return scalar_or_array(np.sqrt(np.sum(validate_impact_factors(p) ** 2 * s**2, axis=-1)))


def total_noise_sigma(
    eps: float, delta: float, T: Number, B: float, p: Any, m: Any, c: float | None = None
) -> Number:
    """``sigma_A = c T Delta f / eps = 2 B T c max_i p_i / (min_i m_i eps)``: the broadcast std that T
    linearly composed releases need (proof of PADPFL Thm 1; spec 001 F17)."""
    pm, _ = weight_summaries(p)
    return SIGMA_TOTAL(eps=eps, c=_c(delta, c), T=T, B=B, p_max=pm, m_min=_m_min(m))


def server_noise_threshold(R: int, p: Any) -> Number:
    """``T_th = R sqrt(sum_i p_i^2) / max_i p_i`` (PADPFL Thm 1 condition; spec 001 F20): the server adds
    noise only for ``T > T_th``; ``R sqrt(N)`` for uniform p, ``R`` for one-hot p."""
    pm, s2 = weight_summaries(p)
    return THRESHOLD(R=R, p_max=pm, S2=s2)


def _check_R(R: int, T: Number) -> None:
    t = np.max(np.asarray(T, dtype=float))
    if int(check_int("R", R, 1)) > t:
        raise ParameterError(
            "R", R, f"integer in [1, T = {t:g}]", hint="R exposures cannot exceed the T rounds"
        )


def server_noise_sigma(
    eps: float, delta: float, T: Number, R: int, p: Any, B: float, m: Any, c: float | None = None
) -> Number:
    """Theorem 1 (PADPFL eq. (13); spec 001 F19): the server's top-up std

    ``sigma_S = 2 B c sqrt(T^2 max_i p_i^2 - R^2 sum_i p_i^2) / (min_i m_i eps)`` for ``T > T_th`` (F20),
    else 0.  The branch is decided from the radicand with :data:`RADICAND_RTOL` (spec 001 F19 numerical
    note), never by comparing with a rounded ``T_th``.  One value per row of ``p`` (an adaptive schedule:
    F19 with each round's p, spec 001 E25).
    """
    _check_R(R, T)
    pm, s2 = weight_summaries(p)
    return SIGMA_SERVER(eps=eps, c=_c(delta, c), T=T, R=R, p_max=pm, S2=s2, B=B, m_min=_m_min(m))


def server_noise_sigma_from_parts(sigma_A: Number, sigma_AC: Number) -> Number:
    """``sqrt(sigma_A^2 - sigma_AC^2)`` where that exceeds the F19 tolerance, else 0 (PADPFL eq. (14);
    spec 001 F18).  Works with per-client client noise too."""
    a = check_real("sigma_A", sigma_A, 0.0)
    ac = check_real("sigma_AC", sigma_AC, 0.0)
    r = a**2 - ac**2
    return scalar_or_array(np.sqrt(np.where(r > RADICAND_RTOL * a**2, r, 0.0)))


def effective_noise_sigma(
    eps: float, delta: float, T: Number, R: int, p: Any, B: float, m: Any, c: float | None = None
) -> Number:
    """``sigma_eff = sqrt(sigma_AC^2 + sigma_S^2) = max(sigma_A, sigma_AC)``: the std of the noise in the
    broadcast (PADPFL eqs. (11)-(14); spec 001 F21)."""
    _check_R(R, T)
    pm, s2 = weight_summaries(p)
    return SIGMA_EFFECTIVE(eps=eps, c=_c(delta, c), T=T, R=R, p_max=pm, S2=s2, B=B, m_min=_m_min(m))


# --- tight counterparts (fedbound.accounting) -------------------------------------------------------------
def tight_noise_multiplier(eps: float, delta: float) -> float:
    """z: the std of one sensitivity-1 Gaussian release that is exactly (eps, delta)-DP (analytic Gaussian,
    Balle & Wang 2018), valid for every eps > 0.  k Gaussian releases of sensitivity Delta and std sigma
    compose exactly to one of sensitivity sqrt(k) Delta (Gaussian DP), so k exposures need sqrt(k) z Delta."""
    e = float(check_real("eps", eps, 0.0, low_open=True))
    dl = float(check_real("delta", delta, 0.0, 1.0, low_open=True, high_open=True))
    return _analytic_z(e, dl)


@functools.lru_cache(maxsize=4096)
def _analytic_z(eps: float, delta: float) -> float:
    """The analytic Gaussian's z, kept per process by the exact (eps, delta): a plan asks for it a few dozen
    times, and the eps figure's fixed grid asks for the same 60 at every setting."""
    from fedbound.accounting import analytic_gaussian_std

    return float(analytic_gaussian_std(eps, delta, 1.0))


def client_noise_sigma_tight(eps: float, delta: float, B: float, R: int, m: Any) -> float:
    """``sqrt(R) z 2B / min_i m_i``: R uplink exposures composed exactly (tight counterpart of PADPFL
    eq. (8), which composes linearly with the classic constant)."""
    r = int(check_int("R", R, 1))
    b = float(check_real("B", B, 0.0, low_open=True))
    return math.sqrt(r) * tight_noise_multiplier(eps, delta) * 2.0 * b / _m_min(m)


def total_noise_sigma_tight(eps: float, delta: float, T: Number, B: float, p: Any, m: Any) -> Number:
    """``sqrt(T) z Delta f``: the broadcast std that T releases of sensitivity (10) need, composed exactly
    (tight counterpart of PADPFL's sigma_A, spec 001 F17)."""
    t = check_real("T", T, 0.0)
    return scalar_or_array(
        np.sqrt(t) * tight_noise_multiplier(eps, delta) * np.asarray(server_sensitivity(B, p, m), dtype=float)
    )


def server_noise_sigma_tight(eps: float, delta: float, T: Number, R: int, p: Any, B: float, m: Any) -> Number:
    """Server top-up to the tight total: ``sqrt(sigma_A,tight^2 - sigma_AC,tight^2)`` (0 when the aggregated
    client noise already suffices; tight counterpart of PADPFL Theorem 1, eq. (13))."""
    _check_R(R, T)
    total = np.asarray(total_noise_sigma_tight(eps, delta, T, B, p, m), dtype=float)
    ac = np.asarray(aggregated_client_noise_sigma(p, client_noise_sigma_tight(eps, delta, B, R, m)))
    return server_noise_sigma_from_parts(total, np.broadcast_to(ac, total.shape))


def exact_epsilon(
    sigma: Mapping[str, Any], p: Any, m: Any, B: float, R: int, delta: float
) -> dict[str, float]:
    """The epsilon a noise plan actually spends at ``delta`` under exact accounting (analytic Gaussian,
    Gaussian-DP composition), per view, for the worst client.

    ``sigma``: :func:`noise_details`'s output (``uplink``, ``server``, ``aggregated_client`` per round);
    ``p``: the round's impact factors ``(T, N)``.  Uplink: a client's first ``R`` rounds with p_i > 0, each
    a release of sensitivity ``2B/min m`` with std sigma_C; downlink: every round with p_i > 0, sensitivity
    eq. (10) ``2B max_i p_i^(t)/min m`` with std sigma_eff^(t) (F21).  What PADPFL eq. (8)/(13) spend
    when they claim (eps, delta) (E13, E21).
    """
    from fedbound.accounting import analytic_gaussian_epsilon

    rows = validate_impact_factors(p)
    rows = rows[None, :] if rows.ndim == 1 else rows
    active = rows > 0
    m_min = _m_min(m)
    up_z = np.asarray(sigma["uplink"], dtype=float)[: len(rows)] * m_min / (2 * float(B))
    eff = np.sqrt(
        np.asarray(sigma["server"], float) ** 2 + np.asarray(sigma["aggregated_client"], float) ** 2
    )
    down_z = eff[: len(rows)] / (2 * float(B) * rows.max(axis=1) / m_min)
    first_r = active & (np.cumsum(active, axis=0) <= int(R))
    inv_up = np.max(np.sum(np.where(first_r, 1 / up_z[:, None] ** 2, 0.0), axis=0))
    inv_down = np.max(np.sum(np.where(active, 1 / down_z[:, None] ** 2, 0.0), axis=0))
    return {
        "uplink": float(analytic_gaussian_epsilon(1 / math.sqrt(inv_up), delta)),
        "downlink": float(analytic_gaussian_epsilon(1 / math.sqrt(inv_down), delta)),
    }


NOISE_METHODS = ("paper", "tight")


def noise_details(setting: Mapping[str, Any], T: int, method: str = "paper") -> dict[str, Any]:
    """:func:`noise` plus the derived stds: ``{"uplink": sigma_C, "server": sigma_S^(t), "total": sigma_A^(t),
    "aggregated_client": sigma_AC^(t)}``, arrays of length T.

    ``method="paper"``: PADPFL eq. (8) and Theorem 1 eq. (13) (classic constant, linear composition);
    ``"tight"``: the same views calibrated exactly (analytic Gaussian, Gaussian-DP composition:
    ``sqrt(R) z 2B/m_min`` and ``sqrt(T) z Delta f^(t)``), the server topping up as in eq. (14).
    ``setting``: ``eps``, ``delta``, ``C`` (the clip bound B; ``B`` accepted), ``R``, and either ``p`` (a
    vector, or one row per round: the schedule, E25) with ``m`` (every client's size, or the smallest), or an
    [adaptive] section's ``N``, ``parts``, ``ratios``, ``switch_after``, ``sizes``/``m`` (the F55 schedule).
    Arrays of length T.  With ``sensitivity = "provable"`` the clip B reads as the effective clip of
    :func:`fedbound.bounds.provable.apply` (every sensitivity 2B/m_i becomes the provable one).
    """
    if method not in NOISE_METHODS:
        raise ParameterError("method", method, "one of " + ", ".join(NOISE_METHODS))
    t = int(check_int("T", T, 1))
    eps_v, delta_v, R_v = setting["eps"], setting["delta"], int(setting.get("R") or 1)
    if setting.get("p") is not None:
        p, m = validate_impact_factors(setting["p"]), setting["m"]
    else:
        design = design_from_settings(setting)
        p, m = design.schedule(t), design.client_sizes
    key = "C" if setting.get("C") is not None else "B"
    clip = provable.apply(setting, clip_key=key, m=float(np.min(m)), paper="PADPFL (Talaei & Izadi 2024)",
                          assumption="client sensitivity 2B/m of eq. (8)")[key]
    rows = np.tile(p, (t, 1)) if p.ndim == 1 else p[np.minimum(np.arange(t), len(p) - 1)]
    if method == "paper":
        up = client_noise_sigma(eps_v, delta_v, clip, R_v, m)
        total = np.asarray(total_noise_sigma(eps_v, delta_v, t, clip, rows, m), dtype=float)
        server = np.asarray(server_noise_sigma(eps_v, delta_v, t, R_v, rows, clip, m), dtype=float)
    else:
        _check_R(R_v, t)
        up = client_noise_sigma_tight(eps_v, delta_v, clip, R_v, m)
        total = np.asarray(total_noise_sigma_tight(eps_v, delta_v, t, clip, rows, m), dtype=float)
        server = np.asarray(server_noise_sigma_tight(eps_v, delta_v, t, R_v, rows, clip, m), dtype=float)
    agg = np.asarray(aggregated_client_noise_sigma(rows, up), dtype=float)
    return {
        "uplink": np.full(t, up),
        "server": np.broadcast_to(server, (t,)).copy(),
        "total": np.broadcast_to(total, (t,)).copy(),
        "aggregated_client": np.broadcast_to(agg, (t,)).copy(),
    }


def noise(setting: Mapping[str, Any], T: int, method: str = "paper") -> dict[str, np.ndarray]:
    """The noise std of each stage PADPFL injects, for ``T`` rounds: ``{"uplink": sigma_C, "server":
    sigma_S^(t)}`` (arrays of length T) -- the one place that decides "which sigma" (the planner and the
    training recipe both call it).  ``method="paper"``: PADPFL eq. (8) and Theorem 1 eq. (13);
    ``"tight"``: exact calibration (analytic Gaussian, Gaussian-DP composition).  See :func:`noise_details`
    for the setting's keys and the derived sigma_A and sigma_AC.
    """
    details = noise_details(setting, T, method)
    return {"uplink": details["uplink"], "server": details["server"]}


# ---------------------------------------------------------------------------------------------------------
# Lemmas 1-3 (Sec. IV-V) on measured quantities
# ---------------------------------------------------------------------------------------------------------
def global_loss(p: Any, local_losses: Any) -> float:
    """``L = sum_i p_i l_i`` (PADPFL eq. (1); spec 001 F1)."""
    return float(validate_impact_factors(p) @ check_real("local_losses", local_losses))


def aggregate(p: Any, local_weights: Any) -> np.ndarray:
    """``x = sum_i p_i x_i`` for local weights of shape (N, d) (PADPFL eq. (3); spec 001 F3)."""
    w = np.asarray(local_weights, dtype=float)
    pv = validate_impact_factors(p)
    if w.ndim != 2 or w.shape[0] != pv.shape[-1]:
        raise ParameterError("local_weights", w.shape, f"an array (N = {pv.shape[-1]}, d)")
    return pv @ w


def is_gamma_inexact(grad_h_norm: Number, grad_l_at_anchor_norm: Number, gamma: float) -> bool | np.ndarray:
    """``||grad h_i(x_0; x_bar)|| <= gamma ||grad l_i(x_bar)||`` (PADPFL eq. (38); spec 001 F5)."""
    g = float(check_real("gamma", gamma, 0.0, 1.0))
    out = np.asarray(check_real("grad_h_norm", grad_h_norm, 0.0)) <= g * np.asarray(
        check_real("grad_l_at_anchor_norm", grad_l_at_anchor_norm, 0.0)
    )
    return bool(out) if out.ndim == 0 else out


def dissimilarity_A1(grad_norm_L: Number, zeta: Number) -> Number:
    """``A_1(x) = sqrt(1 + zeta^2 / ||grad L(x)||^2)`` (PADPFL eq. (20); spec 001 F26)."""
    g = check_real("grad_norm_L", grad_norm_L, 0.0, low_open=True, hint="A_1 is undefined where grad L = 0")
    z = check_real("zeta", zeta, 0.0)
    return scalar_or_array(np.sqrt(1.0 + (z / g) ** 2))


def empirical_dissimilarity(p: Any, local_grad_norms: Any, grad_norm_L: float) -> float:
    """``A_emp = sum_i p_i ||grad l_i|| / ||grad L||``, the tightest A of Lemma 1 at a point (PADPFL
    eqs. (15)/(22); spec 001 F28)."""
    g = float(
        check_real(
            "grad_norm_L", grad_norm_L, 0.0, low_open=True, hint="A is undefined where grad L = 0 (E18)"
        )
    )
    return float(validate_impact_factors(p) @ check_real("local_grad_norms", local_grad_norms, 0.0)) / g


def adaptive_dissimilarity(alpha: Any, local_grad_norms: Any, grad_norm_L: float, A: float) -> float:
    """``A' = sum_i alpha_i ||grad l_i|| / ||grad L|| + A`` (PADPFL eq. (56); spec 001 F51); can be below
    1 even when A is tight (E18)."""
    g = float(
        check_real("grad_norm_L", grad_norm_L, 0.0, low_open=True, hint="A' is undefined where grad L = 0")
    )
    a = check_real("alpha", alpha, -1.0, 1.0)
    return float(a @ check_real("local_grad_norms", local_grad_norms, 0.0)) / g + float(
        check_real("A", A, 0.0)
    )


def mu_bar_value(mu_value: float, rho_minus_value: float = 0.0) -> float:
    """``mu_bar = mu - rho_-`` (PADPFL Lemma 2; spec 001 F30); DomainError unless > 0."""
    out = float(check_real("mu", mu_value, 0.0, low_open=True)) - float(
        check_real("rho_minus", rho_minus_value, 0.0)
    )
    if out <= 0:
        raise DomainError(
            "mu", mu_value, f"mu > rho_minus = {rho_minus_value}", hint="mu_bar must be > 0 (E8)"
        )
    return out


def local_drift_bound(grad_norm_li: Number, gamma_value: float, mu_bar_v: float) -> Number:
    """``||x_i^(t+1) - x~^(t)|| <= (1 + gamma)/mu_bar ||grad l_i(x~^(t))||`` (PADPFL eq. (39); F33)."""
    g = check_real("grad_norm_li", grad_norm_li, 0.0)
    return scalar_or_array(
        (1 + float(check_real("gamma", gamma_value, 0.0, 1.0)))
        / float(check_real("mu_bar", mu_bar_v, 0.0, low_open=True))
        * g
    )


def step_norm_bound(
    A_value: float, gamma_value: float, mu_bar_v: float, grad_norm_L: Number, noise_norm: Number
) -> Number:
    """``||x~^(t+1) - x~^(t)|| <= A (1 + gamma)/mu_bar ||grad L|| + ||n^(t+1)||`` (PADPFL eq. (40) with
    mu_bar for mu, E9; spec 001 F34)."""
    a = float(check_real("A", A_value, 0.0))
    return scalar_or_array(
        a * np.asarray(local_drift_bound(grad_norm_L, gamma_value, mu_bar_v))
        + check_real("noise_norm", noise_norm, 0.0)
    )


def lemma2_lambdas(
    A: float, gamma: float, rho: float, mu: float, rho_minus: float = 0.0
) -> tuple[float, float, float]:
    """``(lambda_2, lambda_1, lambda_0)`` of Lemma 2 (PADPFL eq. (23); spec 001 F37-F39); with ``A = A'``
    those of Lemma 3 (eq. (52), F53).  lambda_1 starts with 1 (E12)."""
    values = {"A": A, "gamma": gamma, "rho": rho, "mu": mu, "rho_minus": rho_minus}
    return float(LAMBDA2(values)), float(LAMBDA1(values)), float(LAMBDA0(values))


def noise_moments(sigma: Number, N: int, dim: int | None = None) -> tuple[Number, Number]:
    """``(E||n||, E||n||^2) = (sigma sqrt(2N/pi), sigma^2 N)`` (PADPFL eq. (49), N as the dimension;
    spec 001 F40/F41).  ``dim=d``: the exact chi moments of a d-dimensional N(0, sigma^2 I) (E11)."""
    s = check_real("sigma", sigma, 0.0)
    if dim is None:
        n = float(check_int("N", N, 1))
        return scalar_or_array(s * math.sqrt(2 * n / math.pi)), scalar_or_array(s**2 * n)
    dd = float(check_int("dim", dim, 1))
    chi = math.sqrt(2) * math.exp(math.lgamma((dd + 1) / 2) - math.lgamma(dd / 2))
    return scalar_or_array(s * chi), scalar_or_array(s**2 * dd)


def per_round_increment_bound(
    grad_norm_L: Number,
    mean_noise_norm: Number,
    mean_sq_noise_norm: Number,
    lambdas: Sequence[float],
    l_max: float | None = None,
) -> Number:
    """``lambda_2 g^2 + lambda_1 E||n|| g + lambda_0 E||n||^2`` (+ l_max/2 with ``l_max``: Lemma 3).

    PADPFL Lemma 2 eq. (23) (read ||grad L||, E5) and Lemma 3 eq. (52); spec 001 F36/F53.
    ``lambdas = (lambda_2, lambda_1, lambda_0)``.
    """
    l2, l1, l0 = (float(x) for x in lambdas)
    g = np.asarray(check_real("grad_norm_L", grad_norm_L, 0.0))
    e1 = np.asarray(check_real("mean_noise_norm", mean_noise_norm, 0.0))
    e2 = np.asarray(check_real("mean_sq_noise_norm", mean_sq_noise_norm, 0.0))
    extra = 0.0 if l_max is None else 0.5 * float(check_real("l_max", l_max, 0.0))
    return scalar_or_array(np.asarray(l2 * g**2 + l1 * e1 * g + l0 * e2 + extra, dtype=float))


def adaptive_weight_shift_term(alpha: Any, local_losses: Any) -> float:
    """``sum_i alpha_i l_i``: the exact extra term of Lemma 3 (PADPFL eq. (59); the paper bounds its
    expectation by max_i l_i / 2, eq. (60), E16; spec 001 F52)."""
    return float(check_real("alpha", alpha, -1.0, 1.0) @ check_real("local_losses", local_losses, 0.0))


def theorem2_constants(
    lambdas: Sequence[float],
    beta: float,
    B: float,
    c: float,
    p_max: float,
    m: Any,
    N: int,
    variant: str = "paper",
) -> tuple[float, float, float]:
    """``(k_2, k_1, k_0)`` of Theorem 2 (PADPFL eq. (46); spec 001 F44-F46) from given lambdas.

    ``variant="corrected"`` applies E1-E2 (k_0 with N, min m for max m).  ``m``: all sizes.
    """
    l2, l1, l0 = (float(x) for x in lambdas)
    sizes = _sizes(m)
    if variant not in ("paper", "corrected"):
        raise ParameterError("variant", variant, "'paper' or 'corrected'")
    corrected = variant == "corrected"
    ref = float(sizes.min() if corrected else sizes.max())
    n = int(check_int("N", N, 1))
    b_, c_, be = (
        float(check_real(k, v, 0.0, low_open=True)) for k, v in (("B", B), ("c", c), ("beta", beta))
    )
    pm = float(check_real("p_max", p_max, 0.0, 1.0, low_open=True))
    k1_ = 2 * l1 * be * b_ * c_ * pm / ref * math.sqrt(2 * n / math.pi)
    k0_ = 4 * l0 * b_**2 * c_**2 * pm**2 * (n if corrected else 1) / ref**2
    return l2 * be**2, k1_, k0_


def theorem3_constants(
    lambdas_prime: Sequence[float],
    beta: float,
    B: float,
    c: float,
    p_max: float,
    m: Any,
    N: int,
    l_max: float,
    variant: str = "paper",
) -> tuple[float, float, float]:
    """``(k_2', k_1', k_0')`` of Theorem 3 (PADPFL eq. (69); spec 001 F54); ``p_max`` over rounds (E4)."""
    k2_, k1_, k0_ = theorem2_constants(lambdas_prime, beta, B, c, p_max, m, N, variant)
    lm = 0.5 * float(check_real("l_max", l_max, 0.0))
    div = 1.0 if variant == "corrected" else float(_sizes(m).max())
    return k2_ / div + lm, k1_, k0_


def convergence_bound(Theta: float, T: Number, eps: float, k: Sequence[float]) -> Number:
    """``Theta + k_2 T + k_1 T^2/eps + k_0 T^3/eps^2`` (PADPFL eqs. (46)/(69); spec 001 F43/F54)."""
    k2_, k1_, k0_ = (float(x) for x in k)
    t = check_real("T", T, 0.0)
    e = float(check_real("eps", eps, 0.0, low_open=True))
    th = float(check_real("Theta", Theta, 0.0))
    return scalar_or_array(th + k2_ * t + k1_ * t**2 / e + k0_ * t**3 / e**2)


def summaries(p: Any, m: Any) -> dict[str, float]:
    """The theorem parameters of weights and sizes: ``p_max`` (over all rows: E4), ``S2`` (largest row),
    ``m_min``, ``m_max``, ``N``."""
    pm, s2 = weight_summaries(p)
    sizes = _sizes(m)
    return {
        "p_max": float(np.max(pm)),
        "S2": float(np.max(s2)),
        "m_min": int(sizes.min()),
        "m_max": int(sizes.max()),
        "N": int(validate_impact_factors(p).shape[-1]),
    }


__all__ = [
    "SEED",
    "RADICAND_RTOL",
    "PARAMS",  # noqa: F822  (module __getattr__: from the declarations)
    "NOTATION",
    "THEOREMS",
    "VARIANTS",
    "LOSS_CONSTANTS",
    "ASSUMED_LOSS_CONSTANTS",
    "NOISE_METHODS",
    "GAUSSIAN_C",
    "SIGMA_CLIENT",
    "SERVER_SENSITIVITY",
    "SIGMA_AGG_CLIENT",
    "SIGMA_TOTAL",
    "SIGMA_SERVER",
    "THRESHOLD",
    "SIGMA_EFFECTIVE",
    "LAMBDA2",
    "LAMBDA1",
    "LAMBDA0",
    "LAMBDA2_PRIME",
    "LAMBDA1_PRIME",
    "NOISE_MOMENT_1",
    "NOISE_MOMENT_2",
    "K2",
    "K1",
    "K0",
    "K2_PRIME",
    "K1_PRIME",
    "K0_PRIME",
    "BOUND",
    "BOUND_ADAPTIVE",
    "BOUND_DT",
    "BOUND_D2T",
    "SIMPLEX_ATOL",
    "Design",
    "design_from_settings",
    "parse_lists",
    "validate_impact_factors",
    "impact_factors_uniform",
    "impact_factors_by_size",
    "impact_factors_from_scores",
    "impact_factors_from_ratios",
    "impact_schedule",
    "redistribute_impact",
    "update_impact_factors",
    "impact_factor_change",
    "weight_summaries",
    "summaries",
    "gaussian_c",
    "gaussian_constant",
    "gaussian_sigma",
    "client_sensitivity",
    "client_noise_sigma_personal",
    "client_noise_sigma",
    "server_sensitivity",
    "server_sensitivity_tight",
    "aggregated_client_noise_sigma",
    "total_noise_sigma",
    "server_noise_threshold",
    "server_noise_sigma",
    "server_noise_sigma_from_parts",
    "effective_noise_sigma",
    "tight_noise_multiplier",
    "client_noise_sigma_tight",
    "total_noise_sigma_tight",
    "server_noise_sigma_tight",
    "noise",
    "noise_details",
    "exact_epsilon",
    "global_loss",
    "aggregate",
    "is_gamma_inexact",
    "dissimilarity_A1",
    "empirical_dissimilarity",
    "adaptive_dissimilarity",
    "mu_bar_value",
    "local_drift_bound",
    "step_norm_bound",
    "lemma2_lambdas",
    "noise_moments",
    "per_round_increment_bound",
    "adaptive_weight_shift_term",
    "theorem2_constants",
    "theorem3_constants",
    "convergence_bound",
    "CLAIMS",  # noqa: F822  (module __getattr__: imported on first use)
]


def __getattr__(name: str) -> Any:
    """``CLAIMS`` (PADPFL's claims, :mod:`fedbound.bounds.adaptive_claims`), imported on first use; the
    declarations' other names (symbols, definitions, conditions) from adaptive_theory (imports sympy)."""
    if name == "CLAIMS":
        from fedbound.bounds.adaptive_claims import CLAIMS

        return CLAIMS
    return _THEORY.attribute(__name__, name)
