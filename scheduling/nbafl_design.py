"""The NbAFL design a designer deploys: the bound that applies, evaluated with the noise the design deploys.

Seed 002 (Wei et al. 2020); spec 002 F18, F32, E8.  A design is (T, K): T rounds, K of N clients a round
(K = N: all).  Its noise is the tight calibration (:func:`fedbound.bounds.nbafl.noise`, method "tight"): each
client's upload std sigma_U = sqrt(L) z 2C/m (z: analytic Gaussian of one (eps, delta) release), and the
server tops the aggregate up to what the T broadcasts need.  The aggregate therefore never falls below the
uplink floor sigma_U/sqrt(K): when T <= L N (K = N) the server adds nothing and the aggregate *is* the floor,
which the printed Theorem 2 drops (E8, the regime-aware reading).

* K = N, Theorem 2 (eq. (14)) in its recursive form (F18) with s = sqrt(N) sigma_A / 2 (the paper's ratio of
  its scalar s to sigma_A, F18) and sigma_A = max(sqrt(T) z 2C/(mN), sigma_U/sqrt(N)):
  :func:`deployed_bound_full` (vectorised over T);
* K < N, Theorem 3 (eq. (17)) with s_K = sigma_A^(K)/2 (F32) and sigma_A^(K) = max(z_K(T) 2C/(mK),
  sigma_U/sqrt(K)), z_K(T) the RDP calibration of T rounds of K-of-N sampling without replacement (the
  tightest accountant fedbound has for it): :func:`deployed_bound_k`.

:func:`optimal_design` minimises over the open variables (T, and K when the user leaves it open) with a
certificate: the T scan is exhaustive and stops only where the accumulated-noise term alone, which never
decreases in T, exceeds the best bound found (:func:`fedbound.scheduling.certificate.scan_until_turned`);
K < N (the config's K) by branch and bound on brackets of z_K(T), which is non-decreasing in T.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.accounting.rdp import DEFAULT_ORDERS, rdp_sampled_without_replacement, rdp_to_dp
from fedbound.bounds import nbafl as nb
from fedbound.scheduling.certificate import scan_until_turned

__all__ = ["Design", "deployed_bound_full", "deployed_bound_k", "optimal_design", "KofNCalibration",
           "T_SEARCH_MAX"]

ORDER_CAP = 32
"""K < N searches with the Renyi orders <= 32 (one-step RDP of K-of-N sampling costs O(order^2) in
dp-accounting: ~0.03 s instead of ~0.5 s); when the best order at the recommended design reaches the cap, the
search is redone with every order.  Below the cap the calibrated z is the same (the min over orders is
attained there)."""
T_SEARCH_MAX = 10**6
"""Documented maximum of the T scan (reached only when the bound keeps decreasing that far)."""
_SQ2PI = math.sqrt(2 / math.pi)


@dataclass(frozen=True)
class Design:
    """One deployable design, its deployed noise and the bound that applies to it."""

    T: int
    K: int | None
    bound: float
    theorem: str
    sigma_uplink: float
    sigma_server: float
    sigma_aggregate: float
    z: float


def _noise_term(a1: float, a0: float, beta: float, s: np.ndarray) -> np.ndarray:
    return a1 * beta * _SQ2PI * s + a0 * s**2


def _thm2(s: Mapping[str, Any]) -> tuple[float, float, float]:
    """(P, lambda_1, lambda_0) of Theorem 2, eq. (14) (Lemma 3, eq. (12))."""
    lam0, lam1, _ = nb.lambdas(s["mu"], s["rho"], s["B"])
    return float(nb.CONTRACTION_P(s)), float(lam1), float(lam0)


def _uplink(s: Mapping[str, Any]) -> float:
    return float(nb.sigma_uplink_tight(s["eps"], s["delta"], s["C"], s["m"], s.get("L", 1)))


def deployed_bound_full(s: Mapping[str, Any], T: np.ndarray) -> np.ndarray:
    """Theorem 2 (seed 002, eq. (14), recursive form F18) at every T with the noise K = N deploys."""
    P, lam1, lam0 = _thm2(s)
    T = np.asarray(T, dtype=float)
    agg = np.asarray(nb.sigma_aggregate_tight(s["eps"], s["delta"], s["C"], s["m"], s["N"], T,
                                              s.get("L", 1)), dtype=float)
    return np.asarray(nb.recursive_bound(T, s["Theta"], P, lam1, lam0, s["beta"],
                                         agg * math.sqrt(s["N"]) / 2), dtype=float)


def _floor_full(s: Mapping[str, Any], T: np.ndarray) -> np.ndarray:
    """The accumulated-noise term of :func:`deployed_bound_full`: a lower bound that never decreases in T."""
    P, lam1, lam0 = _thm2(s)
    agg = np.asarray(nb.sigma_aggregate_tight(s["eps"], s["delta"], s["C"], s["m"], s["N"],
                                              np.asarray(T, float), s.get("L", 1)), dtype=float)
    noise = _noise_term(lam1, lam0, s["beta"], agg * math.sqrt(s["N"]) / 2)
    return -np.expm1(T * math.log(P)) / (1 - P) * noise


class KofNCalibration:
    """z_K(T) for every T at once: the RDP noise multiplier of T rounds of K-of-N sampled Gaussians.

    One-step RDP of sampling without replacement (Wang, Balle & Kasiviswanathan 2019, through
    dp-accounting) is computed once per z and scales linearly in T, so every evaluated z says for *every* T
    whether it meets (eps, delta).  Brackets [lo(T), hi(T)] on z_K(T) tighten as z's are evaluated;
    :meth:`calibrate` narrows one T's bracket to ``rtol``.  The calibrated multiplier is ``hi`` (meets the
    target), as :func:`fedbound.accounting.calibrate_noise` with method "rdp" would give up to ``rtol``.
    """

    def __init__(self, eps: float, delta: float, q: float, orders: np.ndarray = DEFAULT_ORDERS) -> None:
        self.eps, self.delta, self.q, self.orders = float(eps), float(delta), float(q), np.asarray(orders)
        self._rdp: dict[float, np.ndarray] = {}

    def _one_step(self, z: float) -> np.ndarray:
        if z not in self._rdp:
            self._rdp[z] = np.asarray(rdp_sampled_without_replacement(self.orders, self.q, z), dtype=float)
        return self._rdp[z]

    def epsilon(self, z: float, T: np.ndarray) -> np.ndarray:
        T = np.atleast_1d(np.asarray(T, dtype=float))
        return np.atleast_1d(rdp_to_dp(self.orders, T[:, None] * self._one_step(z)[None, :], self.delta))

    def best_order(self, z: float, T: int, orders: np.ndarray) -> float:
        """The Renyi order at which ``orders`` convert T rounds at multiplier z to the smallest eps."""
        rdp = np.asarray(rdp_sampled_without_replacement(orders, self.q, z), dtype=float)
        return float(rdp_to_dp(orders, T * rdp, self.delta, return_order=True)[1])

    def brackets(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): z_K(T) in (lo, hi] from every z evaluated so far (lo 0, hi inf where none says)."""
        T = np.atleast_1d(np.asarray(T, dtype=float))
        lo, hi = np.zeros(T.shape), np.full(T.shape, np.inf)
        for z in self._rdp:
            ok = self.epsilon(z, T) <= self.eps
            hi = np.where(ok, np.minimum(hi, z), hi)
            lo = np.where(~ok, np.maximum(lo, z), lo)
        return lo, hi

    def calibrate(self, T: int, rtol: float = 1e-6) -> float:
        """z_K(T) to relative tolerance ``rtol`` (the returned z meets (eps, delta) at T rounds)."""
        lo, hi = (float(v[0]) for v in self.brackets(np.array([T])))
        if not np.isfinite(hi):  # about what q = 1 needs: subsampling never adds privacy loss
            hi = max(lo * 2, math.sqrt(T) * float(nb.tight_noise_multiplier(self.eps, self.delta)))
            while self.epsilon(hi, np.array([T]))[0] > self.eps:
                lo, hi = hi, hi * 4
        if lo <= 0:
            lo = hi / 2
            while self.epsilon(lo, np.array([T]))[0] <= self.eps and lo > 1e-4:
                hi, lo = lo, lo / 4
        while hi / lo > 1 + rtol:
            lo, hi = self.split(T, lo, hi)
        return hi

    def split(self, T: int, lo: float, hi: float) -> tuple[float, float]:
        """Evaluate the geometric midpoint of (lo, hi]: the half that holds z_K(T)."""
        mid = math.sqrt(lo * hi)
        return (lo, mid) if self.epsilon(mid, np.array([T]))[0] <= self.eps else (mid, hi)


