"""Closed-form "moments accountant" noise formulas, as papers state them (approximations, not bounds).

Two forms are in use:

* Abadi et al. (2016), "Deep Learning with Differential Privacy", Theorem 1: there are constants c1, c2 such
  that for eps < c1 q^2 T, noise multiplier sigma >= c2 q sqrt(T log(1/delta)) / eps gives (eps, delta)-DP for
  T steps with sampling ratio q.  The paper gives no numbers.  Its Lemma 3 (log moment <= q^2 l(l+1) / ((1-q)
  sigma^2) + O(q^3 l^3 / sigma^3), for sigma >= 1, q < 1/(16 sigma), l <= sigma^2 ln(1/(q sigma))) gives at
  leading order sigma = 2 q sqrt(T ln(1/delta)) / (eps sqrt(1 - q)), i.e. c2 ~ 2 for small q (spec 003 E10);
  that is our default ``c2=2``.
* UDP (Wei et al., UDP), Theorem 1, eq. (10): sigma = Delta_l sqrt(2 q T ln(1/delta)) / eps, from a
per-round
  log moment *linear* in q (eq. (15)), which is an approximation (spec 003 E4) and whose last step runs the
  wrong way (E5): under the paper's own accountant this sigma delivers delta^((1 - eps/(4 ln(1/delta)))^2) >
  delta (spec 003 D3).  UDP cites Abadi et al. [3] for the moments accountant but uses this form with its
  own constant sqrt(2 q), not c2 q (effective c2 = sqrt(2/q); spec 003 E10).

Both are kept so that later issues can show the paper's sigma next to the tight one
(``fedbound.accounting.calibrate_noise``).  Results are floats for scalar input and arrays otherwise.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from fedbound.checks import (
    broadcast_errors_named,
    check_finite,
    check_int,
    check_probability,
    check_real,
    scalar_or_array,
)
from fedbound.errors import AssumptionWarning

__all__ = ["moments_accountant_std", "moments_accountant_epsilon", "moments_accountant_conditions",
           "udp_theorem1_std", "udp_theorem1_epsilon"]


def _common(delta, q, steps, sensitivity):
    d = check_probability("delta", delta)
    qq = check_probability("q", q, allow_one=True)
    t = check_int("steps", steps, 1)
    s = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    return d, qq, t, s


def moments_accountant_conditions(noise_multiplier: ArrayLike, q: ArrayLike) -> str | None:
    """Which conditions of Abadi et al. 2016, Lemma 3 (sigma >= 1, q < 1/(16 sigma)) fail; None if both
    hold."""
    z = np.asarray(noise_multiplier, dtype=float)
    qq = np.asarray(q, dtype=float)
    fails = []
    if np.any(z < 1.0):
        fails.append(f"noise multiplier {float(np.min(z)):.4g} < 1")
    if np.any(qq >= 1.0 / (16.0 * z)):
        fails.append("q >= 1/(16 sigma)")
    if not fails:
        return None
    return ("moments-accountant closed form (Abadi et al. 2016, Thm 1) used outside its Lemma 3 conditions: "
            + ", ".join(fails) + "; the constant c2 is then unsupported (use calibrate_noise)")


@broadcast_errors_named
def moments_accountant_std(eps: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                           sensitivity: ArrayLike = 1.0, c2: float = 2.0) -> float | np.ndarray:
    """sigma = c2 q sqrt(T ln(1/delta)) Delta / eps (Abadi et al. 2016, Thm 1; c2 = 2 from Lemma 3, leading
    order).

    Validity (Abadi et al.): eps < c1 q^2 T for an unspecified c1, and Lemma 3's sigma/Delta >= 1,
    q < 1/(16 sigma/Delta); emits AssumptionWarning when the checkable conditions fail.
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    d, qq, t, s = _common(delta, q, steps, sensitivity)
    c = check_real("c2", c2, 0.0, low_open=True)
    z = c * qq * np.sqrt(t * -np.log(d)) / e
    message = moments_accountant_conditions(z, qq)
    if message:
        warnings.warn(message, AssumptionWarning, stacklevel=2)
    return scalar_or_array(check_finite("sigma", z * s, dict(eps=e, delta=d, q=qq, steps=t, sensitivity=s),
                                        positive=True))


@broadcast_errors_named
def moments_accountant_epsilon(sigma: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                               sensitivity: ArrayLike = 1.0, c2: float = 2.0) -> float | np.ndarray:
    """eps = c2 q sqrt(T ln(1/delta)) Delta / sigma, the inverse of ``moments_accountant_std`` (same
    caveats)."""
    sg = check_real("sigma", sigma, 0.0, low_open=True)
    d, qq, t, s = _common(delta, q, steps, sensitivity)
    c = check_real("c2", c2, 0.0, low_open=True)
    message = moments_accountant_conditions(sg / s, qq)
    if message:
        warnings.warn(message, AssumptionWarning, stacklevel=2)
    eps = c * qq * np.sqrt(t * -np.log(d)) * s / sg
    return scalar_or_array(check_finite("eps", eps, dict(sigma=sg, delta=d, q=qq, steps=t, sensitivity=s),
                                        positive=True))


@broadcast_errors_named
def udp_theorem1_std(eps: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                     sensitivity: ArrayLike = 1.0) -> float | np.ndarray:
    """sigma = Delta_l sqrt(2 q T ln(1/delta)) / eps: UDP (Wei et al. 2021), Theorem 1, eq. (10); spec 003
    Sec. 3.4.

    Delta_l = 2 eta C / |D_i| for one full-batch GD step with per-sample clipping (UDP eq. (13)). Not a
    guarantee (spec 003 E4, E5): under the paper's own accountant it delivers delta^((1 - eps/(4
    ln(1/delta)))^2) > delta, and nothing at all for eps >= 2 ln(1/delta).  Regression values: spec 003 Sec.
    8.2 (TV1: z = 13.14130442 at eps = 4, delta = 1e-3, q = 1, T = 200).
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    d, qq, t, s = _common(delta, q, steps, sensitivity)
    return scalar_or_array(check_finite("sigma", s * np.sqrt(2.0 * qq * t * -np.log(d)) / e,
                                        dict(eps=e, delta=d, q=qq, steps=t, sensitivity=s), positive=True))


@broadcast_errors_named
def udp_theorem1_epsilon(sigma: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                         sensitivity: ArrayLike = 1.0) -> float | np.ndarray:
    """eps = Delta_l sqrt(2 q T ln(1/delta)) / sigma, the inverse of UDP eq. (10) (same caveats)."""
    sg = check_real("sigma", sigma, 0.0, low_open=True)
    d, qq, t, s = _common(delta, q, steps, sensitivity)
    eps = s * np.sqrt(2.0 * qq * t * -np.log(d)) / sg
    return scalar_or_array(check_finite("eps", eps, dict(sigma=sg, delta=d, q=qq, steps=t, sensitivity=s),
                                        positive=True))
