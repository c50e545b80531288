"""UDP's optimal number of rounds and the plan a designer reads (seed 003, Theorems 1-3; Algorithm 2's CRD).

* :func:`optimal_T`: Theorem 3's integer optimum of eq. (22) with a certificate (closed form with the Wright
  omega function, unimodality, both integer neighbours evaluated).
* :func:`optimal_T_tight`: the same trade-off with the noise of the tight calibration: eq. (22)'s privacy term
  is (L^2/2mu) x mean_i sigma_i^2 (identity D6), so h_tight(T) = A^T Theta + (1 - A^T)((L^2/2mu) mean_i
  sigma_tight,i(T)^2 + b), with sigma_tight the exact calibration of Algorithm 1's release for every
  realised participation pattern (:func:`fedbound.bounds.udp_moments.sigma_exact` at the rate
  :data:`ACCOUNTED_RATE`); an exhaustive scan in T stops where the accumulated term, which never decreases
  in T, exceeds the best bound (a certificate, not a heuristic).

The recommendation is what ``fedbound train --design recommended`` deploys and its ledger certifies: the
ledger counts each client's realised uploads (the server sees who uploads), so a client the random K-of-N
selection picks in all T rounds must meet (eps_i, delta_i) too, and sigma is the T-fold Gaussian
calibration (issue 36: the plan said 0.0177 at K < N, counting the selection's randomness, and training
deployed 0.0212).  The smaller sigma that counts the random selection (Algorithm 1's release averaged over
it, a Binomial(T, K/N) mixture: (eps, delta)-DP over the selection, not for every pattern) is shown beside
it.
* :func:`plan`: the recommendation first (T, sigma per client under the tight accountant at that T, the
  bound), then the paper's answer beside it (eq. (10)'s sigma and the delta it really achieves).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fedbound.bounds import udp
from fedbound.bounds import udp_moments as um
from fedbound.bounds.claims import Claim, Computed, Region
from fedbound.errors import ParameterError
from fedbound.scheduling.certificate import (
    Certificate,
    OptimumCheck,
    PrivacyCheck,
    brute_force_argmin,
    scan_until_turned,
)
from fedbound.scheduling.crd import CRDPolicy, heuristic_search_T, run_crd
from fedbound.scheduling.results import Optimum, Plan, Recommendation, Row

__all__ = [
    "coeffs",
    "optimal_T",
    "optimal_T_tight",
    "optimal_T_tight_many",
    "bound_tight",
    "bound_tight_curve",
    "recommended",
    "plan",
    "parse_grid",
    "CLAIMS",
    "TIGHT_ACCOUNTING",
]

SHORT = udp.SHORT
ACCOUNTED_RATE = 1.0
"""The selection rate the recommendation's accounting counts: 1, every realised participation pattern (a
client may upload in all T rounds; module docstring).  The selection-averaged mixture uses K/N."""
TIGHT_ACCOUNTING = (
    "exact privacy profile of Algorithm 1's uploads for every realised participation pattern (the server "
    "sees who uploads; a client selected in all T rounds composes T Gaussian releases, one Gaussian of "
    "multiplier z/sqrt(T): the analytic Gaussian of Balle & Wang 2018), what fedbound's ledger certifies; "
    "no bound, no discretisation"
)
MIXTURE_ACCOUNTING = (
    "Algorithm 1's release averaged over the random K-of-N selection (nothing w.p. 1 - q, Gaussian w.p. q): "
    "a Binomial(T, q) mixture of analytic Gaussians, (eps, delta)-DP over the selection, not for every "
    "realised pattern"
)
PREMISES = (
    "one full-batch gradient step per round with per-sample clipping to C, so Delta_l = 2 eta C/|D_i| "
    f"({SHORT}, eq. (13))",
    "replace-one adjacency of a client's local dataset; the server is honest-but-curious",
    "the guarantee holds for every realised participation pattern (what fedbound's ledger counts); counting "
    "the server's random K-of-N selection instead (noise(..., 'tight'), a Binomial mixture) needs less noise "
    "but holds only on average over the selection",
    f"the loss constants L, mu, xi-bar, Theta of Theorem 2 ({SHORT}, eq. (22)); its proof is not in "
    "the seed text",
)


def coeffs(s: Mapping[str, Any]) -> dict[str, float]:
    """Theorem 2's constants for a planner setting (per-client eps_i, delta_i; Delta_l of the smallest
    dataset, the worst case)."""
    arr = udp.client_arrays(s)
    return udp.bound_coeffs(
        int(s["N"]),
        int(s.get("K") or s["N"]),
        arr["eps"],
        arr["delta"],
        s["L"],
        s["mu"],
        s["eta"],
        float(arr["sens"].max()),
        s["div"],
        s["theta0"],
    )


def optimal_T(co: Mapping[str, float], T_max: int | None = None) -> Optimum:
    """The integer T minimising eq. (22), certified: h is strictly quasi-convex (h' = A^T g, g increasing;
    Theorem 3 corrected), so the better of floor/ceil of the Wright-omega T* is the integer optimum."""
    t_cont = udp.optimal_T(co)
    t_int = udp.optimal_T_int(co)
    if T_max is not None and t_int > T_max:
        t_int = int(T_max)
    fun = udp.bound(t_int, co)
    below = udp.bound(t_int - 1, co) if t_int > 1 else math.inf
    above = udp.bound(t_int + 1, co) if T_max is None or t_int < T_max else math.inf
    edge = t_int == 1
    msg = (
        "Theta <= b: h increases in T, the best integer is T = 1"
        if co["theta0"] <= co["b"]
        else "interior optimum: h decreases before T* and increases after (quasi-convex)"
    )
    return Optimum(
        x=t_int,
        fun=float(fun),
        success=bool(fun <= below and fun <= above),
        message=msg,
        method="closed form (Wright omega) + integer neighbours",
        bracket=(1, T_max),
        fun_below=float(below),
        fun_above=float(above),
        at_lower_edge=edge,
        at_upper_edge=T_max is not None and t_int == T_max,
        x_continuous=t_cont,
        evidence={
            "T_convexity_limit": udp.convexity_limit(co),
            "h_prime_at_x": udp.bound_d1(t_int, co),
            "R": 1.0 + co["c"] * (co["theta0"] - co["b"]) / co["a"],
        },
    )


def _sigma_tight(s: Mapping[str, Any], T: int) -> np.ndarray:
    """The recommendation's sigma per client at T rounds (:data:`ACCOUNTED_RATE`: every realised pattern)."""
    return udp.noise(s, T, "tight_participation")["uplink"]


