"""Seed 000 (Wei et al., IEEE TIFS 2023, DP-PFL / RDP-PFL): Theorem 1's privacy, Lemmas 1-6 and Theorems 2-3.

K. Wei, J. Li, C. Ma, M. Ding, W. Chen, J. Wu, M. Tao, H. V. Poor, "Personalized Federated Learning With
Differential Privacy and Convergence Guarantee", IEEE TIFS 18 (2023).  Equation numbers are the paper's.

Privacy (Theorem 1, eq. (12), with the E1 reading mu_1 = N(1, sigma^2)): after ``T`` rounds of ``tau0``
local epochs, each one inner sampled Gaussian mechanism (rate ``q_in``, noise multiplier ``sigma_in``) and one
outer (``q_out``, ``sigma_out``), each client's data is (eps, delta)-DP with

    eps(alpha) = T tau0 (log I^Q + log I^S) / (alpha - 1)
                 + (log(1/delta) + (alpha - 1) log(1 - 1/alpha) - log alpha) / (alpha - 1),

minimised over the orders (E7: Opacus' grid :data:`OPACUS_ORDERS`, 151 orders, normative).
``log I/(alpha-1)`` is the RDP of one Poisson-subsampled Gaussian, computed by
``fedbound.accounting.rdp_subsampled_gaussian`` (exact signed series; no second RDP implementation
here); the conversion (34) is
``fedbound.accounting.rdp_to_dp``.  The paper's "budget allocation" is the additive split of the RDP into an
inner and an outer part (:func:`rdp_pfl_rdp`), 50/50 in the paper (q_in = q_out, one sigma); ``ratio`` =
sigma_out / sigma_in generalises it (the split optimiser lives in ``fedbound.scheduling.dppfl``).  Theorem 1
is numeric (integrals (13)-(14)), so it is a set of functions here, not a sympy theorem.

Convergence (theorems as data, :mod:`fedbound.bounds.core`): Lemma 1 ``L'`` (22), Lemma 2 (23), Lemma 3
``D_i`` (25), Lemma 4 ``Theta`` (27) and ``Xi`` (26), Lemma 5 ``h(tau0)`` (28), Lemma 6 ``l'`` (30), the
per-round error ``E`` (common bracket of (31) and (32)), Theorem 2 (31) and Theorem 3 (32).  The noise
multiplier ``sigma`` of the bounds is the inner stage's (Theta bounds E||n^Q||).

Variants (all opt-in; the paper reading is the default):

* ``theta_exact`` (E14): Theta = E||N(0, C^2 sigma^2 I_S)|| = sqrt(2) C sigma Gamma((S+1)/2)/Gamma(S/2).
  The printed product (27) equals 2x that for odd S and 4x for even S (valid, but parity-discontinuous).
* ``tight`` (E15): Lemma 4's 2 eta L B replaced by eta L max(0, B - C)
  (||clip_C(x) - x|| = max(0, ||x|| - C)).
* ``outer_noise`` (E18): the outer step's noise beta n^S, missing from (227), adds Theta(S, sigma_out, C)
  to the bracket Xi + D_i (needs ``sigma_out``).
* ``client_sizes``: D-bar = sum_i p_i D_i is given (parameter ``Dbar``) instead of D(m) for the smallest
  support set m (D is decreasing in |D_i^S|, so D(m) >= D-bar: the default is a valid upper bound).

Conditions the paper leaves unstated (E26), checked and reported (never NaN): eta L < 1 and l' > 0 (Lemma 6,
Theorem 2), 0 < beta < 2/L' (both theorems), 0 <= zeta < 1 (Theorem 2).

Decisions where spec and paper differ (seed text /shared/seeds/000 re-read):

* Theta's closed form: the paper's (27) has the factor C, (162) drops it; we keep C (the noise is
  N(0, C^2 sigma^2 I)).  P(S) is evaluated through log-gamma, which the spec proves equal to the product
  (checked against the explicit product in the tests for S <= 60).
* Lemma 3 uses |D_i^S| for every term (the paper's reading, E12); the config key ``m`` is the smallest
  support set.
* Theorem 3 carries lambda once (main-text (32), E21); Theorem 2 is (31) as printed (E19's valid larger form).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.bounds.lazy import Theory
from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import InfeasibleError, ParameterError

__all__ = ["OPACUS_ORDERS", "TIGHT_ORDERS", "NOISE_METHODS", "sgm_log_integral", "rdp_pfl_rdp",
           "rdp_pfl_epsilon", "rdp_pfl_noise_multiplier", "noise_multiplier_curve", "theorem1_calibration",
           "noise", "NOTATION", "THEOREMS", "noise_norm_paper", "noise_norm_exact", "clipping_bias",
           "per_round_error", "convex_bound", "nonconvex_bound", "aggregation_weights", "CLAIMS"]

SEED = "000"

OPACUS_ORDERS = np.concatenate([1.0 + np.arange(1, 100) / 10.0, np.arange(12, 64, dtype=np.float64)])
"""Seed 000 App. A (Opacus) / E7: ``{1.1, 1.2, ..., 10.9} U {12, ..., 63}`` (151 orders)."""
OPACUS_ORDERS.setflags(write=False)


def _tight_orders() -> np.ndarray:
    from fedbound.accounting import DEFAULT_ORDERS

    out = np.unique(np.concatenate([OPACUS_ORDERS, DEFAULT_ORDERS]))
    out.setflags(write=False)
    return out


TIGHT_ORDERS = _tight_orders()
"""Opacus' 151 orders united with fedbound's DEFAULT_ORDERS: a finer grid can only lower eps (RDP holds at
every order), so sigma* on it is still proven and never larger than the paper's."""

# ---------------------------------------------------------------------------------------------------------
# Theorem 1: privacy (numeric, on fedbound.accounting's RDP)
# ---------------------------------------------------------------------------------------------------------


def sgm_log_integral(q: Any, sigma: Any, alpha: Any) -> Any:
    """log I of eqs. (13)-(14): (alpha - 1) times the RDP of one sampled Gaussian (E1 reading).  Seed 000,
    eqs. (13)-(14); ``fedbound.accounting.rdp_subsampled_gaussian`` (q = 1: alpha (alpha - 1)/(2 sigma^2))."""
    from fedbound.accounting import rdp_subsampled_gaussian

    a = check_real("alpha", alpha, 1.0, low_open=True)
    out = np.asarray(rdp_subsampled_gaussian(a.ravel(), q, sigma), dtype=float)
    out = out.reshape(np.shape(out)[:-1] + a.shape) * (a - 1.0)
    return float(out) if out.ndim == 0 else out


