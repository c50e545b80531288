"""NbAFL: noise before model aggregation FL, and K-client random scheduling (NbAFL, spec 002).

K. Wei et al., "Federated Learning With Differential Privacy: Algorithms and Performance Analysis",
IEEE TIFS 15 (2020).  Every formula F1-F44 of spec 002, named without the ``nbafl_`` prefix.

Two layers:

* Theorem objects (upper case: ``SIGMA_UPLINK``, ``BOUND``, ``K_BOUND`` ...) hold the sympy expression,
  parameters with domains, conditions, source and variants; see :mod:`fedbound.bounds.core`.
* Plain functions (``sigma_uplink``, ``bound`` ...) take floats or arrays and return floats or arrays.  They
  raise :class:`~fedbound.errors.DomainError` where the spec says "returns nan" (outside condition (60),
  P or Q outside (0, 1)) and warn with :class:`~fedbound.errors.ClassicGaussianRangeWarning` where the classic
  Gaussian mechanism is used at a per-release epsilon >= 1 (every paper setting).

Variants (spec section 7), all opt-in; the paper-literal reading is the default, except where noted:

* ``eq13_printed`` (E1): sigma_A as printed in (13), with the extra sqrt(N).  The default ``sigma_aggregate``
  is the corrected reading (spec F12), because the printed one contradicts (24), App. E and continuity.
* ``thm1_noise`` (E2): the bound uses Theorem 1's noise std sigma_A instead of the paper's
  cCT/(m sqrt(N) eps).
* ``dimensional_lambda1`` (E4): lambda_1 = 1 + rho B / mu.
* ``noise_dimension`` (E5): the noise is d-dimensional (needs the parameter ``d``).
* ``regime_aware`` (E8, E9): constant noise where Theorem 1 (resp. Lemma 4) adds no server noise.
* ``two_sided`` (E9): standard two-sided amplification by subsampling in b and gamma.
* ``tight`` (not an erratum): the bound with the exact T-fold Gaussian composition; needs ``z``, the noise
  multiplier of one (eps, delta)-DP Gaussian release (``fedbound.accounting.analytic_gaussian_std(eps,
  delta)``), so the noise grows like sqrt(T) instead of T.

Decisions recorded here (see also the report): the printed (13) in the seed text reads ``sqrt{N epsilon}``;
we follow spec 002's reading sqrt(N) * eps (its test vectors use it).  T is a real parameter >= 0 (the paper
treats it as continuous in (15)); N, K, m, L are integers >= 1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.bounds import provable
from fedbound.bounds.core import Evaluable
from fedbound.bounds.lazy import Theory
from fedbound.checks import check_real, scalar_or_array
from fedbound.errors import DomainError, ParameterError

SEED = "002"
Number = float | np.ndarray

_THEORY = Theory("fedbound.bounds.nbafl_theory")
NOTATION = _THEORY.notation()
(GAUSSIAN_C, SIGMA_UPLINK, SIGMA_DOWNLINK, SIGMA_AGGREGATE, CONTRACTION_P, BOUND, BOUND_EQ14, BOUND_D2T_EQ15,
 KAPPA1, KAPPA0, ALPHA0, ALPHA1, ALPHA2, T_THETA, KSCHED_U, KSCHED_B, KSCHED_GAMMA, SIGMA_DOWNLINK_K,
 SIGMA_AGGREGATE_K, S_K, CONTRACTION_Q, K_BOUND, BOUND_DT, BOUND_D2T, K_BOUND_DT) = _THEORY.theorems(
    "GAUSSIAN_C SIGMA_UPLINK SIGMA_DOWNLINK SIGMA_AGGREGATE CONTRACTION_P BOUND BOUND_EQ14 BOUND_D2T_EQ15 "
    "KAPPA1 KAPPA0 ALPHA0 ALPHA1 ALPHA2 T_THETA KSCHED_U KSCHED_B KSCHED_GAMMA SIGMA_DOWNLINK_K "
    "SIGMA_AGGREGATE_K S_K CONTRACTION_Q K_BOUND BOUND_DT BOUND_D2T K_BOUND_DT")
THEOREMS = _THEORY.mapping("THEOREMS")


def __getattr__(name: str) -> Any:
    """The declarations' other names (symbols, definitions, conditions) from nbafl_theory (imports sympy)."""
    return _THEORY.attribute(__name__, name)


VARIANTS = tuple(NOTATION.variants)
LOSS_CONSTANTS = ("Theta", "l", "beta", "rho", "B", "mu")

# ---------------------------------------------------------------------------------------------------------
# Plain-number functions
# ---------------------------------------------------------------------------------------------------------
# The plain functions of the theorems above (positional arguments in the paper's order, ``variant=`` and extra
# parameters by keyword; DomainError where a formula is undefined), generated from the theorem objects.
gaussian_c = GAUSSIAN_C.as_function("delta", "gaussian_c")
sigma_uplink = SIGMA_UPLINK.as_function("eps delta C m L", "sigma_uplink")
sigma_downlink = SIGMA_DOWNLINK.as_function("eps delta C m N T L", "sigma_downlink")
sigma_aggregate = SIGMA_AGGREGATE.as_function("eps delta C m N T L", "sigma_aggregate")
contraction_P = CONTRACTION_P.as_function("l mu rho B", "contraction_P")
bound = BOUND.as_function("T eps delta N C m Theta l beta rho B mu", "bound")
bound_dT = BOUND_DT.as_function("T eps delta N C m Theta l beta rho B mu", "bound_dT")
bound_d2T = BOUND_D2T.as_function("T eps delta N C m Theta l beta rho B mu", "bound_d2T")
T_theta = T_THETA.as_function("eps delta N C m Theta l beta rho B mu", "T_theta")
ksched_u = KSCHED_U.as_function("eps T N K", "ksched_u")
ksched_b = KSCHED_B.as_function("eps T N K", "ksched_b")
ksched_gamma = KSCHED_GAMMA.as_function("eps N K L", "ksched_gamma")
sigma_downlink_k = SIGMA_DOWNLINK_K.as_function("eps delta C m N K T L", "sigma_downlink_k")
sigma_aggregate_k = SIGMA_AGGREGATE_K.as_function("eps delta C m N K T L", "sigma_aggregate_k")
contraction_Q = CONTRACTION_Q.as_function("l mu rho B K N", "contraction_Q")
k_bound = K_BOUND.as_function("T K eps delta N C m Theta l beta rho B mu", "k_bound")


