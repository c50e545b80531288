"""The NbAFL design a designer deploys: the bound that applies, evaluated with the noise the design deploys.

NbAFL (Wei et al. 2020); spec 002 F18, F32, E8.  A design is (T, K): T rounds, K of N clients a round
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
K < N (the config's K) by branch and bound on brackets of z_K(T), which is non-decreasing in T.  With K
open (``joint_k``), :func:`_joint` searches every (T, K), K = N by Theorem 2 and K < N by Theorem 3: one
vectorised grid of the one-step K-of-N RDP (:mod:`fedbound.accounting.wor_rdp`) brackets z_K(T) for every
(K, T) at once, branch and bound prunes, bisection with exact RDP refines the survivors, and the argmin's z
is recalibrated by dp-accounting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb
from fedbound.scheduling.certificate import scan_until_turned

__all__ = ["Design", "deployed_bound_full", "deployed_bound_k", "optimal_design", "KofNCalibration",
           "T_SEARCH_MAX"]

def _rdp() -> Any:
    """fedbound.accounting.rdp, imported when first used (a cached plan imports neither scipy nor sympy)."""
    from fedbound.accounting import rdp

    return rdp


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
    """Theorem 2 (NbAFL, eq. (14), recursive form F18) at every T with the noise K = N deploys."""
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


SPECULATE_DEPTH = 4
"""Bisection levels whose midpoints :meth:`KofNCalibration.calibrate` evaluates in one call (15 z's cost
about two single ones)."""


def _bisection_tree(lo: float, hi: float, rtol: float, depth: int) -> list[float]:
    """The geometric midpoints (``math.sqrt(lo * hi)``, as :meth:`KofNCalibration.split` computes them) that
    bisection of (lo, hi] may visit in its next ``depth`` steps, brackets narrower than 1 + rtol left out."""
    out, level = [], [(lo, hi)]
    for _ in range(depth):
        nxt = []
        for a, b in level:
            if b / a > 1 + rtol:
                m = math.sqrt(a * b)
                out.append(m)
                nxt += [(a, m), (m, b)]
        level = nxt
    return out


class KofNCalibration:
    """z_K(T) for every T at once: the RDP noise multiplier of T rounds of K-of-N sampled Gaussians.

    One-step RDP of sampling without replacement (Wang, Balle & Kasiviswanathan 2019, through
    dp-accounting) is computed once per z and scales linearly in T, so every evaluated z says for *every* T
    whether it meets (eps, delta).  Brackets [lo(T), hi(T)] on z_K(T) tighten as z's are evaluated;
    :meth:`calibrate` narrows one T's bracket to ``rtol``.  The calibrated multiplier is ``hi`` (meets the
    target), as :func:`fedbound.accounting.calibrate_noise` with method "rdp" would give up to ``rtol``.
    """

    def __init__(self, eps: float, delta: float, q: float, orders: np.ndarray | None = None) -> None:
        self.eps, self.delta, self.q = float(eps), float(delta), float(q)
        self.orders = np.asarray(_rdp().DEFAULT_ORDERS if orders is None else orders)
        self._rdp: dict[float, np.ndarray] = {}

    _SHARED: dict[tuple[float, float, bytes], np.ndarray] = {}
    """One-step RDP by (q, z, orders), shared by every calibration of the process: a re-plan that keeps
    (eps, delta, K) asks for the same z's."""

    def _one_step(self, z: float) -> np.ndarray:
        if z not in self._rdp:
            key = (self.q, float(z), self.orders.tobytes())
            if key not in self._SHARED:
                if len(self._SHARED) > 4096:
                    self._SHARED.clear()
                one_step = _rdp().rdp_sampled_without_replacement(self.orders, self.q, z)
                self._SHARED[key] = np.asarray(one_step, dtype=float)
            self._rdp[z] = self._SHARED[key]
        return self._rdp[z]

    def epsilon(self, z: float, T: np.ndarray) -> np.ndarray:
        T = np.atleast_1d(np.asarray(T, dtype=float))
        rdp = T[:, None] * self._one_step(z)[None, :]
        return np.atleast_1d(_rdp().rdp_to_dp(self.orders, rdp, self.delta))

    def best_order(self, z: float, T: int, orders: np.ndarray) -> float:
        """The Renyi order at which ``orders`` convert T rounds at multiplier z to the smallest eps."""
        rdp = np.asarray(_rdp().rdp_sampled_without_replacement(orders, self.q, z), dtype=float)
        return float(_rdp().rdp_to_dp(orders, T * rdp, self.delta, return_order=True)[1])

    def brackets(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): z_K(T) in (lo, hi] from every z evaluated so far (lo 0, hi inf where none says)."""
        T = np.atleast_1d(np.asarray(T, dtype=float))
        lo, hi = np.zeros(T.shape), np.full(T.shape, np.inf)
        if not self._rdp:
            return lo, hi
        zs = np.array(list(self._rdp))  # every z at every T in one conversion (row by row: the same eps)
        rdp = T[None, :, None] * np.stack([self._rdp[z] for z in zs])[:, None, :]
        eps = np.asarray(_rdp().rdp_to_dp(self.orders, rdp.reshape(-1, self.orders.size), self.delta))
        ok = eps.reshape(zs.size, T.size) <= self.eps
        hi = np.minimum(hi, np.min(np.where(ok, zs[:, None], np.inf), axis=0))
        lo = np.maximum(lo, np.max(np.where(ok, 0.0, zs[:, None]), axis=0))
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
        while hi / lo > 1 + rtol:  # bisection, its next SPECULATE_DEPTH levels' one-step RDP in one call
            self._prefetch(_bisection_tree(lo, hi, rtol, SPECULATE_DEPTH))
            for _ in range(SPECULATE_DEPTH):
                if hi / lo <= 1 + rtol:
                    break
                lo, hi = self.split(T, lo, hi)
        return hi

    def _prefetch(self, zs: list[float]) -> None:
        """One-step RDP of several z's in one vectorised ``wor_rdp_pairs`` call, into the shared cache only
        (a z counts as evaluated, for :meth:`brackets`, when :meth:`split` visits it): the rows equal
        ``rdp_sampled_without_replacement``'s one z at a time (a row depends on its own z; tested), so the
        search visits the same z's and returns the same z, at about half the cost per z."""
        from fedbound.accounting.events import sample_fraction
        from fedbound.accounting.wor_rdp import wor_rdp_pairs

        tag = self.orders.tobytes()
        todo = sorted({float(z) for z in zs if 1e-3 <= z <= 1e6} - {k[1] for k in list(self._SHARED)
                                                                     if k[0] == self.q and k[2] == tag})
        if len(todo) < 2:
            return
        k, n = sample_fraction(self.q)
        with np.errstate(all="ignore"):
            rows = wor_rdp_pairs(_rdp().check_orders(self.orders), np.full(len(todo), k / n), np.array(todo))
        if len(self._SHARED) + len(todo) > 4096:
            self._SHARED.clear()
        for z, row in zip(todo, rows, strict=True):
            if np.all(np.isfinite(row) & (row >= 0)):  # else _one_step's own path (dp-accounting) decides
                self._SHARED[(self.q, z, tag)] = row.astype(float)

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
    """Theorem 3 (NbAFL, eq. (17)) at (T, K) with the deployed aggregate noise of multiplier ``z``."""
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