def rdp_pfl_rdp(orders: np.ndarray, T: int, tau0: int, q_in: float, sigma_in: Any, q_out: float,
                sigma_out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(eps'_total, eps'_in, eps'_out)`` at every order: ``eps'_in = T tau0 log I^Q / (alpha - 1)``,
    ``eps'_out = T tau0 log I^S / (alpha - 1)`` (seed 000 eq. (12), first term; (13), (14) with the E1
    reading), each ``T tau0`` times the RDP of one Poisson-subsampled Gaussian
    (``fedbound.accounting.rdp_subsampled_gaussian``; q = 1: ``alpha / (2 sigma^2)``).  ``sigma_in`` and
    ``sigma_out`` may be arrays (the result gets their shape before the orders axis)."""
    from fedbound.accounting import rdp_subsampled_gaussian

    steps = check_int("T", T, 1) * check_int("tau0", tau0, 1)
    o = np.asarray(orders, dtype=np.float64)
    inner = np.asarray(rdp_subsampled_gaussian(o, q_in, sigma_in, steps), dtype=np.float64)
    if q_out == q_in and np.array_equal(np.asarray(sigma_out), np.asarray(sigma_in)):
        return 2.0 * inner, inner, inner.copy()  # the paper's setting: an even split
    outer = np.asarray(rdp_subsampled_gaussian(o, q_out, sigma_out, steps), dtype=np.float64)
    return inner + outer, inner, outer


def rdp_pfl_epsilon(T: int, tau0: int, q_in: float, sigma_in: float, q_out: float, sigma_out: float,
                    delta: float, orders: np.ndarray = OPACUS_ORDERS,
                    conversion: str = "improved") -> tuple[float, float]:
    """``(eps_DP, alpha*)``: seed 000 eq. (12) minimised over ``orders``.  ``conversion="improved"``: eq. (34)
    (Balle et al. 2020, normative); ``"classic"``: Sec. II-B's eps' + log(1/delta)/(alpha - 1) (E3)."""
    from fedbound.accounting import rdp_to_dp

    d = float(check_probability("delta", delta))
    total, _, _ = rdp_pfl_rdp(orders, T, tau0, q_in, sigma_in, q_out, sigma_out)
    eps, alpha = rdp_to_dp(np.asarray(orders, dtype=np.float64), total, d, return_order=True,
                           conversion=conversion)
    return float(eps), float(alpha)


def _eps_grid(sigma_in: np.ndarray, ratio: float, T: np.ndarray, tau0: int, q_in: float, q_out: float,
              delta: float, orders: np.ndarray) -> np.ndarray:
    """eq. (12) for arrays of sigma_in and T (same shape): per-step RDP once, then T tau0 times it."""
    from fedbound.accounting import rdp_to_dp

    per_step = rdp_subsampled_gaussian_total(sigma_in, ratio, q_in, q_out, orders)
    total = (np.ravel(T) * tau0)[:, None] * per_step
    return np.asarray(rdp_to_dp(orders, total, delta), dtype=float).reshape(np.shape(sigma_in))


def _log_excess(log_s: np.ndarray, T: np.ndarray, ratio: float, tau0: int, q_in: float, q_out: float,
                delta: float, orders: np.ndarray, target: float) -> np.ndarray:
    eps = _eps_grid(np.exp(log_s), ratio, T, tau0, q_in, q_out, delta, orders)
    with np.errstate(divide="ignore"):
        return np.log(eps) - math.log(target)


_WINDOW = 6


def rdp_subsampled_gaussian_total(sigma_in: np.ndarray, ratio: float, q_in: float, q_out: float,
                                  orders: np.ndarray) -> np.ndarray:
    """Per-local-epoch RDP of both stages, shape ``(len(sigma_in), len(orders))`` (eq. (12) at T tau0 = 1)."""
    from fedbound.accounting import rdp_subsampled_gaussian

    s = np.atleast_1d(sigma_in).ravel()
    inner = np.asarray(rdp_subsampled_gaussian(orders, q_in, s), dtype=float).reshape(s.size, orders.size)
    if q_out == q_in and ratio == 1.0:
        return 2.0 * inner
    outer = np.asarray(rdp_subsampled_gaussian(orders, q_out, ratio * s), dtype=float)
    return inner + outer.reshape(s.size, orders.size)


def _per_order_rdp(alpha: np.ndarray, sigma_in: np.ndarray, ratio: float, q_in: float,
                   q_out: float) -> np.ndarray:
    """Per-local-epoch RDP of both stages for element-wise (alpha, sigma_in) pairs (any equal shapes).

    fedbound.accounting's exact sampled-Gaussian log A_alpha (the function behind
    ``rdp_subsampled_gaussian``), called pointwise: each Rényi order here has its own sigma."""
    from fedbound.accounting._sgm import log_a

    a, z = np.broadcast_arrays(np.asarray(alpha, dtype=float), np.asarray(sigma_in, dtype=float))
    af, zf = a.ravel(), z.ravel()
    out = log_a(af, np.full(af.shape, q_in), zf)
    if q_out == q_in and ratio == 1.0:
        out = 2.0 * out
    else:
        out = out + log_a(af, np.full(af.shape, q_out), ratio * zf)
    return (out / (af - 1.0)).reshape(a.shape)


def _solve_per_order(lo: np.ndarray, hi: np.ndarray, T: np.ndarray, alpha: np.ndarray, ratio: float,
                     tau0: int, q_in: float, q_out: float, delta: float, target: float,
                     rtol: float) -> np.ndarray:
    """sigma_alpha(T) with T tau0 R_alpha(sigma) + conversion(alpha) = eps for every (T, alpha) pair
    (``alpha`` has shape (len(T), k)), by Illinois on log sigma inside [lo, hi] (each equation is smooth and
    monotone).  Returns the feasible end; +inf where hi itself is infeasible for that order."""
    from fedbound.accounting.rdp import conversion_offset

    budget = target - conversion_offset(alpha, np.asarray(delta))
    steps = (T * tau0)[:, None]
    lo_m = np.broadcast_to(lo[:, None], alpha.shape).copy()
    hi_m = np.broadcast_to(hi[:, None], alpha.shape).copy()
    live = budget > 0

    def g(x: np.ndarray, a: np.ndarray, st: np.ndarray, bud: np.ndarray) -> np.ndarray:
        return np.log(st * _per_order_rdp(a, np.exp(x), ratio, q_in, q_out)) - np.log(bud)

    idx = np.flatnonzero(live.ravel())
    st = np.broadcast_to(steps, alpha.shape).ravel()
    a_f, b_f = alpha.ravel(), np.where(live, budget, 1.0).ravel()
    lo_f, hi_f = lo_m.ravel(), hi_m.ravel()
    g_lo = np.full(lo_f.shape, np.inf)
    g_hi = np.full(hi_f.shape, np.inf)
    g_lo[idx] = g(lo_f[idx], a_f[idx], st[idx], b_f[idx])
    g_hi[idx] = g(hi_f[idx], a_f[idx], st[idx], b_f[idx])
    idx = idx[g_hi[idx] <= 0]
    for it in range(200):
        idx = idx[hi_f[idx] - lo_f[idx] > rtol / 2]
        if not idx.size:
            break
        gl, gh = g_lo[idx], g_hi[idx]
        with np.errstate(all="ignore"):
            x = hi_f[idx] - gh * (hi_f[idx] - lo_f[idx]) / (gh - gl)
        done = np.isfinite(x) & (hi_f[idx] - x < rtol / 4)  # the secant root is within rtol/4 of hi
        idx, x = idx[~done], x[~done]
        if not idx.size:
            break
        mid = 0.5 * (lo_f[idx] + hi_f[idx])
        x = np.where(~np.isfinite(x) | (x <= lo_f[idx]) | (x >= hi_f[idx]) | (it % 4 == 3), mid, x)
        gx = g(x, a_f[idx], st[idx], b_f[idx])
        f = gx <= 0
        up, dn = idx[f], idx[~f]
        hi_f[up], g_hi[up] = x[f], gx[f]
        g_lo[up] *= 0.5
        lo_f[dn], g_lo[dn] = x[~f], gx[~f]
        g_hi[dn] *= 0.5
    out = np.where(np.isfinite(g_hi) & (g_hi <= 0), hi_f, np.inf)
    return out.reshape(alpha.shape)


def _bisect_feasible(feasible: Any, lo: np.ndarray, hi: np.ndarray, idx: np.ndarray,
                     rtol: float) -> np.ndarray:
    """The feasible end of [lo, hi] (log sigma; ``feasible(hi)`` holds, ``feasible(lo)`` does not) bisected
    to ``rtol``: the whole criterion of :func:`fedbound.accounting.rdp_to_dp`, for points that no single
    order's equation reaches."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(200):
        live = np.flatnonzero(hi - lo > rtol / 2)
        if not live.size:
            break
        mid = 0.5 * (lo[live] + hi[live])
        ok = feasible(mid, idx[live])
        hi[live[ok]], lo[live[~ok]] = mid[ok], mid[~ok]
    return hi