def fl_weights(sizes: Sequence[float] | np.ndarray) -> np.ndarray:
    """Aggregation weights p_i = |D_i| / sum_j |D_j|.  NbAFL, eq. (1); spec 002 F1."""
    arr = check_real("sizes", sizes, 0.0, low_open=True)
    return arr / arr.sum()


def fl_aggregate(ws: np.ndarray, p: np.ndarray) -> np.ndarray:
    """w = sum_i p_i w_i for client models ws of shape (N, d).  NbAFL, eq. (1); spec 002 F1."""
    return np.asarray(p, dtype=float) @ np.asarray(ws, dtype=float)


def dp_inequality_holds(p: Number, p_prime: Number, eps: Number, delta: Number) -> bool | np.ndarray:
    """Definition 1: p <= e^eps p' + delta.  NbAFL, eq. (3); spec 002 F3."""
    return np.asarray(p) <= np.exp(eps) * np.asarray(p_prime) + np.asarray(delta)




def gaussian_mechanism_sigma(eps: Number, delta: Number, sensitivity: Number) -> Number:
    """Classic Gaussian mechanism sigma = c Delta / eps (proven for eps < 1).  NbAFL, Sec. II-C; F4."""
    sens = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    return scalar_or_array(gaussian_c(delta) * sens / check_real("eps", eps, 0.0, low_open=True))


def client_uplink_sensitivity(C: Number, n_i: Number) -> Number:
    """Delta s_U^{D_i} = 2C/|D_i|.  NbAFL, eq. (5); spec 002 F6."""
    Cv = NOTATION.params["C"].check(C)
    n = check_real("n_i", n_i, 1.0)
    return scalar_or_array(2 * Cv / n)


def uplink_sensitivity(C: Number, m: Number) -> Number:
    """Delta s_U = 2C/m.  NbAFL, eq. (6); spec 002 F7."""
    return client_uplink_sensitivity(C, m)


def downlink_sensitivity(C: Number, m: Number, p_i: Number) -> Number:
    """Lemma 1: Delta s_D^{D_i} = 2 C p_i / m.  NbAFL, eq. (8); spec 002 F8."""
    p = check_real("p_i", p_i, 0.0, 1.0)
    return scalar_or_array(uplink_sensitivity(C, m) * p)


def global_downlink_sensitivity(C: float, m: int, p: Sequence[float] | np.ndarray) -> float:
    """Remark 1: Delta s_D = max_i 2 C p_i / m (>= 2C/(mN), equality iff p uniform).  NbAFL, (9); F9."""
    pv = check_real("p", p, 0.0, 1.0)
    if abs(pv.sum() - 1) > 1e-9:
        raise ParameterError("p", float(pv.sum()), "weights summing to 1")
    return float(uplink_sensitivity(C, m) * pv.max())








def sigma_aggregate_eq13_printed(eps: Number, delta: Number, C: Number, m: Number, N: Number, T: Number,
                                 L: Number) -> Number:
    """(13) exactly as printed (documentation only).  NbAFL, eq. (13); spec 002 E1."""
    return sigma_aggregate(eps, delta, C, m, N, T, L, variant="eq13_printed")


def B_from_divergence(grad_F_sq_norm: Number, mean_sq_divergence: Number) -> Number:
    """Lemma 2: B(w) = sqrt(1 + E[eps_i^2] / ||grad F(w)||^2) >= 1.  NbAFL, eq. (28); spec 002 F14."""
    g = check_real("grad_F_sq_norm", grad_F_sq_norm, 0.0, low_open=True,
                   hint="B is defined only where the global gradient is not zero")
    v = check_real("mean_sq_divergence", mean_sq_divergence, 0.0)
    return scalar_or_array(np.sqrt(1 + v / g))


def estimate_B(client_grads: np.ndarray, p: Sequence[float] | np.ndarray | None = None) -> float:
    """sqrt(sum_i p_i ||g_i||^2 / ||sum_i p_i g_i||^2) from client gradients (N, d); exact by (26).

    NbAFL, Lemma 2, eqs. (26)-(29); spec 002 F14.  ``p`` defaults to uniform weights.
    """
    g = np.asarray(client_grads, dtype=float)
    if g.ndim != 2 or not np.isfinite(g).all():
        raise ParameterError("client_grads", g.shape, "a finite array of shape (N, d)")
    w = np.full(len(g), 1 / len(g)) if p is None else fl_weights(p)
    mean = w @ g
    denom = float(mean @ mean)
    if denom <= 0:
        raise DomainError("client_grads", 0.0, "a nonzero weighted mean gradient",
                          hint="B (Lemma 2) is undefined where grad F = 0")
    return float(np.sqrt(float(w @ np.sum(g * g, axis=1)) / denom))