def optimal_design(s: Mapping[str, Any], joint_k: bool = False) -> DesignSearch:
    """The argmin over the open T of the bound that applies to the design, with the noise it deploys.

    ``s``: an NbAFL setting (spec 002 notation).  A T in it is held fixed.  K is the config's: unset means
    all N clients every round (the [nbafl] section's documented meaning), read by Theorem 2; K < N by
    Theorem 3 (module docstring).  ``joint_k``: K unset is open instead, searched with T over 1..N
    (:func:`_joint`).
    """
    N = int(s["N"])
    if joint_k and s.get("K") is None:
        return _joint_search(s)
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
    orders = _rdp().DEFAULT_ORDERS
    cal = KofNCalibration(s["eps"], s["delta"], K / N, orders[orders <= ORDER_CAP])
    found = _best_T_at_k(s, K, math.inf, T_fixed, cal)
    if found is not None and cal.best_order(found[2], found[0], _rdp().DEFAULT_ORDERS) >= ORDER_CAP:
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


Z_GRID_RATIO = 1.03
"""The joint search brackets every z_K(T) between neighbours of a geometric grid of this ratio."""
JOINT_PAIRS_MAX = 50_000_000
"""Most (K, T) pairs the joint search brackets at once (memory); past it the T range is capped (said)."""