def bound_tight(s: Mapping[str, Any], co: Mapping[str, float], T: int) -> tuple[float, np.ndarray]:
    sig = _sigma_tight(s, T)
    noise_term = s["L"] ** 2 / (2.0 * s["mu"]) * float(np.mean(sig**2))
    A_T = math.exp(-co["c"] * T)
    return A_T * co["theta0"] + (1.0 - A_T) * (noise_term + co["b"]), sig


def _classes(s: Mapping[str, Any]) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
    """Each client's class index and the distinct (eps_i, delta_i, Delta_l,i) classes."""
    arr = udp.client_arrays(s)
    keys = [(float(e), float(d), float(x)) for e, d, x in zip(arr["eps"], arr["delta"], arr["sens"],
                                                               strict=True)]
    uniq = list(dict.fromkeys(keys))
    return np.array([uniq.index(k) for k in keys]), uniq


_Z_CACHE: dict[tuple[float, float, float, int], float] = {}
_Z_CACHE_MAX = 200_000
"""The exact multipliers z(eps_i, delta_i, q, T) the scans and curves have computed in this process (a warm
re-plan or a curve reuses the plan's; bounded: cleared when full)."""


def _z_grid(classes: Sequence[tuple[float, float, float]], T: np.ndarray) -> np.ndarray:
    """z_exact for every (eps, delta, q) class x every T: the missing ones in one vectorised
    :func:`fedbound.bounds.udp_moments.z_exact` call, the rest from :data:`_Z_CACHE`."""
    keys = [(e, d, q, int(t)) for e, d, q in classes for t in T]
    found = {k: _Z_CACHE.get(k) for k in keys}  # read once: another thread may clear the cache meanwhile
    missing = [k for k, z in found.items() if z is None]
    if missing:
        z = um.z_exact(*(np.array(c, dtype=float) for c in zip(*missing, strict=True)))
        found.update(zip(missing, z.tolist(), strict=True))
        if len(_Z_CACHE) + len(missing) > _Z_CACHE_MAX:
            _Z_CACHE.clear()
        _Z_CACHE.update(zip(missing, z.tolist(), strict=True))
    return np.array([found[k] for k in keys]).reshape(len(classes), len(T))


def _noise_term(s: Mapping[str, Any], T: np.ndarray) -> np.ndarray:
    """(L^2/2mu) x mean_i sigma_i(T)^2 with each client's exact sigma (:func:`udp_moments.sigma_exact`: z x
    Delta_l,i), vectorised over T through :func:`_z_grid`."""
    idx, uniq = _classes(s)
    T = np.atleast_1d(np.asarray(T))
    sens = np.array([x for _, _, x in uniq])[:, None]
    per = _z_grid([(e, d, ACCOUNTED_RATE) for e, d, _ in uniq], T) * sens
    return s["L"] ** 2 / (2.0 * s["mu"]) * np.mean(per[idx] ** 2, axis=0)


def bound_tight_curve(s: Mapping[str, Any], co: Mapping[str, float], T: np.ndarray) -> np.ndarray:
    """:func:`bound_tight`'s bound at every T of a grid at once (eq. (22) with the exact sigma each T deploys;
    one vectorised calibration, equal to the point-by-point values to float rounding)."""
    T = np.atleast_1d(np.asarray(T))
    A = np.exp(-co["c"] * T)
    return A * co["theta0"] + (1.0 - A) * (_noise_term(s, T) + co["b"])