def noise_multiplier_curve(eps: float, delta: float, T: Any, tau0: int, q_in: float, q_out: float,
                           ratio: float = 1.0, orders: np.ndarray = OPACUS_ORDERS,
                           rtol: float = 1e-10) -> np.ndarray:
    """sigma*_in(T) for an array of T at once: the smallest sigma_in with eps_DP(sigma_in, ratio sigma_in)
    <= eps (seed 000 eq. (12), Sec. III-B "searching method"; the spec's bisection, done faster): a bracket
    by doubling, then, since eps_DP <= eps iff some order alpha has T tau0 R_alpha(sigma) + conversion(alpha)
    <= eps, sigma* = min over the orders of the roots of those smooth monotone equations (Illinois on
    log sigma, to ``rtol``; always on the feasible side)."""
    from fedbound.accounting.calibrate import MAX_NOISE_MULTIPLIER  # scipy: not on a cached plan's path

    target = float(check_real("eps", eps, 0.0, low_open=True))
    d = float(check_probability("delta", delta))
    Ts = check_int("T", T, 1).astype(float)
    check_int("tau0", tau0, 1)
    check_probability("q_in", q_in, allow_one=True)
    check_probability("q_out", q_out, allow_one=True)
    r = float(check_real("ratio", ratio, 0.0, low_open=True))
    check_real("rtol", rtol, 0.0, low_open=True)
    o = np.asarray(orders, dtype=float)
    shape = Ts.shape
    Tf = Ts.ravel()
    lo = np.zeros(Tf.size)
    hi = np.zeros(Tf.size)
    cap = math.log(MAX_NOISE_MULTIPLIER)

    def feasible(log_s: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return _eps_grid(np.exp(log_s), r, Tf[idx], tau0, q_in, q_out, d, o) <= target

    ok = feasible(hi, np.arange(Tf.size))
    todo = np.flatnonzero(~ok)
    while todo.size:  # grow hi until feasible
        lo[todo] = hi[todo]
        hi[todo] += math.log(2.0)
        if np.any(hi[todo] > cap):
            bad = todo[hi[todo] > cap][0]
            raise InfeasibleError(f"eps = {target:g} at delta = {d:g} needs a noise multiplier above "
                                  f"{MAX_NOISE_MULTIPLIER:g} (T = {int(Tf[bad])}, tau0 = {tau0})")
        todo = todo[~feasible(hi[todo], todo)]
    todo = np.flatnonzero(ok)
    lo[todo] = -math.log(2.0)
    while todo.size:  # shrink lo until infeasible
        f = feasible(lo[todo], todo)
        hi[todo[f]] = lo[todo[f]]
        lo[todo[f]] -= math.log(2.0)
        todo = todo[f]
    # eps_DP(sigma) <= eps iff some order alpha has T tau0 R_alpha(sigma) + conversion(alpha) <= eps, and each
    # of those is decreasing in sigma: sigma* = min over alpha of the root sigma_alpha of each equation.
    # The roots are solved for the orders in a window around each T's optimal order at the feasible end of
    # the bracket; a check on all orders then catches an optimum outside the window (solved on all orders).
    from fedbound.accounting import rdp_to_dp

    per_step = rdp_subsampled_gaussian_total(np.exp(hi), r, q_in, q_out, o)
    _, best = rdp_to_dp(o, (Tf * tau0)[:, None] * per_step, d, return_order=True)
    pos = np.searchsorted(o, np.atleast_1d(best))
    cols = np.clip(pos[:, None] + np.arange(-_WINDOW, _WINDOW + 1)[None, :], 0, o.size - 1)
    roots = _solve_per_order(lo, hi, Tf, o[cols], r, tau0, q_in, q_out, d, target, rtol)
    bracket_hi, hi = hi, roots.min(axis=1)
    kl = np.flatnonzero(~np.isfinite(hi))
    if kl.size:  # feasible only through the (0, delta) route of the conversion (RDP below -ln(1 - delta^2),
        hi[kl] = _bisect_feasible(feasible, lo[kl], bracket_hi[kl], kl, rtol)  # no order's root): bisection
    below = np.exp(hi - rtol)
    moved = np.flatnonzero(_eps_grid(below, r, Tf, tau0, q_in, q_out, d, o) <= target)
    if moved.size:
        full = np.broadcast_to(o, (moved.size, o.size))
        hi[moved] = _solve_per_order(lo[moved], np.log(below[moved]) + rtol, Tf[moved], full, r, tau0, q_in,
                                     q_out, d, target, rtol).min(axis=1)
    bad = np.flatnonzero(_eps_grid(np.exp(hi), r, Tf, tau0, q_in, q_out, d, o) > target)
    for _ in range(64):  # rounding at the last ulp: step to the feasible side
        if not bad.size:
            break
        hi[bad] += rtol / 4
        bad = bad[_eps_grid(np.exp(hi[bad]), r, Tf[bad], tau0, q_in, q_out, d, o) > target]
    out = np.exp(hi)
    if not np.all(np.isfinite(out)):  # never an infinite noise multiplier: say which input cannot be met
        bad = int(np.flatnonzero(~np.isfinite(out))[0])
        raise InfeasibleError(f"eps = {target:g} at delta = {d:g} cannot be met by Theorem 1's RDP "
                              f"accounting at any finite noise multiplier (T = {int(Tf[bad])}, tau0 = "
                              f"{tau0})")
    return out.reshape(shape)


def rdp_pfl_noise_multiplier(eps: float, delta: float, T: int, tau0: int, q_in: float, q_out: float,
                             orders: np.ndarray = OPACUS_ORDERS, rtol: float = 1e-10,
                             ratio: float = 1.0) -> float:
    """``sigma*``: the smallest (inner) noise multiplier with ``eps_DP(sigma, ratio sigma) <= eps`` (seed 000
    eq. (12), Sec. III-B "searching method"; ``ratio`` = sigma_out/sigma_in, 1 in the paper)."""
    return float(noise_multiplier_curve(eps, delta, T, tau0, q_in, q_out, ratio, orders, rtol))


def theorem1_calibration(eps: float, delta: float, T: int, tau0: int, q_in: float, q_out: float,
                         ratio: float = 1.0) -> dict[str, Any]:
    """sigma* and eps of Theorem 1 (seed 000 eq. (12)) for ``fedbound calibrate``-style reporting.

    Returns the paper's calibration on Opacus' orders (``sigma``, ``eps``, ``alpha``, inner/outer RDP and
    share at alpha*), the same on the finer :data:`TIGHT_ORDERS` (``sigma_tight``), and, for q_in = q_out and
    one sigma, what a one-mechanism calibrator over ``2 T tau0`` steps gives on fedbound's DEFAULT_ORDERS
    (``sigma_default_orders``: a different order grid, hence a different sigma, e.g. 3.3581 vs 3.34841 in
    spec 000 setting A: the default grid has no order near alpha* = 6).
    """
    from fedbound.accounting import DEFAULT_ORDERS

    sigma = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q_in, q_out, ratio=ratio)
    spent, alpha = rdp_pfl_epsilon(T, tau0, q_in, sigma, q_out, ratio * sigma, delta)
    _, e_in, e_out = rdp_pfl_rdp(np.array([alpha]), T, tau0, q_in, sigma, q_out, ratio * sigma)
    out: dict[str, Any] = {
        "sigma": sigma, "sigma_inner": sigma, "sigma_outer": ratio * sigma, "eps": spent, "alpha": alpha,
        "eps_rdp_inner": float(e_in[0]), "eps_rdp_outer": float(e_out[0]),
        "inner_share": float(e_in[0] / (e_in[0] + e_out[0])),
        "orders": "Opacus (151 orders, seed 000 App. A)",
        "sigma_tight": rdp_pfl_noise_multiplier(eps, delta, T, tau0, q_in, q_out, TIGHT_ORDERS, ratio=ratio),
        "sigma_default_orders": None, "steps_equivalent": None}
    if q_in == q_out and ratio == 1.0:
        out["steps_equivalent"] = 2 * int(T) * int(tau0)
        out["sigma_default_orders"] = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q_in, q_out,
                                                               DEFAULT_ORDERS)
    return out