class _KGrid:
    """Brackets of z_K(T) for every admissible K < N and every T, from one grid of z.

    One-step RDP of K-of-N sampling is computed once per (K, z) (:func:`fedbound.accounting.wor_rdp.
    wor_rdp_pairs`, vectorised); T rounds meet (eps, delta) at z iff min over orders of T rdp + offset <=
    eps, i.e. iff T <= Tmax(K, z) = max over orders of (eps - offset) / rdp: one number per (K, z) says it
    for every T.  z_K(T) lies in (G[j-1], G[j]] with j the first grid point whose Tmax reaches T.
    """

    def __init__(self, eps: float, delta: float, q: np.ndarray, orders: np.ndarray) -> None:
        from fedbound.accounting.rdp import conversion_offset, kl_budget

        self.eps, self.delta, self.q, self.orders = eps, delta, q, orders
        self.off = np.asarray(conversion_offset(orders, np.asarray(delta)), float).reshape(-1)
        self.kl = float(kl_budget(np.asarray(delta)))
        self.G = np.geomspace(0.05, 2.0, int(math.ceil(math.log(40) / math.log(Z_GRID_RATIO))) + 1)
        self.Tmax = self._tmax(self.G)

    _ROWS: dict[tuple[bytes, float, float], np.ndarray] = {}
    """One-step RDP rows by (orders, q, z), shared by every search of the process: the grid G does not depend
    on (eps, delta), so a re-plan at a new eps finds its rows here."""
    ROWS_MAX = 20_000

    def rdp(self, q: np.ndarray, z: np.ndarray) -> np.ndarray:
        """:func:`fedbound.accounting.wor_rdp.wor_rdp_pairs` of the pairs (q[i], z[i]), each row computed once
        per process (a row depends on its own pair only: the kept rows equal a fresh call's, tested)."""
        from fedbound.accounting.wor_rdp import wor_rdp_pairs

        tag = self.orders.tobytes()
        keys = [(tag, float(a), float(b)) for a, b in zip(np.ravel(q), np.ravel(z), strict=True)]
        rows = self._ROWS
        found = [rows.get(k) for k in keys]  # read once: another thread may clear the cache meanwhile
        missing = sorted({k for k, r in zip(keys, found, strict=True) if r is None})
        if missing:
            qs, zs = (np.array([k[i] for k in missing]) for i in (1, 2))
            new = wor_rdp_pairs(self.orders, qs, zs)
            fresh = dict(zip(missing, new, strict=True))
            if len(rows) + len(missing) > self.ROWS_MAX:
                rows.clear()
            rows.update(fresh)
            found = [fresh[k] if r is None else r for k, r in zip(keys, found, strict=True)]
        return np.array(found).reshape(len(keys), self.orders.size)

    def _tmax(self, G: np.ndarray) -> np.ndarray:
        r = self.rdp(np.repeat(self.q, G.size), np.tile(G, self.q.size)).reshape(self.q.size, G.size, -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(r > 0, np.maximum((self.eps - self.off) / r, self.kl / r * (1 - 1e-12)), np.inf)
        return np.maximum.accumulate(np.max(t, axis=-1), axis=1)

    def cover(self, T: int) -> None:
        """Extend the grid upward until every K's z_K(T) is bracketed."""
        while np.any(self.Tmax[:, -1] < T):
            top = self.G[-1] * Z_GRID_RATIO ** np.arange(1, int(math.log(2) / math.log(Z_GRID_RATIO)) + 2)
            self.G = np.concatenate([self.G, top])
            self.Tmax = np.maximum.accumulate(np.concatenate([self.Tmax, self._tmax(top)], axis=1), axis=1)

    def brackets(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi), shape (K's, len(T)): z_K(T) in (lo, hi]; lo 0 below the grid, hi inf above it."""
        j = np.stack([np.searchsorted(row, T, side="left") for row in self.Tmax])
        G0 = np.concatenate([[0.0], self.G, [np.inf]])
        return G0[j], G0[j + 1]

    def meets(self, k: np.ndarray, T: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Whether T rounds at multiplier z meet (eps, delta) for the K's of index k (exact RDP, pairwise)."""
        r = self.rdp(self.q[k], z)
        return np.atleast_1d(_rdp().rdp_to_dp(self.orders, T[:, None] * r, self.delta)) <= self.eps


def _joint(s: Mapping[str, Any], full: Design, T_fixed: int | None, orders: np.ndarray,
           rtol: float = 1e-6) -> tuple[Design, dict[str, str], int, str]:
    """Branch and bound over every (K, T), K < N by Theorem 3, against ``full`` (K = N, Theorem 2).

    Each pair's bound is bracketed by the bounds at the ends of its z bracket (the bound grows with z);
    pairs whose lower end is not below the best design found are pruned, the rest bisected in z (exact RDP)
    until they are pruned or their z is known to ``rtol`` (that of :meth:`KofNCalibration.calibrate`).
    """
    N = int(s["N"])
    th = {K: _thm3(s, K) for K in range(1, N)}
    Ks = np.array([K for K, v in th.items() if v is not None], dtype=int)
    best = (full.bound, None, full.T, math.nan)
    if not Ks.size:
        return full, {"K": f"{N} only (Theorem 3 needs 0 < Q < 1 at every K < N)"}, 0, ""
    Q, a1, a0 = (np.array([th[int(K)][i] for K in Ks]) for i in range(3))
    up = _uplink(s)
    cst = 2 * s["C"] / (s["m"] * Ks)

    def rb(k: np.ndarray, T: np.ndarray, z: np.ndarray) -> np.ndarray:
        agg = np.maximum(z * cst[k], up / np.sqrt(Ks[k]))
        frac = -np.expm1(T * np.log(Q[k])) / (1 - Q[k])
        return Q[k] ** T * s["Theta"] + frac * _noise_term(a1[k], a0[k], s["beta"], agg / 2)

    kk = np.arange(Ks.size)
    floor_noise = _noise_term(a1, a0, s["beta"], up / np.sqrt(Ks) / 2)
    if T_fixed is not None:
        low = rb(kk, np.full(Ks.size, float(T_fixed)), np.zeros(Ks.size))
    else:  # at the uplink floor's noise the bound is monotone in T: its inf is at T = 1 or T -> inf
        low = np.minimum(rb(kk, np.ones(Ks.size), np.zeros(Ks.size)), floor_noise / (1 - Q))
    alive = low < best[0]
    n_floor_pruned = int(Ks.size - alive.sum())
    Ks, Q, a1, a0, cst = Ks[alive], Q[alive], a1[alive], a0[alive], cst[alive]
    if not Ks.size:
        return full, {"K": f"1..{N} (K < N pruned by the uplink floor alone)"}, 0, ""
    grid = _KGrid(float(s["eps"]), float(s["delta"]), Ks / N, orders)
    kk = np.arange(Ks.size)
    capped = ""
    T_cap = T_fixed if T_fixed is not None else 64
    while True:
        Ts = np.array([T_fixed]) if T_fixed is not None else np.arange(1, T_cap + 1)
        grid.cover(int(Ts[-1]))
        lo, hi = grid.brackets(Ts)
        kmat = np.broadcast_to(kk[:, None], lo.shape)
        tmat = np.broadcast_to(Ts[None, :].astype(float), lo.shape)
        upper = rb(kmat, tmat, hi)
        i = np.unravel_index(np.argmin(upper), upper.shape)
        if upper[i] < best[0]:
            best = (float(upper[i]), int(kmat[i]), int(tmat[i]), float(hi[i]))
        if T_fixed is not None:
            break
        last = -np.expm1(T_cap * np.log(Q)) / (1 - Q) * _noise_term(
            a1, a0, s["beta"], np.maximum(lo[:, -1] * cst, up / np.sqrt(Ks)) / 2)
        if np.all(last >= best[0]):  # the noise term never decreases in T: no T > T_cap can win
            break
        if T_cap >= T_SEARCH_MAX or 2 * T_cap * Ks.size > JOINT_PAIRS_MAX:
            capped = f"T capped at {T_cap} (memory bound {JOINT_PAIRS_MAX:,} pairs / T_SEARCH_MAX)"
            break
        T_cap *= 2
    points = int(lo.size)
    lower = rb(kmat, tmat, lo)
    sel = lower < best[0]
    k, T, lo, hi = kmat[sel], tmat[sel], lo[sel], hi[sel]
    while k.size:
        ub, lb = rb(k, T, hi), rb(k, T, lo)
        j = int(np.argmin(ub))
        if ub[j] < best[0]:
            best = (float(ub[j]), int(k[j]), int(T[j]), float(hi[j]))
        keep = lb < best[0]
        k, T, lo, hi, ub, lb = k[keep], T[keep], lo[keep], hi[keep], ub[keep], lb[keep]
        todo = (hi > lo * (1 + rtol)) & (ub > lb)
        if not todo.any():
            break
        k, T, lo, hi = k[todo], T[todo], lo[todo], hi[todo]
        mid = np.where(lo > 0, np.sqrt(lo * np.minimum(hi, lo * 1e6)), hi / 4)
        ok = grid.meets(k, T, mid)
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    dom_T = f"{T_fixed} (set by the user)" if T_fixed is not None else \
        f"1..{T_cap} (widened until every K's noise term alone exceeded the best bound)"
    dom_K = (f"1..{N} (K = N by Theorem 2; K < N by Theorem 3, {n_floor_pruned} of {N - 1} pruned by the "
             "uplink floor alone, the rest by branch and bound)")
    if best[1] is None:
        return full, {"T": dom_T, "K": dom_K}, points, capped
    K = int(Ks[best[1]])
    cal = KofNCalibration(s["eps"], s["delta"], K / N, orders)  # the argmin's z by dp-accounting, from a
    for zz in (best[3] * (1 + rtol / 2), best[3] / (1 + rtol / 2)):  # bracket seeded at the search's z
        cal.epsilon(zz, np.array([best[2]]))
    z = cal.calibrate(best[2], rtol)
    return _k_design(s, K, best[2], z), {"T": dom_T, "K": dom_K}, points, capped


def _joint_search(s: Mapping[str, Any]) -> DesignSearch:
    """The argmin over K in 1..N and the open T (:func:`_joint`), the order cap lifted where it binds."""
    full = optimal_design(s)
    T_fixed = int(s["T"]) if s.get("T") is not None else None
    orders = _rdp().DEFAULT_ORDERS[_rdp().DEFAULT_ORDERS <= ORDER_CAP]
    d, dom, points, capped = _joint(s, full.design, T_fixed, orders)
    if d.K is not None and KofNCalibration(s["eps"], s["delta"], d.K / s["N"]).best_order(
            d.z, d.T, _rdp().DEFAULT_ORDERS) >= ORDER_CAP:
        d, dom, points, capped = _joint(s, full.design, T_fixed, _rdp().DEFAULT_ORDERS)
    dom = {"T": full.domain["T"] if d.K is None else dom["T"], "K": dom["K"],
           **({"T (K < N)": dom["T"]} if d.K is None and "T" in dom else {})}
    search = ("K = N: " + full.search + "; K < N: branch and bound over every (K, T) on brackets of the RDP "
              "noise multiplier z_K(T) from one vectorised grid of z (one-step RDP per (K, z), every T at "
              "once), refined by bisection with exact RDP; the argmin's z recalibrated by dp-accounting")
    return DesignSearch(d, dom, search, full.points + points, capped or full.capped, "")