def _thm3(s: Mapping[str, Any], K: int) -> tuple[float, float, float] | None:
    """(Q, alpha_1, alpha_0) of Theorem 3, eq. (17) ((84)-(85)); None outside 0 < Q < 1."""
    ev = nb.CONTRACTION_Q.evaluate({**s, "K": K})
    if not ev.admissible:
        return None
    a0, a1, _ = nb.ksched_alphas(s["mu"], s["rho"], s["B"], K, s["N"])
    return float(ev.value), float(a1), float(a0)


def _k_aggregate(s: Mapping[str, Any], K: int, z: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(z) * 2 * s["C"] / (s["m"] * K), _uplink(s) / math.sqrt(K))


def deployed_bound_k(s: Mapping[str, Any], K: int, T: int, z: float) -> float:
    """Theorem 3 (seed 002, eq. (17)) at (T, K) with the deployed aggregate noise of multiplier ``z``."""
    th = _thm3(s, K)
    if th is None:
        return math.inf
    Q, a1, a0 = th
    return float(nb.recursive_bound(float(T), s["Theta"], Q, a1, a0, s["beta"], _k_aggregate(s, K, z) / 2))


def _k_lower(s: Mapping[str, Any], K: int, T: np.ndarray, z_lo: np.ndarray) -> np.ndarray:
    th = _thm3(s, K)
    if th is None:
        return np.full(np.shape(T), np.inf)
    Q, a1, a0 = th
    return np.asarray(nb.recursive_bound(np.asarray(T, float), s["Theta"], Q, a1, a0, s["beta"],
                                         _k_aggregate(s, K, z_lo) / 2), dtype=float)