def lambdas(mu: Number, rho: Number, B: Number, theta: float = 0.0, mu_bar: float | None = None,
            lambda1_variant: str = "paper") -> tuple[Number, Number, Number]:
    """Lemma 3 coefficients (lambda_0, lambda_1, lambda_2), general theta-inexact form (46)-(47).

    NbAFL, eq. (12), (46)-(47); spec 002 F15.  ``lambda1_variant="dimensional"`` uses 1 + rho B/mu (E4).
    """
    muv = NOTATION.params["mu"].check(mu)
    rv = NOTATION.params["rho"].check(rho)
    Bv = NOTATION.params["B"].check(B)
    th = check_real("theta", theta, 0.0, 1.0, high_open=True)
    mb = muv if mu_bar is None else check_real("mu_bar", mu_bar, 0.0, low_open=True)
    if lambda1_variant not in ("paper", "dimensional"):
        raise ParameterError("lambda1_variant", lambda1_variant, "'paper' or 'dimensional'")
    lam_0 = rv / 2 + 0 * muv * Bv
    lam_1 = (1 / muv if lambda1_variant == "paper" else 1.0) + rv * Bv * (1 + th) / mb
    lam_2 = -1 / muv + Bv / muv * (rv * (1 + th) / mb + th) + rv * Bv**2 * (1 + th) ** 2 / (2 * mb**2)
    return scalar_or_array(lam_0), scalar_or_array(lam_1), scalar_or_array(lam_2)


def lemma3_rhs(grad_sq: Number, cross: Number, noise_sq: Number, mu: Number, rho: Number,
               B: Number) -> Number:
    """lambda_2 grad_sq + lambda_1 cross + lambda_0 noise_sq.  NbAFL, eq. (12); spec 002 F15."""
    lam_0, lam_1, lam_2 = lambdas(mu, rho, B)
    return scalar_or_array(np.asarray(lam_2 * np.asarray(grad_sq) + lam_1 * np.asarray(cross)
                                      + lam_0 * np.asarray(noise_sq), dtype=float))


def check_thm2_conditions(l: float, mu: float, rho: float, B: float) -> None:
    """Raise DomainError unless lambda_2 < 0 and 0 < P < 1.  NbAFL, (50); spec 002 F13, E20."""
    contraction_P(l, mu, rho, B)




def recursive_bound(T: Number, Theta: Number, P: Number, a1: Number, a0: Number, beta: Number,
                    s: Number) -> Number:
    """RB = P^T Theta + (1-P^T)/(1-P) (a1 beta sqrt(2/pi) s + a0 s^2).  NbAFL, (51); spec 002 F16, F18."""
    Pv = check_real("P", P, 0.0, 1.0, low_open=True, high_open=True)
    Tv = NOTATION.params["T"].check(T)
    frac = -np.expm1(Tv * np.log(Pv)) / (1 - Pv)
    sv = np.asarray(s, dtype=float)
    noise = np.asarray(a1) * np.asarray(beta) * math.sqrt(2 / math.pi) * sv + np.asarray(a0) * sv**2
    out = Pv**Tv * np.asarray(Theta, float) + frac * noise
    return scalar_or_array(np.asarray(out, dtype=float))


def kappas(delta: Number, N: Number, C: Number, m: Number, l: Number, beta: Number, rho: Number, B: Number,
           mu: Number) -> tuple[Number, Number, Number]:
    """(kappa_1, kappa_0, P) of Theorem 2 (main-text form with (1-P) and C).  NbAFL, (14); spec F17, E3."""
    values = dict(delta=delta, N=N, C=C, m=m, l=l, beta=beta, rho=rho, B=B, mu=mu)
    return KAPPA1(values), KAPPA0(values), contraction_P(l, mu, rho, B)












def sampling_probability(N: Number, K: Number) -> Number:
    """q = K/N.  NbAFL, App. F; spec 002 F24."""
    Nv, Kv = NOTATION.params["N"].check(N), NOTATION.params["K"].check(K)
    if (Kv > Nv).any():
        raise ParameterError("K", K, "K <= N")
    return scalar_or_array(Kv / Nv)








def ksched_domain(eps: Number, T: Number, N: Number, K: Number) -> bool | np.ndarray:
    """Condition (60): T > eps/(-ln(1 - K/N)), where b and (17) are defined.  NbAFL, App. F; spec F28."""
    return KSCHED_U.evaluate(eps=eps, T=T, N=N, K=K).defined


def ksched_gaussian_valid(eps: Number, T: Number, N: Number, K: Number) -> bool | np.ndarray:
    """Condition (64): b eps/T < 1, where the classic c is valid per round.  NbAFL, (64); spec F28."""
    ev = KSCHED_U.evaluate(eps=eps, T=T, N=N, K=K)
    out = np.asarray(ev.defined) & (np.nan_to_num(np.asarray(ev.value, dtype=float), nan=np.inf) < 1)
    return bool(out) if out.ndim == 0 else out






def ksched_alphas(mu: Number, rho: Number, B: Number, K: Number, N: Number) -> tuple[Number, Number, Number]:
    """(alpha_0, alpha_1, alpha_2) of Theorem 3.  NbAFL, eqs. (84)-(85); spec 002 F33."""
    values = dict(mu=mu, rho=rho, B=B, K=K, N=N)
    return ALPHA0(values), ALPHA1(values), ALPHA2(values)






def privacy_loss_ratio(n: Number, ds_D: Number, sigma_A: Number, q: Number) -> Number:
    """Per-round privacy-loss ratio 1 - q + q exp(-(2 n Delta + Delta^2)/(2 sigma_A^2)).  (54); F38."""
    return scalar_or_array(np.asarray(1 - np.asarray(q) + np.asarray(q) * np.exp(
        -(2 * np.asarray(n) * ds_D + np.asarray(ds_D) ** 2) / (2 * np.asarray(sigma_A) ** 2)), dtype=float))


