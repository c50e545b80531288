"""UDP's privacy accounting, numerically: the per-round log-moments, the delta a sigma sequence achieves, the
smallest sigma that meets (eps, delta), and Theorem 4's budget bookkeeping (seed 003, Secs. 3.2-3.3, 4.3).

K. Wei et al., "User-Level Privacy-Preserving Federated Learning: Analysis and Performance Optimization",
IEEE TMC (arXiv 2003.00229).  Every quantity depends on sigma and the sensitivity Delta_l only through the
noise multiplier z = sigma / Delta_l.

Three per-round log-moments ``alpha(lambda)`` (integer moment order lambda >= 1):

* ``"approx"``: eq. (15), q lambda (lambda + 1) / (2 z^2) -- the paper's accountant.  It is an approximation,
  not a bound (e^x - 1 >= x); it upper-bounds ``"exact"`` only while x = lambda / (2 z^2) <= 0.75.
* ``"exact"``: ln D_{nu1,nu0} of eqs. (7)/(14), the binomial sum (what the paper's pair (nu0, nu1) gives;
  it models a *hidden* selection where a non-selected client would still publish pure noise).
* ``"release"``: ln(1 - q + q e^{lambda(lambda+1)/(2 z^2)}), the exact moment of what Algorithm 1 releases
  to the server, which sees who uploads: nothing with probability 1 - q, the Gaussian otherwise.

Decisions (seed text vs the spec, recorded here):

* Theorem 1's last step (eq. (21)) runs the wrong way: the paper's sigma meets a larger delta than claimed
  (:func:`delta_achieved_paper`).  We keep eq. (10) as "paper" and add the corrected closed form and the
  numeric calibrations; the seed text was re-read for (18)-(21) to confirm.
* The adversary is the server, which draws the K-subset itself (Sec. 2.1, Alg. 1).  The sampling
  amplification of the pair (nu0, nu1) therefore does not apply; the *tight* calibration
  (:func:`sigma_tight`) is the Renyi DP of the release model, alpha(a) = ln(1 - q + q e^{a(a-1)/(2 z^2)}) /
  (a - 1) at every order a > 1, converted with fedbound.accounting's optimal RDP -> (eps, delta) conversion.
* Budget exhaustion in Theorem 4 (eq. (25) with a non-positive denominator) is an error; the authors' code
  reuses the last sigma, which spends more than eps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import integrate, optimize
from scipy.special import gammaln, logsumexp

from fedbound.checks import check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import InfeasibleError, ParameterError, PrivacyBudgetExceeded

__all__ = [
    "ACCOUNTANTS",
    "log_moment_approx",
    "log_moment_exact",
    "log_moment_reverse",
    "log_moment_release",
    "log_delta_from_sigmas",
    "delta_from_sigmas",
    "schedule_delta",
    "delta_achieved_paper",
    "sigma_numeric",
    "sigma_tight",
    "tight_orders",
    "validity_x",
    "budget_phi",
    "budget_phi_corrected",
    "sigma_crd",
    "eps_spent",
]

ACCOUNTANTS = ("approx", "exact", "release")
LAM_MAX = 256


def _z(sigma: Any, sens: Any) -> np.ndarray:
    s = check_real("sigma", sigma, 0.0, low_open=True)
    d = check_real("sens", sens, 0.0)
    return d / s  # 1/z (0 allowed: Delta_l = 0 means no privacy loss)


def _accountant(accountant: str) -> None:
    if accountant not in ACCOUNTANTS:
        raise ParameterError("accountant", accountant, "one of " + ", ".join(ACCOUNTANTS))


def log_moment_approx(lam: Any, q: Any, sigma: Any, sens: Any) -> float | np.ndarray:
    """alpha(lambda) ~= q lambda (lambda + 1) Delta_l^2 / (2 sigma^2): seed 003, eq. (15) (approximation)."""
    lam_ = check_int("lam", lam, 1)
    qq = check_probability("q", q, allow_one=True)
    inv_z = _z(sigma, sens)
    return scalar_or_array(qq * lam_ * (lam_ + 1) * inv_z**2 / 2.0)


def log_moment_release(lam: Any, q: Any, sigma: Any, sens: Any) -> float | np.ndarray:
    """ln(1 - q + q e^y), y = lambda (lambda + 1) Delta_l^2 / (2 sigma^2): the exact log-moment of Alg. 1's
    release (nothing w.p. 1 - q, Gaussian w.p. q; seed 003 Alg. 1, eqs. (5)-(7) applied to it)."""
    lam_ = check_int("lam", lam, 1)
    qq = check_probability("q", q, allow_one=True)
    inv_z = _z(sigma, sens)
    return scalar_or_array(_release(lam_.astype(float), qq, inv_z))


def _release(lam: np.ndarray, q: np.ndarray, inv_z: np.ndarray) -> np.ndarray:
    y = lam * (lam + 1.0) * inv_z**2 / 2.0
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log(q) + y, np.log1p(-q))


def _exact(lam: int, q: float, inv_z: float) -> float:
    """ln sum_l C(lam+1, l) (1-q)^(lam+1-l) q^l e^{l(l-1)/(2 z^2)}: eq. (14), second line."""
    n = lam + 1
    ell = np.arange(n + 1, dtype=float)
    log_binom = gammaln(n + 1) - gammaln(ell + 1) - gammaln(n - ell + 1)
    rest = n - ell
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(rest > 0, rest * (np.log1p(-q) if q < 1 else -np.inf), 0.0)
        terms = log_binom + tail + ell * math.log(q) + ell * (ell - 1) * inv_z**2 / 2.0
    return float(max(logsumexp(terms), 0.0))


def log_moment_exact(lam: Any, q: Any, sigma: Any, sens: Any) -> float | np.ndarray:
    """alpha(lambda) = ln D_{nu1,nu0}, the binomial sum of seed 003 eq. (14) (exact for the pair (6)-(8))."""
    lam_ = check_int("lam", lam, 1)
    qq = check_probability("q", q, allow_one=True)
    inv_z = _z(sigma, sens)
    lam_b, q_b, z_b = np.broadcast_arrays(lam_, qq, inv_z)
    out = np.array(
        [
            _exact(int(a), float(b), float(c))
            for a, b, c in zip(lam_b.ravel(), q_b.ravel(), z_b.ravel(), strict=True)
        ]
    )
    return scalar_or_array(out.reshape(lam_b.shape))


def log_moment_reverse(lam: int, q: float, sigma: float, sens: float) -> float:
    """ln D_{nu0,nu1} = ln E_{nu0}[(nu1/nu0)^(-lambda)] by quadrature: seed 003 eq. (8) (Lemma 1, other side).

    In units of sigma the likelihood ratio is 1 - q + q e^{u s - s^2/2} with u ~ N(0, 1), s = Delta_l/sigma
    (eq. (14)'s first line); the integrand is centred between u = 0 and u = -lambda s.
    """
    lam_ = int(check_int("lam", lam, 1))
    qq = float(check_probability("q", q, allow_one=True))
    s = float(_z(sigma, sens))

    def integrand(u: float) -> float:
        log_ratio = np.logaddexp(math.log(qq) + u * s - s * s / 2.0, math.log1p(-qq) if qq < 1 else -np.inf)
        return math.exp(-u * u / 2.0 - lam_ * log_ratio) / math.sqrt(2.0 * math.pi)

    lo, hi = -lam_ * s - 14.0, 14.0 + s
    value, _ = integrate.quad(integrand, lo, hi, limit=400, epsabs=0.0, epsrel=1e-12)
    return math.log(value)


def _per_round(accountant: str, lams: np.ndarray, q: float, inv_z: np.ndarray) -> np.ndarray:
    """Per-round log-moments, shape (len(inv_z), len(lams))."""
    if accountant == "approx":
        return q * np.outer(inv_z**2, lams * (lams + 1.0)) / 2.0
    if accountant == "release":
        return _release(lams[None, :], np.asarray(q), inv_z[:, None])
    return np.stack([_exact_orders(lams, q, float(z)) for z in inv_z])


def _exact_orders(lams: np.ndarray, q: float, inv_z: float) -> np.ndarray:
    """:func:`_exact` for many orders at once (a lambda x l matrix of the binomial terms)."""
    n = lams[:, None] + 1.0
    ell = np.arange(int(lams.max()) + 2, dtype=float)[None, :]
    rest = n - ell
    with np.errstate(divide="ignore", invalid="ignore"):
        log_binom = gammaln(n + 1) - gammaln(ell + 1) - gammaln(np.maximum(rest, 0) + 1)
        tail = np.where(rest > 0, rest * (np.log1p(-q) if q < 1 else -np.inf), 0.0)
        terms = np.where(
            rest >= 0, log_binom + tail + ell * math.log(q) + ell * (ell - 1) * inv_z**2 / 2.0, -np.inf
        )
    return np.maximum(logsumexp(terms, axis=1), 0.0)


def log_delta_from_sigmas(
    eps: float,
    q: float,
    sigmas: Sequence[float] | np.ndarray,
    sens: float,
    accountant: str = "approx",
    lam_max: int = LAM_MAX,
) -> tuple[float, int]:
    """(ln delta, lambda*) = min over integer lambda in [1, lam_max] of sum_t alpha_t(lambda) - lambda eps:
    seed 003, eqs. (16)-(17) (eq. (26) for rounds with different sigma)."""
    _accountant(accountant)
    e = float(check_real("eps", eps, 0.0, low_open=True))
    qq = float(check_probability("q", q, allow_one=True))
    n = int(check_int("lam_max", lam_max, 1))
    sig = check_real("sigmas", np.atleast_1d(np.asarray(sigmas, dtype=float)), 0.0, low_open=True)
    if sig.ndim != 1 or sig.size == 0:
        raise ParameterError("sigmas", sigmas, "a non-empty 1-D sequence of noise stds")
    unique, counts = np.unique(sig, return_counts=True)
    inv_z = float(check_real("sens", sens, 0.0)) / unique
    lams = np.arange(1, n + 1, dtype=float)
    total = counts @ _per_round(accountant, lams, qq, inv_z)
    log_d = total - lams * e
    best = int(np.argmin(log_d))
    return float(log_d[best]), best + 1


def delta_from_sigmas(
    eps: float,
    q: float,
    sigmas: Sequence[float] | np.ndarray,
    sens: float,
    accountant: str = "approx",
    lam_max: int = LAM_MAX,
) -> float:
    """delta achieved by the noise stds ``sigmas`` (one per round) at eps: seed 003, eq. (17), minimised over
    integer orders.  A value >= 1 means no guarantee (kept, not clipped, so the shortfall is visible)."""
    log_d, _ = log_delta_from_sigmas(eps, q, sigmas, sens, accountant, lam_max)
    return math.exp(min(log_d, 700.0))


def delta_achieved_paper(eps: Any, delta: Any) -> float | np.ndarray:
    """delta^((1 - eps/(4 ln(1/delta)))^2): what eq. (10)'s sigma achieves under the paper's own accountant
    (eqs. (16)-(19) at the continuous order lambda* = 2 ln(1/delta)/eps - 1/2; valid while lambda* >= 1, i.e.
    eps <= 4 ln(1/delta)/3).  Seed 003, Theorem 1 with the last step (21) corrected."""
    e = check_real("eps", eps, 0.0, low_open=True)
    d = check_probability("delta", delta)
    lam_ = -np.log(d)
    return scalar_or_array(np.exp(-lam_ * (1.0 - e / (4.0 * lam_)) ** 2))


def _solve_z(log_gap: Any, z0: float) -> float:
    """The smallest z > 0 with log_gap(z) <= 0 for log_gap decreasing in z (bracket, then brentq on ln z)."""
    lo, hi = math.log(z0) - 1.0, math.log(z0) + 1.0
    for _ in range(200):
        if log_gap(math.exp(lo)) > 0:
            break
        lo -= 1.0
    for _ in range(200):
        if log_gap(math.exp(hi)) <= 0:
            break
        hi += 1.0
    else:
        raise InfeasibleError(
            "no noise std meets the target: the accountant's delta stays above it for "
            "every sigma (raise lam_max, eps or delta)"
        )
    root = optimize.brentq(
        lambda x: log_gap(math.exp(x)), lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500
    )
    return math.exp(root)


def sigma_numeric(
    eps: float,
    delta: float,
    q: float,
    T: int,
    sens: float,
    accountant: str = "approx",
    lam_max: int | None = None,
) -> float:
    """The smallest constant sigma whose T rounds meet (eps, delta) under ``accountant`` over integer orders
    lambda in [1, lam_max]: seed 003, eqs. (16)-(17) solved numerically instead of (18)-(21).

    ``lam_max`` defaults to max(256, ceil(4 ln(1/delta)/eps)): the tail bound (17) can only reach delta at
    orders lambda > ln(1/delta)/eps, which exceed 256 for small eps and delta."""
    _accountant(accountant)
    e = float(check_real("eps", eps, 0.0, low_open=True))
    d = float(check_probability("delta", delta))
    t = int(check_int("T", T, 1))
    s = float(check_real("sens", sens, 0.0, low_open=True))
    qq = float(check_probability("q", q, allow_one=True))
    z0 = math.sqrt(2.0 * qq * t * math.log(1.0 / d)) / e
    log_target = math.log(d)
    if lam_max is None:
        lam_max = max(LAM_MAX, math.ceil(4.0 * -log_target / e))
    n = int(check_int("lam_max", lam_max, 1))
    lams = np.arange(1, min(n, DENSE_ORDERS) + 1, dtype=float)

    def objective(orders: np.ndarray, z: float) -> np.ndarray:
        return t * _per_round(accountant, orders, qq, np.array([1.0 / z]))[0] - orders * e

    def gap(z: float) -> float:
        if n <= DENSE_ORDERS:
            return float(np.min(objective(lams, z))) - log_target
        return _convex_min(lambda orders: objective(orders, z), n) - log_target

    return _solve_z(gap, z0) * s


DENSE_ORDERS = 4096
"""Up to this many integer orders the minimum over lambda is taken on all of them; beyond (eps so small that
lambda > ln(1/delta)/eps runs to millions), by :func:`_convex_min`."""


def _convex_min(f: Any, n: int) -> float:
    """min over the integers 1..n of ``f`` (vectorised over an array of orders), for f convex in lambda: the
    first lambda where f(lambda + 1) - f(lambda) >= 0, by bisection (2 log2 n evaluations).  T x alpha(lambda)
    - lambda eps is convex in lambda for the moments here: the approximate one is quadratic, and the exact
    and the release's are log-moment-generating functions, convex in lambda (Hölder)."""
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        a, b = f(np.array([mid, mid + 1.0]))
        lo, hi = (lo, mid) if b - a >= 0 else (mid + 1, hi)
    return float(f(np.array([float(lo)]))[0])


def tight_orders() -> np.ndarray:
    """Renyi orders for the tight calibration: fedbound.accounting's default grid and every integer 2..257."""
    from fedbound.accounting import DEFAULT_ORDERS

    return np.union1d(DEFAULT_ORDERS, np.arange(2.0, LAM_MAX + 2.0))


def _release_rdp(orders: np.ndarray, q: float, z: float) -> np.ndarray:
    return _release(orders - 1.0, np.asarray(q), np.asarray(1.0 / z)) / (orders - 1.0)


def release_log_delta(eps: float, q: float, T: Any, z: Any) -> np.ndarray:
    """ln delta(eps) of T rounds of Algorithm 1's release at noise multiplier z, exactly.

    The server sees who uploads (seed 003, Alg. 1), so the number j of a client's uploads is part of the
    output and independent of its data: the privacy profile is the Binomial(T, q) mixture of the T-fold
    Gaussian profiles, and j Gaussian releases are exactly one with sensitivity sqrt(j) (Dong, Roth & Su
    2022, Cor. 3.3): delta(eps) = sum_j C(T, j) q^j (1-q)^(T-j) delta_G(eps; sqrt(j)/z), with delta_G the
    analytic Gaussian profile (Balle & Wang 2018, Thm 8).  No bound, no discretisation.  Vectorised over
    equally shaped ``T`` and ``z``.
    """
    T_arr, z_arr = np.broadcast_arrays(np.asarray(T, dtype=float), np.asarray(z, dtype=float))
    terms = _release_terms(np.full(T_arr.size, float(q)), T_arr.ravel())
    rows = np.arange(T_arr.size)
    return _release_rows(terms, rows, np.full(T_arr.size, float(eps)), z_arr.ravel()).reshape(T_arr.shape)


SCHEDULE_POINTS = 200_000
"""Grid points of sum_t z_t^-2 in :func:`schedule_delta` (its bracket is within rounds / points of it)."""


def schedule_delta(eps: float, q: float, inv_z2: Any, points: int = SCHEDULE_POINTS) -> tuple[float, float]:
    """(lower, upper): a bracket of the exact delta(eps) of Algorithm 1's release over rounds whose noise
    multipliers differ (CRD, seed 003 Theorem 4 eq. (25)), averaged over the random selection: the server
    sees who uploads and a client uploads in round t with probability q, independently across rounds, so
    delta = E_S[delta_G(eps; mu_S)] with mu_S^2 = sum_{t in S} z_t^-2 (Gaussian releases compose to one,
    Dong, Roth & Su 2022, Cor. 3.3; delta_G the analytic Gaussian, Balle & Wang 2018, Thm 8).  The
    distribution of mu_S^2 is built on a grid of ``points`` steps, once with every z_t^-2 rounded up (delta_G
    grows with mu: an upper bound) and once rounded down (a lower bound).  q = 1: the one Gaussian, exact."""
    from fedbound.accounting.analytic import analytic_gaussian_log_delta

    e = float(check_real("eps", eps, 0.0))
    qq = float(check_probability("q", q, allow_one=True))
    a = check_real("inv_z2", np.atleast_1d(np.asarray(inv_z2, dtype=float)), 0.0)
    total = float(a.sum())
    if total == 0.0:
        return 0.0, 0.0
    if qq == 1.0:
        d = float(np.exp(analytic_gaussian_log_delta(np.asarray(e), np.asarray(1.0 / math.sqrt(total)))))
        return d, d
    n = int(check_int("points", points, 16))
    h = total / n
    out = []
    for steps in (np.floor(a / h), np.ceil(a / h)):
        prob = np.zeros(int(steps.sum()) + 1)
        prob[0] = 1.0
        top = 0
        for k in steps.astype(np.int64):  # each round: no upload (1 - q) or an upload adding k steps (q)
            if k:
                prob[k:top + k + 1] = (1 - qq) * prob[k:top + k + 1] + qq * prob[:top + 1]
                prob[:k] *= 1 - qq
                top += k
        mu2 = np.arange(top + 1) * h
        live = (prob[:top + 1] > 0) & (mu2 > 0)
        with np.errstate(divide="ignore"):
            log_d = analytic_gaussian_log_delta(np.full(int(live.sum()), e), 1.0 / np.sqrt(mu2[live]))
        out.append(float(np.sum(prob[:top + 1][live] * np.exp(log_d))))
    return out[0], out[1]


def _release_terms(q: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row r (q_r, T_r), what :func:`release_log_delta` needs that does not depend on z: the log Binomial
    weights of j uploads (-inf where j > T), sqrt(j), and the bound on the weight of the terms dropped."""
    # |j - qT| >= t has weight <= 2 exp(-2 t^2 / T) (Hoeffding) = 2 e^-700 at t = sqrt(350 T): those terms
    # are bounded by their weight (delta_G <= 1) and added as such, so the result never falls below the exact
    spread = np.sqrt(350.0 * T) + 1.0
    j_lo = np.maximum(1.0, np.floor(q * T - spread))
    width = int(np.max(np.minimum(T, q * T + spread) - j_lo)) + 1
    j = j_lo[:, None] + np.arange(width)[None, :]
    Tc, qc = T[:, None], q[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_w = (gammaln(Tc + 1) - gammaln(j + 1) - gammaln(np.maximum(Tc - j, 0) + 1) + j * np.log(qc)
                 + (Tc - j) * np.where(qc < 1, np.log1p(-qc), 0.0))
        log_w = np.where((j <= Tc) & ((Tc - j == 0) | (qc < 1)), log_w, -np.inf)
    cut = (j_lo > 1) | (j_lo + width - 1 < T)
    dropped = np.where(cut, math.log(2.0) - 700.0, -np.inf)  # the dropped weights, at most
    return log_w, np.sqrt(np.minimum(j, Tc)), dropped


def _release_rows(terms: tuple[np.ndarray, np.ndarray, np.ndarray], rows: np.ndarray, eps: np.ndarray,
                  z: np.ndarray) -> np.ndarray:
    """ln delta(eps_r) of the release at multipliers z_r for the given rows of :func:`_release_terms`."""
    from fedbound.accounting._numerics import logsumexp_rows
    from fedbound.accounting.analytic import analytic_gaussian_log_delta

    log_w, sqrt_j, dropped = terms[0][rows], terms[1][rows], terms[2][rows]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_d = analytic_gaussian_log_delta(eps[:, None], z[:, None] / sqrt_j)
        return np.logaddexp(logsumexp_rows(log_w + log_d), dropped)


def z_exact(eps: Any, delta: Any, q: Any, T: Any) -> np.ndarray:
    """The smallest noise multiplier z whose T rounds of Algorithm 1's release meet (eps, delta), exactly, for
    many settings at once: every argument broadcasts to one shape (no input checks; :func:`sigma_exact` is the
    checked entry).  Per element: z is bracketed in ln z (steps of 1) from sqrt(T) x the analytic Gaussian
    multiplier, then the root of ln(-ln delta(z)) - ln(-ln delta) (nearly linear in ln z; its sign is that of
    :func:`release_log_delta` - ln delta) is found by Illinois regula falsi with Dekker's nudge
    (``fedbound.accounting._numerics.decreasing_root``) to 1e-12 in ln z, about 10 evaluations; the feasible
    end is returned.  Each element's iterates depend on that element alone, so a grid answers what each point
    answers alone (to float rounding)."""
    from fedbound.accounting._numerics import decreasing_root

    e, d, qq, t = (a.ravel() for a in np.broadcast_arrays(*(np.asarray(x, dtype=float)
                                                          for x in (eps, delta, q, T))))
    terms = _release_terms(qq, t)
    log_d = np.log(d)

    def gap(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        # ln(-ln delta(z)) is nearly linear in ln z (-ln delta grows like z^2), so regula falsi converges in
        # a few steps; its sign is that of ln delta(z) - ln delta, the feasibility test itself
        log_delta = _release_rows(terms, rows, e[rows], np.exp(x))
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(-log_d[rows]) - np.log(-log_delta)
        return np.where(log_delta > log_d[rows], np.maximum(g, 1e-300), np.minimum(g, -1e-300))

    every = np.arange(t.size)
    # every one of j <= T uploads is a Gaussian of sensitivity at most sqrt(T)/z, so sqrt(T) x the analytic
    # Gaussian multiplier at (eps, delta) meets delta (to the dropped-tail bound: the loop below checks)
    from fedbound.accounting.analytic import analytic_gaussian_std

    hi = np.log(np.sqrt(t) * np.asarray(analytic_gaussian_std(e, d), dtype=float)) + 1e-9
    g_hi = gap(hi, every)
    while np.any(g_hi > 0):
        bad = np.flatnonzero(g_hi > 0)
        hi[bad] += 1.0
        g_hi[bad] = gap(hi[bad], bad)
    lo = hi - 1.0
    g_lo = gap(lo, every)
    while np.any(g_lo <= 0):
        bad = np.flatnonzero(g_lo <= 0)
        lo[bad] -= 1.0
        if np.min(lo) < math.log(1e-6):  # delta >= P(a client uploads at all): no noise is needed
            k = int(np.argmin(lo))
            raise ParameterError("delta", float(d[k]), f"(0, {-math.expm1(t[k] * math.log1p(-qq[k])):.4g}) "
                                 f"(the chance that a client uploads in {int(t[k])} rounds at q = {qq[k]:g})",
                                 hint="a larger delta is met without any noise")
        g_lo[bad] = gap(lo[bad], bad)
    _, hi = decreasing_root(gap, lo, hi, g_lo, g_hi, 1e-12, nudge=True)
    return np.exp(hi).reshape(np.broadcast_shapes(*(np.shape(x) for x in (eps, delta, q, T))))


def sigma_exact(eps: float, delta: float, q: float, T: Any, sens: float) -> float | np.ndarray:
    """The smallest constant sigma whose T rounds of Algorithm 1's release meet (eps, delta), exactly
    (:func:`release_log_delta`; :func:`z_exact` to 1e-12 in ln z, vectorised over an array of T)."""
    e = float(check_real("eps", eps, 0.0, low_open=True))
    d = float(check_probability("delta", delta))
    qq = float(check_probability("q", q, allow_one=True))
    s = float(check_real("sens", sens, 0.0, low_open=True))
    t = np.atleast_1d(np.asarray(check_int("T", T, 1), dtype=float))
    out = z_exact(e, d, qq, t) * s
    return float(out[0]) if np.ndim(T) == 0 else out


def sigma_tight(eps: float, delta: float, q: float, T: int, sens: float) -> float:
    """The smallest constant sigma whose T rounds of Algorithm 1's release meet (eps, delta): exact since
    issue 23 (:func:`sigma_exact`).  Valid against the server that sees who uploads (seed 003, Alg. 1)."""
    return float(sigma_exact(eps, delta, q, int(check_int("T", T, 1)), sens))


def sigma_tight_rdp(eps: float, delta: float, q: float, T: int, sens: float) -> float:
    """The earlier "tight" sigma: the Renyi DP of the release model (module docstring) and
    fedbound.accounting.rdp_to_dp (optimal conversion, Canonne, Kamath & Steinke 2020).  Valid, but 8-12 %
    more noise than :func:`sigma_exact` needs (its delta is 2-3x below the target)."""
    from fedbound.accounting import rdp_to_dp

    e = float(check_real("eps", eps, 0.0, low_open=True))
    d = float(check_probability("delta", delta))
    t = int(check_int("T", T, 1))
    s = float(check_real("sens", sens, 0.0, low_open=True))
    qq = float(check_probability("q", q, allow_one=True))
    orders = tight_orders()

    def gap(z: float) -> float:
        return math.log(max(float(rdp_to_dp(orders, t * _release_rdp(orders, qq, z), d)), 1e-300)) - math.log(
            e
        )

    z0 = math.sqrt(2.0 * qq * t * math.log(1.0 / d)) / e
    return _solve_z(gap, z0) * s


def validity_x(eps: float, q: float, sigmas: Sequence[float] | np.ndarray, sens: float) -> float:
    """max over rounds of x = lambda* Delta_l^2 / (2 sigma_t^2) at the order lambda* = eps/(2 rho) - 1/2 (at
    least 1), rho = q Delta_l^2 / 2 sum_t sigma_t^-2: eq. (15) upper-bounds the exact moment only for
    x <= 0.75
    (seed 003, eq. (15)'s premise lambda Delta_l^2/(2 sigma^2) << 1)."""
    sig = check_real("sigmas", np.atleast_1d(np.asarray(sigmas, dtype=float)), 0.0, low_open=True)
    s = float(check_real("sens", sens, 0.0))
    rho = float(q) * s * s / 2.0 * float(np.sum(sig**-2.0))
    lam_star = max(float(eps) / (2.0 * rho) - 0.5, 1.0) if rho > 0 else 1.0
    return float(lam_star * s * s / (2.0 * np.min(sig) ** 2))


# ---------------------------------------------------------------------------------------------------------
# Theorem 4: the inverse-variance budget (eq. (25)) and the privacy spent (its inverse)
# ---------------------------------------------------------------------------------------------------------
def _budget_inputs(eps: Any, delta: Any, q: Any, sens: Any) -> tuple[np.ndarray, ...]:
    return (
        check_real("eps", eps, 0.0, low_open=True),
        check_probability("delta", delta),
        check_probability("q", q, allow_one=True),
        check_real("sens", sens, 0.0, low_open=True),
    )


def budget_phi(eps: Any, delta: Any, q: Any, sens: Any) -> float | np.ndarray:
    """Phi_i = eps_i^2 / (2 q Delta_l^2 ln(1/delta_i)): the total inverse variance sum_t sigma_t^-2 that the
    paper's accountant allows (seed 003, Theorem 4, eq. (25)'s denominator; eq. (10) at t = 0)."""
    e, d, qq, s = _budget_inputs(eps, delta, q, sens)
    return scalar_or_array(e**2 / (2.0 * qq * s**2 * -np.log(d)))


def budget_phi_corrected(eps: Any, delta: Any, q: Any, sens: Any) -> float | np.ndarray:
    """Phi_i^corr = 2 (sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))^2 / (q Delta_l^2): the budget under which
    eq. (16)'s accountant really meets (eps, delta) (seed 003, eqs. (18)-(19) solved for rho; Theorem 4 with
    the corrected Theorem 1)."""
    e, d, qq, s = _budget_inputs(eps, delta, q, sens)
    lam_ = -np.log(d)
    gap = e / (np.sqrt(lam_ + e) + np.sqrt(lam_))  # sqrt(L + e) - sqrt(L), without cancellation
    return scalar_or_array(2.0 * gap**2 / (qq * s**2))


def sigma_crd(t: int, T: int, phi: Any, past_inverse_variance: Any) -> float | np.ndarray:
    """sigma^t = sqrt((T - t) / (Phi - sum_{tau < t} (sigma^tau)^-2)): seed 003, Theorem 4, eq. (25) (0-based
    rounds; the remaining budget spread evenly over the T - t rounds still planned).

    ``phi`` and ``past_inverse_variance`` broadcast (per client).  T <= t is a ParameterError (training is
    over); an exhausted budget is PrivacyBudgetExceeded (never a reused sigma).
    """
    tt = int(check_int("t", t, 0))
    total = int(check_int("T", T, tt + 1, hint="Theorem 4 needs rounds left: T > t"))
    p = check_real("phi", phi, 0.0, low_open=True)
    spent = check_real("past_inverse_variance", past_inverse_variance, 0.0)
    left = p - spent
    if np.any(left <= 0):
        raise PrivacyBudgetExceeded(
            f"privacy budget exhausted at round t = {tt}: Phi - sum sigma^-2 = "
            f"{float(np.min(left)):.6g} <= 0 (UDP (Wei et al. 2021), eq. (25)); stop "
            "training instead of reusing a sigma"
        )
    return scalar_or_array(np.sqrt((total - tt) / left))


def sigma_after(
    t: int,
    T: int,
    eps: Any,
    delta: Any,
    q: Any,
    sens: Any,
    past_sigmas: Sequence[float] | np.ndarray,
    calibration: str = "paper",
) -> float | np.ndarray:
    """Theorem 4 as the paper states it (seed 003, eq. (25)): the noise std of round t for a (new) total T,
    given the stds of rounds 0..t-1 (rows: rounds; columns: clients, optional).  ``calibration="corrected"``
    uses the budget under which eq. (16) really meets (eps, delta) (:func:`budget_phi_corrected`)."""
    if calibration not in ("paper", "corrected"):
        raise ParameterError("calibration", calibration, "one of paper, corrected")
    phi = (budget_phi if calibration == "paper" else budget_phi_corrected)(eps, delta, q, sens)
    past = np.asarray(past_sigmas, dtype=float)
    if past.shape[:1] != (int(t),):
        raise ParameterError("past_sigmas", past.shape, f"t = {int(t)} rows, one per past round")
    spent = np.sum(check_real("past_sigmas", past, 0.0, low_open=True) ** -2.0, axis=0) if t else 0.0
    return sigma_crd(t, T, phi, spent)


def eps_spent(sigmas: Sequence[float] | np.ndarray, delta: Any, q: Any, sens: Any) -> float | np.ndarray:
    """eps_spent = Delta_l sqrt(2 q ln(1/delta) sum_tau sigma_tau^-2): the inverse of eq. (25)'s budget (seed
    003, eqs. (26)-(29) with the corrected last step read as the paper's)."""
    sig = check_real("sigmas", np.asarray(sigmas, dtype=float), 0.0, low_open=True)
    d = check_probability("delta", delta)
    qq = check_probability("q", q, allow_one=True)
    s = check_real("sens", sens, 0.0)
    inv = np.sum(sig**-2.0, axis=0)
    return scalar_or_array(s * np.sqrt(2.0 * qq * -np.log(d) * inv))