NOISE_METHODS = ("paper", "tight", "split")


def noise(setting: Mapping[str, Any], T: int, method: str = "paper") -> dict[str, float]:
    """Noise std per stage ``{"inner": C sigma_in, "outer": C sigma_out}`` for ``T`` rounds (seed 000
    eq. (12), noise N(0, C^2 sigma^2 I) of eqs. (7), (8)).

    ``setting`` needs eps, delta, tau0, q_in, q_out, C.  Methods:

    * ``"paper"``: one sigma for both stages, Theorem 1 on Opacus' 151 orders (Sec. III-B's search).
    * ``"tight"``: one sigma; q_in = q_out = 1: the exact calibration of the 2 T tau0 Gaussian releases
      (``fedbound.accounting.calibrate_noise(method="analytic")``); otherwise Theorem 1's RDP on the finer
      :data:`TIGHT_ORDERS` (valid, not tight in issue 23's sense: what fedbound plans and trains at q < 1 is
      the PLD-exact ``fedbound.scheduling.dppfl_sigma.exact_sigma``, which this sigma bounds from above).
    * ``"split"``: sigma_out = ``setting["sigma_ratio"]`` x sigma_in (the inner/outer budget split; ratio 1 is
      the paper's 50/50), calibrated jointly by Theorem 1 on Opacus' orders.
    """
    if method not in NOISE_METHODS:
        raise ParameterError("method", method, "one of " + ", ".join(NOISE_METHODS))
    eps, delta, tau0 = setting["eps"], setting["delta"], int(setting.get("tau0", 1))
    q_in, q_out = float(setting["q_in"]), float(setting["q_out"])
    C = float(check_real("C", setting["C"], 0.0, low_open=True))
    T = int(check_int("T", T, 1))
    ratio = 1.0
    if method == "tight" and q_in == 1.0 and q_out == 1.0:
        from fedbound.accounting import calibrate_noise

        sigma = float(calibrate_noise(eps, delta, 1.0, 2 * T * tau0, method="analytic"))
    elif method == "tight":
        sigma = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q_in, q_out, TIGHT_ORDERS)
    else:
        if method == "split":
            ratio = float(check_real("sigma_ratio", setting.get("sigma_ratio", 1.0), 0.0, low_open=True))
        sigma = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q_in, q_out, ratio=ratio)
    return {"inner": C * sigma, "outer": C * ratio * sigma}


def aggregation_weights(n_support: Sequence[int] | np.ndarray) -> np.ndarray:
    """p_i = |D_i^S| / sum_j |D_j^S|.  Seed 000, eq. (3)."""
    n = check_real("n_support", n_support, 0.0, low_open=True)
    return n / n.sum()


# ---------------------------------------------------------------------------------------------------------
# Convergence: parameters, definitions, variants
# ---------------------------------------------------------------------------------------------------------
_THEORY = Theory("fedbound.bounds.dppfl_theory")
NOTATION = _THEORY.notation()
(META_SMOOTHNESS, META_STRONG_CONVEXITY, META_DISSIMILARITY, DATA_BIAS, NOISE_NORM, CLIPPING_BIAS,
 LOCAL_DRIFT, LOCAL_STEP_WEIGHT, PER_ROUND_ERROR, CONTRACTION, CONVEX_BOUND,
 NONCONVEX_BOUND) = _THEORY.theorems(
    "META_SMOOTHNESS META_STRONG_CONVEXITY META_DISSIMILARITY DATA_BIAS NOISE_NORM CLIPPING_BIAS "
    "LOCAL_DRIFT LOCAL_STEP_WEIGHT PER_ROUND_ERROR CONTRACTION CONVEX_BOUND NONCONVEX_BOUND")
THEOREMS = _THEORY.mapping("THEOREMS")


def __getattr__(name: str) -> Any:
    """The declarations' other names (symbols, definitions, conditions), from dppfl_theory (imports sympy)."""
    return _THEORY.attribute(__name__, name)

BOUNDS = {"convex": CONVEX_BOUND, "nonconvex": NONCONVEX_BOUND}
VARIANTS = tuple(NOTATION.variants)
ANALYSIS_CONSTANTS = ("L", "rho", "B", "lam", "l", "eps_het", "gamma_het", "sigma_G", "sigma_H", "Delta0")

# ---------------------------------------------------------------------------------------------------------
# Plain-number functions (spec 000 API names)
# ---------------------------------------------------------------------------------------------------------


def noise_norm_paper(S: Any, sigma: Any, C: Any) -> Any:
    """Theta_paper = 2 sigma C sqrt(2/pi) P(S) (odd S) or 2 sigma C sqrt(2 pi) P(S) (even S).  Seed 000,
    eq. (27) (via log-gamma, equal to the product; E14)."""
    return NOISE_NORM(S=S, sigma=sigma, C=C)


def noise_norm_exact(S: Any, sigma: Any, C: Any) -> Any:
    """Theta_exact = E||N(0, C^2 sigma^2 I_S)|| = sqrt(2) C sigma Gamma((S+1)/2)/Gamma(S/2).  Seed 000,
    eq. (27) corrected (E14)."""
    return NOISE_NORM(S=S, sigma=sigma, C=C, variant="theta_exact")


def _variant(theta: str, tight: bool, outer_noise: bool = False, client_sizes: bool = False) -> str:
    if theta not in ("paper", "exact"):
        raise ParameterError("theta", theta, "'paper' or 'exact'")
    parts = [name for name, on in (("theta_exact", theta == "exact"), ("tight", tight),
                                   ("outer_noise", outer_noise), ("client_sizes", client_sizes)) if on]
    return "+".join(parts) or "paper"


def clipping_bias(C: Any, S: Any, sigma: Any, eta: Any, L: Any, B: Any, theta: str = "paper",
                  tight: bool = False) -> Any:
    """Xi(C, S, sigma) = (1 + eta L)(2 eta L B + eta L Theta + max{B, sqrt C} - min{C/(1 + eta L), sqrt C}).
    Seed 000, Lemma 4, eq. (26); ``theta="exact"`` (E14), ``tight`` (E15)."""
    return CLIPPING_BIAS(C=C, S=S, sigma=sigma, eta=eta, L=L, B=B, variant=_variant(theta, tight))


