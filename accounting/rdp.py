"""Renyi differential privacy (RDP) of the Gaussian and the Poisson-subsampled Gaussian mechanism.

* ``rdp_gaussian``: eps_R(alpha) = alpha / (2 z^2) (Mironov 2017, "Renyi Differential Privacy", Prop. 7), z =
  noise std / L2 sensitivity.
* ``rdp_subsampled_gaussian``: Poisson sampling with rate q, add/remove-one relation; exact values at integer
  and fractional orders (Mironov, Talwar & Zhang 2019, Sec. 3.3; evaluation details in ``_sgm``).  Unlike
  dp-accounting 0.6 we keep the signs of the fractional-order series (it sums absolute values, an upper bound)
  and never drop orders.
* composition over ``steps`` identical rounds multiplies the RDP by ``steps`` (Mironov 2017, Prop. 1);
  heterogeneous rounds: add the arrays.
* ``rdp_to_dp`` / ``rdp_to_delta``: conversion to (eps, delta)-DP, minimised over the orders.  ``"improved"``
  (default): eps = rdp + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (Canonne, Kamath & Steinke 2020,
  Prop. 12; Balle et al. 2020, Thm 21), plus eps = 0 when delta >= sqrt(1 - e^-rdp) (Bretagnolle-Huber bound
  via KL <= rdp), the same conversion as dp-accounting and Opacus.  ``"classic"``: eps = rdp +
  ln(1/delta)/(alpha-1)
  (Mironov 2017, Prop. 3), i.e. the moments-accountant tail bound of Abadi et al. 2016 (eq. (17) of UDP).

Shapes: ``orders`` is a scalar or 1-D array; the RDP functions return an array of shape ``broadcast(q,
noise_multiplier, steps).shape + orders.shape`` (a float for all-scalar input).  The conversions take RDP
arrays whose last axis matches ``orders`` and return one value per leading index.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedbound.checks import broadcast, check_finite, check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import DomainError, ParameterError

__all__ = ["DEFAULT_ORDERS", "CONVERSIONS", "MAX_ORDER", "rdp_gaussian", "rdp_subsampled_gaussian",
           "rdp_sampled_without_replacement", "rdp_to_dp", "rdp_to_delta", "conversion_offset"]

#: Renyi orders used when none are given: 37 fractional orders 1.01 ... 11 (12 per decade of alpha - 1, where
#: large-eps settings have their optimum) and 25 integer orders 12 ... 1024 (ratio ~1.2).  On random Gaussian
#: settings the eps lost to the grid is 0.1 % (median), 0.6 % (99th percentile).
DEFAULT_ORDERS = np.concatenate([
    1.0 + np.geomspace(0.01, 10.0, 37),
    np.array([12, 14, 16, 18, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512,
              640, 768, 1024], dtype=float),
])
DEFAULT_ORDERS.setflags(write=False)

CONVERSIONS = ("improved", "classic")

#: Largest Renyi order accepted: the integer-order series has alpha terms (and the optimum order of any
#: setting with eps <= 1e4 lies far below it).
MAX_ORDER = 1e5


def check_orders(orders: ArrayLike | None) -> np.ndarray:
    """Orders as a 1-D float array (scalars stay 0-d); each must be a finite real > 1."""
    if orders is None:
        return DEFAULT_ORDERS
    o = check_real("orders", orders, 1.0, MAX_ORDER, low_open=True)
    if o.ndim > 1:
        raise ParameterError("orders", o, "a scalar or a 1-D array of Renyi orders > 1")
    if o.size == 0:
        raise ParameterError("orders", o, "a non-empty set of Renyi orders > 1")
    return o


def rdp_gaussian(orders: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike = 1) -> float | np.ndarray:
    """steps * alpha / (2 z^2): RDP of ``steps`` Gaussian releases (Mironov 2017, Prop. 7 and Prop. 1)."""
    o = check_orders(orders)
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    t = check_int("steps", steps, 1)
    z, t = broadcast(noise_multiplier=z, steps=t)
    with np.errstate(over="ignore"):
        out = t[..., None] * o.ravel() / (2.0 * z[..., None] ** 2)
    out = check_finite("rdp", out, {"orders": o, "noise_multiplier": z, "steps": t})
    return scalar_or_array(out.reshape(z.shape + o.shape))


def rdp_subsampled_gaussian(orders: ArrayLike, q: ArrayLike, noise_multiplier: ArrayLike,
                            steps: ArrayLike = 1) -> float | np.ndarray:
    """RDP of ``steps`` rounds of the Poisson-subsampled Gaussian mechanism (add/remove-one relation).

    Exact log(A_alpha)/(alpha - 1) of Mironov, Talwar & Zhang 2019 (Sec. 3.3) at integer and fractional
    orders, times ``steps``; q = 1 is the plain Gaussian alpha/(2 z^2).  Relative accuracy ~1e-13 (checked
    against 40-digit quadrature, dp-accounting at integer orders and Opacus at fractional orders).
    """
    o = check_orders(orders)
    qq = check_probability("q", q, allow_one=True)
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    t = check_int("steps", steps, 1)
    qq, z, t = broadcast(q=qq, noise_multiplier=z, steps=t)
    shape = qq.shape
    alpha = np.broadcast_to(o.ravel(), (qq.size, o.size)).ravel()
    qf = np.repeat(qq.ravel(), o.size)
    zf = np.repeat(z.ravel(), o.size)
    with np.errstate(all="ignore"):
        from fedbound.accounting import _sgm  # scipy, imported only here: the conversions need none

        rdp = np.maximum(_sgm.log_a(alpha, qf, zf) / (alpha - 1.0), 0.0)  # RDP >= 0; rounding may dip below
        out = t.reshape(-1, 1) * rdp.reshape(qq.size, o.size)
    out = check_finite("rdp", out, {"orders": o, "q": qq, "noise_multiplier": z, "steps": t})
    return scalar_or_array(out.reshape(shape + o.shape))


def rdp_sampled_without_replacement(orders: ArrayLike, q: ArrayLike, noise_multiplier: ArrayLike,
                                    steps: ArrayLike = 1) -> float | np.ndarray:
    """RDP upper bound of ``steps`` rounds of a Gaussian on a fixed-size random subset (K of N, q = K/N).

    Replace-one relation; z = std / replace-one sensitivity.  dp-accounting's RdpAccountant bound (Wang,
    Balle & Kasiviswanathan 2019, Thm 27 at integer orders; fractional orders by their Cor. 10
    interpolation, also an upper bound), for z in [1e-3, 1e6] by :func:`fedbound.accounting.wor_rdp.
    wor_rdp_pairs` (the same floating-point operations, ~10x faster; equal to dp-accounting's numbers to
    <= 1e-12 relative, tested), elsewhere by dp-accounting itself.  Loops over distinct (q, z).
    """
    o = check_orders(orders)
    qq = check_probability("q", q, allow_one=True)
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    t = check_int("steps", steps, 1)
    qq, z, t = broadcast(q=qq, noise_multiplier=z, steps=t)
    out = np.empty(qq.shape + (o.size,))
    cache: dict[tuple[float, float], np.ndarray] = {}
    for i in np.ndindex(qq.shape):
        key = (float(qq[i]), float(z[i]))
        if key not in cache:
            cache[key] = _wor_rdp_one_step(o, *key)
        out[i] = cache[key] * t[i]
    return scalar_or_array(out.reshape(qq.shape + o.shape))


_WOR_FAST = (1e-3, 1e6)
"""Noise multipliers at which the vectorised K-of-N RDP is used (tested against dp-accounting there)."""


def _wor_rdp_one_step(orders: np.ndarray, q: float, z: float) -> np.ndarray:
    """One step's RDP: :func:`fedbound.accounting.wor_rdp.wor_rdp_pairs` on ``_WOR_FAST``, else dp-accounting
    itself, whose float errors at extreme z (OverflowError at 1e308, ZeroDivisionError at 1e-308, "math
    domain error" at 1e12) become a DomainError naming the input."""
    from fedbound.accounting.events import dp_event, make_accountant, sample_fraction

    event = dp_event(z, q, 1, "without_replacement")  # checks q; K / N is the rate dp-accounting reads
    if _WOR_FAST[0] <= z <= _WOR_FAST[1]:
        from fedbound.accounting.wor_rdp import wor_rdp_pairs

        with np.errstate(all="ignore"):
            k, n = sample_fraction(q)
            rdp = wor_rdp_pairs(orders, np.array([k / n]), np.array([z]))[0]
        if np.all(np.isfinite(rdp) & (rdp >= 0)):
            return rdp
    acc = make_accountant("rdp", "without_replacement", orders)
    try:
        acc.compose(event)
        rdp = np.asarray(acc.rdp, dtype=float)
    except (ArithmeticError, ValueError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise DomainError("noise_multiplier", z, "a value dp-accounting's RDP for sampling without "
                          "replacement can evaluate", f"it failed with {type(exc).__name__} at q = {q:g}; "
                          "try a noise multiplier in [1e-3, 1e6]") from None
    if not np.all(rdp >= 0):  # NaN or a negative RDP: not a valid bound
        raise DomainError("noise_multiplier", z, "a value dp-accounting's RDP for sampling without "
                          f"replacement evaluates to a valid (>= 0) RDP at q = {q:g}")
    return rdp


def _check_conversion(conversion: str) -> None:
    if conversion not in CONVERSIONS:
        raise ParameterError("conversion", conversion, f"one of {CONVERSIONS}")


def conversion_offset(orders: np.ndarray, delta: np.ndarray, conversion: str = "improved") -> np.ndarray:
    """eps(alpha) - rdp(alpha) of the RDP -> (eps, delta) conversion, broadcast as delta[..., None] x orders.

    improved: ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (CKS 2020, Prop. 12); classic:
    ln(1/delta)/(alpha - 1) (Mironov 2017, Prop. 3).  No input checks.
    """
    a = np.asarray(orders, dtype=float)
    log_delta = np.log(np.asarray(delta, dtype=float))[..., None]
    if conversion == "classic":
        return -log_delta / (a - 1.0)
    return np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)


def kl_budget(delta: np.ndarray) -> np.ndarray:
    """-ln(1 - delta^2): an RDP at most this gives (0, delta)-DP (Bretagnolle-Huber via KL <= rdp); stable at
    delta ~ 1."""
    d = np.asarray(delta, dtype=float)
    return -(np.log1p(-d) + np.log1p(d))


def _prepare(orders: ArrayLike, rdp: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    o = check_orders(orders).ravel()
    r = check_real("rdp", rdp, 0.0, allow_inf=True)
    r = np.atleast_1d(r)
    if r.shape[-1] != o.size:
        raise ParameterError("rdp", r, f"an array whose last axis has len(orders) = {o.size} entries")
    return o, r


def rdp_to_dp(orders: ArrayLike, rdp: ArrayLike, delta: ArrayLike, *, conversion: str = "improved",
              return_order: bool = False):
    """Smallest eps over the orders such that RDP curve ``rdp`` gives (eps, delta)-DP.

    ``rdp[..., k]`` is the (composed) RDP at ``orders[k]``.  Conversion as in the module docstring; eps >= 0.
    Returns eps (float or array), or ``(eps, optimal_order)`` when ``return_order``.
    """
    _check_conversion(conversion)
    o, r = _prepare(orders, rdp)
    d = check_probability("delta", delta)
    with np.errstate(invalid="ignore"):
        eps_k = r + conversion_offset(o, d, conversion)
        if conversion == "improved":  # delta >= sqrt(1 - exp(-KL)) and KL <= rdp: (0, delta)-DP
            eps_k = np.where(r < kl_budget(d)[..., None], 0.0, eps_k)
    best = np.argmin(eps_k, axis=-1)
    eps = np.maximum(np.take_along_axis(eps_k, best[..., None], axis=-1)[..., 0], 0.0)
    eps = scalar_or_array(eps)
    return (eps, scalar_or_array(o[best])) if return_order else eps


def rdp_to_delta(orders: ArrayLike, rdp: ArrayLike, eps: ArrayLike, *, conversion: str = "improved",
                 return_order: bool = False):
    """Smallest delta over the orders such that RDP curve ``rdp`` gives (eps, delta)-DP (at most 1).

    improved: ln delta = (alpha - 1)(rdp - eps + ln(1 - 1/alpha)) - ln alpha (CKS 2020, Prop. 12), and
    delta <= sqrt(1 - e^-rdp); classic: ln delta = (alpha - 1)(rdp - eps) (Mironov 2017, Prop. 3).
    """
    _check_conversion(conversion)
    o, r = _prepare(orders, rdp)
    e = np.asarray(check_real("eps", eps, 0.0))[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        if conversion == "classic":
            log_d = (o - 1.0) * (r - e)
        else:
            log_d = (o - 1.0) * (r - e + np.log1p(-1.0 / o)) - np.log(o)
            log_d = np.minimum(log_d, 0.5 * np.log(-np.expm1(-r)))  # delta <= sqrt(1 - e^-KL)
    log_d = np.where(np.isnan(log_d), np.inf, log_d)
    best = np.argmin(log_d, axis=-1)
    delta = np.exp(np.minimum(np.take_along_axis(log_d, best[..., None], axis=-1)[..., 0], 0.0))
    delta = scalar_or_array(delta)
    return (delta, scalar_or_array(o[best])) if return_order else delta
