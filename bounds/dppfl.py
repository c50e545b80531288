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
import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from fedbound.accounting.calibrate import MAX_NOISE_MULTIPLIER
from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant
from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import InfeasibleError, ParameterError

__all__ = ["OPACUS_ORDERS", "TIGHT_ORDERS", "NOISE_METHODS", "sgm_log_integral", "rdp_pfl_rdp",
           "rdp_pfl_epsilon", "rdp_pfl_noise_multiplier", "noise_multiplier_curve", "theorem1_calibration",
           "noise", "NOTATION", "THEOREMS", "noise_norm_paper", "noise_norm_exact", "clipping_bias",
           "per_round_error", "convex_bound", "nonconvex_bound", "aggregation_weights"]

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
    from fedbound.accounting import rdp_subsampled_gaussian, rdp_to_dp

    per_step = np.asarray(rdp_subsampled_gaussian(orders, q_in, sigma_in.ravel()), dtype=float)
    if q_out == q_in and ratio == 1.0:
        per_step = 2.0 * per_step
    else:
        per_step = per_step + np.asarray(rdp_subsampled_gaussian(orders, q_out, ratio * sigma_in.ravel()),
                                         dtype=float)
    per_step = per_step.reshape(sigma_in.size, orders.size)
    total = (T.ravel() * tau0)[:, None] * per_step
    return np.asarray(rdp_to_dp(orders, total, delta), dtype=float).reshape(sigma_in.shape)