def _with_clients(values: dict[str, Any], p: Any, n_support: Any) -> tuple[dict[str, Any], bool]:
    if n_support is None:
        return values, False
    n = np.asarray(check_int("n_support", n_support, 1), dtype=float)
    w = aggregation_weights(n) if p is None else check_real("p", p, 0.0, 1.0)
    if abs(float(np.sum(w)) - 1) > 1e-9:
        raise ParameterError("p", float(np.sum(w)), "weights summing to 1")
    d = np.asarray(DATA_BIAS({**values, "m": n}), dtype=float)
    return {**values, "Dbar": float(np.sum(w * d)), "m": int(n.min())}, True


def per_round_error(values: Mapping[str, Any], p: Any = None, n_support: Any = None, theta: str = "paper",
                    tight: bool = False, outer_noise: bool = False) -> Any:
    """E = lambda[(1 + eta L) h(tau0) + beta tau0 (1 + eta L) W(tau0) sum_i p_i (Xi + D_i)].  Seed 000,
    eqs. (31)-(32).  ``n_support`` (and ``p``, default |D_i^S|-proportional, eq. (3)): the clients' support
    sizes; otherwise D-bar is bounded by D(m)."""
    vals, clients = _with_clients(dict(values), p, n_support)
    return PER_ROUND_ERROR(vals, variant=_variant(theta, tight, outer_noise, clients))


def convex_bound(values: Mapping[str, Any], p: Any = None, n_support: Any = None, theta: str = "paper",
                 tight: bool = False, outer_noise: bool = False) -> Any:
    """Theorem 2: zeta^{T tau0} Delta0 + (1 - zeta^{T tau0})/(1 - zeta^{tau0}) E.  Seed 000, eq. (31)."""
    vals, clients = _with_clients(dict(values), p, n_support)
    return CONVEX_BOUND(vals, variant=_variant(theta, tight, outer_noise, clients))


def nonconvex_bound(values: Mapping[str, Any], p: Any = None, n_support: Any = None, theta: str = "paper",
                    tight: bool = False, outer_noise: bool = False) -> Any:
    """Theorem 3: Delta0/(T beta (1 - beta L'/2)) + E/(beta (1 - beta L'/2)).  Seed 000, eq. (32)."""
    vals, clients = _with_clients(dict(values), p, n_support)
    return NONCONVEX_BOUND(vals, variant=_variant(theta, tight, outer_noise, clients))



# ---------------------------------------------------------------------------------------------------------
# Claims (spec 000 Sec. 4: P1-P17, P19, P20 and Remarks 1-3; P18 lives with the optimiser), checked by
# fedbound.bounds.claims
# ---------------------------------------------------------------------------------------------------------
from fedbound.bounds.claims import Claim, Computed, Region  # noqa: E402  (claims need the theorems above)

TV_CONSTANTS = {"L": 1.0, "rho": 1.0, "B": 1.0, "lam": 1.0, "l": 0.5, "eps_het": 0.1, "gamma_het": 0.1,
                "sigma_G": 1.0, "sigma_H": 1.0, "Delta0": 10.0}
"""Spec 000 Sec. 8's illustrative analysis constants (the paper reports none)."""
SETTING_A = {**TV_CONSTANTS, "T": 200.0, "tau0": 1, "eta": 0.01, "beta": 0.01, "C": 2.4, "S": 159010,
             "m": 300, "sigma": 3.34841371, "sigma_out": 3.34841371}
_INTS = frozenset({"tau0", "S", "m", "T_int"})


def _clean(v: Mapping[str, Any]) -> dict[str, Any]:
    return {k: x for k, x in v.items() if not k.startswith("_")}


def _admissible(v: Mapping[str, Any]) -> bool:
    return bool(np.all(CONVEX_BOUND.evaluate(_clean(v)).admissible))


BOUNDS_REGION = Region(
    {"T": (1.0, 300.0), "tau0": (1, 4), "eta": (1e-3, 0.1, "log"), "beta": (1e-3, 0.3, "log"),
     "C": (0.1, 10.0, "log"), "S": (1, 10**6, "log"), "sigma": (0.1, 10.0, "log"), "m": (10, 1000),
     "L": (0.5, 2.0), "rho": (0.0, 2.0), "B": (0.1, 3.0), "lam": (0.5, 2.0), "l": (0.05, 0.5),
     "eps_het": (0.0, 0.5), "gamma_het": (0.0, 0.5), "sigma_G": (0.0, 2.0), "sigma_H": (0.0, 2.0),
     "Delta0": (0.1, 100.0, "log")},
    derived=(("sigma_out", lambda v: v["sigma"]),), integers=_INTS,
    where=(("eta L < 1, l' > 0, 0 < beta < 2/L'", _admissible),),
    doc="random settings where Theorem 2's hypotheses hold (E26)")


def _with(region: Region, **fixed: Any) -> Region:
    return Region({k: r for k, r in region.ranges.items() if k not in fixed}, {**region.fixed, **fixed},
                  region.derived, region.where, region.integers, region.points, region.doc)


def _vectorised(fn: Any) -> Any:
    def run(values: Mapping[str, Any], variant: str) -> np.ndarray:
        keys = list(values)
        arrays = np.broadcast_arrays(*(np.asarray(values[k], dtype=float) for k in keys))
        out = np.empty(arrays[0].shape if arrays else ())
        for i in np.ndindex(out.shape):
            out[i] = fn({k: a[i].item() for k, a in zip(keys, arrays, strict=True)})
        return out
    return run


INTEGER_ORDERS = np.arange(2.0, 64.0)
"""The claims' order grid: Theorem 1's monotonicity holds on any grid; the integer orders' binomial sums are
exact and fast (the fractional ones need quadrature), which keeps the checker quick."""
EPS_DP = Computed("eps_DP", _vectorised(lambda v: rdp_pfl_epsilon(
    int(v["T_int"]), int(v["tau0"]), v["q_in"], v["sigma"], v["q_out"], v["sigma"], v["delta"],
    INTEGER_ORDERS)[0]), "Theorem 1 (eq. (12)) on the integer orders 2..63")
SGM_RDP = Computed("sgm_rdp", _vectorised(lambda v: sgm_log_integral(v["q"], v["sigma"], v["alpha"])
                                          / (v["alpha"] - 1)), "log I/(alpha - 1), eqs. (13)-(14)")
SIGMA_STAR = Computed("sigma_star", _vectorised(lambda v: rdp_pfl_noise_multiplier(
    v["eps"], v["delta"], int(v["T_int"]), int(v["tau0"]), v["q_in"], v["q_out"], INTEGER_ORDERS, rtol=1e-9)),
    "Theorem 1's sigma* (Sec. III-B) on the integer orders")


def _bound_at_sigma_star(v: Mapping[str, Any]) -> float:
    s = rdp_pfl_noise_multiplier(v["eps"], v["delta"], int(v["T"]), int(v["tau0"]), v["q_in"], v["q_out"],
                                 INTEGER_ORDERS, rtol=1e-9)
    vals = {k: x for k, x in _clean(v).items() if k in NOTATION.params}
    return float(NONCONVEX_BOUND.evaluate({**vals, "sigma": s, "sigma_out": s}).value)


