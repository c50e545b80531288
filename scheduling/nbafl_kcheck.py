"""An independent check over every K of an NbAFL design with K open (``fedbound plan nbafl --check``).

NbAFL (Wei et al. 2020): K = N is read by Theorem 2 (eq. (14)), K < N by Theorem 3 (eq. (17)) with the
aggregate std max(z_K(T) 2C/(mK), sigma_U/sqrt(K)), z_K(T) the RDP calibration of T rounds of K-of-N
sampling (:mod:`fedbound.scheduling.nbafl_design`).  :func:`check_every_k` proves, for every K in 1..N and
every T >= 1, that no design beats the recommended bound ``best`` (to a relative ``rtol``), without the
search's grid of z or its branch and bound:

* K = N: Theorem 2 at every integer T up to where its noise term alone (never decreasing in T) exceeds
  ``best`` (``fedbound.scheduling.nbafl._independent_full``: the noise of ``fedbound.bounds.nbafl.noise``).
* K < N with 0 < Q < 1 (elsewhere Theorem 3 has no bound): z_K(T) never decreases in T, and at a fixed
  noise Theorem 3's bound Q^T Theta + (1 - Q^T)/(1 - Q) n(s) moves monotonically from Theta towards
  n(s)/(1 - Q).  So on T in [a, b] the bound is at least min(RB(a), RB(b)) evaluated at z_lo(a), a lower
  bound of z_K(a) (a bisection here, which keeps the half that fails the target), and for T >= a at least
  (1 - Q^a)/(1 - Q) n(s(z_lo(a))).  Intervals start as [2^j, 2^(j+1) - 1]; one whose lower bound is below
  ``best`` is halved (z_lo at its midpoint) until it is dominated or a single T, whose lower bound must
  then be within ``rtol`` of ``best``.

The one-step RDP is :func:`fedbound.accounting.wor_rdp.wor_rdp_pairs` (equal to dp-accounting's
RdpAccountant for sampling without replacement, tested) at the orders the search deployed; the conversion
is :func:`fedbound.accounting.rdp.rdp_to_dp`.  ``points`` counts the (K, T) calibrations, the check's cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb

__all__ = ["KCheck", "check_every_k", "z_lower"]

BISECTIONS = 32
"""Bisection steps of log z over [1e-4, 1e4]: z_lo within a factor exp(18.4 / 2^32) of z_K(T)."""
T_LIMIT = 2**20
"""The largest T the check covers (the search's own documented maximum is 10^6 < 2^20)."""


@dataclass(frozen=True)
class KCheck:
    """The verdict: ``passed``; per K the least lower bound over the final cover of T by dominated
    intervals (``least``: at K = N the brute-force minimum; inf where Theorem 3 has no bound);
    ``points``: (K, T) pairs calibrated; ``full_T``: the integers T brute-forced at K = N; ``note``: what was
    checked, in words."""

    passed: bool
    least: dict[int, float]
    points: int
    full_T: int
    note: str


def z_lower(eps: float, delta: float, q: np.ndarray, T: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """Per pair, a z below z_K(T) (the smallest multiplier whose T-fold RDP meets (eps, delta)) by at most
    a factor exp(18.4/2^32): a bisection keeping the half that fails the target (0 when 1e-4 meets it)."""
    from fedbound.accounting.rdp import rdp_to_dp
    from fedbound.accounting.wor_rdp import wor_rdp_pairs

    q, T = np.asarray(q, float), np.asarray(T, float)

    def meets(z: np.ndarray) -> np.ndarray:
        r = wor_rdp_pairs(orders, q, z)
        return np.atleast_1d(rdp_to_dp(orders, T[:, None] * r, delta)) <= eps

    lo, hi = np.full(q.size, math.log(1e-4)), np.full(q.size, math.log(1e4))
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        ok = meets(np.exp(mid))
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    return np.where(meets(np.full(q.size, 1e-4)), 0.0, np.exp(lo))


def check_every_k(s: Mapping[str, Any], best: float, orders: np.ndarray, full_bound: Any,
                  rtol: float = 1e-5) -> KCheck:
    """Whether no (T, K) design has a bound below ``best`` (1 - rtol) (module docstring); ``full_bound(s,
    T)``: Theorem 2 at K = N for an array of T (with the deployed noise)."""
    N, eps, delta = int(s["N"]), float(s["eps"]), float(s["delta"])
    target = best * (1 - rtol) if best > 0 else best - rtol
    least: dict[int, float] = {}
    # K = N: brute force over T until the noise term alone (Theta = 0) exceeds best
    top = 64
    while top < T_LIMIT and float(full_bound({**s, "Theta": 0.0}, np.array([top]))[0]) < target:
        top *= 2
    Ts = np.arange(1, top + 1)
    least[N] = float(np.min(full_bound(s, Ts)))
    # K < N: the interval argument
    up = float(nb.sigma_uplink_tight(eps, delta, s["C"], s["m"], s.get("L", 1)))
    ks, Q, a1, a0 = [], [], [], []
    for K in range(1, N):
        ev = nb.CONTRACTION_Q.evaluate({**s, "K": K})
        if not ev.admissible:
            least[K] = math.inf
            continue
        al0, al1, _ = nb.ksched_alphas(s["mu"], s["rho"], s["B"], K, N)
        ks.append(K), Q.append(float(ev.value)), a1.append(float(al1)), a0.append(float(al0))
    ks_a, Q_a, a1_a, a0_a = (np.array(v, dtype=float) for v in (ks, Q, a1, a0))
    for K in ks:
        least[K] = math.inf

    def parts(k: np.ndarray, T: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q^T Theta, (1 - Q^T)/(1 - Q) n(s)) of Theorem 3 at multiplier z."""
        agg = np.maximum(z * 2 * s["C"] / (s["m"] * ks_a[k]), up / np.sqrt(ks_a[k]))
        sd = agg / 2
        noise = a1_a[k] * s["beta"] * math.sqrt(2 / math.pi) * sd + a0_a[k] * sd**2
        return Q_a[k] ** T * s["Theta"], -np.expm1(T * np.log(Q_a[k])) / (1 - Q_a[k]) * noise

    points = 0
    # starts 2^j of each K until the tail T >= 2^j is dominated by the noise term alone
    k_idx, starts, z_starts, tails = [], [], [], {}
    live = np.arange(ks_a.size)
    a = 1
    while live.size and a <= T_LIMIT:
        z = z_lower(eps, delta, ks_a[live] / N, np.full(live.size, float(a)), orders)
        points += live.size
        k_idx.append(live), starts.append(np.full(live.size, a)), z_starts.append(z)
        _, noise = parts(live, np.full(live.size, float(a)), z)
        done = noise >= target
        for k in live[done]:
            tails[int(k)] = a
        live = live[~done]
        a *= 2
    if live.size:
        return KCheck(False, least, points, int(top), f"K = {[int(ks_a[k]) for k in live]}: the noise "
                      f"term did not exceed the recommended bound by T = {T_LIMIT}: not checked past it")
    # intervals [2^j, min(2^(j+1), tail) - 1] with z_lo(2^j)
    k = np.concatenate(k_idx)
    lo_T = np.concatenate(starts).astype(float)
    z_lo = np.concatenate(z_starts)
    hi_T = np.array([min(2 * t, tails[int(kk)]) - 1 for kk, t in zip(k, lo_T, strict=True)], dtype=float)
    keep = hi_T >= lo_T
    k, lo_T, hi_T, z_lo = k[keep], lo_T[keep], hi_T[keep], z_lo[keep]
    while k.size:
        th_a, n_a = parts(k, lo_T, z_lo)
        th_b, n_b = parts(k, hi_T, z_lo)
        lower = np.minimum(th_a + n_a, th_b + n_b)
        open_ = lower < target
        for kk, v in zip(k[~open_], lower[~open_], strict=True):  # the final cover: dominated intervals
            least[int(ks_a[kk])] = min(least[int(ks_a[kk])], float(v))
        single = open_ & (hi_T == lo_T)
        if np.any(single):
            bad = [(int(ks_a[kk]), int(t)) for kk, t in zip(k[single], lo_T[single], strict=True)]
            return KCheck(False, least, points, int(top), f"(K, T) = {bad[:3]}: a lower bound below the "
                          f"recommended {best:.8g}")
        k, lo_T, hi_T, z_lo = k[open_], lo_T[open_], hi_T[open_], z_lo[open_]
        if not k.size:
            break
        mid = np.floor((lo_T + hi_T) / 2) + 1  # [lo, mid - 1] keeps z_lo(lo); [mid, hi] gets z_lo(mid)
        z_mid = z_lower(eps, delta, ks_a[k] / N, mid, orders)
        points += k.size
        k, lo_T, hi_T, z_lo = (np.concatenate([k, k]), np.concatenate([lo_T, mid]),
                               np.concatenate([mid - 1, hi_T]), np.concatenate([z_lo, z_mid]))
    ok = least[N] >= target
    note = (f"every K in 1..{N}: K = N by Theorem 2 at every T <= {top}; {len(ks)} K < N by Theorem 3 "
            f"on intervals of T with z bisected independently ({points} (K, T) calibrations), "
            f"{N - 1 - len(ks)} without a Theorem 3 bound (Q outside (0, 1))")
    return KCheck(bool(ok), least, points, int(top), note)