def gaussian_tail_bound(eta: Number, sigma: Number) -> Number:
    """Pr[n > eta] <= sigma/(sqrt(2 pi) eta) exp(-eta^2/(2 sigma^2)) for eta > 0.  NbAFL, (62); F40."""
    e = check_real("eta", eta, 0.0, low_open=True)
    s = check_real("sigma", sigma, 0.0, low_open=True)
    return scalar_or_array(s / (math.sqrt(2 * math.pi) * e) * np.exp(-(e**2) / (2 * s**2)))


# ---------------------------------------------------------------------------------------------------------
# Tight counterparts (fedbound.accounting)
# ---------------------------------------------------------------------------------------------------------


def _accounting(name: str) -> Any:
    import fedbound.accounting as acc

    try:
        return getattr(acc, name)
    except AttributeError as exc:  # pragma: no cover - depends on the accounting layer being present
        raise NotImplementedError(f"fedbound.accounting.{name} is not available yet") from exc


def tight_noise_multiplier(eps: float, delta: float) -> float:
    """z: the std of one Gaussian release with sensitivity 1 that is exactly (eps, delta)-DP.

    The analytic Gaussian mechanism (Balle & Wang 2018), valid for every eps > 0.  A k-fold composition of
    Gaussian releases with sensitivity Delta and std sigma is exactly one Gaussian release with sensitivity
    sqrt(k) Delta (Gaussian DP), so k exposures need sigma = sqrt(k) z Delta: this is tight, not a bound.
    """
    eps_v = NOTATION.params["eps"].check(eps)
    delta_v = NOTATION.params["delta"].check(delta)
    if eps_v.ndim == 0 and delta_v.ndim == 0:  # a plan asks for the same z many times
        return _scalar_noise_multiplier(float(eps_v), float(delta_v))
    out = _accounting("analytic_gaussian_std")(eps_v, delta_v, 1.0)
    return scalar_or_array(np.asarray(out, dtype=float))


@functools.lru_cache(maxsize=256)
def _scalar_noise_multiplier(eps: float, delta: float) -> float:
    return float(_accounting("analytic_gaussian_std")(eps, delta, 1.0))


def sigma_uplink_tight(eps: Number, delta: Number, C: Number, m: Number, L: Number) -> Number:
    """Tight uplink std: L Gaussian exposures composed exactly: sqrt(L) z(eps, delta) 2C/m.

    Counterpart of spec 002 F10 (paper: c L 2C/(m eps), linear composition, classic mechanism).
    """
    Lv = NOTATION.params["L"].check(L)
    return scalar_or_array(np.sqrt(Lv) * tight_noise_multiplier(eps, delta) * uplink_sensitivity(C, m))


def sigma_aggregate_tight(eps: Number, delta: Number, C: Number, m: Number, N: Number, T: Number,
                          L: Number) -> Number:
    """Tight aggregate std: max(sqrt(T) z Delta s_D, sigma_U,tight / sqrt(N)).  Counterpart of F12."""
    Nv, Tv = NOTATION.params["N"].check(N), NOTATION.params["T"].check(T)
    down = np.sqrt(Tv) * tight_noise_multiplier(eps, delta) * uplink_sensitivity(C, m) / Nv
    return scalar_or_array(np.maximum(down, sigma_uplink_tight(eps, delta, C, m, L) / np.sqrt(Nv)))


def sigma_downlink_tight(eps: Number, delta: Number, C: Number, m: Number, N: Number, T: Number,
                         L: Number) -> Number:
    """Tight server std sqrt(sigma_A,tight^2 - sigma_U,tight^2 / N) (0 when the uplink noise suffices).

    Counterpart of Theorem 1 (spec 002 F11): the T broadcasts compose to sqrt(T) z Delta s_D, so the server
    adds noise only for T > L N (the paper: T > L sqrt(N)).
    """
    # sigma_A^2 - sigma_U^2/N = z^2 (2C/(mN))^2 (T - L N): written so that it is exactly 0 for T <= L N
    Nv, Tv, Lv = (NOTATION.params[k].check(v) for k, v in (("N", N), ("T", T), ("L", L)))
    z = tight_noise_multiplier(eps, delta)
    return scalar_or_array(z * uplink_sensitivity(C, m) / Nv * np.sqrt(np.maximum(Tv - Lv * Nv, 0.0)))


def sigma_aggregate_k_tight(eps: float, delta: float, C: float, m: int, N: int, K: int, T: int, L: int,
                            method: str = "rdp") -> float:
    """Tight aggregate std under K-of-N scheduling, by numerical accounting of the T-fold composition.

    The server's release each round is a Gaussian with sensitivity Delta s_D = 2C/(mK) applied to a uniformly
    sampled K-subset of clients (sampling without replacement, two-sided amplification), composed over T
    rounds; ``fedbound.accounting.calibrate_noise`` finds the noise multiplier.  The uplink floor
    sigma_U,tight/sqrt(K) applies as in Lemma 4.  Counterpart of spec 002 F29 (paper: one-sided amplification,
    linear composition, classic mechanism).

    ``method="rdp"`` (default) uses the RDP bound for sampling without replacement (Wang, Balle &
    Kasiviswanathan 2019, replace-one relation, through dp-accounting); dp-accounting 0.6 has no PLD for
    sampling without replacement, so ``method="pld"`` raises UnsupportedError rather than silently
    accounting for Poisson sampling instead.
    """
    for name, v in (("eps", eps), ("delta", delta), ("C", C), ("m", m), ("N", N), ("K", K), ("L", L)):
        NOTATION.params[name].check(v)
    check_real("T", T, 1.0)
    if K > N:
        raise ParameterError("K", K, f"K <= N = {N}")
    if K == N:
        z = float(np.sqrt(T)) * tight_noise_multiplier(eps, delta)
    else:
        z = _k_of_n_multiplier(float(eps), float(delta), K / N, int(T), method)
    down = z * 2 * C / (m * K)
    return float(max(down, sigma_uplink_tight(eps, delta, C, m, L) / math.sqrt(K)))


