"""log A_alpha of the Poisson-subsampled Gaussian mechanism, vectorised over many (alpha, q, z) triples.

Mironov, Talwar & Zhang (2019), "Renyi Differential Privacy of the Sampled Gaussian Mechanism", Sec. 3.3:
for sampling rate q and noise multiplier z (std / L2 sensitivity), the RDP of order alpha is
log(A_alpha)/(alpha-1),

    A_alpha = E_{x ~ N(0, z^2)} [ (1 - q + q exp((2x - 1)/(2 z^2)))^alpha ].

Three evaluation routes, all in log space (the values span hundreds of orders of magnitude):

* integer alpha: the binomial expansion A_alpha = sum_i C(alpha, i) q^i (1-q)^(alpha-i) exp((i^2 - i)/(2 z^2))
  (MTZ 2019 eq. for integer orders).  We sum A_alpha - 1 = sum_{i>=2} C(alpha,i) q^i (1-q)^(alpha-i)
  expm1((i^2-i)/(2z^2)), whose terms are all positive, so tiny q and huge z lose no precision.
* fractional alpha, z not tiny: trapezoidal quadrature of A_alpha - 1 = E[(1+y)^alpha - 1 - alpha y], y =
q(e^u - 1),
  u = x/z - 1/(2z^2) (we subtract alpha*E[y] = 0 so the integrand is non-negative).  The integrand is analytic
  in the strip |Im x| < pi z and is a mixture of unit Gaussians centred in [0, alpha/z], so a step of
  min(0.5, 0.4 z) over [-12, alpha/z + 12] is accurate to ~1e-15 relative.
* fractional alpha, tiny z (the quadrature would need > 4096 nodes): MTZ 2019's two-sided series with
  erfc weights, which converges in about alpha + 40 terms there.

Private helpers; ``fedbound.accounting.rdp`` is the public face.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr, logsumexp

from fedbound.accounting._numerics import LOG_2PI_HALF, log1mexp, log_expm1, logsumexp_rows

_CHUNK = 2_000_000  # elements per temporary 2-D array
_MAX_NODES = 4096
_SERIES_TERMS = 16


def log_a(alpha: np.ndarray, q: np.ndarray, z: np.ndarray) -> np.ndarray:
    """log A_alpha for 1-D arrays of equal length (alpha > 1, q in (0, 1], z > 0); grouped by distinct
    alpha."""
    out = np.empty(alpha.shape)
    full = q >= 1.0
    out[full] = alpha[full] * (alpha[full] - 1.0) / (2.0 * z[full] ** 2)
    part = np.flatnonzero(~full)
    if part.size:
        a = alpha[part]
        order = np.argsort(a, kind="stable")
        values, starts = np.unique(a[order], return_index=True)
        for k, value in enumerate(values):
            stop = starts[k + 1] if k + 1 < len(values) else order.size
            idx = part[order[starts[k]:stop]]
            out[idx] = np.logaddexp(0.0, log_a_minus_one(float(value), q[idx], z[idx]))
    return out


def log_a_batched(alpha: np.ndarray, q: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``log_a`` (same values) with the fractional orders in one quadrature call per node count, not one per
    order: for many distinct orders (a calibration's screening and per-order roots).  Integer orders and the
    series regime (tiny z) go through ``log_a``."""
    out = np.empty(alpha.shape)
    quad = (q < 1.0) & (alpha != np.floor(alpha))
    with np.errstate(divide="ignore", over="ignore"):
        nodes = np.ceil((np.maximum(12.0, alpha / z + 12.0) + 12.0) / np.minimum(0.5, 0.4 * z)) + 1
    quad &= nodes <= _MAX_NODES
    rest = np.flatnonzero(~quad)
    if rest.size:
        out[rest] = log_a(alpha[rest], q[rest], z[rest])
    buckets = _bucket(nodes)
    for n in np.unique(buckets[quad]):
        sel = np.flatnonzero(quad & (buckets == n))
        step = max(1, _CHUNK // int(n))
        for i in range(0, sel.size, step):
            part = sel[i:i + step]
            out[part] = np.logaddexp(0.0, _log_excess_quadrature(alpha[part], q[part], z[part], int(n)))
    return out


def _bucket(nodes: np.ndarray) -> np.ndarray:
    """Node counts rounded up to a grid of ratio 2^(1/4): few distinct quadrature calls, at
    most ~19 % more nodes than the step needs (powers of 2 cost up to 2x)."""
    n = np.clip(nodes, 2, 2 * _MAX_NODES)  # beyond _MAX_NODES (or inf) the series answers: any bucket will do
    return np.maximum(32, np.ceil(2.0 ** (np.ceil(4.0 * np.log2(n)) / 4.0))).astype(int)


def log_a_minus_one(alpha: float, q: np.ndarray, z: np.ndarray) -> np.ndarray:
    """log(A_alpha - 1) for one order and arrays q in (0, 1), z > 0."""
    if float(alpha).is_integer():
        return _chunked(_log_excess_integer, alpha, q, z, int(alpha) - 1)
    x_hi = np.maximum(12.0, alpha / z + 12.0)
    nodes = np.ceil((x_hi + 12.0) / np.minimum(0.5, 0.4 * z)) + 1
    out = np.empty(q.shape)
    series = nodes > _MAX_NODES
    if series.any():
        out[series] = _chunked(_log_excess_series, alpha, q[series], z[series], int(np.ceil(alpha)) + 41)
    buckets = _bucket(nodes)
    for n in np.unique(buckets[~series]):
        sel = ~series & (buckets == n)
        out[sel] = _chunked(_log_excess_quadrature, alpha, q[sel], z[sel], int(n))
    return out


def _chunked(fn, alpha: float, q: np.ndarray, z: np.ndarray, width: int) -> np.ndarray:
    from fedbound.budget import check

    step = max(1, _CHUNK // max(width, 1))
    check("the exact RDP of the sampled Gaussian, a quadrature per order")
    if q.size <= step:
        return fn(alpha, q, z, width)
    out = []
    for i in range(0, q.size, step):
        check("the exact RDP of the sampled Gaussian, a quadrature per order")
        out.append(fn(alpha, q[i:i + step], z[i:i + step], width))
    return np.concatenate(out)


def _log_excess_integer(alpha: float, q: np.ndarray, z: np.ndarray, width: int) -> np.ndarray:
    """log(A - 1) = logsumexp_{i=2..alpha} [log C(alpha,i) + i log q + (alpha-i) log(1-q) + log
    expm1((i^2-i)/(2z^2))]."""
    i = np.arange(2.0, alpha + 1.0)
    log_binom = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(alpha - i + 1.0)
    terms = (log_binom + i * np.log(q)[:, None] + (alpha - i) * np.log1p(-q)[:, None]
             + log_expm1(i * (i - 1.0) / (2.0 * z[:, None] ** 2)))
    return logsumexp_rows(terms)


def _log_binomial_excess(alpha: float | np.ndarray, log1y: np.ndarray) -> np.ndarray:
    """log((1+y)^alpha - 1 - alpha y) for log(1+y) = ``log1y`` > -inf, accurate in every regime (``alpha``: a
    scalar or an array broadcasting against ``log1y``)."""
    out = np.empty(log1y.shape)
    t = alpha * log1y
    with np.errstate(over="ignore"):
        ay = alpha * np.expm1(np.minimum(log1y, 700.0))
    small = np.abs(ay) < 0.05
    large = ~small & (t > 30.0)
    mid = ~small & ~large
    full_alpha = np.broadcast_to(alpha, log1y.shape)
    with np.errstate(divide="ignore"):
        # |alpha y| < 0.05: power series sum_{k>=2} C(alpha,k) y^k = y^2 poly(y) (Horner)
        alpha = full_alpha[small]
        y = ay[small] / alpha
        coef = [alpha * (alpha - 1.0) / 2.0]
        for k in range(3, _SERIES_TERMS + 1):
            coef.append(coef[-1] * (alpha - k + 1.0) / k)
        poly = np.full(y.shape, coef[-1])
        for c in reversed(coef[:-1]):
            poly = poly * y + c
        out[small] = 2.0 * np.log(np.abs(y)) + np.log(poly)
        # moderate: direct difference (the cancellation is bounded once |alpha y| >= 0.05)
        g = np.expm1(t[mid]) - ay[mid]
        out[mid] = np.where(g > 0, np.log(np.maximum(g, 1e-300)), -np.inf)
        # large: t + log(1 - (1 + alpha y) e^-t), log(1 + alpha y) without overflow
        ll, tl, alpha = log1y[large], t[large], full_alpha[large]
        log_1ay = np.where(ll <= 30.0, np.log1p(ay[large]),
                           np.log(alpha) + ll + np.log1p(-(alpha - 1.0) / alpha * np.exp(-ll)))
        out[large] = tl + log1mexp(np.minimum(log_1ay - tl, -1e-300))
    return out


def _log_excess_quadrature(alpha: float | np.ndarray, q: np.ndarray, z: np.ndarray, nodes: int) -> np.ndarray:
    """log(A - 1) by the trapezoidal rule on x in [-12, max(12, alpha/z + 12)] in units of the noise std
    (``alpha``: one order, or one per point)."""
    if np.ndim(alpha):
        alpha = np.asarray(alpha)[:, None]
        x_hi = np.maximum(12.0, alpha[:, 0] / z + 12.0)
        return _log_excess_quadrature_at(alpha, q, z, nodes, x_hi)
    return _log_excess_quadrature_at(alpha, q, z, nodes, np.maximum(12.0, alpha / z + 12.0))


def _log_excess_quadrature_at(alpha, q: np.ndarray, z: np.ndarray, nodes: int, x_hi: np.ndarray
                              ) -> np.ndarray:
    x = -12.0 + (x_hi + 12.0)[:, None] * np.linspace(0.0, 1.0, nodes)[None, :]
    h = (x_hi + 12.0) / (nodes - 1)
    u = x / z[:, None] - 0.5 / z[:, None] ** 2
    log1y = np.logaddexp(np.log1p(-q)[:, None], np.log(q)[:, None] + u)
    log_integrand = _log_binomial_excess(alpha, log1y) - 0.5 * x**2 - LOG_2PI_HALF
    return logsumexp_rows(log_integrand) + np.log(h)


def _log_excess_series(alpha: float, q: np.ndarray, z: np.ndarray, terms: int) -> np.ndarray:
    """log(A - 1) from MTZ 2019 Sec. 3.3's series (fractional alpha): A = sum_i C(alpha,i) [s0_i + s1_i]."""
    i = np.arange(float(terms))
    j = alpha - i
    log_binom = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(j + 1.0)
    sign = gammasgn(j + 1.0)
    lq, l1q = np.log(q)[:, None], np.log1p(-q)[:, None]
    zz = z[:, None]
    z0 = zz**2 * (l1q - lq) + 0.5
    s0 = log_binom + i * lq + j * l1q + (i * i - i) / (2 * zz**2) + log_ndtr((z0 - i) / zz)
    s1 = log_binom + j * lq + i * l1q + (j * j - j) / (2 * zz**2) + log_ndtr((j - z0) / zz)
    signs = np.broadcast_to(np.concatenate([sign, sign]), (q.size, 2 * terms))
    log_abs, sgn = logsumexp(np.concatenate([s0, s1], axis=1), axis=1, b=signs, return_sign=True)
    log_a_val = np.where(sgn > 0, log_abs, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(log_a_val > 0, log_a_val + log1mexp(-np.maximum(log_a_val, 1e-300)), -np.inf)