def _best_T_at_k(s: Mapping[str, Any], K: int, incumbent: float, T_fixed: int | None,
                 cal: KofNCalibration) -> tuple[int, float, float, int] | None:
    """Branch and bound over T at fixed K < N: (T, bound, z, T's examined) if some T beats ``incumbent``."""
    th = _thm3(s, K)
    if th is None:
        return None
    Q, a1, a0 = th
    if T_fixed is not None:
        z = cal.calibrate(T_fixed)
        return T_fixed, deployed_bound_k(s, K, T_fixed, z), z, 1
    best, best_T = incumbent, None
    T_hi = 1
    while T_hi <= T_SEARCH_MAX:  # widen: stop where the noise term at the z that T_hi needs beats the best
        z = cal.calibrate(T_hi, 0.05)
        val = deployed_bound_k(s, K, T_hi, z)
        if val < best:
            best, best_T = val, T_hi
        lo, _ = cal.brackets(np.array([T_hi]))
        floor = -math.expm1(T_hi * math.log(Q)) / (1 - Q) * float(
            _noise_term(a1, a0, s["beta"], _k_aggregate(s, K, lo) / 2)[0])
        if floor >= best:
            break
        T_hi *= 2
    Ts = np.arange(1, T_hi + 1)
    while True:
        lo, hi = cal.brackets(Ts)
        upper = _k_lower(s, K, Ts, hi)  # a design that deploys hi meets the target: a valid bound
        lower = _k_lower(s, K, Ts, lo)
        i = int(np.argmin(upper))
        if upper[i] < best:
            best, best_T = float(upper[i]), int(Ts[i])
        cand = np.nonzero((lower < best) & (hi / np.maximum(lo, 1e-300) > 1 + 1e-6))[0]
        if not cand.size:
            break
        j = cand[np.argmax(hi[cand] / np.maximum(lo[cand], 1e-300))]
        if lo[j] > 0 and np.isfinite(hi[j]):
            cal.split(int(Ts[j]), float(lo[j]), float(hi[j]))
        else:
            cal.calibrate(int(Ts[j]), 0.05)
    if best_T is None:
        return None
    z = cal.calibrate(best_T, 1e-6)
    return best_T, deployed_bound_k(s, K, best_T, z), z, int(T_hi)