@functools.lru_cache(maxsize=256)
def _k_of_n_multiplier(eps: float, delta: float, q: float, steps: int, method: str) -> float:
    """Noise multiplier of ``steps`` K-of-N sampled Gaussian releases (cached: one RDP calibration takes
    about a second, and a plan asks for the same one several times)."""
    return float(_calibrate(_accounting("calibrate_noise"), eps, delta, q, steps, method))


def _calibrate(calibrate: Any, eps: float, delta: float, q: float, steps: int, method: str) -> float:
    try:
        return calibrate(eps, delta, q, steps, method=method, sampling="without_replacement")
    except TypeError as exc:  # no silent switch to Poisson sampling: K-of-N scheduling is without replacement
        raise NotImplementedError("fedbound.accounting.calibrate_noise does not support "
                                  "sampling='without_replacement'") from exc


def sigma_downlink_k_tight(eps: float, delta: float, C: float, m: int, N: int, K: int, T: int, L: int,
                           method: str = "rdp") -> float:
    """Tight server std under K-scheduling: sqrt(sigma_A,tight^2 - sigma_U,tight^2/K).  Counterpart of F27."""
    agg = sigma_aggregate_k_tight(eps, delta, C, m, N, K, T, L, method)
    up = float(sigma_uplink_tight(eps, delta, C, m, L)) / math.sqrt(K)
    return math.sqrt(max(agg**2 - up**2, 0.0))


def noise(setting: Mapping[str, Any], T: float, method: str = "paper") -> dict[str, float]:
    """Noise std per stage for ``T`` rounds: ``{"uplink": sigma_U, "server": sigma_D}``.

    The one place that decides NbAFL's noise (the planner and ``fedbound train nbafl`` both call it).
    ``method="paper"``: sigma_U of Sec. III-A (spec F10) and Theorem 1's sigma_D, NbAFL eq. (10); under
    K-of-N scheduling (``K < N`` in ``setting``) Lemma 4's sigma_D, eq. (16).  With ``sensitivity =
    "provable"`` every formula reads the provable sensitivity instead of eq. (6)'s 2C/m
    (:func:`fedbound.bounds.provable.apply`).  ``method="tight"``: their exact counterparts through
    fedbound.accounting (:func:`sigma_uplink_tight`, :func:`sigma_downlink_tight`,
    :func:`sigma_downlink_k_tight`).  Classic-mechanism caveats are emitted as warnings.
    """
    if method not in NOISE_METHODS:
        raise ParameterError("method", method, "one of " + ", ".join(NOISE_METHODS))
    setting = provable.apply(setting, clip_key="C", m=setting["m"], paper="NbAFL (Wei et al. 2020)",
                             assumption="sensitivity 2C/m of eq. (6)")
    eps_, delta_, C_, m_, N_ = (setting[k] for k in ("eps", "delta", "C", "m", "N"))
    L_ = setting.get("L", 1)
    K_ = setting.get("K")
    scheduled = K_ is not None and K_ < N_
    if method == "paper":
        up = sigma_uplink(eps_, delta_, C_, m_, L_)
        down = (sigma_downlink_k(eps_, delta_, C_, m_, N_, K_, T, L_) if scheduled
                else sigma_downlink(eps_, delta_, C_, m_, N_, T, L_))
    else:
        up = sigma_uplink_tight(eps_, delta_, C_, m_, L_)
        down = (sigma_downlink_k_tight(eps_, delta_, C_, m_, N_, K_, int(round(max(T, 1))), L_) if scheduled
                else sigma_downlink_tight(eps_, delta_, C_, m_, N_, T, L_))
    return {"uplink": float(up), "server": float(down)}


NOISE_METHODS = ("paper", "tight")