BOUND_AT_SIGMA_STAR = Computed("bound_at_sigma_star", _vectorised(_bound_at_sigma_star),
                               "Theorem 3 at Theorem 1's sigma*")
PRIVACY_REGION = Region({"q_in": (0.01, 0.5, "log"), "sigma": (0.5, 5.0), "T_int": (1, 300), "tau0": (1, 3),
                         "delta": (1e-6, 1e-2, "log")}, derived=(("q_out", lambda v: v["q_in"]),),
                        integers=_INTS, doc="spec 000 P1's region")


def _dp_accounting_integer(v: Mapping[str, Any]) -> float:
    import dp_accounting as dpa

    acc = dpa.rdp.RdpAccountant([float(a) for a in range(2, 64)])
    steps = int(v["T_int"]) * int(v["tau0"])
    acc.compose(dpa.PoissonSampledDpEvent(v["q_in"], dpa.GaussianDpEvent(v["sigma"])), steps)
    acc.compose(dpa.PoissonSampledDpEvent(v["q_out"], dpa.GaussianDpEvent(v["sigma"])), steps)
    return float(acc.get_epsilon(v["delta"]))


def _conversions(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    from fedbound.accounting import rdp_to_dp

    a = np.array([v["alpha"]])
    improved = rdp_to_dp(a, np.array([v["rdp"]]), v["delta"])
    classic = rdp_to_dp(a, np.array([v["rdp"]]), v["delta"], conversion="classic")
    return bool(improved <= classic), f"improved (34) {float(improved):.6g} <= classic {float(classic):.6g}"


def _quadrature(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    from scipy.integrate import quad

    q, s, a = v["q"], v["sigma"], v["alpha"]

    def integrand(z: float) -> float:
        return math.exp(-z * z / (2 * s * s)) / (s * math.sqrt(2 * math.pi)) * (
            1 - q + q * math.exp((2 * z - 1) / (2 * s * s))) ** a

    val, _ = quad(integrand, -40 * s, 40 * s + a, limit=400, epsabs=0, epsrel=1e-13)
    ours = float(sgm_log_integral(q, s, a))
    ok = abs(ours - math.log(val)) < 1e-9 * max(1.0, abs(ours))
    return bool(ok), f"series {ours:.12g}, quad {math.log(val):.12g}"


def _sqrt_scaling(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    s1 = rdp_pfl_noise_multiplier(v["eps"], v["delta"], int(v["T_int"]), 1, 1.0, 1.0)
    sk = rdp_pfl_noise_multiplier(v["eps"], v["delta"], int(v["T_int"]) * 4, 1, 1.0, 1.0)
    return bool(abs(sk / s1 - 2.0) < 1e-7), f"sigma*(4T)/sigma*(T) = {sk / s1:.10f}"


def _theta_parity(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    S = int(v["S"])
    ratio = float(noise_norm_paper(S, 1.0, 1.0) / noise_norm_exact(S, 1.0, 1.0))
    expect = 2.0 if S % 2 else 4.0
    drop = S % 2 == 1 or noise_norm_paper(S, 1.0, 1.0) > noise_norm_paper(S + 1, 1.0, 1.0)
    return bool(abs(ratio - expect) < 1e-9 and drop), f"Theta_paper/Theta_exact = {ratio:.12g} at S = {S}"


def _theta_bracket(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    S = float(v["S"])
    t = float(noise_norm_exact(int(S), 1.0, 1.0))
    return bool(S / math.sqrt(S + 1) <= t * (1 + 1e-12) and t <= math.sqrt(S) * (1 + 1e-12)), \
        f"S/sqrt(S+1) = {S / math.sqrt(S + 1):.8g} <= {t:.8g} <= sqrt(S) = {math.sqrt(S):.8g}"


def _zeta_iff(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    Lp_, lp_ = float(META_SMOOTHNESS(_clean(v))), float(META_STRONG_CONVEXITY.evaluate(_clean(v)).value)
    z = 1 - 2 * lp_ * v["beta"] + Lp_ * lp_ * v["beta"] ** 2
    inside = 0 <= z < 1
    return bool(inside == (v["beta"] < 2 / Lp_)), f"zeta = {z:.6g}, beta L'/2 = {v['beta'] * Lp_ / 2:.4g}"


def _at_limit(v: Mapping[str, Any]) -> dict[str, Any]:
    a_ = 1 + v["eta"] * v["L"]
    return {**_clean(v), "sigma": 0.0, "sigma_out": 0.0, "tau0": 1,
            "C": max(v["C"], max(v["B"] ** 2, a_ * a_))}


def _p20(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    p = _at_limit(v)
    a_ = 1 + p["eta"] * p["L"]
    z = float(CONTRACTION(p))
    zT = z ** p["T"]
    Dbar_ = float(DATA_BIAS(p))
    floor = p["lam"] * p["beta"] * a_ * ((0.0 if "tight" in variant else 2 * p["eta"] * p["L"] * p["B"] * a_)
                                         + Dbar_)
    expect = zT * p["Delta0"] + (1 - zT) / (1 - z) * floor
    got = float(CONVEX_BOUND(p, variant=variant))
    ok = math.isclose(got, expect, rel_tol=1e-8, abs_tol=1e-12 * p["Delta0"])
    return bool(ok), f"Theorem 2 = {got:.12g}, limit form {expect:.12g}"


def _plain_gd(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    p = {**_at_limit({**v, "eta": 1e-12}), "eta": 1e-12}
    z = 1 - 2 * p["l"] * p["beta"] + p["L"] * p["l"] * p["beta"] ** 2
    got, expect = float(CONVEX_BOUND(p, variant="tight")), z ** p["T"] * p["Delta0"]
    ok = math.isclose(got, expect, rel_tol=1e-6, abs_tol=1e-6 * p["Delta0"])  # eta = 1e-12 leaves ~1e-9
    return bool(ok), f"Theorem 2 = {got:.10g}, plain GD zeta^T Delta0 = {expect:.10g}"


_PSI_A0, _PSI_KAPPA = 50.0, 0.5
PSI = Computed("Psi", lambda v, variant: _PSI_A0 * np.asarray(v["S"], dtype=float) ** (-_PSI_KAPPA)
               + np.asarray(NONCONVEX_BOUND.evaluate(_clean(v), variant=variant).value, dtype=float),
               "Psi(S) = a0 S^-kappa + Theorem 3 (flagged extension, a0 = 50, kappa = 1/2)")

_PB = BOUNDS_REGION
_POINT_A = {**SETTING_A, "T_int": 200, "q_in": 0.1, "q_out": 0.1, "delta": 1e-3, "eps": 2.0}
_LIMIT = Region({k: _PB.ranges[k] for k in ("T", "eta", "beta", "L", "rho", "B", "lam", "l", "m", "S",
                                             "sigma_G", "sigma_H", "Delta0", "eps_het", "gamma_het")}
                | {"_c": (0.0, 2.0)}, fixed={"tau0": 1, "sigma": 0.0, "sigma_out": 0.0},
                derived=(("C", lambda v: max(v["B"] ** 2, (1 + v["eta"] * v["L"]) ** 2) * (1 + v["_c"])),),
                integers=_INTS, where=(("admissible", _admissible),))

def _p13_premise(v: Mapping[str, Any]) -> Any:
    """P13's premise: eps_het (1 + eta L) + eta B gamma > 0 (spec 000 P13, eq. (28))."""
    return v["eps_het"] * (1 + v["eta"] * v["L"]) + v["eta"] * v["B"] * v["gamma_het"] > 0


_P13B = Region({**_PB.ranges, "B": (0.0, 3.0), "eps_het": (0.0, 0.5), "gamma_het": (0.0, 0.5)}, _PB.fixed,
               _PB.derived, (*_PB.where, ("eps_het (1 + eta L) + eta B gamma > 0", _p13_premise)),
               _PB.integers, _PB.points, "settings where Theorem 2's hypotheses and P13's premise hold")

CLAIMS: tuple[Claim, ...] = (
    Claim("P1a", "eps_DP is strictly decreasing in sigma (Theorem 1)", EPS_DP, "decreasing", PRIVACY_REGION,
          wrt="sigma", line_points=8, source="Theorem 1, eq. (12)"),
    Claim("P1b", "eps_DP is non-decreasing in T", EPS_DP, "increasing", PRIVACY_REGION, wrt="T_int",
          strict=False, line_points=8, source="eq. (12)"),
    Claim("P1c", "eps_DP is non-decreasing in the sampling rate", EPS_DP, "increasing",
          _with(PRIVACY_REGION), wrt="q_in", strict=False, line=(0.01, 0.5), line_points=8,
          source="eq. (12)"),
    Claim("P1d", "eps_DP is decreasing in delta", EPS_DP, "decreasing", PRIVACY_REGION, wrt="delta",
          line_points=8, source="eq. (12), (34)"),
    Claim("P2", "at integer orders eq. (12) equals dp-accounting's RDP accountant for 2 T tau0 DP-SGD steps",
          EPS_DP, "compare", PRIVACY_REGION, other=_dp_accounting_integer, op="==", rtol=1e-8,
          source="Theorem 1, spec 000 Sec. 3.4 backend caveat"),
    Claim("P3a", "the per-stage RDP is non-decreasing in alpha", SGM_RDP, "increasing",
          Region({"q": (0.01, 1.0), "sigma": (0.5, 5.0), "alpha": (1.1, 40.0)}), wrt="alpha", strict=False,
          line_points=10, source="eqs. (13)-(14)"),
    Claim("P3b", "the per-stage RDP is at most alpha/(2 sigma^2), with equality at q = 1", SGM_RDP, "compare",
          Region({"q": (0.01, 1.0), "sigma": (0.5, 5.0), "alpha": (1.1, 40.0)}),
          other=lambda v: v["alpha"] / (2 * v["sigma"] ** 2), op="<=", rtol=1e-12, source="eqs. (13)-(14)"),
    Claim("P4", "the series behind (13) agrees with direct quadrature of the integral", SGM_RDP, "predicate",
          Region(points=({"q": 0.1, "sigma": 1.0, "alpha": 8.0}, {"q": 0.1, "sigma": 1.0, "alpha": 10.5},
                         {"q": 0.05, "sigma": 0.8, "alpha": 3.3}, {"q": 0.3, "sigma": 1.7, "alpha": 4.2})),
          other=_quadrature, source="eq. (13), P4"),
    Claim("P5", "the improved conversion (34) is never above the classic one (Sec. II-B)", SGM_RDP,
          "predicate",
          Region({"alpha": (1.05, 60.0, "log"), "delta": (1e-10, 0.5, "log"), "rdp": (0.0, 50.0)}),
          other=_conversions, source="eq. (34), E3"),
    Claim("P6a", "sigma* is decreasing in eps", SIGMA_STAR, "decreasing",
          Region(points=({**_POINT_A, "T_int": 50},)), wrt="eps", line=(0.5, 8.0), line_points=5,
          source="Sec. III-B"),
    Claim("P6b", "sigma* is increasing in T (Remark 1)", SIGMA_STAR, "increasing",
          Region(points=(_POINT_A,)), wrt="T_int", line=(1, 300), line_points=6, source="Remark 1"),
    Claim("P6c", "at q = 1, sigma*(4T) = 2 sigma*(T) exactly", SIGMA_STAR, "predicate",
          Region(points=({"eps": 4.0, "delta": 1e-3, "T_int": 50}, {"eps": 1.0, "delta": 1e-5, "T_int": 7})),
          other=_sqrt_scaling, source="spec 000 Sec. 3.8"),
    Claim("P7", "E1: log I(q = 0.1, sigma = 1, alpha = 8) = 9.648529879 (mu_1 = N(1, sigma^2)), not the q^2 "
          "value 0.006255507 of the printed mixture", SGM_RDP, "compare",
          Region(points=({"q": 0.1, "sigma": 1.0, "alpha": 8.0},)), other=9.648529879 / 7, op="==", rtol=1e-9,
          source="Theorem 1, E1"),
    Claim("P8a", "Theta_exact is strictly increasing in S", NOISE_NORM, "increasing",
          Region({"S": (1, 400), "sigma": (0.1, 5.0), "C": (0.1, 5.0)}, integers=_INTS), wrt="S",
          variant="theta_exact", source="E14"),
    Claim("P8b", "S/sqrt(S+1) <= Theta_exact/(sigma C) <= sqrt(S)", NOISE_NORM, "predicate",
          Region({"S": (1, 10**7, "log")}, integers=_INTS), other=_theta_bracket, source="E14"),
    Claim("P8c", "the printed Theta (27) is 2x E||n|| for odd S and 4x for even S, and drops from even S "
          "to S+1",
          NOISE_NORM, "predicate", Region({"S": (1, 10**6, "log")}, integers=_INTS), other=_theta_parity,
          source="eq. (27), E14"),
    Claim("P8d", "the printed Theta (27) is non-decreasing from S to S + 1", NOISE_NORM, "compare",
          Region({"_k": (1, 10**5, "log"), "sigma": (0.1, 5.0), "C": (0.1, 5.0)},
                 derived=(("S", lambda v: 2 * int(v["_k"]) + 1),)),
          other=lambda v: noise_norm_paper(v["S"] + 1, v["sigma"], v["C"]), op="<=",
          source="eq. (27), Remark 3",
          fails_in="every even S: Theta_paper(S) > Theta_paper(S + 1) (E14)",
          counterexamples=(({"S": 2, "sigma": 1.0, "C": 1.0}, "paper"),
                           ({"S": 159010, "sigma": 1.0, "C": 1.0}, "paper"))),
    Claim("P8e", "Theta is linear in sigma", NOISE_NORM, "homogeneous",
          Region({"S": (1, 10**6, "log"), "sigma": (0.1, 5.0), "C": (0.1, 5.0)}, integers=_INTS), wrt="sigma",
          degree=1, source="eq. (27)"),
    Claim("P9a", "Xi is strictly increasing in sigma", CLIPPING_BIAS, "increasing", _PB, wrt="sigma",
          source="Lemma 4, eq. (26)"),
    Claim("P9b", "Xi (exact Theta) is strictly increasing in S", CLIPPING_BIAS, "increasing", _PB, wrt="S",
          variant="theta_exact", source="eq. (26), E14"),
    Claim("P9c", "Xi >= 2 eta L B (1 + eta L)", CLIPPING_BIAS, "compare", _PB,
          other=lambda v: 2 * v["eta"] * v["L"] * v["B"] * (1 + v["eta"] * v["L"]), op=">=", rtol=1e-12,
          source="eq. (26), E15"),
    Claim("P9d", "at sigma = 0 and C >= max(B^2, (1 + eta L)^2) the tight Xi vanishes (E15)", CLIPPING_BIAS,
          "compare", _LIMIT, other=0.0, op="==", variant="tight",
          source="E15 (the paper's Xi leaves 2 eta L B (1 + eta L))"),
    Claim("P10a", "Xi is non-increasing in C at sigma = 0 when B >= (1 + eta L)/2", CLIPPING_BIAS,
          "decreasing",
          Region({k: r for k, r in _PB.ranges.items() if k != "sigma"}, {"sigma": 0.0, "sigma_out": 0.0},
                 integers=_INTS, where=(*_PB.where, ("B >= (1 + eta L)/2",
                                                     lambda v: v["B"] >= (1 + v["eta"] * v["L"]) / 2))),
          wrt="C", strict=False, line=(0.01, 20.0),
          source="eq. (26), spec 000 Sec. 3.8"),
    Claim("P11a", "L' >= L (Lemma 1)", META_SMOOTHNESS, "compare", _PB, other=lambda v: v["L"], op=">=",
          source="eq. (22)"),
    Claim("P11b", "l' <= l for eta L <= 1 (Lemma 6)", META_STRONG_CONVEXITY, "compare", _PB,
          other=lambda v: v["l"], op="<=", source="eq. (30)"),
    Claim("P11c", "L' is increasing in eta", META_SMOOTHNESS, "increasing", _PB, wrt="eta",
          source="eq. (22)"),
    Claim("P12", "0 <= zeta < 1 iff 0 < beta < 2/L' (given 0 < l' <= L')", CONTRACTION, "predicate",
          Region({"beta": (1e-3, 3.0, "log"), "eta": (1e-3, 0.05), "L": (0.5, 1.5), "l": (0.3, 0.5),
                  "rho": (0.0, 0.5), "B": (0.0, 1.0)}), other=_zeta_iff, source="Theorem 2, E26"),
    Claim("P13a", "h(1) = 0 (Lemma 5)", LOCAL_DRIFT, "compare", _with(_PB, tau0=1), other=0.0, op="==",
          source="eq. (28)"),
    # P13b is checked under its own premise (eps_het, B and gamma_het range down to 0, the premise filters):
    # eps_het = 0 with B = 0 zeroes h for every tau0 but also the premise: it is no counterexample
    Claim("P13b", "h is strictly increasing in tau0 when eps_het (1 + eta L) + eta B gamma > 0", LOCAL_DRIFT,
          "increasing", _P13B, wrt="tau0", line=(1, 8), source="eq. (28), P13"),
    Claim("P14a", "W(1) = 1", LOCAL_STEP_WEIGHT, "compare", _with(_PB, tau0=1), other=1.0, op="==", rtol=1e-9,
          source="Theorems 2-3"),
    Claim("P14b", "W is increasing in tau0 and in beta", LOCAL_STEP_WEIGHT, "increasing", _PB, wrt="tau0",
          line=(1, 8), source="Theorems 2-3"),
    Claim("P15", "D_i is strictly decreasing in |D_i^S| (Lemma 3)", DATA_BIAS, "decreasing",
          _with(_PB, sigma_G=1.0), wrt="m", line=(1, 10**5), source="eq. (25)"),
    Claim("R2", "both bounds decrease with more data per client (Remark 2)", NONCONVEX_BOUND, "decreasing",
          _with(_PB, sigma_G=1.0), wrt="m", line=(1, 10**5), source="Remark 2"),
    Claim("P16a", "Theorem 2 increases in sigma", CONVEX_BOUND, "increasing", _PB, wrt="sigma",
          source="eq. (31)"),
    Claim("P16b", "Theorem 3 increases in S with the exact Theta", NONCONVEX_BOUND, "increasing", _PB,
          wrt="S",
          variant="theta_exact", source="eq. (32), E14"),
    Claim("P16c", "at tau0 = 1 the bounds do not depend on eps_het (h(1) = 0)", NONCONVEX_BOUND, "compare",
          _with(_PB, tau0=1), other=lambda v: NONCONVEX_BOUND({**_clean(v), "eps_het": 0.0}), op="==",
          rtol=1e-12, source="eq. (28), P16"),
    Claim("P16d", "the outer noise (E18) makes Theorem 3 larger", NONCONVEX_BOUND, "compare", _PB,
          variant="outer_noise", other=lambda v: NONCONVEX_BOUND(v), op=">", source="E18"),
    Claim("P17a", "Theorem 3 is strictly decreasing in T at fixed sigma", NONCONVEX_BOUND, "decreasing", _PB,
          wrt="T", source="eq. (32)"),
    Claim("P17b", "Theorem 2 at T = 0 equals Delta0", CONVEX_BOUND, "compare", _with(_PB, T=0.0),
          other=lambda v: v["Delta0"], op="==", rtol=1e-12, source="eq. (31)"),
    Claim("P19", "the bound at sigma*(T) decreases as eps increases (Figs. 2-3)", BOUND_AT_SIGMA_STAR,
          "decreasing", Region(points=({**SETTING_A, "q_in": 0.1, "q_out": 0.1, "delta": 1e-3, "T": 50.0},)),
          wrt="eps", line=(0.5, 8.0), line_points=4, source="Figs. 2-3"),
    Claim("P20a", "tau0 = 1, sigma = 0, C >= max(B^2, a^2): Theorem 2 is zeta^T Delta0 + (1 - zeta^T)/"
          "(1 - zeta) lambda beta a (2 eta L B a + D); the 2 eta L B a part vanishes with tight (Remark 1)",
          CONVEX_BOUND,
          "predicate", _LIMIT, other=_p20, source="Remark 1, E15"),
    Claim("P20b", "tight, eta -> 0: Theorem 2 reduces to plain gradient descent zeta^T Delta0, "
          "zeta = 1 - 2 l "
          "beta + L l beta^2", CONVEX_BOUND, "predicate", _LIMIT, other=_plain_gd, variant="tight",
          source="Remark 1, E15"),
    Claim("R1b", "tau0 = 1, sigma = 0, C -> infinity recovers conventional meta-learning: the DP floor "
          "vanishes "
          "(Remark 1)", CLIPPING_BIAS, "compare", None, other=0.0, op="==", source="Remark 1",
          fails_in="the paper's Xi keeps 2 eta L B (1 + eta L) > 0 (E15); true only with tight",
          counterexamples=(({**SETTING_A, "sigma": 0.0, "C": 1e6}, "paper"),)),
    Claim("R3", "there is an optimal model size S for a given C (Remark 3)", NONCONVEX_BOUND,
          "interior_minimum",
          None, wrt="S", line=(1, 400), source="Remark 3, E23",
          fails_in="the printed bound: increasing in S (exact Theta) and parity-broken (paper's Theta); an "
                   "interior optimum needs an approximation term the paper never writes",
          counterexamples=(({**SETTING_A}, "paper"), ({**SETTING_A}, "theta_exact"))),
    Claim("R3-ext", "Psi(S) = a0 S^-kappa + bound (flagged extension) has an interior optimal S", PSI,
          "interior_minimum", Region(points=({**SETTING_A, "T": 41.0, "sigma": 1.7273458,
                                              "sigma_out": 1.7273458},)),
          wrt="S", line=(1, 3000), variant="theta_exact", source="spec 000 Sec. 3.8 (extension)"),
)
"""Every declared claim of seed 000's theorems (P18 and the optimisers' claims: fedbound.scheduling.dppfl)."""
CLAIMS_BY_ID = {c.id: c for c in CLAIMS}
