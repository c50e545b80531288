"""Independent high-precision oracles for the accounting tests (mpmath; written from the papers' formulas).

Nothing here imports fedbound.accounting: these are the references our implementation is checked against.
"""

from __future__ import annotations

import mpmath as mp


def balle_wang_delta(eps: float, sigma: float, sensitivity: float = 1.0, dps: int = 40) -> float:
    """delta(eps) of the Gaussian mechanism (Balle & Wang 2018, Thm 8) in 40-digit arithmetic."""
    with mp.workdps(dps):
        e, s, d = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sensitivity)
        return float(mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d))


def sgm_log_a(alpha: float, q: float, z: float, dps: int = 30) -> float:
    """log A_alpha of the Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019) by adaptive quadrature.

    A_alpha - 1 = E_{x~N(0,1)}[(1+y)^alpha - 1 - alpha y], y = q (exp(x/z - 1/(2z^2)) - 1), integrated with
    breakpoints at every mixture centre k/z so that separated peaks are not missed.
    """
    with mp.workdps(dps):
        a, qq, zz = mp.mpf(alpha), mp.mpf(q), mp.mpf(z)

        def f(x):
            y = qq * mp.expm1(x / zz - 1 / (2 * zz * zz))
            return mp.npdf(x) * ((1 + y) ** a - 1 - a * y)

        points = {-mp.inf, mp.mpf(-10), mp.mpf(0), 1 / (2 * zz), a / zz, a / zz + 10, mp.inf}
        points |= {mp.mpf(k) / zz for k in range(1, int(alpha) + 2)}
        return float(mp.log1p(mp.quad(f, sorted(points))))
