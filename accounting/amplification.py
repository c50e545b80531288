"""Privacy amplification by subsampling for (eps, delta)-DP, and its inverse.

Balle, Barthe & Gaboardi (2018), "Privacy Amplification by Subsampling: Tight Analyses via Couplings and
Divergences", Table 1 / Theorem 9 (sampling without replacement, substitution relation) and Theorem 8 (Poisson
sampling, add/remove relation): if a mechanism is (eps, delta)-DP, running it on a random subset that holds
each record with probability q is (eps', delta')-DP with

    eps' = ln(1 + q (e^eps - 1)),        delta' = q delta.

This is the *two-sided* bound (it controls both tails of the privacy loss).  The K-of-N client scheduling of
the NbAFL paper (Lemma 4) is sampling without replacement with q = K/N under the substitution
relation (a client's data replaced), so the first form applies there with the replace-one sensitivity.

Both functions broadcast and return a named pair ``PrivacyParams(epsilon, delta)`` of floats or arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from fedbound.checks import broadcast, check_probability, check_real, scalar_or_array
from fedbound.errors import InfeasibleError

__all__ = ["PrivacyParams", "amplify_by_subsampling", "inverse_amplify_by_subsampling"]


class PrivacyParams(NamedTuple):
    """An (epsilon, delta) pair; fields are floats for scalar input and arrays otherwise."""

    epsilon: float | np.ndarray
    delta: float | np.ndarray


def amplify_by_subsampling(eps: ArrayLike, delta: ArrayLike, q: ArrayLike) -> PrivacyParams:
    """(eps', delta') of an (eps, delta)-DP mechanism run on a q-subsample: ln(1 + q(e^eps - 1)), q delta.

    Balle, Barthe & Gaboardi 2018, Thm 9 (without replacement, substitution) / Thm 8 (Poisson, add/remove).
    Computed as log1p(q expm1(eps)) (exact at eps = 0 and q = 1), or eps + ln(q + (1-q) e^-eps) for eps > 30
    (no overflow).  eps >= 0, delta in [0, 1], q in (0, 1].
    """
    e = check_real("eps", eps, 0.0)
    d = check_real("delta", delta, 0.0, 1.0)
    qq = check_probability("q", q, allow_one=True)
    e, d, qq = broadcast(eps=e, delta=d, q=qq)
    big = e > 30.0
    with np.errstate(over="ignore"):
        eps_amp = np.where(big, e + np.log(qq + (1.0 - qq) * np.exp(-e)),
                           np.log1p(qq * np.expm1(np.minimum(e, 30.0))))
    return PrivacyParams(scalar_or_array(eps_amp), scalar_or_array(qq * d))


def inverse_amplify_by_subsampling(eps: ArrayLike, delta: ArrayLike, q: ArrayLike) -> PrivacyParams:
    """The per-release (eps0, delta0) whose q-subsampled version is exactly (eps, delta)-DP by BBG 2018.

    eps0 = ln(1 + (e^eps - 1)/q) (= eps + ln(1 - (1-q) e^-eps) - ln q for large eps), delta0 = delta / q.
    This is the budget a mechanism may spend per round when each round samples a q-fraction (K-of-N:
    q = K/N); e.g. spec 002 E9's two-sided b_std = T/eps * eps0(eps/T, q).  Raises InfeasibleError when
    delta/q >= 1 (no per-release delta in (0, 1) amplifies to the target).
    """
    e = check_real("eps", eps, 0.0)
    d = check_real("delta", delta, 0.0, 1.0, high_open=True)
    qq = check_probability("q", q, allow_one=True)
    e, d, qq = broadcast(eps=e, delta=d, q=qq)
    if np.any(d / qq >= 1.0):
        i = np.unravel_index(int(np.argmax(d / qq >= 1.0)), d.shape) if d.ndim else ()
        raise InfeasibleError(f"delta / q = {d[i] / qq[i]:g} >= 1: no per-release delta amplifies to "
                              f"delta = {d[i]:g} at q = {qq[i]:g}")
    big = e > 30.0
    eps0 = np.where(big, e + np.log1p(-(1.0 - qq) * np.exp(-e)) - np.log(qq),
                    np.log1p(np.expm1(np.minimum(e, 30.0)) / qq))
    return PrivacyParams(scalar_or_array(eps0), scalar_or_array(d / qq))