def recommended(s: Mapping[str, Any], co: Mapping[str, float]) -> tuple[int, float]:
    """The plan's recommended (T, bound) alone (``plan(s).recommendation``'s T and bound, without the rest
    of the plan): the user's T with its tight bound, else the scan's optimum."""
    if s.get("T"):
        return int(s["T"]), float(bound_tight(s, co, int(s["T"]))[0])
    opt = _optimal_T_scan(s, co)[0]
    return int(opt.x), float(opt.fun)


def optimal_T_tight(s: Mapping[str, Any], co: Mapping[str, float]) -> tuple[Optimum, np.ndarray]:
    """The integer T minimising eq. (22) with the exact noise each T deploys, and the sigma's at it."""
    opt, sig, _ = _optimal_T_scan(s, co)
    return opt, sig


class _Beyond(Exception):
    """A scan asked for a T whose calibration is not in the cache yet (:func:`optimal_T_tight_many`)."""


def _scan(s: Mapping[str, Any], co: Mapping[str, float], upto: int | None = None) -> Any:
    """The T scan (:func:`fedbound.scheduling.certificate.scan_until_turned`): exhaustive in T, stopped where
    the accumulated term (1 - A^T)(noise(T) + b), which never decreases in T, exceeds the best bound.  With
    ``upto``, a T beyond it raises :class:`_Beyond` before anything is calibrated."""
    c, theta0, b = co["c"], co["theta0"], co["b"]

    def noise(T: np.ndarray) -> np.ndarray:
        if upto is not None and int(T[-1]) > upto:
            raise _Beyond
        return _noise_term(s, T)

    def bound(T: np.ndarray) -> np.ndarray:
        A = np.exp(-c * T)
        return A * theta0 + (1.0 - A) * (noise(T) + b)

    def floor(T: np.ndarray) -> np.ndarray:
        return -np.expm1(-c * T) * (noise(T) + b) if b >= 0 else np.full(T.shape, -np.inf)

    return scan_until_turned(bound, floor, chunk=SCAN_CHUNK, maximum=T_SEARCH_MAX)


SCAN_CHUNK = 64
"""T values per step of the scan (and per batched calibration of :func:`optimal_T_tight_many`)."""