@dataclass(frozen=True)
class DesignSearch:
    """The argmin and what was searched: per-variable domains, how, the points examined, any cap."""

    design: Design
    domain: dict[str, str]
    search: str
    points: int
    capped: str
    note: str


def _full_design(s: Mapping[str, Any], T: int) -> Design:
    sig = nb.noise({**s, "K": None}, T, "tight")
    agg = float(nb.sigma_aggregate_tight(s["eps"], s["delta"], s["C"], s["m"], s["N"], T, s.get("L", 1)))
    return Design(T, None, float(deployed_bound_full(s, np.array([T]))[0]), "Theorem 2 (eq. (14))",
                  sig["uplink"], sig["server"], agg, float(nb.tight_noise_multiplier(s["eps"], s["delta"])))


def _k_design(s: Mapping[str, Any], K: int, T: int, z: float) -> Design:
    up = _uplink(s)
    agg = float(_k_aggregate(s, K, np.asarray(z)))
    server = math.sqrt(max(agg**2 - up**2 / K, 0.0))
    return Design(T, K, deployed_bound_k(s, K, T, z), "Theorem 3 (eq. (17))", up, server, agg, z)


def optimal_design(s: Mapping[str, Any]) -> DesignSearch:
    """The argmin over the open T of the bound that applies to the design, with the noise it deploys.

    ``s``: an NbAFL setting (spec 002 notation).  A T in it is held fixed.  K is the config's: unset means
    all N clients every round (the [nbafl] section's documented meaning), read by Theorem 2; K < N by
    Theorem 3 (module docstring).
    """
    N = int(s["N"])
    T_fixed = int(s["T"]) if s.get("T") is not None else None
    K = int(s["K"]) if s.get("K") is not None else N
    if K >= N:
        if T_fixed is not None:
            return DesignSearch(_full_design(s, T_fixed), {"T": f"{T_fixed} (set by the user)",
                                                           "K": f"{N} only (all N clients)"},
                                "fixed design", 1, "", "")
        scan = scan_until_turned(lambda T: deployed_bound_full(s, T), lambda T: _floor_full(s, T),
                                 maximum=T_SEARCH_MAX)
        k_dom = f"{N} only (K unset: all N clients)"
        return DesignSearch(_full_design(s, scan.x), {"T": scan.domain, "K": k_dom},
                            "exhaustive scan in T, stopped where the accumulated-noise term alone (never "
                            "decreasing in T) exceeds the best bound", scan.points, scan.capped, "")
    cal = KofNCalibration(s["eps"], s["delta"], K / N, DEFAULT_ORDERS[DEFAULT_ORDERS <= ORDER_CAP])
    found = _best_T_at_k(s, K, math.inf, T_fixed, cal)
    if found is not None and cal.best_order(found[2], found[0], DEFAULT_ORDERS) >= ORDER_CAP:
        cal = KofNCalibration(s["eps"], s["delta"], K / N)  # the cap binds: every order, at ~50x the cost
        found = _best_T_at_k(s, K, math.inf, T_fixed, cal)
    if found is None:
        raise nb_infeasible(s, [K])
    T, _, z, examined = found
    dom = f"{T_fixed} (set by the user)" if T_fixed is not None else \
        f"1..{examined} (every T bracketed; widened until the noise term alone exceeded the best bound)"
    return DesignSearch(_k_design(s, K, T, z), {"T": dom, "K": f"{K} (set by the user)"},
                        "branch and bound over T on brackets of the RDP noise multiplier z_K(T) (non-"
                        "decreasing in T), each T's bound bracketed by the noise it needs",
                        examined, "", "")


def nb_infeasible(s: Mapping[str, Any], Ks: list[int]) -> Exception:
    from fedbound.errors import InfeasibleError

    return InfeasibleError(f"no NbAFL design at K = {Ks[0]} has a defined bound: Theorem 3 of NbAFL (Wei et "
                           "al. 2020), eq. (17), needs 0 < Q < 1 (alpha_2 < 0 needs K > B^2)")
