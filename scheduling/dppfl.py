"""DP-PFL (seed 000) optimal designs: rounds T under a fixed (eps, delta), clipping threshold C, model size S
and the inner/outer budget split, and the designer's plan.

Every optimiser takes the [dppfl] settings (spec 000 notation: eps, delta, tau0, q_in, q_out, eta, beta, C, S,
m and the analysis constants) and returns a :class:`~fedbound.scheduling.results.Optimum` certificate.

* :func:`optimal_T` (Remark 1): Phi(T) = bound(T, sigma*(T)) with sigma*(T) from Theorem 1 for every T:
  every integer T until the noise term alone exceeds the best bound (exact at every q: sigma*(T) for a
  chunk of T is one vectorised call at q < 1, :mod:`fedbound.scheduling.dppfl_sigma`; Phi is not convex,
  spec 000 P18, and no unimodality is assumed).  Theorem 2: Delta0 <= K(1) = E(sigma*(1))/(1 -
  zeta^tau0) certifies T* = 1 (Phi2(T+1) - Phi2(T) >= (zeta^{(T+1)tau0} - zeta^{T tau0})(Delta0 - K(T)) >= 0
  and K is increasing).  Theorem 3 at q = 1: sigma*(T) = sigma*(1) sqrt(T) exactly, so
  T* = (2A/(K1 sigma*(1)))^{2/3} (A = Delta0/c, K1 = dPhi3/dsigma) is reported as the continuous check.
* The plan deploys the exact sigma (:func:`fedbound.scheduling.dppfl_sigma.exact_sigma`: PLD at q < 1, the
  analytic Gaussian at q = 1, labelled tight within 1 % of eps) and, with T open, re-optimises T on it by
  branch and bound from the RDP optimum (:mod:`fedbound.scheduling.dppfl_exact`; the RDP sigma*(T) above
  is the upper curve); with ``outer_noise`` and T open, (T, r) jointly by branch and bound on r
  (:mod:`fedbound.scheduling.dppfl_split`), then T on the exact sigma at that r.
* :func:`optimal_clip` (our derivation, spec 000 Sec. 3.8): Xi(C) at fixed sigma is piecewise linear +
  {+, -, 0} sqrt(C); its minimiser lies in the finite candidate set {0+, a^2, B^2, (B with ``tight``),
  1/(4 slope^2) clipped to [min(a^2, B^2), max(a^2, B^2)]}.  Exact: no grid.  C -> 0+ is an infimum
  (reported as x = 0).  :func:`clip_profile` gives C* at every sigma at once, so ``plan`` minimises over
  (T, C) jointly (``optimal_T(..., joint_C=True)``); a T the user sets is held fixed.
* :func:`model_size`: the printed bound has no interior optimum in S (increasing in S with theta_exact; with
  the paper's Theta even S are worse than both odd neighbours, E14).  The flagged extension
  Psi(S) = a0 S^-kappa + Phi(S) (user-given a0, kappa) is minimised over the admissible sizes
  S(n) = S_base + S_per_neuron n by exhaustive search, with the continuous
  S* = (2 a0 kappa / c1)^{1/(kappa + 1/2)} (Theta ~ k C sigma sqrt(S)).
* :func:`optimal_split`: sigma_out = r sigma_in, both calibrated jointly by Theorem 1.  The paper's bounds see
  only sigma_in (E18), so there the optimum degenerates to r -> infinity; with ``outer_noise`` the bound is
  k_in sigma_in + k_out sigma_out + const.  At q_in = q_out = 1 the RDP is T tau0 alpha (1/sigma_in^2 +
  1/sigma_out^2)/2, so with x = sigma_in^-2, y = sigma_out^-2 the problem min k_in x^-1/2 + k_out y^-1/2 s.t.
  x + y <= R is DCP: solved by cvxpy (and its closed form r = (k_in/k_out)^{1/3} is the test oracle).  For
  q < 1 the sampled-Gaussian RDP has no DCP form in sigma, so branch and bound on log r with a proven lower
  bound (:func:`fedbound.scheduling.dppfl_split.split_at_T`), each evaluation calibrating sigma_in(r).
  r = 1 (the paper's 50/50) is always evaluated too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import dppfl as dp
from fedbound.bounds.claims import Claim, Computed, Region
from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import InfeasibleError, ParameterError
from fedbound.scheduling.integer_search import exhaustive_integer_min
from fedbound.scheduling.results import Optimum, Plan, Recommendation, Row

__all__ = [
    "sigma_curve",
    "bound_curve",
    "optimal_T",
    "optimal_clip",
    "clip_sigma",
    "model_size",
    "optimal_split",
    "plan",
    "CLAIMS",
    "SHORT",
]

SHORT = "DP-PFL (Wei et al. 2023)"
BOUND_NAMES = ("nonconvex", "convex")
T_MAX_DEFAULT = 400
T_SEARCH_MAX = 100_000
"""The documented maximum of the widening T search (a plan whose bound has not turned by then says so)."""
SCAN_CHUNK = 32
"""T values per step of the widening scan (sigma*(T) per chunk is one vectorised call; small chunks keep a
plan whose bound turns early cheap, which the split search repeats per r)."""


def _theorem(settings: Mapping[str, Any]):
    name = settings.get("bound", "nonconvex")
    if name not in BOUND_NAMES:
        raise ParameterError("bound", name, "one of " + ", ".join(BOUND_NAMES))
    return dp.BOUNDS[name]


def _values(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k in dp.NOTATION.params and v is not None}


# ---------------------------------------------------------------------------------------------------------
# sigma*(T) and the bound along T
# ---------------------------------------------------------------------------------------------------------
def sigma_curve(
    settings: Mapping[str, Any], T: Any, method: str = "paper", ratio: float = 1.0, rtol: float = 1e-8
) -> np.ndarray:
    """sigma*_in(T) (noise multiplier) for an array of T: Theorem 1 (seed 000 eq. (12)) on Opacus' orders
    (``"paper"``) or on the finer grid (``"tight"``; at q_in = q_out = 1 with ratio 1 the exact composition
    of the 2 T tau0 Gaussian releases).  q_in = q_out = 1: eps depends on T only through T tau0/sigma^2, so
    sigma*(T) = sigma*(1) sqrt(T) exactly (spec 000 Sec. 3.8) and only T = 1 is calibrated.  Otherwise the
    whole array in one vectorised call on tabulated RDP (:mod:`fedbound.scheduling.dppfl_sigma`; equal to
    the point-by-point :func:`fedbound.bounds.dppfl.noise_multiplier_curve` to ~1e-12), kept per setting
    in this process (``rtol`` only applies to the q = 1 calibration)."""
    Ts = np.asarray(T, dtype=float)
    eps, delta, tau0 = settings["eps"], settings["delta"], int(settings.get("tau0", 1))
    q_in, q_out = float(settings["q_in"]), float(settings["q_out"])
    if method not in ("paper", "tight"):
        raise ParameterError("method", method, "'paper' or 'tight'")
    orders = dp.OPACUS_ORDERS if method == "paper" else dp.TIGHT_ORDERS
    if q_in == 1.0 and q_out == 1.0:
        return _sigma_one(eps, delta, tau0, method, ratio, rtol) * np.sqrt(Ts)
    key = (float(eps), float(delta), tau0, q_in, q_out, method, float(ratio))
    cache = _SIGMA_CACHE.setdefault(key, {})
    flat = check_int("T", Ts.astype(np.int64), 1).ravel()  # a real T is read as its integer part
    missing = np.array(sorted({int(t) for t in flat} - set(cache)), dtype=np.int64)
    if missing.size:
        from fedbound.accounting.rdp_table import OutsideTable
        from fedbound.scheduling.dppfl_sigma import sigma_curve as table_curve
        from fedbound.scheduling.dppfl_sigma import table_directory

        check_real("ratio", ratio, 0.0, low_open=True)
        try:
            found = table_curve(float(check_real("eps", eps, 0.0, low_open=True)),
                                float(check_probability("delta", delta)), missing, tau0, q_in, q_out, ratio,
                                orders, table_directory())
        except OutsideTable:  # beyond the tables (extreme noise): the point-by-point calibration
            found = dp.noise_multiplier_curve(eps, delta, missing, tau0, q_in, q_out, ratio, orders, 1e-12)
        cache.update(zip(missing.tolist(), np.atleast_1d(found).tolist(), strict=True))
    return np.array([cache[int(t)] for t in flat], dtype=float).reshape(Ts.shape)


_SIGMA_CACHE: dict[tuple, dict[int, float]] = {}


def _sigma_one(eps: float, delta: float, tau0: int, method: str, ratio: float, rtol: float) -> float:
    """sigma*(T = 1) at q_in = q_out = 1 (sigma*(T) = sigma*(1) sqrt(T) there).  ``"tight"``: tau0 inner
    releases at z and tau0 outer ones at r z compose exactly to one Gaussian of multiplier
    z / sqrt(tau0 (1 + r^-2)), so z = z_1 sqrt(tau0 (1 + r^-2)) with z_1 the analytic Gaussian's (Balle &
    Wang 2018) for one release, at every split r."""
    if method == "tight":
        from fedbound.accounting import calibrate_noise

        z_1 = float(calibrate_noise(eps, delta, 1.0, 1, method="analytic"))
        return z_1 * math.sqrt(tau0 * (1.0 + ratio**-2))
    orders = dp.OPACUS_ORDERS if method == "paper" else dp.TIGHT_ORDERS
    return float(dp.noise_multiplier_curve(eps, delta, 1, tau0, 1.0, 1.0, ratio, orders, rtol))


def bound_curve(settings: Mapping[str, Any], T: Any, sigma: Any, variant: str = "paper", ratio: float = 1.0):
    """The chosen bound (``settings["bound"]``: Theorem 3 ``nonconvex`` (32) or Theorem 2 ``convex`` (31)) at
    rounds ``T`` and inner noise multiplier ``sigma`` (outer: ``ratio * sigma``), as an Evaluation."""
    vals = {**_values(settings), "T": T, "sigma": sigma, "sigma_out": ratio * np.asarray(sigma, dtype=float)}
    return _theorem(settings).evaluate(vals, variant=variant)


def _noise_slope(settings: Mapping[str, Any], variant: str, ratio: float) -> tuple[float, float]:
    """(Phi at sigma = 0, dPhi/dsigma): the bound at a fixed T is affine in sigma (Theta is linear in
    sigma)."""
    at0 = np.asarray(bound_curve(settings, settings["T"], 0.0, variant, ratio).value, dtype=float)
    at1 = np.asarray(bound_curve(settings, settings["T"], 1.0, variant, ratio).value, dtype=float)
    return float(at0), float(at1 - at0)


def _check_hypotheses(settings: Mapping[str, Any], variant: str, ratio: float) -> None:
    """InfeasibleError naming the failed hypothesis when the chosen bound is admissible at no T: Theorems 2
    and 3's required conditions (beta < 2/L', 0 <= zeta < 1, eta L < 1, l' > 0) involve neither T, sigma
    nor C (tested), so one evaluation decides for every T before any T is searched (issue 36: the search
    ran to T = 100000 first, 15 CPU s per plan)."""
    ev = bound_curve(settings, 1, 1.0, variant, ratio)
    failed = [text for cond, _, text in ev.failures if cond.severity == "required"]
    if failed:
        raise InfeasibleError(f"{SHORT}'s bound is admissible at no T: {failed[0]}")


def optimal_T(
    settings: Mapping[str, Any],
    variant: str = "paper",
    method: str = "paper",
    T_max: int | None = None,
    ratio: float = 1.0,
    exhaustive: bool = False,
    joint_C: bool = False,
) -> Optimum:
    """Integer T minimising Phi(T) = bound(T, sigma*(T)) (Remark 1; seed 000 eqs. (12), (31), (32)).

    ``T_max`` given: the search is [1, T_max] (``at_upper_edge`` flags an argmin there).  Otherwise the
    search is every integer T from 1, stopped by :func:`~fedbound.scheduling.certificate.scan_until_turned`
    once the noise term alone (the bound at Delta0 = 0: non-decreasing in T because sigma*(T) is and the
    bound's noise term is increasing in sigma) exceeds the best value: exact, with no unimodality premise
    (sigma*(T) at q = 1 is sigma*(1) sqrt(T); at q < 1 it comes for a whole chunk of T from one vectorised
    call, :mod:`fedbound.scheduling.dppfl_sigma`), up to :data:`T_SEARCH_MAX` (a documented maximum,
    flagged by ``at_upper_edge``).  ``exhaustive``: every integer of [1, T_max].
    ``evidence`` holds sigma*(T*), the window, Theorem 2's K(1) test and Theorem 3's q = 1 closed form.
    ``joint_C``: the bound at each T is taken at C*(sigma*(T)) (:func:`clip_profile`), so the argmin is over
    (T, C) jointly (only Xi depends on C; the noise-only floor stays non-decreasing in T)."""
    from fedbound.scheduling.certificate import scan_until_turned

    fixed = T_max is not None
    T_max = int(T_max or settings.get("T_max") or T_MAX_DEFAULT)

    def at(sig: np.ndarray) -> Mapping[str, Any]:  # joint_C: each T's C*(sigma*(T)) (C profiled out)
        return ({**settings, "C": clip_profile(settings, clip_sigma(settings, sig, ratio, variant), variant)}
                if joint_C else settings)

    def f(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sig = sigma_curve(settings, xs, method, ratio)
        ev = bound_curve(at(sig), xs, sig, variant, ratio)
        return np.asarray(ev.value, dtype=float), np.asarray(ev.admissible, dtype=bool)

    def masked(xs: np.ndarray) -> np.ndarray:
        vals, ok = f(xs)
        return np.where(ok & np.isfinite(vals), vals, np.inf)

    _check_hypotheses(settings, variant, ratio)
    lo, hi, how = 1, T_max, ""
    if not fixed and not exhaustive:
        def floor(xs: np.ndarray) -> np.ndarray:
            sig = sigma_curve(settings, xs, method, ratio)
            ev = bound_curve({**at(sig), "Delta0": 0.0}, xs, sig, variant, ratio)
            return np.asarray(ev.value, dtype=float)

        scan = scan_until_turned(masked, floor, maximum=T_SEARCH_MAX, chunk=SCAN_CHUNK)
        lo, hi = 1, scan.stop
        how = f"every integer T in {scan.domain}" + (f"; {scan.capped}" if scan.capped else "")
    res = exhaustive_integer_min(f, lo, hi, what="T")
    sig = {int(t): float(sigma_curve(settings, np.array([t]), method, ratio)[0]) for t in (1, int(res.x))}
    if not res.success:
        raise InfeasibleError(f"no T in [1, {T_max}] where {SHORT}'s bound is admissible")
    T_star = int(res.x)
    top = hi if how.startswith("every integer") else T_max
    evidence = dict(res.evidence, sigma_at_T_opt=sig[T_star], noise_method=method, T_max=top,
                    searched=how or res.message, joint_C=joint_C,
                    C_at_T_opt=float(np.ravel(at(np.array([sig[T_star]]))["C"])[0]))
    message = how or res.message
    x_cont = None
    name = settings.get("bound", "nonconvex")
    if name == "convex":
        at1 = {**_values(settings), "T": 1.0, "sigma": sig[1], "sigma_out": ratio * sig[1]}
        E1 = float(dp.PER_ROUND_ERROR(at1, variant=variant))
        zeta = float(dp.CONTRACTION(at1))
        K1 = E1 / -math.expm1(int(settings.get("tau0", 1)) * math.log(zeta))
        evidence["K_at_1"] = K1
        if settings["Delta0"] <= K1:
            message += (
                f"; Delta0 = {settings['Delta0']:g} <= K(1) = {K1:.6g}: Phi2 is non-decreasing, T* = 1 "
                "is proved (Phi2(T+1) - Phi2(T) >= 0)"
            )
    elif float(settings["q_in"]) == 1.0 == float(settings["q_out"]):
        _, K1 = _noise_slope({**settings, "T": 1.0}, variant, ratio)
        c = float(
            dp.NONCONVEX_BOUND(
                {**_values(settings), "T": 1.0, "sigma": 0.0, "sigma_out": 0.0, "Delta0": 1.0},
                variant=variant,
            )
            - dp.NONCONVEX_BOUND(
                {**_values(settings), "T": 1.0, "sigma": 0.0, "sigma_out": 0.0, "Delta0": 0.0},
                variant=variant,
            )
        )
        A = settings["Delta0"] * c
        x_cont = (2 * A / (K1 * float(sig[1]))) ** (2 / 3)
        evidence.update(A=A, K1=K1)
        message += f"; q = 1 closed form T* = (2A/(K1 sigma*(1)))^(2/3) = {x_cont:.6g}"
    return Optimum(
        x=T_star,
        fun=res.fun,
        success=res.success,
        message=message,
        method=res.method,
        bracket=res.bracket,
        fun_below=res.fun_below,
        fun_above=res.fun_above,
        at_lower_edge=res.at_lower_edge,
        at_upper_edge=bool(T_star == top) or "stopped at the documented maximum" in how,
        x_continuous=x_cont,
        evidence=evidence,
    )


# ---------------------------------------------------------------------------------------------------------
# Clipping threshold
# ---------------------------------------------------------------------------------------------------------
def _xi(settings: Mapping[str, Any], C: Any, sigma: float, variant: str) -> np.ndarray:
    vals = {k: settings[k] for k in ("S", "eta", "L", "B")}
    return np.asarray(
        dp.CLIPPING_BIAS.evaluate({**vals, "C": C, "sigma": sigma}, variant=variant).value, dtype=float
    )


def clip_candidates(settings: Mapping[str, Any], sigma: float, variant: str = "paper") -> np.ndarray:
    """The finite candidate set of C* (module docstring; spec 000 Sec. 3.8), 0+ as a tiny positive C."""
    eta, L, B = float(settings["eta"]), float(settings["L"]), float(settings["B"])
    a = 1 + eta * L
    theta1 = float(
        dp.NOISE_NORM.evaluate({"S": settings["S"], "sigma": 1.0, "C": 1.0}, variant=variant).value
    )
    s = eta * L * theta1 * sigma
    lo, hi = min(a * a, B * B), max(a * a, B * B)
    cands = [a * a, B * B]
    slopes = [s]
    if "tight" in variant.split("+"):
        cands.append(B)
        slopes.append(s - eta * L)
    for slope in slopes:
        cands.append(hi if slope <= 0 else min(max(1 / (4 * slope * slope), lo), hi))
    tiny = 1e-12 * max(1.0, hi)
    return np.array(sorted({c for c in cands if c > 0} | {tiny}))


def clip_sigma(settings: Mapping[str, Any], sigma: Any, ratio: Any = 1.0, variant: str = "paper") -> Any:
    """The noise multiplier at which C is profiled: ``sigma``, or with ``outer_noise`` (E18) sigma_eff =
    sigma_in + sigma_out / (a eta L), a = 1 + eta L: the bracket Xi + Theta^S depends on C only through
    a (eta L k Theta_1(C) sigma_eff + f_C) (Lemma 4 (26) with Theta^S = k Theta_1(C) sigma_out), so Lemma 4's
    candidate set at sigma_eff is the exact C* of the bound with both stages' noise."""
    if "outer_noise" not in variant.split("+"):
        return sigma
    eta_L = float(settings["eta"]) * float(settings["L"])
    return np.asarray(sigma, dtype=float) * (1.0 + np.asarray(ratio, dtype=float) / ((1.0 + eta_L) * eta_L))


def clip_profile(settings: Mapping[str, Any], sigma: Any, variant: str = "paper") -> np.ndarray:
    """The C the plan deploys at each noise multiplier in ``sigma``: :func:`optimal_clip`'s C* (exact over its
    candidate set), or the setting's C where the infimum is C -> 0+ (not attained).  Every bound is
    increasing in Xi and only Xi depends on C, so min over (T, C) = min over T of the bound at
    C*(sigma*(T))."""
    sig = np.atleast_1d(np.asarray(sigma, dtype=float))[:, None]
    eta, L, B = float(settings["eta"]), float(settings["L"]), float(settings["B"])
    a2, lo, hi = (1 + eta * L) ** 2, min((1 + eta * L) ** 2, B * B), max((1 + eta * L) ** 2, B * B)
    theta1 = float(dp.NOISE_NORM.evaluate({"S": settings["S"], "sigma": 1.0, "C": 1.0},
                                          variant=variant).value)
    slopes = [eta * L * theta1 * sig] + ([eta * L * theta1 * sig - eta * L] if "tight" in variant.split("+")
                                         else [])
    fixed = [np.full_like(sig, c) for c in ([a2, B * B] + ([B] if "tight" in variant.split("+") else []))]
    inner = [np.where(x <= 0, hi, np.clip(1 / (4 * np.where(x > 0, x, 1.0) ** 2), lo, hi)) for x in slopes]
    cands = np.sort(np.concatenate([np.full_like(sig, 1e-12 * max(1.0, hi)), *fixed, *inner], axis=1), axis=1)
    vals = np.broadcast_to(_xi(settings, np.where(cands > 0, cands, np.inf), sig, variant), cands.shape)
    j = np.argmin(np.where(cands > 0, vals, np.inf), axis=1)  # the candidate set of :func:`optimal_clip`
    return np.where(j == 0, float(settings["C"]), cands[np.arange(cands.shape[0]), j])


def optimal_clip(settings: Mapping[str, Any], sigma: float, variant: str = "paper") -> Optimum:
    """C* = argmin over the candidate set of Xi(C) at noise multiplier ``sigma`` (Lemma 4, eq. (26); our
    derivation, spec 000 Sec. 3.8).  Every bound is increasing in Xi, so this is the bound's C* at fixed T."""
    cands = clip_candidates(settings, sigma, variant)
    vals = _xi(settings, cands, sigma, variant)
    i = int(np.argmin(vals))
    C_star = float(cands[i])
    at_zero = i == 0
    eta, L = float(settings["eta"]), float(settings["L"])
    s = (
        eta
        * L
        * float(dp.NOISE_NORM.evaluate({"S": settings["S"], "sigma": sigma, "C": 1.0}, variant=variant).value)
    )
    msg = "exact: Xi is minimised over the finite candidate set {0+, a^2, B^2, 1/(4 s^2) clipped}"
    if at_zero:
        msg += (
            f"; s = {s:.4g} >= 1/(1 + eta L) makes Xi non-decreasing in C: the infimum is C -> 0+ "
            "(not attained)"
        )
    return Optimum(
        x=0.0 if at_zero else C_star,
        fun=float(vals[i]),
        success=True,
        message=msg,
        method="candidate set",
        at_lower_edge=at_zero,
        evidence={"candidates": cands, "values": vals, "s": s, "a": 1 + eta * L},
    )


# ---------------------------------------------------------------------------------------------------------
# Model size
# ---------------------------------------------------------------------------------------------------------
def _size_grid(settings: Mapping[str, Any], sigma: float, variant: str, lo: int, hi: int) -> np.ndarray:
    """Candidate sizes in [lo, hi]: a 400-point log grid with both parities (the printed Theta (27) differs
    between odd and even S, E14), plus every integer between the neighbours of its best point under the
    objective of :func:`model_size` -- so the answer is an integer optimum, not a grid point."""
    grid = np.unique(np.round(np.geomspace(lo, hi, 400)))
    grid = np.unique(np.clip(np.concatenate([grid, grid + 1]), lo, hi))
    vals = _size_objective(settings, grid, sigma, variant)
    i = int(np.argmin(np.where(np.isfinite(vals), vals, np.inf)))
    a, b = int(grid[max(i - 1, 0)]), int(grid[min(i + 1, len(grid) - 1)])
    return np.unique(np.concatenate([grid, np.arange(a, b + 1, dtype=float)]))


def _size_objective(settings: Mapping[str, Any], sizes: np.ndarray, sigma: float, variant: str) -> np.ndarray:
    """The bound at S (``a0 S^-kappa`` added with the flagged extension's a0, kappa)."""
    phi = np.asarray(bound_curve({**settings, "S": sizes}, settings["T"], sigma, variant).value, dtype=float)
    a0, kappa = settings.get("a0"), settings.get("kappa")
    return phi if a0 is None or kappa is None else float(a0) * sizes ** (-float(kappa)) + phi


def model_size(settings: Mapping[str, Any], sigma: float, variant: str = "paper") -> Optimum:
    """Model size: the bound alone is increasing in S (no interior optimum; Remark 3 is unsupported, E23), so
    without ``a0`` and ``kappa`` the answer is the smallest admissible S.  With them, Psi(S) = a0 S^-kappa +
    Phi(S) (flagged extension, not in the paper) over S(n) = S_base + S_per_neuron n,
    n in [1, neurons_max]."""
    base = int(settings.get("S_base") or 0)
    slope = int(settings.get("S_per_neuron") or 0)
    n_max = int(settings.get("neurons_max") or 0)
    if slope and n_max:
        sizes = base + slope * np.arange(1, n_max + 1, dtype=float)
        reading = f"admissible sizes S(n) = {base} + {slope} n, n = 1..{n_max}"
    else:
        S0 = int(settings["S"])
        sizes = _size_grid(settings, sigma, variant, max(1, S0 // 100), S0 * 100)
        reading = (f"every integer S in [{sizes[0]:.0f}, {sizes[-1]:.0f}] around the given S (a log grid of "
                   "both parities, then every integer between the best point's neighbours)")
    ev = bound_curve({**settings, "S": sizes}, settings["T"], sigma, variant)
    phi = np.asarray(ev.value, dtype=float)
    a0, kappa = settings.get("a0"), settings.get("kappa")
    evidence: dict[str, Any] = {"sizes_searched": len(sizes), "reading": reading}
    x_cont = None
    if a0 is not None and kappa is not None:
        psi = float(a0) * sizes ** (-float(kappa)) + phi
        big = {**settings, "S": sizes[-1]}
        gap = float(bound_curve(big, settings["T"], sigma, variant).value) - float(
            bound_curve(big, settings["T"], 0.0, variant).value
        )
        c1 = gap / math.sqrt(sizes[-1])  # Phi(S) ~ c0 + c1 sqrt(S): Theta ~ k C sigma sqrt(S)
        x_cont = (2 * float(a0) * float(kappa) / c1) ** (1 / (float(kappa) + 0.5)) if c1 > 0 else None
        i = int(np.argmin(np.where(np.isfinite(psi), psi, np.inf)))
        msg = (
            f"Psi(S) = a0 S^-kappa + bound (a0 = {a0:g}, kappa = {kappa:g}; flagged extension, not in the "
            f"paper): exhaustive over {reading}"
        )
        evidence["psi"] = "a0 S^-kappa + bound"
        fun = float(psi[i])
    else:
        i = int(np.argmin(np.where(np.isfinite(phi), phi, np.inf)))
        msg = (
            f"the bound alone over {reading}: increasing in S (theta_exact) or parity-broken (paper's "
            "Theta (27) is 2x/4x E||n|| for odd/even S), so the smallest size wins; give a0 and kappa "
            "for the Psi(S) extension"
        )
        fun = float(phi[i])
    return Optimum(
        x=int(sizes[i]),
        fun=fun,
        success=True,
        message=msg,
        method="exhaustive over sizes",
        at_lower_edge=bool(i == 0),
        at_upper_edge=bool(i == len(sizes) - 1),
        x_continuous=x_cont,
        evidence=evidence,
    )


# ---------------------------------------------------------------------------------------------------------
# Inner/outer budget split
# ---------------------------------------------------------------------------------------------------------
def _split_value(settings: Mapping[str, Any], r: float, variant: str, method: str) -> tuple[float, float]:
    T = int(settings["T"])
    sig = float(sigma_curve(settings, np.array([T]), "paper" if method == "paper" else "tight", r)[0])
    return float(bound_curve(settings, T, sig, variant, r).value), sig


def split_closed_form(k_in: float, k_out: float) -> float:
    """q = 1: argmin of k_in sigma_in + k_out sigma_out s.t. 1/sigma_in^2 + 1/sigma_out^2 <= R is
    r = sigma_out/sigma_in = (k_in/k_out)^{1/3} (Lagrange: x ~ k_in^{2/3}, y ~ k_out^{2/3}; the cvxpy
    program's oracle)."""
    return (k_in / k_out) ** (1 / 3)


def _split_cvxpy(k_in: float, k_out: float) -> float:
    import cvxpy as cp

    x = cp.Variable(pos=True, name="inv_sigma_in_sq")
    y = cp.Variable(pos=True, name="inv_sigma_out_sq")
    problem = cp.Problem(cp.Minimize(k_in * cp.power(x, -0.5) + k_out * cp.power(y, -0.5)), [x + y <= 1.0])
    problem.solve()
    return float(math.sqrt(x.value / y.value))


def optimal_split(
    settings: Mapping[str, Any],
    variant: str = "paper",
    method: str = "paper",
    r_bounds: tuple[float, float] = (1e-2, 1e2),
) -> Optimum:
    """sigma_out/sigma_in minimising the bound at the setting's T subject to Theorem 1's total RDP budget
    (seed 000 eq. (12) with sigma_in != sigma_out; extension of the paper's 50/50 split).  ``x`` = r,
    ``evidence`` has sigma_in, sigma_out, the RDP shares and the 50/50 value."""
    base, sig1 = _split_value(settings, 1.0, variant, method)
    if "outer_noise" not in variant.split("+"):
        big = r_bounds[1]
        val, sig = _split_value(settings, big, variant, method)
        return Optimum(
            x=math.inf,
            fun=val,
            success=True,
            method="degenerate (analysis)",
            message=(
                f"the paper's bounds depend on sigma_in only (the outer noise is omitted in App. G, (227)):"
                f" the bound decreases as r -> infinity (at r = {big:g}: {val:.6g}, at 50/50: "
                f"{base:.6g}); use variant outer_noise for a meaningful split"
            ),
            at_upper_edge=True,
            evidence={"r_50_50": 1.0, "bound_50_50": base, "sigma_50_50": sig1, "sigma_in_at_upper": sig},
        )
    q1 = float(settings["q_in"]) == 1.0 == float(settings["q_out"])
    if q1:
        T = int(settings["T"])
        at_s = {**settings, "T": T}
        _, k_in = _noise_slope(at_s, variant.replace("outer_noise", "").strip("+") or "paper", 1.0)
        k_total = _noise_slope(at_s, variant, 1.0)[1]
        k_out = k_total - k_in
        r = _split_cvxpy(k_in, k_out)
        oracle = split_closed_form(k_in, k_out)
        val, sig = _split_value(settings, r, variant, method)
        how, extra = (
            "cvxpy (DCP after x = sigma_in^-2, y = sigma_out^-2)",
            {"closed_form_r": oracle, "k_in": k_in, "k_out": k_out},
        )
    else:  # global over r_bounds: branch and bound, a proven lower bound (fedbound.scheduling.dppfl_split)
        from fedbound.scheduling.dppfl_split import split_at_T

        r, _, how, evaluations = split_at_T(settings, variant, "paper" if method == "paper" else "tight",
                                            r_bounds)
        val, sig = _split_value(settings, r, variant, method)
        extra = {"evaluations": evaluations, "searched": how}
    if base <= val:
        r, val, sig = 1.0, base, sig1
    T = int(settings["T"])
    eps_dp, alpha, e_in_a, e_out_a = _eps_parts(settings, T, sig, r * sig)
    return Optimum(
        x=r,
        fun=val,
        success=True,
        method=how,
        message=f"sigma_out/sigma_in = {r:.6g} (50/50 gives {base:.6g}, this gives {val:.6g})",
        at_lower_edge=bool(r <= r_bounds[0] * 1.001),
        at_upper_edge=bool(r >= r_bounds[1] / 1.001),
        evidence={
            "sigma_in": sig,
            "sigma_out": r * sig,
            "bound_50_50": base,
            "sigma_50_50": sig1,
            "eps": eps_dp,
            "alpha": alpha,
            "eps_rdp_inner": e_in_a,
            "eps_rdp_outer": e_out_a,
            **extra,
        },
    )


# ---------------------------------------------------------------------------------------------------------
# Claims about the optima (spec 000 P18, Sec. 3.8), checked by fedbound.bounds.claims
# ---------------------------------------------------------------------------------------------------------
CONSTS = {
    "L": 1.0,
    "rho": 1.0,
    "B": 1.0,
    "lam": 1.0,
    "l": 0.5,
    "eps_het": 0.1,
    "gamma_het": 0.1,
    "sigma_G": 1.0,
    "sigma_H": 1.0,
    "Delta0": 10.0,
}
PRIV_A = {"eps": 2.0, "delta": 1e-3, "q_in": 0.1, "q_out": 0.1, "tau0": 1}
SCEN = {**CONSTS, **PRIV_A, "eta": 0.01, "beta": 0.01, "C": 2.4, "m": 300}


def _phi(values: Mapping[str, Any], variant: str) -> np.ndarray:
    """Phi(T) = bound(T, sigma*(T)) along an array of integer T (Remark 1)."""
    Ts = np.atleast_1d(np.asarray(values["T"], dtype=float))
    sig = sigma_curve(values, Ts)
    return np.asarray(bound_curve(values, Ts, sig, variant).value, dtype=float).reshape(np.shape(values["T"]))


PHI = Computed("Phi", _phi, "the bound at sigma*(T) (Remark 1)")


def _clip_matches_grid(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    res = optimal_clip(values, values["sigma"], variant)
    lo, hi = 1e-6, 4 * max(1.0, values["B"] ** 2, (1 + values["eta"] * values["L"]) ** 2, res.x or 0.0)
    grid = np.concatenate([np.geomspace(lo, hi, 4000), np.linspace(lo, hi, 4000)])
    dense = float(np.min(_xi(values, grid, values["sigma"], variant)))
    ok = res.fun <= dense * (1 + 1e-9) + 1e-12
    return bool(ok), f"candidate-set Xi* = {res.fun:.10g}, dense grid min = {dense:.10g}"


def _split_50_50(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    T, tau0 = int(values["T"]), int(values["tau0"])
    sig = float(sigma_curve(values, np.array([T]), "paper", 1.0)[0])
    args = (T, tau0, values["q_in"], values["q_out"])
    eps_at = dp.rdp_pfl_epsilon(T, tau0, values["q_in"], sig, values["q_out"], sig, values["delta"])[0]
    below = sig * (1 - 1e-6)
    eps_below = dp.rdp_pfl_epsilon(T, tau0, values["q_in"], below, values["q_out"], below, values["delta"])[0]
    _, e_in, e_out = dp.rdp_pfl_rdp(dp.OPACUS_ORDERS, *args[:3], sig, args[3], sig)
    ok = eps_at <= values["eps"] < eps_below and np.allclose(e_in, e_out, rtol=1e-12)
    return bool(ok), f"sigma(r = 1) = {sig:.10g}: eps {eps_at:.10g} <= {values['eps']:g} < eps just below it"


_CLIP_REGION = Region(
    {
        "S": (1, 2000),
        "sigma": (0.0, 3.0),
        "eta": (0.001, 0.2, "log"),
        "L": (0.1, 5, "log"),
        "B": (0.05, 10, "log"),
    },
    integers=frozenset({"S"}),
    where=(("eta L < 1", lambda v: v["eta"] * v["L"] < 1),),
    doc="random Lemma 4 instances (spec 000 Sec. 3.8's check)",
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "P18a",
        "Phi3(T) = Theorem 3 at sigma*(T) has an interior optimal T (Remark 1)",
        PHI,
        "interior_minimum",
        Region(points=({**SCEN, "S": 159010, "bound": "nonconvex"},)),
        wrt="T",
        line=(1, 80),
        source="Remark 1, spec 000 Sec. 8.3 (T* = 41)",
        fails_in="Theorem 2 for the MLP-sized model (S = 159,010, Delta0 = 10): Delta0 <= K(1), so T* = 1",
        counterexamples=(({**SCEN, "S": 159010, "bound": "convex"}, "paper"),),
    ),
    Claim(
        "P18b",
        "Phi is unimodal in T (Remark 1); it is not convex",
        PHI,
        "unimodal",
        Region(points=({**SCEN, "S": 1001, "bound": "convex"}, {**SCEN, "S": 159010, "bound": "nonconvex"})),
        wrt="T",
        line=(1, 120),
        line_points=30,
        source="Remark 1, P18",
    ),
    Claim(
        "C*",
        "C* from the finite candidate set attains the dense-grid minimum of Xi(C) (spec 000 Sec. 3.8)",
        dp.CLIPPING_BIAS,
        "predicate",
        _CLIP_REGION,
        other=_clip_matches_grid,
        source="Sec. 3.8, Table II",
    ),
    Claim(
        "split50",
        "the paper's budget allocation is the r = 1 case of the split: sigma*(r = 1) is Theorem 1's "
        "sigma* and the inner and outer RDP are equal (Theorem 1)",
        dp.CLIPPING_BIAS,
        "predicate",
        Region(points=({**SCEN, "T": 50}, {**SCEN, "T": 20, "q_in": 0.3, "q_out": 0.3, "tau0": 2})),
        other=_split_50_50,
        source="Theorem 1, eq. (12)",
    ),
)
"""Declared claims about DP-PFL's optima (the checker is fedbound.bounds.claims)."""


# ---------------------------------------------------------------------------------------------------------
# The designer's plan
# ---------------------------------------------------------------------------------------------------------
PREMISES = (
    "per-example clipping with Poisson sampling inside each client (DP-SGD form; the paper's batch clipping "
    "of "
    "eq. (6) is not covered by the sampled-Gaussian analysis)",
    "the outer step touches the query set only through the privatised inner iterate (first-order g1 or a "
    "per-example Hessian; eq. (10)'s query-batch Hessian is outside Theorem 1)",
    "every local step of every round is counted (2 T tau0 sampled Gaussian releases per client)",
)


def _noise_split(s: Mapping[str, Any], T: int, variant: str,
                 split: Optimum | None = None) -> tuple[float, float, str, float, Optimum]:
    """(sigma_in, sigma_out, accounting, ratio, split certificate) for the recommendation at T (``split``:
    the joint (T, r) optimum's, else r is optimised at this T)."""
    split = split or optimal_split({**s, "T": T}, variant, "tight")
    r = float(split.x)
    r = r if math.isfinite(r) else 1.0
    from fedbound.scheduling.dppfl_sigma import exact_sigma

    rec = exact_sigma(s, T, r)
    how = (f"the exact calibration of the 2 T tau0 releases ({rec['method']}; "
           + ("tight" if rec["tight"] else "valid, not tight") + ")")
    if r != 1.0:
        how += f", with sigma_out = {r:.4g} sigma_in"
    return float(rec["z"]), r * float(rec["z"]), how, r, split


def _eps_parts(
    s: Mapping[str, Any], T: int, sig_in: float, sig_out: float
) -> tuple[float, float, float, float]:
    """(eps, alpha*, inner and outer RDP at alpha*) of Theorem 1 on the tight orders (tabulated RDP)."""
    from fedbound.scheduling.dppfl_sigma import epsilon, table_directory

    if float(s["q_in"]) == 1.0 == float(s["q_out"]):  # closed form: the point-by-point code is cheap here
        tau0 = int(s.get("tau0", 1))
        eps, alpha = dp.rdp_pfl_epsilon(
            T, tau0, float(s["q_in"]), sig_in, float(s["q_out"]), sig_out, s["delta"], dp.TIGHT_ORDERS
        )
        _, e_in, e_out = dp.rdp_pfl_rdp(
            np.array([alpha]), T, tau0, float(s["q_in"]), sig_in, float(s["q_out"]), sig_out
        )
        return eps, alpha, float(e_in[0]), float(e_out[0])
    return epsilon(T, int(s.get("tau0", 1)), float(s["q_in"]), sig_in, float(s["q_out"]), sig_out,
                   float(s["delta"]), dp.TIGHT_ORDERS, table_directory())


def _differences(
    s: Mapping[str, Any], data: Mapping[str, Any], t_paper: Optimum, clip: Optimum, split: Optimum, name: str
) -> tuple[str, ...]:
    """The paper's own answer against the recommendation, in words."""
    out = []
    if data.get("bound_at_T") is not None:
        out.append(
            f"the configured T = {data['T']} predicts {data['bound_at_T']:.6g}; the recommended "
            f"T* = {data['T_opt']} predicts {data['bound_at_T_opt']:.6g}"
        )
    sp, st = data["noise_multiplier_paper"], data["noise_multiplier"]
    if data["T_opt_paper"] != data["T_opt"] or abs(sp - st) > 1e-9 * sp:
        out.append(
            f"the paper's accountant (Opacus' orders) gives T* = {data['T_opt_paper']} with sigma* = "
            f"{sp:.6g}; the recommendation uses sigma = {st:.6g} at T* = {data['T_opt']} "
            f"({100 * (st / sp - 1):+.2f} % inner noise)"
        )
    else:
        out.append(
            f"the paper's accountant and the tight one agree here (sigma* = {sp:.6g} at T* = "
            f"{data['T_opt']}): the exact sampled-Gaussian RDP is what both use"
        )
    if clip.at_lower_edge:
        out.append(f"the paper's C = {s['C']:g} is kept although the bound would prefer C -> 0")
    else:
        out.append(f"the paper's C = {s['C']:g} against C* = {float(clip.x):.6g} of Lemma 4")
    if math.isfinite(split.x) and split.x != 1.0:
        out.append(
            f"the paper splits the budget 50/50 (bound {split.evidence['bound_50_50']:.6g}); "
            f"sigma_out/sigma_in = {split.x:.4g} gives {float(split.fun):.6g}"
        )
    return tuple(out)


def trivial_level(s: Mapping[str, Any]) -> tuple[float, str]:
    """(level, what): a value the bound must beat to say anything.  Theorem 2 (31): Delta0, the gap at
    T = 0.  Theorem 3 (32) bounds the sum over tau0 local steps of ||grad G||^2 with ||grad G_i|| <=
    (1 + eta L) B (A1, A2: grad G_i(w) = (I - eta hess F_i) grad F_i(w - eta grad F_i)), so tau0 ((1 + eta L)
    B)^2 holds trivially."""
    if s.get("bound", "nonconvex") == "convex":
        return float(s["Delta0"]), "the initial gap Delta0"
    level = int(s.get("tau0", 1)) * ((1 + float(s["eta"]) * float(s["L"])) * float(s["B"])) ** 2
    return level, "tau0 ((1 + eta L) B)^2, what A1 gives without any training"


def _reaccount(s: Mapping[str, Any], T: int, z_in: float, z_out: float, C: float, full: bool,
               calibrated: Mapping[str, Any] | None = None) -> Any:
    """Both stages of Theorem 1's release (T tau0 inner and T tau0 outer sampled Gaussians per client)
    re-accounted exactly: analytic Gaussian of the Gaussian composition at q = 1, dp-accounting's PLD
    otherwise (see :func:`fedbound.scheduling.certificate.reaccount`); with ``full`` also the exact PLD
    calibration of the same release, for the noise the RDP-calibrated sigma wastes.  ``calibrated``: the
    exact calibration's record (:func:`fedbound.scheduling.dppfl_sigma.exact_sigma`) of the deployed sigma;
    without ``full`` its own PLD eps (the same dp-accounting arithmetic, one-step PLD vectorised) is
    reported, and ``--check`` re-accounts with dp-accounting's own accountant (3-4x slower)."""
    from fedbound.scheduling.certificate import PrivacyCheck, reaccount

    k, q_in, q_out = T * int(s.get("tau0", 1)), float(s["q_in"]), float(s["q_out"])
    stage = f"inner + outer ({2 * k} sampled Gaussian releases per client)"
    if q_in == q_out == 1.0:
        z = 1 / math.sqrt((1 / z_in**2 + 1 / z_out**2) / 2)
        return reaccount(stage, C * z, C, s["eps"], s["delta"], steps=2 * k, sample_rate=1.0)
    if not full and calibrated and calibrated["tight"] and calibrated["z"] == z_in:
        return PrivacyCheck(stage, C * z_in, float(s["eps"]), float(s["delta"]),
                            float(calibrated["eps_achieved"]),
                            f"{calibrated['method']} (as calibrated; --check re-accounts with dp-accounting's"
                            " own PLD accountant)")
    from fedbound.accounting.events import make_accountant, poisson_gaussian_event
    from fedbound.accounting.pld import discretization_for, discretization_for_target

    want = 1e-4 if full else discretization_for_target(s["eps"], 2 * k)  # eps error <= 1 % of the target
    disc = float(discretization_for(min(z_in, z_out), max(q_in, q_out), 2 * k, want))
    def account() -> float:
        acc = make_accountant("pld", "poisson", pld_discretization=disc)
        if q_in == q_out and z_in == z_out:  # one event of 2k steps: the same PLD, composed once
            acc.compose(poisson_gaussian_event(z_in, q_in, 2 * k))
        else:
            acc.compose(poisson_gaussian_event(z_in, q_in, k))
            acc.compose(poisson_gaussian_event(z_out, q_out, k))
        return float(acc.get_epsilon(s["delta"]))

    from importlib.metadata import version

    from fedbound.bounds.compiled import cached_json

    # kept across runs (a cached plan need not import dp-accounting): keyed by every input and its version
    achieved = cached_json(f"dppfl-pld|{z_in!r}|{z_out!r}|{q_in!r}|{q_out!r}|{k}|{float(s['delta'])!r}|"
                           f"{disc!r}|{version('dp-accounting')}", account)
    exact = None
    if full and q_in == q_out and z_in == z_out:  # the exact (PLD) calibration, for the noise wasted
        from fedbound.accounting import calibrate_noise

        exact = C * float(calibrate_noise(s["eps"], s["delta"], q_in, 2 * k, method="pld"))
    return PrivacyCheck(stage, C * z_in, float(s["eps"]), float(s["delta"]),
                        float(achieved), f"PLD (dp-accounting), discretisation {disc:.0e}",
                        sigma_exact=exact)


def _at_user_T(s: Mapping[str, Any], variant: str) -> Optimum:
    """A T the user sets, held fixed (issue 23): the bound at it with the tight sigma*(T) (Remark 1's
    trade-off is not searched)."""
    from fedbound.scheduling.dppfl_sigma import exact_sigma

    T = int(s["T"])
    sig = float(exact_sigma(s, T)["z"])
    ev = bound_curve(s, T, sig, variant)
    if not bool(np.asarray(ev.admissible)):
        raise InfeasibleError(f"{SHORT}'s bound is not admissible at the T = {T} the setting gives")
    return Optimum(x=T, fun=float(ev.value), success=True, message=f"T = {T} set by the user (held fixed)",
                   method="T held fixed (set by the user)", bracket=(T, T),
                   evidence={"searched": f"{T} (set by the user)", "T_max": T, "sigma_at_T_opt": sig,
                             "user_T": True})


def _check_T(s: Mapping[str, Any], variant: str, ratio: float, res: Optimum, full: bool) -> Any:
    """The independent check of T*: brute force over every integer of the searched window (up to
    BRUTE_FORCE_POINTS; a geometric grid beyond, 32 points, 400 with ``full``, which no point may beat); with
    ``full`` at q < 1 also sigma*(T) at T* - 1..T* + 1 re-calibrated point by point (within 1e-9)."""
    from fedbound.scheduling.certificate import BRUTE_FORCE_POINTS, OptimumCheck, brute_force_argmin

    if res.evidence.get("user_T"):  # held fixed: its bound recomputed from the theorem directly
        T = int(res.x)
        ev = dp.BOUNDS[s.get("bound", "nonconvex")]({**_values(s), "T": float(T), "sigma": (sig := float(
            res.evidence["sigma_at_T_opt"])), "sigma_out": sig}, variant=variant)
        fun = float(ev)
        return OptimumCheck("recomputed at the user's T", 1, {"T": T}, fun,
                            bool(abs(fun - float(res.fun)) <= 1e-9 * max(1.0, abs(fun))),
                            note="T set by the user: nothing searched")
    if res.evidence.get("exact_search"):  # the exact sigma: re-evaluated around T* and across the domain
        from fedbound.scheduling.dppfl_exact import exact_check

        x, fun, points, agrees, note, tol = exact_check(s, variant, ratio, res, bool(res.evidence.get(
            "joint_C")), half_width=6 if full else 3, spread=24 if full else 8)
        return OptimumCheck("exact sigma re-evaluated near T* and on a geometric sample", points, x, fun,
                            agrees, note=note, tolerance=tol)
    top = int(res.evidence["T_max"])
    every = top <= BRUTE_FORCE_POINTS  # sigma*(T) is cheap at every q (closed form / tables)
    Ts = np.arange(1, top + 1) if every else np.unique(np.round(np.geomspace(1, top, 400 if full else 32)))

    def objective(T: np.ndarray) -> np.ndarray:
        sig = sigma_curve(s, T, "tight", ratio)
        at = ({**s, "C": clip_profile(s, clip_sigma(s, sig, ratio, variant), variant)}
              if res.evidence.get("joint_C") else s)
        ev = bound_curve(at, T, sig, variant, ratio)
        return np.where(np.asarray(ev.admissible, bool), np.asarray(ev.value, dtype=float), np.inf)

    x, fun, points = brute_force_argmin(objective, {"T": Ts})
    agrees = float(res.fun) <= fun * (1 + 1e-12) + 1e-12 and (not every or int(x["T"]) == int(res.x))
    how = "brute force over every integer T" if every else "geometric grid of T (no point may beat T*)"
    note = f"best {fun:.8g} vs T* {float(res.fun):.8g}"
    if full and not float(s["q_in"]) == 1.0 == float(s["q_out"]):  # the tables against the series
        Tn = np.arange(max(1, int(res.x) - 1), int(res.x) + 2)
        exact = dp.noise_multiplier_curve(s["eps"], s["delta"], Tn, int(s.get("tau0", 1)), float(s["q_in"]),
                                          float(s["q_out"]), ratio, dp.TIGHT_ORDERS, 1e-12)
        gap = float(np.max(np.abs(sigma_curve(s, Tn, "tight", ratio) / exact - 1)))
        agrees = agrees and gap <= 1e-9
        note += f"; sigma*(T) at T* - 1..T* + 1 re-calibrated point by point: rel. difference {gap:.1e}"
    return OptimumCheck(how, points, x, fun, bool(agrees), note=note)


def plan(settings: Mapping[str, Any], variant: str = "paper", check: bool = False) -> Plan:
    """Everything a designer needs for one DP-PFL setting (seed 000): the recommendation (T*, sigma_in and
    sigma_out under Theorem 1's accounting at T*, C*, the predicted bound), then the paper's answer beside the
    tight one, the optima (T, C, S, split), warnings and the certificate.  ``settings``: the [dppfl] keys;
    ``check``: the certificate's finer grid (q < 1) and PLD discretisation."""
    s = {k: v for k, v in settings.items() if v is not None}
    variant = "+".join(dp.NOTATION.variant_names(variant)) or "paper"
    name = s.get("bound", "nonconvex")
    eq = "(32)" if name == "nonconvex" else "(31)"
    warnings: list[str] = []
    t_paper = optimal_T(s, variant, "paper")
    joint = "T" not in s and "outer_noise" in variant.split("+")  # the split matters: (T, r) jointly
    if joint:
        from fedbound.scheduling.dppfl_split import optimal_T_split

        t_tight, split_joint = optimal_T_split(s, variant)
    else:
        t_tight = optimal_T(s, variant, "tight", joint_C=True) if "T" not in s else _at_user_T(s, variant)
    if "T" not in s:  # T again, with the exact sigma deployed (branch and bound from the RDP optimum)
        from fedbound.scheduling.dppfl_exact import exact_optimal_T

        r_at = float(split_joint.x) if joint else 1.0
        t_tight = exact_optimal_T(s, variant, r_at if math.isfinite(r_at) else 1.0, t_tight)
    T_rec = int(t_tight.x)
    split_given = split_joint if joint else None
    sig_in, sig_out, accounting, ratio, split = _noise_split(s, T_rec, variant, split_given)
    clip = optimal_clip(s, clip_sigma(s, sig_in, sig_out / sig_in, variant), variant)
    C_rec = float(s["C"]) if clip.at_lower_edge else float(clip.x)
    rec_setting = {**s, "C": C_rec}
    ev_rec = bound_curve(rec_setting, T_rec, sig_in, variant, sig_out / sig_in)
    bound_rec = float(ev_rec.value) if ev_rec.admissible else None
    eps_spent, alpha, e_in, e_out = _eps_parts(s, T_rec, sig_in, sig_out)
    from fedbound.scheduling.dppfl_sigma import exact_sigma

    exact_rec, eps_rdp = exact_sigma(s, T_rec, ratio), eps_spent  # Theorem 1's RDP eps at the deployed sigma
    if exact_rec["eps_achieved"] is not None:
        eps_spent = float(exact_rec["eps_achieved"])
    at_T = {**s, "T": T_rec, "C": C_rec}
    size = model_size(at_T, sig_in, variant)
    user_T = bool(t_tight.evidence.get("user_T"))
    why = (
        f"T = {T_rec} is set by the user (held fixed); sigma*(T) meets (eps, delta) = ({s['eps']:g}, "
        f"{s['delta']:g}) at that T" if user_T else
        f"T* = {T_rec} minimises {SHORT} Theorem {3 if name == 'nonconvex' else 2}, eq. {eq}, at the noise "
        f"sigma*(T) that meets (eps, delta) = ({s['eps']:g}, {s['delta']:g}) for every T (Remark 1)"
    )
    if not clip.at_lower_edge:
        why += f"; C* = {C_rec:.6g} minimises Lemma 4's Xi at that noise"
    if ratio != 1.0:
        why += f"; sigma_out/sigma_in = {ratio:.4g} minimises the bound under the same total RDP"
    rec = Recommendation(
        T=T_rec,
        K=s.get("N"),
        sigma={"inner": C_rec * sig_in, "outer": C_rec * sig_out},
        bound=bound_rec,
        accounting=accounting,
        why=why,
        premises=PREMISES,
        extra={
            "noise_multiplier": sig_in,
            "noise_multiplier_outer": sig_out,
            "C": C_rec,
            "eps_spent": eps_spent,
            "alpha": alpha,
        },
    )
    sig_paper = float(t_paper.evidence["sigma_at_T_opt"])
    rows = [
        Row("T* (Remark 1)", int(t_paper.x), T_rec, f"bound {name} {eq}, C = {s['C']:g}"),
        Row(
            "noise multiplier sigma* at T*",
            sig_paper,
            sig_in,
            f"paper: Opacus' 151 orders; tight: {exact_rec['method']} (Theorem 1's RDP on the finer "
            f"orders: {float(exact_rec['z_rdp']):.6g})",
        ),
        Row(
            "bound at T*",
            float(t_paper.fun),
            float(t_tight.fun),
            f"Theorem {3 if name == 'nonconvex' else 2}",
        ),
        Row("C* (Lemma 4, candidate set)", None, float(clip.x), clip.message),
        Row("bound at (T*, C*)", None, bound_rec, "the recommendation"),
        Row("model size S", int(s["S"]), int(size.x), size.message),
    ]
    data: dict[str, Any] = {
        "noise_multiplier": sig_in,
        "noise_multiplier_paper": sig_paper,
        "sigma_inner": C_rec * sig_in,
        "sigma_outer": C_rec * sig_out,
        "epsilon_inner": e_in,
        "epsilon_outer": e_out,
        "epsilon": eps_spent,
        "epsilon_rdp": eps_rdp,
        "sigma_method": exact_rec["method"],
        "sigma_tight": bool(exact_rec["tight"]),
        "noise_multiplier_rdp": float(exact_rec["z_rdp"]),
        "alpha": alpha,
        "T_opt": T_rec,
        "T_opt_paper": int(t_paper.x),
        "C_opt": float(clip.x),
        "C_opt_is_infimum": bool(clip.at_lower_edge),
        "bound_at_T_opt": float(t_tight.fun),
        "bound_at_T_opt_paper": float(t_paper.fun),
        "bound_recommended": bound_rec,
        "S_opt": int(size.x),
        "sigma_ratio": ratio,
        "bound": name,
    }
    if "T" in s:
        T = int(s["T"])
        sig_T = float(sigma_curve(s, np.array([T]), "paper")[0])
        ev_T = bound_curve(s, T, sig_T, variant)
        data.update(
            T=T, noise_multiplier_at_T=sig_T, bound_at_T=float(ev_T.value) if ev_T.admissible else None
        )
        rows.insert(
            0,
            Row(
                "noise multiplier at the given T",
                sig_T,
                float(exact_sigma(s, T)["z"]),
                f"T = {T}; tight: {exact_sigma(s, T)['method']}",
            ),
        )
        warnings.extend(f"{SHORT} at T = {T}: {w}" for w in ev_T.warnings)
    rows.append(
        Row(
            "split sigma_out/sigma_in", 1.0, float(split.x) if math.isfinite(split.x) else None, split.message
        )
    )
    if "outer_noise" not in variant.split("+"):
        warnings.append(
            f"{SHORT}, eqs. (31)-(32): the bounds omit the outer step's noise beta n^S (App. G, "
            "(227)), so they penalise only the inner noise and the 50/50 split is kept; compare "
            "--variant outer_noise"
        )
    warnings.extend(f"{SHORT}: {w}" for w in ev_rec.warnings)
    if clip.at_lower_edge:
        warnings.append(
            f"{SHORT}, Lemma 4 eq. (26): at this noise Xi is non-decreasing in C (s = "
            f"{clip.evidence['s']:.3g} >= 1/(1 + eta L)), so the bound prefers C -> 0; it does not "
            "reproduce the interior optimum C = 2.4-3.2 of Table II (the given C is kept)"
        )
    if t_tight.at_upper_edge:
        warnings.append(f"T* = {T_rec} is the largest T searched: raise T_max")
    if "theta_exact" not in variant and int(s["S"]) % 2 == 0:
        warnings.append(
            f"{SHORT}, eq. (27): the printed Theta is 4x E||n|| for even S (2x for odd S), so even "
            "model sizes look worse than their odd neighbours; compare --variant theta_exact"
        )
    if bound_rec is not None and bound_rec >= float(s["Delta0"]) and name == "convex":
        warnings.append(
            f"{SHORT}, eq. (31): the bound at the recommendation ({bound_rec:.4g}) is not below "
            f"the initial gap Delta0 = {s['Delta0']:g}: vacuous here"
        )
    level, what = trivial_level(s)
    least = min(float(t_tight.fun), bound_rec if bound_rec is not None else math.inf)
    vacuous = least >= level
    data["vacuous"] = vacuous
    thm = f"Theorem {3 if name == 'nonconvex' else 2} eq. {eq}"
    if vacuous and user_T:
        warnings.insert(0, f"{SHORT}, {thm}: the bound is vacuous at the T = {T_rec} the setting gives "
                           f"({least:.4g} >= {level:.4g}, {what}); leave T open to search")
        rec = dataclasses.replace(rec, why=f"VACUOUS at the user's T: the bound is not below {level:.4g} "
                                           f"({what}). " + rec.why)
    elif vacuous:
        warnings.insert(0, f"{SHORT}, {thm}: the bound is vacuous for every T searched (least {least:.4g} "
                           f">= {level:.4g}, {what}): fedbound cannot recommend a design this bound supports")
        rec = dataclasses.replace(rec, why=f"VACUOUS: no T gives a bound below {level:.4g} ({what}); shown "
                                           "is the least vacuous design, not a supported one. " + rec.why)
    from fedbound.scheduling.certificate import Certificate

    privacy = (_reaccount(s, T_rec, sig_in, sig_out, C_rec, check, exact_rec),)
    domain = {"T": str(t_tight.evidence["searched"]),
              "C": ("the setting's C (the bound prefers C -> 0+)" if clip.at_lower_edge else
                    "Lemma 4's exact candidate set at the noise of the user's T" if user_T else
                    "Lemma 4's exact candidate set at every T's noise, jointly with T (C*(T) profiled out)"),
              "split": (str(split.evidence["searched"]) if joint else
                        "sigma_out/sigma_in = 1 (the paper's)" if ratio == 1.0
                        else f"r = {ratio:.4g} (optimised at T*)"),
              "S": "the setting's model (held)"}
    at_max = t_tight.at_upper_edge and "T_max" not in settings
    capped = "; ".join(c for c in (  # a search that stopped early is never certified (issue 36)
        f"T stopped at the documented maximum {T_SEARCH_MAX}" if at_max else "",
        t_tight.evidence.get("left_open", "")) if c)
    certificate = Certificate(domain=domain, search=t_tight.method,
                              check=_check_T(s, variant, ratio, t_tight, check), privacy=privacy,
                              vacuous=vacuous, capped=capped,
                              notes=("the T search profiles out C: at each T the bound is taken at "
                                     f"C*(sigma*(T)) (the setting's C = {s['C']:g} where C* -> 0+)",))
    differences = _differences(s, data, t_paper, clip, split, name)
    optima = {"T": t_tight, "T_paper": t_paper, "C": clip, "S": size, "split": split}
    return Plan(
        paper="dppfl",
        title=f"{SHORT}: T, noise, C, model size and budget split",
        variant=variant,
        recommendation=rec,
        rows=tuple(rows),
        optima=optima,
        warnings=tuple(warnings),
        data=data,
        differences=differences,
        certificate=certificate,
        caption="paper: Theorem 1 on Opacus' orders, the bound as printed; tight: the calibration "
        "that provably meets (eps, delta) with the least noise fedbound can certify",
    )