def optimal_T_tight_many(settings: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """(argmin T, bound) of :func:`optimal_T_tight` for many settings (a curve against eps or K): the same
    scans, run in lockstep so that each chunk of T's is calibrated for every setting still scanning in one
    vectorised call.  The bound is the scan's own value (the batched calibration: equal to
    ``optimal_T_tight(...)[0].fun`` to float rounding, the same T)."""
    cos = [coeffs(s) for s in settings]
    out: dict[int, tuple[int, float]] = {}
    upto = 0
    while len(out) < len(settings) and upto < T_SEARCH_MAX:
        upto = min(upto + SCAN_CHUNK, T_SEARCH_MAX)
        pending = [i for i in range(len(settings)) if i not in out]
        classes = {(e, d, ACCOUNTED_RATE) for i in pending for e, d, _ in _classes(settings[i])[1]}
        _z_grid(sorted(classes), np.arange(upto - SCAN_CHUNK + 1, upto + 1))
        for i in pending:
            try:
                scan = _scan(settings[i], cos[i], None if upto >= T_SEARCH_MAX else upto)
            except _Beyond:
                continue
            out[i] = (int(scan.x), float(scan.fun))
    return [out[i] for i in range(len(settings))]


def _optimal_T_scan(s: Mapping[str, Any], co: Mapping[str, float]) -> tuple[Optimum, np.ndarray, Any]:
    """:func:`optimal_T_tight` and its scan (:func:`_scan`)."""
    scan = _scan(s, co)
    T = scan.x
    fun, sig = bound_tight(s, co, T)
    return Optimum(
        x=T,
        fun=fun,
        success=not scan.capped,
        message=scan.domain + (f"; {scan.capped}" if scan.capped else ""),
        method="exhaustive scan with a monotone stopping floor",
        at_lower_edge=T == 1,
        evidence={"points": scan.points, "stop": scan.stop},
    ), sig, scan


T_SEARCH_MAX = 1_000
"""Documented maximum of UDP's T scan (each T costs an exact calibration whose cost grows with T); a
larger optimum is reported as capped in the certificate."""


def _eps_release(eps_target: float, delta: float, q: float, T: int, z: float) -> float:
    """The eps at which T rounds of Algorithm 1's release at multiplier z spend delta, exactly (bisection)."""
    lo, hi = 0.0, eps_target
    while um.release_log_delta(hi, q, T, z) > math.log(delta):
        lo, hi = hi, 2 * hi
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if um.release_log_delta(mid, q, T, z) <= math.log(delta) else (mid, hi)
    return float(hi)


def _certificate(s: Mapping[str, Any], co: Mapping[str, float], rec: Recommendation, scan: Any,
                 check: bool) -> Certificate:
    """The T scan, an independent check through ``udp.noise`` (the function training calls), and every
    client class's (eps, delta) re-accounted exactly for the deployed sigma."""
    T = rec.T
    near = np.arange(max(1, T - 2), T + 3) if scan is not None else np.array([T])

    def one_by_one(T: np.ndarray) -> np.ndarray:  # the noise training asks for, T by T
        return np.array([bound_tight(s, co, int(t))[0] for t in T])

    def all_at_once(T: np.ndarray) -> np.ndarray:  # every T's calibration in one vectorised bisection
        A = np.exp(-co["c"] * T)
        return A * co["theta0"] + (1.0 - A) * (_noise_term(s, T) + co["b"])

    x, fun, points = brute_force_argmin(one_by_one, {"T": near})
    agrees = x["T"] == T and abs(fun - rec.bound) <= 1e-9 * max(1.0, abs(fun))
    note = f"T in {near[0]}..{near[-1]} with sigma from fedbound.bounds.udp.noise"
    if scan is None:
        note = f"T = {T} set by the user: its bound recomputed with sigma from fedbound.bounds.udp.noise"
        xw, funw, _ = brute_force_argmin(all_at_once, {"T": near})
        agrees = agrees and abs(funw - fun) <= 1e-9 * max(1.0, abs(fun))
    elif check:
        dom = np.arange(1, 2 * scan.stop + 1)
        xw, funw, points = brute_force_argmin(all_at_once, {"T": dom})
        agrees = agrees and xw["T"] == T and abs(funw - fun) <= 1e-9 * max(1.0, abs(fun))
        note += f"; every T in 1..{dom[-1]} at once (vectorised calibration)"
    how = ("recomputed two ways at the user's T" if scan is None else
           "brute force" if check else "brute force around the argmin")
    opt = OptimumCheck(how, points, x, fun, agrees, note)
    idx, uniq = _classes(s)
    sig = np.asarray(rec.sigma["uplink"])
    privacy = []
    for k, (e, d, x_) in enumerate(uniq):
        sigma = float(sig[np.flatnonzero(idx == k)[0]])
        privacy.append(PrivacyCheck(
            stage=f"client uploads (eps {e:g}, delta {d:g}; a client selected in all T = {T} rounds)",
            sigma=sigma, eps_target=e, delta=d,
            eps_achieved=_eps_release(e, d, ACCOUNTED_RATE, T, sigma / x_),
            method="exact: T Gaussian releases compose to one (analytic Gaussian); every realised "
                   "participation pattern, as fedbound's ledger counts them",
            sigma_exact=float(um.sigma_exact(e, d, ACCOUNTED_RATE, T, x_))))
    fixed = scan is None
    return Certificate(domain={"T": f"{T} (set by the user)" if fixed else scan.domain,
                               "K": f"{int(s.get('K') or s['N'])} (set by the config)"},
                       search="nothing optimised: T set by the user, sigma calibrated exactly to it" if fixed
                       else "exhaustive scan in T, stopped where the accumulated term alone exceeds the best "
                            "bound", check=opt, privacy=tuple(privacy),
                       vacuous=bool(rec.bound is not None and rec.bound >= co["theta0"]),
                       capped="" if fixed else scan.capped)


def _accountant_deltas(s: Mapping[str, Any], sigma: float, sens: float, T: int) -> dict[str, float]:
    q = int(s.get("K") or s["N"]) / int(s["N"])
    e, d = float(np.min(np.atleast_1d(s["eps"]))), float(np.max(np.atleast_1d(s["delta"])))
    return {acc: um.delta_from_sigmas(e, q, [sigma] * T, sens, acc) for acc in um.ACCOUNTANTS} | {
        "claimed": d
    }


def _worst_client(s: Mapping[str, Any]) -> int:
    arr = udp.client_arrays(s)
    return int(np.argmax(-np.log(arr["delta"]) * arr["sens"] ** 2 / arr["eps"] ** 2))


def _paper_warnings(
    s: Mapping[str, Any], T: int, sig: np.ndarray, arr: dict[str, np.ndarray], deltas: dict[str, float]
) -> list[str]:
    out = []
    i = _worst_client(s)
    e, d = float(arr["eps"][i]), float(arr["delta"][i])
    if deltas["approx"] > d:
        out.append(
            f"{SHORT}, eq. (10): the paper's sigma achieves delta = {deltas['approx']:.4g} (not "
            f"{d:g}) under its own accountant, eqs. (16)-(17) over integer orders; under the exact "
            f"accountant of Algorithm 1's release delta = {deltas['release']:.4g}.  Eq. (21) bounds "
            "ln(1/delta) from the wrong side; use sigma_corrected or sigma_tight"
        )
    if e >= 2.0 * math.log(1.0 / d):
        out.append(
            f"{SHORT}, Theorem 1: at eps = {e:g} >= 2 ln(1/delta) = {2 * math.log(1 / d):.4g} the paper's "
            "sigma gives no guarantee at all (achieved delta >= 1)"
        )
    q = int(s.get("K") or s["N"]) / int(s["N"])
    x = um.validity_x(e, q, [float(sig[i])] * T, float(arr["sens"][i]))
    if x > 0.75:
        out.append(
            f"{SHORT}, eq. (15): lambda Delta_l^2/(2 sigma^2) = {x:.3g} > 0.75 at the optimal order: the "
            "approximation no longer bounds the exact moment"
        )
    return out


def plan(settings: Mapping[str, Any], variant: str = "paper", check: bool = False) -> Plan:
    """Which sigma and how many rounds for a UDP setting: the recommendation (tight accountant at the optimal
    T of eq. (22); a T the user sets is held fixed), then the paper's answer (eq. (10), Theorem 3) with the
    delta it really achieves."""
    udp.NOTATION.variant_names(variant)  # only "paper": ParameterError otherwise
    s = dict(settings)
    n = int(s["N"])
    k = int(s.get("K") or n)
    if k > n:
        raise ParameterError("K", k, f"integer in [1, {n}] (N = {n})")
    co = coeffs(s)
    arr = udp.client_arrays(s)
    t_opt = optimal_T(co)
    T_used = int(s["T"]) if s.get("T") else int(t_opt.x)
    if s.get("T"):  # the user's T is held fixed: only sigma is calibrated (to it)
        scan = None
        fun, rec_sigma = bound_tight(s, co, T_used)
        rec_opt = Optimum(x=T_used, fun=fun, success=True, message=f"T = {T_used} set by the user",
                          method="held fixed (set by the user)", at_lower_edge=T_used == 1)
    else:
        rec_opt, rec_sigma, scan = _optimal_T_scan(s, co)
    T_rec = int(rec_opt.x)
    sig = {
        m: udp.noise(s, T_used, m)["uplink"]
        for m in ("paper", "corrected", "numeric", "numeric_release", "tight")
    }
    sig["mixture"], sig["tight"] = sig["tight"], _sigma_tight(s, T_used)  # the deployed: every pattern
    i = _worst_client(s)
    deltas = _accountant_deltas(
        {**s, "eps": arr["eps"][i], "delta": arr["delta"][i]},
        float(sig["paper"][i]),
        float(arr["sens"][i]),
        T_used,
    )
    warnings = _paper_warnings(s, T_used, sig["paper"], arr, deltas)
    if co["theta0"] <= co["b"]:
        warnings.append(
            f"{SHORT}, Theorem 3: Theta = {co['theta0']:g} <= b = {co['b']:.4g}: the bound (22) "
            "increases in T from the start; T = 1 is optimal and the bound is not informative"
        )
    if s.get("T") and T_used > udp.convexity_limit(co):
        warnings.append(
            f"{SHORT}, eq. (23): T = {T_used} lies beyond T_c = {udp.convexity_limit(co):.4g}, where "
            "(22) is concave in T (the paper's proof claims convexity)"
        )
    optima: dict[str, Optimum] = {"T_opt": t_opt, "T_opt_tight" if scan is not None else "T_user": rec_opt}
    if s.get("T_grid"):
        grid = parse_grid(str(s["T_grid"]))
        optima["heuristic_search"] = heuristic_search_T(lambda T: udp.bound(T, co), grid)
    crd = _crd_summary(s, co, arr) if s.get("crd") else None
    if crd is not None and crd["delta_exact_selection_averaged"][1] > crd["delta_target"] * (1 + 1e-9):
        lo, hi = crd["delta_exact_selection_averaged"]
        warnings.append(
            f"{SHORT}, Algorithm 2 (CRD), Theorem 4 eq. (25): its sigma schedule ({crd['rounds']} rounds, "
            f"budget {crd['budget']}) is budgeted by the paper's accountant (16); re-accounted exactly it "
            f"spends delta = {lo:.4g} to {hi:.4g} at eps = {crd['eps']:g} averaged over the selection "
            f"({crd['delta_exact_every_round']:.4g} for a client selected in every round), against delta = "
            f"{crd['delta_target']:g}: the schedule under-delivers its budget")
    why = (
        (f"T = {T_rec} is set by the user (held fixed); the bound is Theorem 2's (22) with the tight noise "
         "at that T" if scan is None else
         f"T = {T_rec} minimises Theorem 2's bound (22) with the tight noise at every T (its privacy term is "
         "(L^2/2mu) x mean sigma_i^2)")
        + f"; sigma is the smallest std whose {T_rec} rounds meet (eps_i, delta_i) "
        "for every client and every realised participation pattern under the exact accountant of what "
        "Algorithm 1 releases (what fedbound train --design recommended deploys and its ledger certifies)"
    )
    rec = Recommendation(
        T=T_rec,
        K=k,
        sigma={"uplink": rec_sigma},
        bound=float(rec_opt.fun),
        accounting=TIGHT_ACCOUNTING,
        why=why,
        premises=PREMISES,
        extra={"q": k / n, "sensitivity": arr["sens"]},
    )

    def band(x: np.ndarray) -> Any:
        return float(x[0]) if np.allclose(x, x[0]) else f"{x.min():.6g}..{x.max():.6g}"

    rows = (
        Row(
            "sigma per client (uplink)",
            band(sig["paper"]),
            band(sig["tight"]),
            f"at T = {T_used}; paper: eq. (10); tight: Algorithm 1's uploads, exact for every realised "
            "participation pattern (deployed)",
        ),
        Row(
            "sigma counting the random K-of-N selection",
            band(sig["paper"]),
            band(sig["mixture"]),
            f"at T = {T_used}, q = {k / n:g}: {MIXTURE_ACCOUNTING}; fedbound's ledger does not certify it",
        ),
        Row(
            "sigma, corrected closed form",
            band(sig["paper"]),
            band(sig["corrected"]),
            "eqs. (18)-(19) solved for rho",
        ),
        Row("sigma, numeric (paper's accountant, integer orders)", band(sig["paper"]), band(sig["numeric"])),
        Row(
            "delta achieved by the paper's sigma",
            deltas["approx"],
            deltas["release"],
            f"claimed {deltas['claimed']:g}; paper: its accountant (16); tight column: Algorithm 1's release",
        ),
        Row("optimal T", int(t_opt.x), T_rec, "Theorem 3 (Wright omega); tight: same bound, tight noise"
            if scan is not None else "Theorem 3 (Wright omega); tight column: the T set by the user"),
        Row("bound at the optimal T", float(t_opt.fun), float(rec_opt.fun),
            "eq. (22)" if scan is not None else f"eq. (22); tight column: at the user's T = {T_rec}"),
        Row("T_c (end of convexity)", udp.convexity_limit(co), None, "eq. (23) corrected"),
    )
    if crd is not None:  # Theorem 4's schedule: what the paper's accountant claims, what it spends exactly
        lo, hi = crd["delta_exact_selection_averaged"]
        rows += (Row("CRD schedule (Theorem 4): delta at eps", crd["delta_target"], hi,
                     f"paper: eq. (25)'s budget ({crd['budget']}); tight: re-accounted exactly, averaged "
                     f"over the selection (upper end of [{lo:.4g}, {hi:.4g}]); "
                     f"{crd['delta_exact_every_round']:.4g} for a client selected in every round"),)
    if scan is not None:
        data_tight = {"T_opt_tight": T_rec, "bound_at_T_opt_tight": float(rec_opt.fun)}
    else:
        data_tight = {}
    data = {
        "setting": {k_: (v.tolist() if isinstance(v, np.ndarray) else v) for k_, v in s.items()},
        "q": k / n,
        "T": T_used,
        "T_source": "config" if s.get("T") else "T_opt",
        "sigma": sig["paper"],
        "sigma_corrected": sig["corrected"],
        "sigma_numeric": sig["numeric"],
        "sigma_numeric_release": sig["numeric_release"],
        "sigma_tight": sig["tight"],
        "sigma_tight_selection_averaged": sig["mixture"],
        "delta_achieved_by_paper_sigma": deltas,
        "T_opt": int(t_opt.x),
        "T_opt_continuous": udp.optimal_T(co),
        "T_convexity_limit": udp.convexity_limit(co),
        "bound_at_T_opt": float(t_opt.fun),
        "T_recommended": T_rec,
        "bound_at_T_recommended": float(rec_opt.fun),
        "coefficients": co,
        "crd": crd,
        **data_tight,
    }
    if s.get("T"):
        data["bound_at_T"] = udp.bound(T_used, co)
    return Plan(
        paper="udp",
        title=f"{SHORT}: noise and rounds for N = {n}, K = {k}",
        variant=variant,
        recommendation=rec,
        rows=rows,
        optima=optima,
        warnings=tuple(warnings),
        data=data,
        caption="sigma per client; bound = Theorem 2, eq. (22)",
        differences=_differences(sig, T_used, int(t_opt.x), rec, deltas),
        certificate=_certificate(s, co, rec, scan, check),
    )


def _differences(
    sig: dict[str, np.ndarray], T_used: int, T_paper: int, rec: Recommendation, deltas: dict[str, float]
) -> tuple[str, ...]:
    paper, tight = float(np.max(sig["paper"])), float(np.max(sig["tight"]))
    out = [
        f"the paper's sigma at T = {T_used} (eq. (10)) is {paper:.4g}, the tight one {tight:.4g} "
        f"({100 * (paper / tight - 1):+.1f} %); with it delta is {deltas['release']:.3g} instead of "
        f"{deltas['claimed']:g} (Algorithm 1's release)"
    ]
    if T_paper != rec.T and T_used != rec.T:
        out.append(
            f"the paper's optimal T is {T_paper} (Theorem 3 with eq. (10)'s noise); with the tight noise "
            f"it is {rec.T}"
        )
    return tuple(out)


GRID_MAX_POINTS = 10_000
"""The most rounds a ``T_grid`` may list (the heuristic search costs one run per point)."""
GRID_MAX_T = 1_000_000
"""The largest round a ``T_grid`` may hold (the simulator's documented maximum of rounds)."""


def parse_grid(text: str) -> list[int]:
    """ "lo:hi:step" or a comma list of rounds -> the grid of the heuristic search: at most
    :data:`GRID_MAX_POINTS` rounds, each in [1, :data:`GRID_MAX_T`] (checked before the grid is built)."""
    valid = (f'"lo:hi:step" or a comma list of integers, at most {GRID_MAX_POINTS:,} rounds, each in '
             f"[1, {GRID_MAX_T:,}]")
    short = text if len(text) <= 60 else f"{text[:60]}... ({len(text)} characters)"
    try:
        if ":" in text:
            lo, hi, step = (int(x) for x in text.split(":"))
            span = range(lo, hi + 1, step)
            ends = [span[0], span[-1]] if len(span) else []
            if len(span) > GRID_MAX_POINTS:
                raise ParameterError("T_grid", short, valid, f"it lists {len(span):,} rounds")
        else:
            ends = [int(x) for x in text.split(",") if x.strip()]
            if len(ends) > GRID_MAX_POINTS:
                raise ParameterError("T_grid", short, valid, f"it lists {len(ends):,} rounds")
    except ValueError as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError("T_grid", short, valid) from None
    if not ends or min(ends) < 1 or max(ends) > GRID_MAX_T:
        raise ParameterError("T_grid", short, valid)
    return list(span) if ":" in text else ends


def _crd_summary(s: Mapping[str, Any], co: Mapping[str, float], arr: dict[str, np.ndarray]) -> dict[str, Any]:
    """CRD on the bound as a surrogate loss curve: V(w^t) = h(t) (a designer's preview, not a measurement),
    and the privacy its sigma schedule really spends: Theorem 4 (eq. (25)) budgets it by the paper's
    accountant (eq. (16): only sum_t sigma_t^-2 counts), so it is re-accounted exactly for the worst client
    (issue 36): averaged over the random selection (:func:`~fedbound.bounds.udp_moments.schedule_delta`, a
    bracket) and for a client selected in every round (one Gaussian, what fedbound's ledger counts)."""
    n, k = int(s["N"]), int(s.get("K") or s["N"])
    T0 = int(s.get("T") or udp.optimal_T_int(co))
    i = _worst_client(s)
    e, d, sens = float(arr["eps"][i]), float(arr["delta"][i]), float(arr["sens"][i])
    corrected = s.get("calibration") == "corrected"  # the budget Theorem 4 spends, as train's CRD uses it
    phi = (um.budget_phi_corrected if corrected else um.budget_phi)(e, d, k / n, sens)
    trace = run_crd(CRDPolicy(s.get("beta", 0.9), s.get("zeta", 0.001)), lambda t: udp.bound(t, co), T0, phi)
    inv_z2 = (sens / np.ravel(trace.sigmas)) ** 2
    averaged = um.schedule_delta(e, k / n, inv_z2)
    every = um.schedule_delta(e, 1.0, inv_z2)[1]
    return {"surrogate": "V(w^t) = h(t), eq. (22)", **trace.to_dict(),
            "budget": "corrected (eqs. (18)-(19))" if corrected else "the paper's (eq. (10))",
            "delta_target": d, "eps": e, "client": i,
            "delta_exact_selection_averaged": list(averaged),
            "delta_exact_every_round": every,
            "accounting": "Theorem 4's sigma schedule re-accounted exactly: Gaussian releases composed "
                          "(Dong, Roth & Su 2022), averaged over the K-of-N selection (a bracket) and for a "
                          "client selected in every round"}


# ---------------------------------------------------------------------------------------------------------
# Claims about optima and CRD (spec 003 P8, P9, P13 brute force)
# ---------------------------------------------------------------------------------------------------------
def _t_int_is_brute_force(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    co = udp.bound_coeffs(
        *(v[k] for k in ("N", "K", "eps", "delta", "L", "mu", "eta", "sens", "div", "theta0"))
    )
    t_int = udp.optimal_T_int(co)
    hi = max(5000, 3 * t_int)
    grid = np.arange(1, hi + 1)
    brute = int(grid[np.argmin(udp.bound(grid, co))])
    same = brute == t_int or math.isclose(udp.bound(brute, co), udp.bound(t_int, co), rel_tol=1e-13)
    return same, f"closed form {t_int}, brute force {brute}"


def _crd_run(v: Mapping[str, Any]) -> tuple[Any, float]:
    rng = np.random.default_rng(int(v["seed"]))
    drops = np.abs(rng.normal(0.0, 0.01, 400)) * (rng.random(400) < 0.7)
    curve = np.concatenate([[1.0], 1.0 - np.cumsum(drops)])
    phi = float(um.budget_phi(v["eps"], v["delta"], v["q"], v["sens"]))
    return run_crd(CRDPolicy(v["beta"], 0.004), curve, int(v["T"]), phi), phi


def _theorem4_invariants(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    trace, phi = _crd_run(v)
    sig = trace.sigmas
    sigma0 = float(udp.SIGMA(eps=v["eps"], delta=v["delta"], q=v["q"], T=v["T"], sens=v["sens"]))
    first = trace.discounts[0][0] if trace.discounts else trace.rounds
    ok_a = math.isclose(sig[0], sigma0, rel_tol=1e-10)
    ok_b = bool(np.allclose(sig[: first + 1], sigma0, rtol=1e-10))
    spent = float(np.sum(sig**-2.0))
    ok_e = spent <= phi * (1 + 1e-9)
    return ok_a and ok_b and ok_e, (
        f"sigma^0 = Thm 1: {ok_a}; constant until the first discount: {ok_b}; "
        f"sum sigma^-2 = {spent:.6g} <= Phi = {phi:.6g}: {ok_e}"
    )


def _schedule_rules(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    trace, _ = _crd_run(v)
    T = list(trace.T_in_force)
    never_up = all(b <= a for a, b in zip(T, T[1:], strict=False))
    steps_ok = all(
        new - t == math.floor(v["beta"] * (old - t) + 1e-12) and new - t <= old - t - 1
        for t, old, new in trace.discounts
    )
    return never_up and steps_ok and trace.rounds <= int(v["T"]), (
        f"T never increases: {never_up}; T_new - t = floor(beta (T - t)) <= T - t - 1: {steps_ok}; "
        f"rounds {trace.rounds} <= T_init {int(v['T'])}"
    )


def _d13(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    phi = float(um.budget_phi(v["eps"], v["delta"], v["q"], v["sens"]))
    T0, t, T1 = int(v["T"]), int(v["frac"] * (int(v["T"]) - 1)), int(v["T1"])
    T1 = max(T1, t + 1)
    s0 = um.sigma_crd(0, T0, phi, 0.0)
    st = um.sigma_crd(t, T1, phi, t / s0**2)
    want = s0 * math.sqrt((T1 - t) / (T0 - t))
    spent = um.eps_spent([s0] * t, v["delta"], v["q"], v["sens"]) if t else 0.0
    ok = math.isclose(st, want, rel_tol=1e-9) and math.isclose(
        spent, v["eps"] * math.sqrt(t / T0), rel_tol=1e-9, abs_tol=1e-12
    )
    return ok, f"sigma^t = {st:.10g} vs sigma^0 sqrt((T'-t)/(T0-t)) = {want:.10g}"


_CRD_REGION = Region(
    {
        "eps": (0.5, 20.0),
        "delta": (1e-6, 0.1, "log"),
        "q": (0.05, 1.0),
        "sens": (1e-4, 0.1, "log"),
        "T": (5, 300),
        "beta": (0.3, 0.95),
        "seed": (0, 10**6),
    },
    integers=frozenset({"T", "seed"}),
)
_INT_REGION = replace(udp.ADMISSIBLE, ranges={**udp.ADMISSIBLE.ranges, "sens": (1e-3, 0.05, "log")})
_ONE = Computed("crd", lambda v, var: np.asarray(1.0), "a CRD run")

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "P8",
        "Theorem 4: sigma^0 is Theorem 1's sigma, sigma stays constant while T does, and a whole CRD run "
        "spends at most Phi (eps_spent <= eps)",
        _ONE,
        "predicate",
        _CRD_REGION,
        other=_theorem4_invariants,
        source="Theorem 4, eqs. (25)-(31)",
    ),
    Claim(
        "P8c",
        "(D13): after t rounds at sigma^0, a new T' gives sigma^t = sigma^0 sqrt((T'-t)/(T0-t)) and "
        "eps_spent = eps sqrt(t/T0)",
        _ONE,
        "predicate",
        Region(
            {**_CRD_REGION.ranges, "frac": (0.0, 1.0), "T1": (1, 300)},
            integers=frozenset({"T", "T1", "seed"}),
        ),
        other=_d13,
        source="Theorem 4, derived",
    ),
    Claim(
        "P9",
        "CRD schedule: T never increases, T_new - t = floor(beta (T - t)) <= T - t - 1, at most T_init "
        "rounds",
        _ONE,
        "predicate",
        _CRD_REGION,
        other=_schedule_rules,
        source="Alg. 2",
    ),
    Claim(
        "P13c",
        "the closed-form integer T* equals the brute-force argmin of (22)",
        _ONE,
        "predicate",
        _INT_REGION,
        other=_t_int_is_brute_force,
        source="Theorem 3",
    ),
)