def noise_multiplier_curve(eps: float, delta: float, T: Any, tau0: int, q_in: float, q_out: float,
                           ratio: float = 1.0, orders: np.ndarray = OPACUS_ORDERS,
                           rtol: float = 1e-10) -> np.ndarray:
    """sigma*_in(T) for an array of T at once: the smallest sigma_in with eps_DP(sigma_in, ratio sigma_in)
    <= eps (seed 000 eq. (12), Sec. III-B "searching method"), by vectorised bisection on log sigma to
    ``rtol`` (always on the feasible side).  eps_DP is continuous and strictly decreasing in sigma."""
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
    while True:
        gap = hi - lo > rtol / 2
        if not gap.any():
            break
        idx = np.flatnonzero(gap)
        mid = 0.5 * (lo[idx] + hi[idx])
        f = feasible(mid, idx)
        hi[idx[f]] = mid[f]
        lo[idx[~f]] = mid[~f]
    return np.exp(hi).reshape(shape)


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
      :data:`TIGHT_ORDERS` (the exact sampled-Gaussian RDP is fedbound's tight accountant for these stages).
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
_POS = {"low": 0.0, "low_open": True}
_NONNEG = {"low": 0.0}
PARAMS = (
    Param("T", sp.Symbol("T", nonnegative=True), "communication rounds (real >= 0 in the bounds)", 0.0),
    Param("tau0", sp.Symbol("tau_0", positive=True), "local epochs per round (one inner + one outer "
          "step each)",
          1, integer=True),
    Param("eta", sp.Symbol("eta", positive=True), "inner (adaptation) learning rate", **_POS),
    Param("beta", sp.Symbol("beta", positive=True), "outer (meta) learning rate", **_POS),
    Param("C", sp.Symbol("C", positive=True), "clipping threshold (inner gradient to C, outer factors to "
          "sqrt(C))", **_POS),
    Param("S", sp.Symbol("S", positive=True), "model size (number of parameters, noise dimension)", 1,
          integer=True),
    Param("sigma", sp.Symbol("sigma", nonnegative=True), "noise multiplier of the inner stage", **_NONNEG),
    Param("sigma_out", sp.Symbol("sigma_out", nonnegative=True), "noise multiplier of the outer stage "
          "(outer_noise variant)", **_NONNEG),
    Param("m", sp.Symbol("m", positive=True), "smallest support-set size |D_i^S|", 1, integer=True),
    Param("Dbar", sp.Symbol(r"\bar{D}", nonnegative=True), "weighted data bias sum_i p_i D_i (client_sizes "
          "variant)", **_NONNEG),
    Param("L", sp.Symbol("L", positive=True), "smoothness constant of F_i (16)", **_POS),
    Param("rho", sp.Symbol("rho", nonnegative=True), "Hessian Lipschitz constant (17)", **_NONNEG),
    Param("B", sp.Symbol("B", nonnegative=True), "gradient-norm bound (Assumption 1)", **_NONNEG),
    Param("lam", sp.Symbol("lambda", positive=True), "Lipschitz constant of F_i (15)", **_POS),
    Param("l", sp.Symbol("l", positive=True), "strong-convexity constant (29), Theorem 2 only", **_POS),
    Param("eps_het", sp.Symbol(r"\varepsilon_{het}", nonnegative=True), "gradient dissimilarity (18)",
          **_NONNEG),
    Param("gamma_het", sp.Symbol("gamma", nonnegative=True), "Hessian dissimilarity (19)", **_NONNEG),
    Param("sigma_G", sp.Symbol(r"\sigma_G", nonnegative=True), "per-sample gradient std (20)", **_NONNEG),
    Param("sigma_H", sp.Symbol(r"\sigma_H", nonnegative=True), "per-sample Hessian std (21)", **_NONNEG),
    Param("Delta0", sp.Symbol(r"\Delta_0", nonnegative=True), "initial gap G(w^0) - G(w*)", **_NONNEG),
)
NOTATION = Notation("DP-PFL (seed 000)", PARAMS)
(T, tau0, eta, beta, C, S, sigma, sigma_out, m, Dbar_p, L, rho, B, lam, l, eps_het, gamma_het, sigma_G,
 sigma_H, Delta0) = NOTATION.symbols("T tau0 eta beta C S sigma sigma_out m Dbar L rho B lam l eps_het "
                                     "gamma_het sigma_G sigma_H Delta0")


def _define(name: str, expr: sp.Expr, doc: str = "", conditions: Sequence[Condition] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(sp.Symbol(name), expr, doc, tuple(conditions)))


ETA_L = Condition("eta*L<1", sp.Lt(eta * L, 1), "required",
                  "Lemma 6 needs eta L < 1 (I - eta grad^2 F >= (1 - eta L) I; unstated in the paper)", "eta",
                  "eta < 1/L")
a = _define("a", 1 + eta * L, "1 + eta L, the bound on ||I - eta grad^2 F|| (Lemma 4)")
Lp = _define("L'", L * a**2 + eta * rho * B, "Lemma 1 (22): smoothness of G_i")
LP_POS = Condition("l'>0", sp.Gt(sp.Symbol("l'"), 0), "required",
                   "Lemma 6 needs l' = (1 - eta L)(l - eta L^2) - eta rho B > 0 (e.g. eta < l/L^2 and small "
                   "eta rho B; unstated in the paper)", "l'", "l' > 0")
lp = _define("l'", (1 - eta * L) * (l - eta * L**2) - eta * rho * B, "Lemma 6 (30): strong convexity of G_i",
             [ETA_L, LP_POS])
dissim = _define(r"\bar\varepsilon_G", eps_het * a + eta * B * gamma_het, "Lemma 2 (23), averaged over p_i")
D_m = _define("D", eta * a * L * sigma_G / sp.sqrt(m) + eta * B * sigma_H / sp.sqrt(m)
              + eta**2 * L * sigma_G * sigma_H / m, "Lemma 3 (25) at |D_i^S| = m")
Dbar = _define(r"\bar D_m", D_m, "sum_i p_i D_i, bounded by D(m) for the smallest support set m")
theta_unit = _define(r"\Theta_1", sp.sqrt(2) * C * sp.exp(sp.loggamma((S + 1) / 2) - sp.loggamma(S / 2)),
                     "E||N(0, C^2 I_S)|| (exact, E14)")
k_par = _define("k_S", sp.Piecewise((2, sp.Eq(sp.Mod(S, 2), 1)), (4, True)),
                "(27)/exact: 2 for odd S, 4 for even S (E14)")
Theta = _define(r"\Theta", k_par * theta_unit * sigma, "Lemma 4 (27): bound on E||n^Q||")
Theta_out = _define(r"\Theta^S", k_par * theta_unit * sigma_out, "the same bound on E||n^S|| (E18)")
f_clip = _define("f_C", sp.Max(B, sp.sqrt(C)) - sp.Min(C / a, sp.sqrt(C)), "clipping term of (26)")
clip_grad = _define(r"\kappa_{clip}", 2 * eta * L * B, "Lemma 4's bound on eta L ||clip_C(grad F) - grad F||")
Xi = _define(r"\Xi", a * (clip_grad + eta * L * Theta + f_clip), "Lemma 4 (26)")
u = _define("u", beta * Lp, "beta L'")
h = _define("h", beta * dissim * (expm1(tau0 * log1p(u)) / u - tau0), "Lemma 5 (28)")
W = _define("W", (expm1((tau0 + 1) * log1p(u)) - (tau0 + 1) * u) / u**2,
            "sum_j (tau0 - j)(1 + beta L')^j (closed form)")
bracket = _define(r"\Xi_D", Xi + Dbar, "Xi + sum_i p_i D_i")
E = _define(r"\mathcal{E}", lam * (a * h + beta * tau0 * a * W * bracket), "per-round error of (31), (32)")
zeta = _define(r"\zeta", 1 - 2 * lp * beta + Lp * lp * beta**2, "Theorem 2 contraction factor")
c3 = _define("c", beta * (1 - beta * Lp / 2), "Theorem 3 denominator beta (1 - beta L'/2)")

_D = Definition
for _v in (
    Variant("theta_exact", "Theta = E||N(0, C^2 sigma^2 I_S)|| (the printed (27) is 2x (odd S) / 4x "
            "(even S))",
            "E14", (_D(k_par, sp.Integer(1), "exact"),)),
    Variant("tight", "Lemma 4 with eta L max(0, B - C) instead of 2 eta L B", "E15",
            (_D(clip_grad, eta * L * sp.Max(0, B - C), "E15"),)),
    Variant("outer_noise", "the outer noise beta n^S (omitted in (227)) adds Theta(S, sigma_out, C)", "E18",
            (_D(bracket, Xi + Theta_out + Dbar, "E18"),)),
    Variant("client_sizes", "D-bar given (parameter Dbar = sum_i p_i D_i) instead of D(m)", "Lemma 3, (31)",
            (_D(Dbar, Dbar_p, "given"),)),
):
    NOTATION.add_variant(_v)

BETA_RANGE = Condition("beta<2/L'", sp.Lt(beta * Lp, 2), "required",
                       "Theorems 2 and 3 need 0 < beta < 2/L' (zeta < 1, 1 - beta L'/2 > 0; the paper "
                       "only says 'select a proper beta')", "beta", "beta < 2/L'")
ZETA_RANGE = Condition("0<=zeta<1", sp.And(sp.Ge(zeta, 0), sp.Lt(zeta, 1)), "required",
                       "Theorem 2 needs 0 <= zeta < 1 (l' <= L' and 0 < beta < 2/L')", r"\zeta", "[0, 1)")


def _src(eq: str) -> Source:
    return Source(SEED, eq)


def _theorem(name: str, expr: sp.Expr, lhs: str, eq: str, doc: str,
             conditions: Sequence[Condition] = ()) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq), doc=doc, conditions=conditions)