def with_tight_z(setting: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """``setting`` plus ``z`` (:func:`tight_noise_multiplier` of its eps, delta) when ``variant`` uses the
    ``tight`` reading and no ``z`` is given, so ``--variant tight`` needs nothing extra."""
    out = dict(setting)
    if "tight" in NOTATION.variant_names(variant) and out.get("z") is None:
        out["z"] = tight_noise_multiplier(out["eps"], out["delta"])
    return out




# ---------------------------------------------------------------------------------------------------------
# Claims (spec 002 section 4: S1-S26, plus F18/F19/F42 identities and Remark 5)
# ---------------------------------------------------------------------------------------------------------
from fedbound.bounds.claims import Claim, Region  # noqa: E402  (claims need the theorems above)

TV_CONSTANTS = {"Theta": 2.0, "l": 0.1, "beta": 1.0, "rho": 1.0, "B": 1.0, "mu": 4.0}
"""Loss constants assumed by spec 002's test vectors (the paper states none, E21)."""
TV1 = {"eps": 60.0, "delta": 0.01, "C": 20.0, "m": 100, "N": 50, "T": 25.0, "L": 1, **TV_CONSTANTS}
_INTS = frozenset({"m", "N", "K", "L"})
_LOSS_RANGES = {"Theta": (0.1, 10, "log"), "l": (0.01, 0.5, "log"), "beta": (0.1, 10, "log"),
                "rho": (0.05, 2, "log"), "B": (1.0, 2.0), "mu": (1.0, 40, "log")}
_PRIV_RANGES = {"eps": (0.5, 200, "log"), "delta": (1e-6, 0.5, "log"), "C": (1, 50, "log"),
                "m": (10, 1000), "N": (2, 200), "L": (1, 4)}


def _value(th: Evaluable, v: dict[str, Any], variant: str = "paper", **kw: Any) -> np.ndarray:
    return np.asarray(th.evaluate({k: x for k, x in v.items() if not k.startswith("_")}, variant=variant,
                                  **kw).value, dtype=float)


def _admissible(v: dict[str, Any]) -> Any:
    return CONTRACTION_P.evaluate({k: v[k] for k in ("l", "mu", "rho", "B")}).admissible


_ADMISSIBLE = (("0 < P < 1", _admissible),)
ADMISSIBLE = Region({**_PRIV_RANGES, "T": (1, 200), **_LOSS_RANGES}, where=_ADMISSIBLE, integers=_INTS,
                    doc="admissible: 0 < P < 1, positive constants, B >= 1")
PRIVACY = Region({**_PRIV_RANGES, "T": (0.5, 300)}, integers=_INTS)


def _region(base: Region, **changes: Any) -> Region:
    fields = {"ranges": dict(base.ranges), "fixed": dict(base.fixed), "derived": base.derived,
              "where": base.where, "integers": base.integers, "points": base.points, "doc": base.doc}
    for key, val in changes.items():
        if key in ("ranges", "fixed"):
            fields[key] = {**fields[key], **val}
        elif key == "drop":
            fields["ranges"] = {k: r for k, r in fields["ranges"].items() if k not in val}
        elif key in ("derived", "where"):
            fields[key] = tuple(fields[key]) + tuple(val)
        else:
            fields[key] = val
    return Region(**fields)


def _threshold_60(v: dict[str, Any]) -> Any:
    """eps/(-ln(1 - K/N)): (60) holds for T above it (inf at K = N: then always)."""
    with np.errstate(divide="ignore"):
        return v["eps"] / -np.log1p(-np.asarray(v["K"], float) / v["N"])


_KSCHED = Region({**_PRIV_RANGES, "N": (2, 100), "_k": (0.05, 1.0), "_t": (0.01, 3.0, "log"),
                  **_LOSS_RANGES},
                 derived=(("K", lambda v: max(1, int(round(v["_k"] * v["N"])))),
                          ("T", lambda v: float(np.where(v["K"] < v["N"], _threshold_60(v), v["eps"] / 3))
                           * (1 + v["_t"]))),
                 integers=_INTS, doc="K-scheduling settings inside condition (60)")


def _thm1_reduction(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    a = _value(SIGMA_DOWNLINK_K, {**v, "K": v["N"]}, variant)
    bb = _value(SIGMA_DOWNLINK, v)
    b1 = _value(KSCHED_B, {**v, "K": v["N"]}, variant)
    g = _value(KSCHED_GAMMA, {**v, "K": v["N"]}, variant)
    ok = np.isclose(a, bb, rtol=1e-9, atol=1e-15) and np.isclose(b1, 1, rtol=1e-12) and np.isclose(
        g, v["eps"] / (v["L"] * np.sqrt(v["N"])), rtol=1e-12)
    return bool(ok), f"sigma_D^(K=N) = {float(a):.12g}, sigma_D = {float(bb):.12g}, b = {float(b1):.12g}"


def _threshold_equivalence(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    g, b_ = _value(KSCHED_GAMMA, v, variant), _value(KSCHED_B, v, variant)
    lhs = v["T"] > v["eps"] / g
    rhs = v["T"] / b_ > v["L"] * np.sqrt(v["K"])
    near = abs(v["T"] - v["eps"] / g) < 1e-9 * v["T"]
    return bool(lhs == rhs or near), f"T > eps/gamma is {bool(lhs)}, T/b > L sqrt(K) is {bool(rhs)}"


def _beyond_gamma(v: dict[str, Any]) -> float:
    return float(v["eps"] / _value(KSCHED_GAMMA, v) * (1 + 1e-9))


def _non_private_limit(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    """h(T) - P^T Theta, the privacy term, vanishes like 1/eps: below 1e-6 Theta at eps = 1e12 (an absolute
    P^T Theta itself may be far smaller than the rounding of h)."""
    h_, limit = _value(BOUND, v, variant), _value(CONTRACTION_P, v) ** v["T"] * v["Theta"]
    ok = abs(h_ - limit) <= 1e-6 * v["Theta"]
    return bool(ok), f"h = {float(h_):.12g}, P^T Theta = {float(limit):.12g}"


def _q_above_p(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    q_, p_ = _value(CONTRACTION_Q, v), _value(CONTRACTION_P, v)
    return bool(q_ > p_), f"Q = {float(q_):.10g}, P = {float(p_):.10g}"


_TV3 = {**TV1, "eps": 6.0, "K": 20}
_F36 = ((6, 25), (6, 60), (10, 40), (60, 25), (60, 150), (100, 300))
_T25 = lambda v: v["L"] * np.sqrt(v["N"])  # noqa: E731

CLAIMS: tuple[Claim, ...] = (
    Claim("S1", "c(delta) decreases in delta", GAUSSIAN_C, "decreasing", Region({"delta": (1e-12, 0.999,
          "log")}),
          wrt="delta", source="F4"),
    Claim("S2a", "sigma_U is linear in C", SIGMA_UPLINK, "homogeneous", PRIVACY, wrt="C", degree=1,
          source="F10"),
    Claim("S2b", "sigma_U is linear in L", SIGMA_UPLINK, "homogeneous", PRIVACY, wrt="L", degree=1,
          source="F10"),
    Claim("S2c", "sigma_U is proportional to 1/m", SIGMA_UPLINK, "homogeneous", PRIVACY, wrt="m", degree=-1,
          source="F10"),
    Claim("S2d", "sigma_U is proportional to 1/eps", SIGMA_UPLINK, "homogeneous", PRIVACY, wrt="eps",
          degree=-1, source="F10"),
    Claim("S3a", "sigma_D = 0 for T <= L sqrt(N)", SIGMA_DOWNLINK, "compare",
          _region(PRIVACY, ranges={"_f": (0.0, 1.0)}, drop=("T",), derived=(("T",
          lambda v: v["_f"] * _T25(v)),)),
          other=0.0, op="==", source="Theorem 1, F11"),
    Claim("S3b", "sigma_D is strictly increasing in T for T > L sqrt(N) (continuous at the threshold)",
          SIGMA_DOWNLINK, "increasing", PRIVACY, wrt="T", line=(lambda v: _T25(v) * (1 + 1e-9), 400.0),
          source="Theorem 1, F11, F43"),
    Claim("S4a", "sigma_D is strictly decreasing in N where T > L sqrt(N)", SIGMA_DOWNLINK, "decreasing",
          _region(PRIVACY, ranges={"T": (30, 300)}), wrt="N", line=(2, lambda v: (v["T"] / v["L"]) ** 2 - 1),
          source="Theorem 1 discussion"),
    Claim("S4b", "sigma_D is strictly decreasing in L where T > L sqrt(N)", SIGMA_DOWNLINK, "decreasing",
          _region(PRIVACY, ranges={"T": (30, 300), "N": (2, 50)}), wrt="L",
          line=(1, lambda v: v["T"] / np.sqrt(v["N"]) - 1e-9), source="Theorem 1 discussion"),
    Claim("S5a", "sigma_A is non-decreasing in T", SIGMA_AGGREGATE, "increasing", PRIVACY, wrt="T",
          strict=False, source="(13) corrected"),
    Claim("S5b", "sigma_A is strictly decreasing in N", SIGMA_AGGREGATE, "decreasing", PRIVACY, wrt="N",
          source="(13) corrected"),
    Claim("F42", "sigma_A^2 = sigma_D^2 + sigma_U^2 / N", SIGMA_AGGREGATE, "compare", PRIVACY,
          other=lambda v: np.sqrt(_value(SIGMA_DOWNLINK, v) ** 2 + _value(SIGMA_UPLINK, v) ** 2 / v["N"]),
          op="==", source="F11, F12"),
    Claim("F18", "(14) in kappa form equals the recursive form with s = cCT/(m sqrt(N) eps)", BOUND,
          "compare",
          ADMISSIBLE, other=BOUND_EQ14, op="==", source="F17, F18"),
    Claim("S8a", "h(0) = Theta", BOUND, "compare", _region(ADMISSIBLE, fixed={"T": 0.0}, drop=("T",)),
          other=lambda v: v["Theta"], op="==", source="F17"),
    Claim("S8b", "h'(0) = Theta ln P < 0", BOUND_DT, "compare", _region(ADMISSIBLE, fixed={"T": 0.0},
          drop=("T",)),
          other=lambda v: v["Theta"] * np.log(_value(CONTRACTION_P, v)), op="==", rtol=1e-7, source="F20"),
    Claim("S9", "non-private limit: h(T) -> P^T Theta as eps -> infinity (the privacy term is below "
          "1e-6 Theta at eps = 1e12)", BOUND, "predicate",
          _region(ADMISSIBLE, fixed={"eps": 1e12}, drop=("eps",)),
          other=_non_private_limit, source="Remark 4"),
    Claim("S10", "h is strictly decreasing in eps (Remark 2)", BOUND, "decreasing", ADMISSIBLE, wrt="eps",
          source="Remark 2"),
    Claim("S11", "h is strictly decreasing in N (Remark 3)", BOUND, "decreasing", ADMISSIBLE, wrt="N",
          source="Remark 3"),
    Claim("S12a", "h is strictly increasing in C (no interior optimal C: the bound has no clipping bias)",
          BOUND, "increasing", ADMISSIBLE, wrt="C", source="S12"),
    Claim("S12b", "h is strictly decreasing in delta", BOUND, "decreasing", ADMISSIBLE, wrt="delta",
          source="S12"),
    Claim("S12c", "h is strictly decreasing in m", BOUND, "decreasing", ADMISSIBLE, wrt="m", source="S12"),
    Claim("S12d", "h is strictly increasing in Theta", BOUND, "increasing", ADMISSIBLE, wrt="Theta",
          source="S12"),
    Claim("S12e", "h is strictly increasing in beta", BOUND, "increasing", ADMISSIBLE, wrt="beta",
          source="S12"),
    Claim("S13", "h is strictly quasi-convex (unimodal) in T >= 0 (Remark 4: an optimal T exists)", BOUND,
          "unimodal", ADMISSIBLE, wrt="T", line=(0.0, 2000.0), line_points=400, source="F21, Remark 4"),
    Claim("S14", "h is convex in T (the paper's reading of (15)); true on [0, T_Theta]", BOUND_D2T, "compare",
          _region(ADMISSIBLE, ranges={"_f": (0.0, 1.0)}, drop=("T",),
                  derived=(("T", lambda v: v["_f"] * _value(T_THETA, v)),)),
          other=0.0, op=">", source="(15), F21, E14",
          fails_in="T > T_Theta for some settings, e.g. beta = 10",
          counterexamples=(({**TV1, "beta": 10.0, "T": 100.0}, "paper"),)),
    Claim("S17", "(15) as printed equals the sympy second derivative of (14)", BOUND_D2T, "compare",
          ADMISSIBLE,
          other=BOUND_D2T_EQ15, op="==", rtol=1e-7, source="(15), F19"),
    Claim("E8", "the regime-aware bound (E8) is unimodal in T too", BOUND, "unimodal", ADMISSIBLE, wrt="T",
          variant="regime_aware", line=(0.0, 2000.0), line_points=400, source="E8"),
    Claim("S18", "Lemma 4 reduces to Theorem 1 at K = N (b = 1, gamma = eps/(L sqrt(N)))", SIGMA_DOWNLINK_K,
          "predicate", PRIVACY, other=_thm1_reduction, source="F25-F27"),
    Claim("S19a", "b >= 1 inside (60)", KSCHED_B, "compare", _KSCHED, other=1.0, op=">=", source="F25"),
    Claim("S19b", "b is strictly decreasing in K inside (60)", KSCHED_B, "decreasing", _KSCHED, wrt="K",
          line=(1, lambda v: v["N"]), source="F25"),
    Claim("S19c", "T > eps/gamma iff T/b > L sqrt(K)", KSCHED_B, "predicate", _KSCHED,
          other=_threshold_equivalence, source="F26, E11"),
    Claim("S20", "sigma_D^(K) is increasing in T beyond eps/gamma", SIGMA_DOWNLINK_K, "increasing", _KSCHED,
          wrt="T", line=(_beyond_gamma, lambda v: 4 * _beyond_gamma(v)), source="F27"),
    Claim("S21", "2cC/(mKu) (twice the noise of (17)) is strictly increasing in K inside (60)", S_K,
          "increasing", _KSCHED, wrt="K", line=(1, lambda v: v["N"]), source="F29, F32, E9"),
    Claim("S22a", "Q(K) > P for all K", CONTRACTION_Q, "predicate",
          Region({"N": (2, 200), "_k": (0, 1), **_LOSS_RANGES},
                 derived=(("K", lambda v: max(1, int(round(v["_k"] * v["N"])))),), integers=_INTS),
          other=_q_above_p, source="F33"),
    Claim("S22b", "Q is strictly decreasing in K", CONTRACTION_Q, "decreasing",
          Region({"N": (2, 200), **_LOSS_RANGES}, integers=_INTS), wrt="K", line=(1, lambda v: v["N"]),
          source="F33"),
    Claim("S23a", "h_K is strictly decreasing in eps while (T, K, N, eps) stays in (60)", K_BOUND,
          "decreasing",
          _KSCHED, wrt="eps", line=(0.5, 200.0), source="Theorem 3"),
    Claim("S23b", "h_K is strictly decreasing in N while (T, K, N, eps) stays in (60)", K_BOUND, "decreasing",
          _KSCHED, wrt="N", line=(lambda v: v["K"], 400), source="Theorem 3"),
    Claim("S24", "some K < N beats K = N (Remark 5, Fig. 10)", K_BOUND, "beats_upper_end",
          Region(points=tuple({**TV1, "eps": float(e), "T": float(t)} for e, t in _F36)), wrt="K",
          line=(1, lambda v: v["N"]), source="Remark 5, F36",
          fails_in="(eps, T) = (60, 500) with the paper's formula; every F36 setting under two-sided "
                   "amplification (E9)",
          counterexamples=(({**TV1, "eps": 60.0, "T": 500.0}, "paper"), ({**_TV3, "T": 25.0}, "two_sided"),
                           ({**_TV3, "T": 60.0}, "two_sided"))),
    Claim("R5", "an optimal K strictly inside the feasible set exists (Remark 5)", K_BOUND,
          "interior_minimum",
          Region(points=({**TV1, "eps": 6.0, "T": 60.0},)), wrt="K", line=(1, lambda v: v["N"]),
          source="Remark 5, F36",
          fails_in="TV3 (eps = 6, T = 25): the argmin is the domain edge K = 11 (E9 artifact); under "
                   "two-sided amplification the argmin is K = N",
          counterexamples=(({**TV1, "eps": 6.0, "T": 25.0}, "paper"), ({**TV1, "eps": 6.0, "T": 60.0},
                                                                       "two_sided"))),
    Claim("S25", "scheduling beats full participation for large T: h_K(T, K) < h(T)", K_BOUND, "compare",
          Region(points=tuple({**TV1, "eps": 60.0, "K": 20, "T": float(t)} for t in (118, 150, 200, 300, 600))
                 + tuple({**TV1, "eps": 6.0, "K": 20, "T": float(t)} for t in (12, 25, 60, 100))),
          other=BOUND, op="<", source="Fig. 9 (regression only: confounded by E12)"),
    Claim("S26", "h_K is unimodal in T (implied by 'retains the properties'); true at K = N", K_BOUND,
          "unimodal", _region(ADMISSIBLE, drop=("T",), ranges={"N": (2, 100)}, derived=(("K",
          lambda v: v["N"]),)),
          wrt="T", line=(1.0, 1500.0), line_points=300, source="Theorem 3, F37",
          fails_in="K < N, e.g. eps = 60, K = 40 (local maximum at T = 41)",
          counterexamples=(({**TV1, "K": 40}, "paper"),)),
)
"""Every declared claim of NbAFL (paper claims and our identities), checked by fedbound.bounds.claims."""
CLAIMS_BY_ID = {c.id: c for c in CLAIMS}