zeta_T = sp.exp(T * tau0 * sp.log(zeta))
META_SMOOTHNESS = _theorem("meta_smoothness", Lp, "L'", "Lemma 1, eq. (22)", "smoothness of G_i")
META_STRONG_CONVEXITY = _theorem("meta_strong_convexity", lp, "l'", "Lemma 6, eq. (30)",
                                 "strong convexity of G_i")
META_DISSIMILARITY = _theorem("meta_dissimilarity", dissim, r"\bar\varepsilon_G", "Lemma 2, eq. (23)",
                              "meta-gradient dissimilarity averaged over p_i")
DATA_BIAS = _theorem("data_bias", D_m, "D_i", "Lemma 3, eq. (25)", "finite-sample bias of the MAML gradient")
NOISE_NORM = _theorem("noise_norm", Theta, r"\Theta", "Lemma 4, eq. (27)", "bound on E||n^Q||")
CLIPPING_BIAS = _theorem("clipping_bias", Xi, r"\Xi", "Lemma 4, eq. (26)", "clipping + noise bias")
LOCAL_DRIFT = _theorem("local_drift", h, r"h(\tau_0)", "Lemma 5, eq. (28)", "multi-local-step drift")
LOCAL_STEP_WEIGHT = _theorem("local_step_weight", W, r"W(\tau_0)", "Theorems 2-3 (App. G)",
                             "weight sum_j (tau0 - j)(1 + beta L')^j")
PER_ROUND_ERROR = _theorem("per_round_error", E, r"\mathcal{E}", "eqs. (31)-(32)", "per-round error bracket")
CONTRACTION = _theorem("contraction", zeta, r"\zeta", "Theorem 2, eq. (31)", "contraction per local step",
                       [BETA_RANGE])
CONVEX_BOUND = _theorem("convex_bound", zeta_T * Delta0 + (-expm1(T * tau0 * sp.log(zeta)))
                        / (-expm1(tau0 * sp.log(zeta))) * E, "E[G(w^T)] - G(w*)", "Theorem 2, eq. (31)",
                        "strongly convex bound", [BETA_RANGE, ZETA_RANGE])
NONCONVEX_BOUND = _theorem("nonconvex_bound", Delta0 / (T * c3) + E / c3,
                           r"\frac{1}{T}\sum_t\sum_\tau\|\nabla G(\hat w^{t,\tau})\|^2",
                           "Theorem 3, eq. (32)",
                           "non-convex bound", [BETA_RANGE])

THEOREMS: dict[str, Theorem] = {t.name: t for t in (
    META_SMOOTHNESS, META_STRONG_CONVEXITY, META_DISSIMILARITY, DATA_BIAS, NOISE_NORM, CLIPPING_BIAS,
    LOCAL_DRIFT, LOCAL_STEP_WEIGHT, PER_ROUND_ERROR, CONTRACTION, CONVEX_BOUND, NONCONVEX_BOUND)}
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

