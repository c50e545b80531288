"""PADPFL optimal designs (seed 001): rounds T, the proximal mu, impact factors p, and the designer's plan.

Seed 001 states no optimum; these are derived in spec 001 Sec. 3.10 from Theorem 2 (eq. (46)):

* :func:`optimal_rounds` (F47): ``f(T) = Theta + k_2 T + k_1 T^2/eps + k_0 T^3/eps^2`` is convex on T >= 0
  (k_1, k_0 >= 0).  For k_2 < 0 the stationary point is ``T* = -k_2 eps / (k_1 + sqrt(k_1^2 - 3 k_0 k_2))``
  (the stable form, also for k_0 = 0); the integer optimum is the better of floor/ceil, clamped to
  ``T_min`` (R: a client cannot be exposed more often than there are rounds).  k_2 >= 0: f is
  non-decreasing, the optimum is ``T_min`` ("non_decreasing").  k_2 < 0 with k_1 = k_0 = 0 (the non-private
  limit): no finite minimiser, a DomainError naming k1 and k0 (E6), never inf.
* :func:`best_mu`: with mu_bar = mu, ``lambda_2 = (A gamma - 1)/mu + K/mu^2``, ``K = rho A (1+gamma) +
  rho A^2 (1+gamma)^2 / 2``: minimised at ``mu* = 2K/(1 - A gamma)`` with
  ``lambda_2* = -(1 - A gamma)^2/(4K)``; lambda_2 < 0 is possible only if A gamma < 1, and then exactly for
  mu > K/(1 - A gamma).
* impact factors (``weights = "planned"``): the argmin of the recommended bound over the feasible p (floor,
  group bounds), :func:`~fedbound.scheduling.adaptive_weights.bound_optimal_impact_factors`.  The bound
  depends on p only through the broadcast std max(sigma_A, sigma_AC), increasing in it, and that argmin
  (water-filling) minimises max p and ||p||_2 together, so it is the same at every (T, mu): the bound is
  separable, and min over (T, mu) at that p IS the joint (T, mu, p) optimum.  ``weights = "priority"``
  (a labelled variant) takes the convex program of :mod:`fedbound.scheduling.adaptive_weights` instead
  (noise against the designer's data-quality scores; not the bound's argmin when quality_weight > 0) and
  holds it; (T, mu) are then optimised at it.
* :func:`plan`: the recommendation first (T, mu, p and the noise of tight accounting at that T, with the bound
  it predicts), then the paper's own answer (its sigma's, F47's T*) beside the tight numbers.

The recommended bound is Theta + T times Lemma 2's per-round increment (eq. (48)) with the noise actually
injected: sigma_eff = max(sigma_A, sigma_AC) (F21, E19) of the tight calibration, moments (49).  With
sigma_A in place of sigma_eff this is exactly Theorem 2's corrected constants (claim M18).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.bounds import adaptive as ba
from fedbound.bounds import provable
from fedbound.bounds.adaptive_impact import Design, design_from_settings, parse_lists
from fedbound.bounds.claims import Claim, Computed, Region
from fedbound.errors import DomainError, ParameterError
from fedbound.kept import LastKept
from fedbound.scheduling.adaptive_weights import (
    WeightProblem,
    bound_optimal_impact_factors,
    impact_factors_slsqp,
    optimal_impact_factors,
    weight_objective,
)
from fedbound.scheduling.certificate import Certificate, OptimumCheck, PrivacyCheck, brute_force_argmin
from fedbound.scheduling.integer_search import exhaustive_integer_min
from fedbound.scheduling.results import Optimum, Plan, Recommendation, Row, json_number

__all__ = [
    "stationary_rounds",
    "optimal_rounds",
    "best_mu",
    "mu_threshold",
    "WeightProblem",
    "bound_optimal_impact_factors",
    "optimal_impact_factors",
    "impact_factors_slsqp",
    "weight_objective",
    "Design",
    "design_from_settings",
    "parse_lists",
    "recommended_rounds",
    "recommended_design",
    "best_mu_for_noise",
    "certify",
    "tight_bound",
    "normalised_settings",
    "planned_impact_factors",
    "plan",
    "CLAIMS",
    "SHORT",
]

SHORT = "PADPFL (Talaei and Izadi 2024)"
PLANNED_WEIGHTS = ("planned", "priority")
"""``weights`` values whose p fedbound chooses: the bound's argmin, or the priority program's trade-off."""


# ---------------------------------------------------------------------------------------------------------
# Optimal T (F47)
# ---------------------------------------------------------------------------------------------------------
def stationary_rounds(k: Sequence[float], eps: float) -> float:
    """The continuous minimiser ``T*`` of Theorem 2's bound over T >= 0 (spec 001 F47, derived from seed 001
    eq. (46)): 0 when k_2 >= 0, else ``-k_2 eps / (k_1 + sqrt(k_1^2 - 3 k_0 k_2))``."""
    k2, k1, k0 = (float(x) for x in k)
    e = float(ba.NOTATION.params["eps"].check(eps))
    if k1 < 0 or k0 < 0:
        raise ParameterError("k1, k0", (k1, k0), "k1 >= 0 and k0 >= 0 (lambda_1, lambda_0 > 0)")
    if k2 >= 0:
        return 0.0
    if k1 == 0 and k0 == 0:
        raise DomainError(
            "k1, k0",
            (k1, k0),
            "k1 + k0 > 0",
            hint="no finite minimiser: with k2 < 0 and no noise terms the bound decreases without "
            "bound in T (seed 001 eq. (46) in the non-private limit)",
        )
    return -k2 * e / (k1 + math.sqrt(k1 * k1 - 3 * k0 * k2))


def optimal_rounds(Theta: float, k: Sequence[float], eps: float, T_min: int = 1) -> Optimum:
    """Integer T >= ``T_min`` minimising ``Theta + k_2 T + k_1 T^2/eps + k_0 T^3/eps^2`` (spec 001 F47).

    Closed form plus floor/ceil (f is convex on T >= 0); ties go to the smaller T.  ``evidence["case"]``:
    ``"interior"`` or ``"non_decreasing"`` (k_2 >= 0: the bound never decreases, T = T_min).
    """
    t_min = int(ba.NOTATION.params["R"].check(T_min))
    t_star = stationary_rounds(k, eps)

    def f(t: float) -> float:
        return float(ba.convergence_bound(Theta, t, eps, k))

    case = "interior" if t_star > 0 else "non_decreasing"
    candidates = sorted({max(t_min, math.floor(t_star)), max(t_min, math.ceil(t_star))})
    values = [f(t) for t in candidates]
    i = int(np.argmin(values))
    x = candidates[i]
    below = f(x - 1) if x - 1 >= t_min else math.inf
    above = f(x + 1)
    fx = values[i]
    ok = fx <= below and fx <= above
    msg = (
        f"T* = {t_star:.6g} (stationary point of a convex cubic); integer optimum {x}"
        if case == "interior"
        else f"k2 = {float(k[0]):.4g} >= 0: the bound is non-decreasing in T, so T = T_min = {t_min}"
    )
    return Optimum(
        x=x,
        fun=fx,
        success=bool(ok),
        message=msg,
        method="closed form (stationary point of eq. (46)) + floor/ceil",
        bracket=(t_min, max(t_min, math.ceil(t_star))),
        fun_below=below,
        fun_above=above,
        at_lower_edge=x == t_min,
        x_continuous=t_star,
        evidence={
            "case": case,
            "convex": "f'' = 2 k1/eps + 6 k0 T/eps^2 >= 0 on T >= 0",
            "k2": float(k[0]),
            "k1": float(k[1]),
            "k0": float(k[2]),
        },
    )


# ---------------------------------------------------------------------------------------------------------
# Best mu (Sec. 3.10 of spec 001, from Lemma 2 eq. (23))
# ---------------------------------------------------------------------------------------------------------
def _k_mu(A: float, gamma: float, rho: float) -> tuple[float, float]:
    a = float(ba.NOTATION.params["A"].check(A))
    g = float(ba.NOTATION.params["gamma"].check(gamma))
    r = float(ba.NOTATION.params["rho"].check(rho))
    return r * a * (1 + g) + 0.5 * r * a * a * (1 + g) ** 2, a * g


def mu_threshold(A: float, gamma: float, rho: float) -> float | None:
    """``K/(1 - A gamma)``: lambda_2 < 0 exactly for mu above it (mu_bar = mu); None if A gamma >= 1 (no mu
    makes lambda_2 negative).  From seed 001 eq. (23) (spec 001 Sec. 3.10)."""
    k, ag = _k_mu(A, gamma, rho)
    return None if ag >= 1 else k / (1 - ag)


def best_mu(A: float, gamma: float, rho: float) -> Optimum:
    """The proximal mu minimising lambda_2 of Lemma 2 (seed 001 eq. (23); spec 001 Sec. 3.10, M12).

    ``x = mu* = 2K/(1 - A gamma)``, ``fun = lambda_2* = -(1 - A gamma)^2/(4K)``; ``success=False`` (x None)
    when A gamma >= 1: lambda_2 > 0 for every mu and no mu gives a decreasing bound.  Convex losses
    (mu_bar = mu).
    """
    k, ag = _k_mu(A, gamma, rho)
    if ag >= 1:
        return Optimum(
            x=None,
            fun=None,
            success=False,
            method="closed form",
            message=f"A gamma = {ag:.4g} >= 1: lambda_2 > 0 for every mu (no convergent mu)",
            evidence={"K": k, "A_gamma": ag},
        )
    mu = 2 * k / (1 - ag)
    lam = -((1 - ag) ** 2) / (4 * k)
    return Optimum(
        x=mu,
        fun=lam,
        success=True,
        method="closed form",
        message=f"mu* = 2K/(1 - A gamma) = {mu:.6g}; lambda_2 < 0 for mu > {k / (1 - ag):.6g}",
        evidence={"K": k, "A_gamma": ag, "mu_threshold": k / (1 - ag)},
    )


# ---------------------------------------------------------------------------------------------------------
# The recommendation: the joint (T, mu) optimum of the bound under the deployed (tight) noise
# ---------------------------------------------------------------------------------------------------------
MU_BAR_RANGE = (1e-3, 1e6)
"""The searched mu_bar = mu - rho_minus (documented maximum: a minimiser at 1e6 is the infimum mu -> inf)."""
MU_GRID_POINTS = 401
T_MAX = 100_000
"""The largest T the recommendation searches (the window doubles until the bound has turned)."""


def _deployed_moments(s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, Ts: Any) -> tuple[Any, Any]:
    """(E||n||, E||n||^2) of the broadcast noise the design injects at T rounds (eq. (49)): the tight
    effective std max(sigma_A, sigma_AC) (F21, E19; sigma_A = sqrt(T) z 2B max p/min m)."""
    z = ba.tight_noise_multiplier(s["eps"], s["delta"])
    pm, s2 = (float(np.max(x)) for x in ba.weight_summaries(p))
    total = np.sqrt(np.asarray(Ts, dtype=float)) * z * 2 * s["C"] * pm / float(np.min(m))
    agg = ba.client_noise_sigma_tight(s["eps"], s["delta"], s["C"], s["R"], m) * math.sqrt(s2)
    return ba.noise_moments(np.maximum(total, agg), int(p.shape[-1]), dim=s.get("d"))


def _increment(s: Mapping[str, Any], mu: Any, e1: Any, e2: Any) -> np.ndarray:
    """Lemma 2's per-round increment ``lambda_2 beta^2 + lambda_1 E||n|| beta + lambda_0 E||n||^2`` (seed 001
    eq. (23) with ||grad L|| <= beta, eq. (48)), vectorised over ``mu`` and the noise moments."""
    v = {"A": s["A"], "gamma": s["gamma"], "rho": s["rho"], "mu": np.asarray(mu, dtype=float),
         "rho_minus": s.get("rho_minus", 0.0)}
    l2, l1, l0 = (np.asarray(th(v), dtype=float) for th in (ba.LAMBDA2, ba.LAMBDA1, ba.LAMBDA0))
    b = float(s["beta"])
    return l2 * b * b + l1 * np.asarray(e1) * b + l0 * np.asarray(e2)


def tight_bound(s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, mu: Any, Ts: Any) -> np.ndarray:
    """Theta + T * Lemma 2's increment at beta with the tight effective noise (module docstring); ``mu``
    and ``Ts`` broadcast."""
    e1, e2 = _deployed_moments(s, p, m, Ts)
    return s["Theta"] + np.asarray(Ts, dtype=float) * _increment(s, mu, e1, e2)


def best_mu_for_noise(s: Mapping[str, Any], e1: Any, e2: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mu, increment, at_edge): the proximal mu minimising Lemma 2's increment (eq. (23)) at the noise
    moments ``e1``, ``e2`` (arrays), i.e. the bound's mu at a fixed T.  lambda_1 depends on mu too, so this
    is not :func:`best_mu` (which minimises lambda_2 alone).  A log grid of mu_bar over
    :data:`MU_BAR_RANGE`, then golden section between the grid argmin's neighbours; ``at_edge`` where the
    argmin is the range's top (the increment decreases towards mu -> inf: no finite optimum).

    Convex losses (rho_minus = 0): in x = 1/mu the increment is the quadratic ``beta^2 K x^2 - a x + e1 beta
    + lambda_0 e2`` (K as in :func:`best_mu`, ``a = beta^2 (1 - A gamma) - e1 beta rho A (1 + gamma)``), so
    ``mu = 2 beta^2 K / a`` for a > 0 (exact, clipped to the range), the range's top otherwise."""
    rm = float(s.get("rho_minus", 0.0))
    e1, e2 = np.atleast_1d(np.asarray(e1, dtype=float)), np.atleast_1d(np.asarray(e2, dtype=float))
    if rm == 0.0:
        k, ag = _k_mu(s["A"], s["gamma"], s["rho"])
        b = float(s["beta"])
        a = b * b * (1 - ag) - e1 * b * float(s["rho"]) * float(s["A"]) * (1 + float(s["gamma"]))
        with np.errstate(divide="ignore"):
            mu = np.clip(np.where(a > 0, 2 * b * b * k / np.where(a > 0, a, 1.0), np.inf), *MU_BAR_RANGE)
        return mu, _increment(s, mu, e1, e2), mu >= MU_BAR_RANGE[1]
    logs = np.linspace(*np.log(MU_BAR_RANGE), MU_GRID_POINTS)
    vals = _increment(s, rm + np.exp(logs)[:, None], e1[None], e2[None])
    i = np.argmin(vals, axis=0)
    a, b = logs[np.maximum(i - 1, 0)], logs[np.minimum(i + 1, len(logs) - 1)]

    def f(x: np.ndarray) -> np.ndarray:
        return _increment(s, rm + np.exp(x), e1, e2)

    golden = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):  # golden section, both interior points re-evaluated (cheap, vectorised)
        c, d = b - golden * (b - a), a + golden * (b - a)
        left = f(c) < f(d)
        a, b = np.where(left, a, c), np.where(left, d, b)
    x = (a + b) / 2
    fx = f(x)
    grid_best = vals[i, np.arange(len(i))]
    x = np.where(fx <= grid_best, x, logs[i])
    return rm + np.exp(x), np.minimum(fx, grid_best), i == len(logs) - 1


def recommended_design(
    s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, mu: float | None = None, T_max: int = T_MAX,
    T: int | None = None,
) -> Optimum:
    """The integer T in [R, T_max] and mu minimising :func:`tight_bound` jointly (``mu`` given: held fixed).

    For each T the bound's mu is :func:`best_mu_for_noise` (the bound is Theta + T g(mu; T), so the joint
    optimum is min_T of Theta + T min_mu g); T is scanned exhaustively over a window that doubles until
    the minimiser is inside it (the bound has turned) or reaches ``T_max`` (then ``at_upper_edge``).
    ``x = {"T": .., "mu": ..}``; ``evidence["mu_at_edge"]``: the bound's mu is the infimum mu -> inf.
    ``T`` given: held fixed (only mu is optimised).
    """
    lo, hi = (int(T), int(T)) if T is not None else (int(s["R"]), max(int(s["R"]) + 64, 128))

    def f(Ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if mu is not None:
            return tight_bound(s, p, m, mu, Ts), np.ones(Ts.shape, bool)
        e1, e2 = _deployed_moments(s, p, m, Ts)
        _, g, _ = best_mu_for_noise(s, e1, e2)
        return s["Theta"] + Ts * g, np.ones(Ts.shape, bool)

    from fedbound.budget import check

    while True:
        check(f"the search over T had reached T = {min(hi, T_max)} of at most {T_max}")
        res = exhaustive_integer_min(f, lo, min(hi, T_max), what="T")
        if T is not None or res.x < min(hi, T_max) or hi >= T_max:
            break
        hi *= 4
    held, T = T is not None, int(res.x)
    if mu is None:
        e1, e2 = _deployed_moments(s, p, m, np.array([T], dtype=float))
        mus, _, edge = best_mu_for_noise(s, e1, e2)
        mu_x, at_edge, how = float(mus[0]), bool(edge[0]), "joint (T, mu)"
    else:
        mu_x, at_edge, how = float(mu), False, "T at the given mu"
    turned = held or res.x < min(hi, T_max)
    msg = ((f"{how}: T = {T} (the setting's, held)" if held else
            f"{how}: every integer T in [{lo}, {min(hi, T_max)}] (window grown until the bound turned"
            + ("" if turned else f"; stopped at T_max = {T_max}") + ")")
           + ("" if mu is not None else f", mu_bar on a {MU_GRID_POINTS}-point log grid over "
              f"[{MU_BAR_RANGE[0]:g}, {MU_BAR_RANGE[1]:g}] refined by golden section"))
    return Optimum(x={"T": T, "mu": mu_x}, fun=float(res.fun), success=bool(res.success), message=msg,
                   method="exhaustive in T" + (", golden section in mu" if mu is None else ""),
                   bracket=(lo, min(hi, T_max)), fun_below=res.fun_below, fun_above=res.fun_above,
                   at_lower_edge=res.at_lower_edge, at_upper_edge=not turned,
                   evidence={"mu_at_edge": at_edge, "T_window": (lo, min(hi, T_max)), "T_held": held})


def recommended_rounds(
    s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, mu: float, T_max: int = T_MAX
) -> Optimum:
    """Integer T in [R, T_max] minimising :func:`tight_bound` at a fixed ``mu`` (see
    :func:`recommended_design`)."""
    res = recommended_design(s, p, m, mu, T_max)
    return Optimum(x=res.x["T"], fun=res.fun, success=res.success, message=res.message, method=res.method,
                   bracket=res.bracket, fun_below=res.fun_below, fun_above=res.fun_above,
                   at_lower_edge=res.at_lower_edge, at_upper_edge=res.at_upper_edge, evidence=res.evidence)


def certify(s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, mu_given: float | None, rec: Optimum,
            noise: Mapping[str, np.ndarray], spent: Mapping[str, float], vacuous: bool, planned: str,
            full: bool = False, recommended: tuple[int, float, float] | None = None) -> Certificate:
    """The recommendation's certificate: the (T, mu) domain searched, a brute force of :func:`tight_bound`
    over every integer T of that window times a log grid of mu (1001 points; 20001 with ``full``) that the
    recommendation must match (no grid point below it; the grid's best above it by at most the bound's
    change between neighbouring grid points at the grid's best, the grid's resolution), and both
    views' privacy re-accounted exactly (analytic Gaussian of the Gaussian (GDP) composition: exact for
    Gaussian releases).  ``noise``/``spent``: the deployed :func:`~fedbound.bounds.adaptive.noise_details`
    and :func:`~fedbound.bounds.adaptive.exact_epsilon` over the whole run; ``planned``: the setting's
    ``weights`` (how p was chosen, said in the domain and the search).  ``recommended``: the (T, mu, bound)
    the plan shows, which the check compares (default: the search's own optimum): where the bound's mu is
    the infimum mu -> inf the plan shows Lemma 2's mu*, whose bound the grid beats, and the check says so
    (issue 36: it "agreed" while its own grid found a lower bound)."""
    lo, hi = rec.evidence["T_window"]
    turned = not rec.at_upper_edge
    rm = float(s.get("rho_minus", 0.0))
    domain = {"T": f"{lo} (the setting's; held)" if rec.evidence.get("T_held") else
              f"{lo}..{hi} (every integer; the window grew until the bound turned)" if turned
              else f"{lo}..{hi} (stopped at the documented maximum T_max = {T_MAX})"}
    if mu_given is None:
        domain["mu"] = (f"rho_minus + [{MU_BAR_RANGE[0]:g}, {MU_BAR_RANGE[1]:g}] (log grid of "
                        f"{MU_GRID_POINTS}, golden section)")
        mus = rm + np.geomspace(*MU_BAR_RANGE, 20001 if full else 1001)
    else:
        domain["mu"] = f"{mu_given:g} (the setting's)"
        mus = np.array([mu_given])
    domain["p"] = {
        "planned": "the bound's argmin over the feasible p (water-filling: it minimises max p and ||p||_2 "
                   "at once, so it is the argmin at every (T, mu); the joint optimum is the (T, mu) optimum "
                   "at it)",
        "priority": "the impact-factor program's priority trade-off (noise against the quality scores; held, "
                    "not the bound's argmin over p)",
    }.get(planned, "the setting's ratios (held)")
    budget = 2_000_000 if full else 200_000
    Ts = np.arange(lo, hi + 1)
    if Ts.size * mus.size > budget:  # a dense integer grid of T: geometric and linear, both ends included
        n = budget // (2 * mus.size)
        Ts = np.unique(np.concatenate([np.round(np.geomspace(lo, hi, n)), np.round(np.linspace(lo, hi, n))]))
        domain["T"] += f"; checked on {Ts.size} integers of it"
    x, fun, points = brute_force_argmin(lambda T, mu: tight_bound(s, p, m, mu, T), {"T": Ts, "mu": mus})
    # the grid's resolution at its best point: how much the bound moves to the neighbouring mu's there (the
    # grid's best may lie above the continuous optimum by that much, never below it)
    at_T = tight_bound(s, p, m, mus, x["T"])
    i = int(np.argmin(at_T))
    near = at_T[max(i - 1, 0):i + 2]
    tol = float(np.max(np.abs(near - at_T[i]))) + 1e-12 * max(1.0, abs(fun))
    shown = float(rec.fun) if recommended is None else float(recommended[2])
    slack = 1e-12 * max(1.0, abs(fun))  # the grid may beat neither the shown design nor the search's optimum
    agrees = shown <= fun + slack and float(rec.fun) <= fun + slack and fun - float(rec.fun) <= tol
    note = f"grid best {fun:.8g} at (T, mu) = ({x['T']:g}, {x['mu']:.4g}) vs recommended {shown:.8g}"
    if recommended is not None and shown > fun + slack:
        note += (f" at (T, mu) = ({recommended[0]}, {recommended[1]:.4g}): the recommendation is not the "
                 "bound's least over the domain searched")
    check = OptimumCheck("brute force (integer T x log grid of mu)", points, x, fun, bool(agrees),
                         note=note, tolerance=tol)
    eff = np.sqrt(noise["server"] ** 2 + noise["aggregated_client"] ** 2)
    how = "analytic Gaussian of the exact Gaussian (GDP) composition"
    privacy = (PrivacyCheck(f"uplink ({int(s['R'])} upload(s) per client)", float(noise["uplink"][0]),
                            float(s["eps"]), float(s["delta"]), float(spent["uplink"]), how),
               PrivacyCheck(f"downlink ({len(eff)} broadcast(s))", float(eff.max()), float(s["eps"]),
                            float(s["delta"]), float(spent["downlink"]), how))
    notes = []
    if privacy[1].eps_achieved < float(s["eps"]) * 0.99:
        notes.append(f"downlink: the aggregated client noise alone exceeds what the broadcasts need (the "
                     f"server adds nothing), so it spends eps {privacy[1].eps_achieved:.4g} of {s['eps']:g}: "
                     "valid, not tight (the uplink's noise sets it)")
    if rec.evidence.get("mu_at_edge"):
        notes.append("the bound decreases towards mu -> inf (its infimum, not attained, at the top of the mu "
                     "range searched): no (T, mu) optimum exists to certify; the plan shows Lemma 2's mu* "
                     "and the best T at it, and the check compares that design's bound with the grid's least")
    search = rec.method + {"planned": "; p: water-filling, the bound's exact argmin over p at every (T, mu) "
                           "(so the (T, mu) search at it is the joint (T, mu, p) optimum)",
                           "priority": "; p: the priority program (cvxpy), held"}.get(planned, "; p: held")
    return Certificate(domain=domain, search=search, check=check, privacy=privacy, vacuous=vacuous,
                       capped="" if turned else f"T stopped at T_max = {T_MAX}", notes=tuple(notes))


REQUIRED_KEYS = ("N", "R", "C", "eps", "delta", "parts", "ratios", "Theta", "A", "gamma", "rho", "beta")
"""What :func:`plan` needs (the registry fills the loss constants from ``Paper.defaults``)."""


def normalised_settings(
    settings: Mapping[str, Any], required: tuple[str, ...] = REQUIRED_KEYS
) -> dict[str, Any]:
    """The setting without unset keys, ``C`` from the paper's ``B`` when only that is given; ParameterError
    naming the first missing key of :data:`REQUIRED_KEYS`."""
    s = {k: v for k, v in settings.items() if v is not None}
    if "C" not in s and "B" in s:
        s["C"] = s["B"]
    missing = [k for k in required if k not in s]
    if missing:
        raise ParameterError(
            missing[0],
            None,
            "a value in the [adaptive] section",
            hint=f"PADPFL's plan needs {', '.join(REQUIRED_KEYS)}",
        )
    return s


def _problem(s: Mapping[str, Any], design: Design, T: float, accounting: str) -> WeightProblem:
    def vec(key: str) -> tuple[float, ...] | None:
        return None if s.get(key) is None else tuple(parse_lists(key, s[key])[0])

    return WeightProblem(
        design.parts,
        design.sizes,
        T=T,
        R=int(s["R"]),
        accounting=accounting,
        sensitivity=s.get("sensitivity", "paper"),
        scores=vec("scores"),
        quality_weight=float(s.get("quality_weight", 0.0)),
        group_min=vec("group_min"),
        group_max=vec("group_max"),
        floor=float(s.get("floor", 0.0)),
    )


def _provable(s: dict[str, Any]) -> tuple[dict[str, Any], str | None, str]:
    """With ``sensitivity = "provable"`` (the default): the setting with the effective clip of
    :func:`fedbound.bounds.provable.for_planner` (the program then uses eq. (10)'s form) and the note; and
    the premise the plan rests on for the sensitivity it deploys
    (:func:`fedbound.bounds.provable.premise`)."""
    how = {"clip_key": "C", "paper": SHORT, "assumption": "client sensitivity 2B/m of eq. (8)"}
    if provable.mode(s) != "provable":
        m = float(np.min(design_from_settings(s).client_sizes))
        return s, None, provable.premise(s, m=m, **how)
    m = float(np.min(design_from_settings(s).client_sizes))
    given, note = provable.for_planner({**s, "sensitivity": "provable"}, m=m, **how)
    return given, note, provable.premise({**s, "sensitivity": "provable"}, m=m, **how)


def planned_impact_factors(settings: Mapping[str, Any], T: float | None = None) -> Optimum:
    """The impact factors fedbound chooses for an [adaptive] setting, what ``weights = "planned"`` /
    ``"priority"`` train with: ``"priority"``: the impact-factor program (its scores, quality weight, group
    bounds, floor, sensitivity) at ``T`` rounds (default the setting's T, else 30) under tight accounting;
    otherwise the bound's argmin over the same feasible set (:func:`bound_optimal_impact_factors`, the
    same at every T)."""
    s, _, _ = _provable(normalised_settings(settings, ("N", "R", "parts", "ratios")))
    design = design_from_settings(s)
    design.client_sizes  # noqa: B018  (ConfigError without sizes or m)
    problem = _problem(s, design, float(T or s.get("T", 30)), "tight")
    if s.get("weights") == "priority":
        return optimal_impact_factors(problem)
    return bound_optimal_impact_factors(problem)


PLAN_CACHE_SIZE = 32
_PLANS = LastKept(PLAN_CACHE_SIZE)
"""Plans kept per process (:func:`plan`): the T figure marks the plan's design, so the explorer's plan and its
figure, and a figure drawn twice, plan once."""


def plan(settings: Mapping[str, Any], variant: str = "paper", check: bool = False) -> Plan:
    """PADPFL's plan for an [adaptive] setting (module docstring).  ``variant``: the reading of Theorem 2
    used for the paper's own answer (``"paper"`` or ``"corrected"``, E1-E4).  ``check``: the certificate's
    independent brute force runs on a finer mu grid (:func:`certify`).

    Kept per process (the last ``PLAN_CACHE_SIZE``), keyed by the set keys' exact values (unset keys are
    dropped first, as the plan does), the variant and ``check``: a repeated call returns the same (frozen)
    Plan, equal to a fresh one (tested)."""
    key = repr((sorted((k, v) for k, v in settings.items() if v is not None), variant, bool(check)))
    return _PLANS.get(key, lambda: _plan(settings, variant, check))


def _plan(settings: Mapping[str, Any], variant: str, check: bool) -> Plan:
    """:func:`plan` computed (no cache)."""
    s, provable_note, sensitivity_premise = _provable(normalised_settings(settings))
    if variant not in ("paper", "corrected"):
        raise ParameterError("variant", variant, "'paper' or 'corrected'")
    design = design_from_settings(s)
    m = design.client_sizes
    warnings: list[str] = [provable_note] if provable_note else []
    mu_opt = best_mu(s["A"], s["gamma"], s["rho"])
    mu = float(s["mu"]) if s.get("mu") is not None else (mu_opt.x if mu_opt.success else None)
    if mu is None:
        raise DomainError(
            "A gamma",
            s["A"] * s["gamma"],
            "< 1",
            hint="no proximal mu makes Lemma 2's lambda_2 "
            "negative (seed 001 eq. (23)); give mu to plan anyway",
        )
    if not mu_opt.success:
        warnings.append(f"{SHORT}, Lemma 2 eq. (23): {mu_opt.message}; the bound grows with T")
    elif s.get("mu") is not None and mu <= mu_opt.evidence["mu_threshold"]:
        warnings.append(
            f"{SHORT}, Lemma 2 eq. (23): mu = {mu:g} gives lambda_2 >= 0, so the bound grows with T "
            f"from the first round; lambda_2 < 0 needs mu > {mu_opt.evidence['mu_threshold']:.4g} "
            f"(mu* = {mu_opt.x:.4g})"
        )
    problem = _problem(s, design, float(s.get("T", 30)), "tight")
    weights = planned_impact_factors(s)
    if s.get("weights") == "planned" and float(s.get("quality_weight") or 0.0) > 0:
        warnings.append(f"{SHORT}: weights = 'planned' takes the bound's argmin over p and ignores scores "
                        "and quality_weight (weights = 'priority' trades noise against them)")
    phases = design.phase_rows
    use_planned = s.get("weights", "ratios") in PLANNED_WEIGHTS
    p_rec = weights.x if use_planned else phases
    mu_given = float(s["mu"]) if s.get("mu") is not None else None
    T_given = int(s["T"]) if s.get("T") is not None else None  # the setting's T is held (issue 23)
    rec_T = recommended_design(s, p_rec, m, mu_given, T=T_given)
    T_rec, mu_rec = int(rec_T.x["T"]), float(rec_T.x["mu"])
    if rec_T.evidence["mu_at_edge"]:  # the bound's infimum is mu -> inf (vacuous there): Lemma 2's mu*, and
        mu_rec = mu  # the T that is best at it (issue 36: T was the edge's, the bound mu*'s)
        T_rec = int(recommended_design(s, p_rec, m, mu, T=T_given).x["T"])
    bound_rec = float(tight_bound(s, p_rec, m, mu_rec, T_rec))
    vacuous = bound_rec >= float(s["Theta"])
    rows_rec = np.tile(p_rec, (T_rec, 1)) if use_planned else design.schedule(T_rec)
    noise_rec = ba.noise_details({**s, "p": rows_rec, "m": m}, T_rec, "tight")
    # the paper's own answer: F47 with Theorem 2's constants, T_min = R (admissible)
    summ = ba.summaries(phases, m)
    c = float(ba.gaussian_c(s["delta"]))
    values = {
        **{k: s[k] for k in ("eps", "C", "R", "Theta", "A", "gamma", "rho", "beta") if k in s},
        "B": s["C"],
        "c": c,
        "mu": mu,
        "rho_minus": s.get("rho_minus", 0.0),
        **summ,
    }
    values.pop("C")
    k = tuple(float(th(values, variant=variant)) for th in (ba.K2, ba.K1, ba.K0))
    try:
        t_opt = optimal_rounds(s["Theta"], k, s["eps"], T_min=int(s["R"]))
    except DomainError as exc:
        t_opt = None
        warnings.append(f"{SHORT}, eq. (46): {exc}")
    T_paper = int(s["T"]) if "T" in s else (int(t_opt.x) if t_opt is not None else T_rec)
    p_paper = design.schedule(T_paper)
    noise_paper = ba.noise_details({**s, "p": p_paper, "m": m}, T_paper, "paper")
    noise_tight_at_paper = ba.noise_details({**s, "p": p_paper, "m": m}, T_paper, "tight")
    thr = float(np.min(ba.server_noise_threshold(int(s["R"]), phases)))
    spent_paper = ba.exact_epsilon(noise_paper, p_paper, m, s["C"], int(s["R"]), s["delta"])
    spent_tight = ba.exact_epsilon(noise_rec, rows_rec, m, s["C"], int(s["R"]), s["delta"])
    if max(spent_paper.values()) > s["eps"] * (1 + 1e-9):
        view = max(spent_paper, key=spent_paper.get)
        warnings.append(
            f"{SHORT}, eqs. (8) and (13): the paper's noise spends eps = {spent_paper[view]:.4g} on the "
            f"{view} under exact accounting, against the budget eps = {s['eps']:g}"
        )
    bound_paper = float(ba.BOUND({**values, "T": float(T_paper)}, variant=variant))
    _warn(warnings, s, design, noise_paper, noise_tight_at_paper, T_paper, thr, k, variant)
    sigma_rec = {
        "uplink": float(noise_rec["uplink"][0]),
        "server": _one(noise_rec["server"]),
    }
    premises = (
        sensitivity_premise,
        f"R = {s['R']} uplink exposures per client; every broadcast is a release (linear in T in the paper, "
        "exact Gaussian composition here)",
        f"assumed loss constants Theta, A, gamma, rho, beta ({SHORT} states none)",
    )
    why = (
        (f"mu = {mu_rec:.4g} minimises Theta + T x (Lemma 2's increment, eq. (23)) at the setting's T = "
         f"{T_rec}" if T_given is not None else
         f"(T, mu) = ({T_rec}, {mu_rec:.4g}) minimise Theta + T x (Lemma 2's increment, eq. (23)) jointly")
        + " with the tight effective noise max(sigma_A, sigma_AC) computed at each T (eqs. (48), (49) with "
        "the injected noise)"
        + ("" if mu_given is None else " at the setting's mu")
        + {"planned": "; p, jointly: the bound's argmin over p, the same at every (T, mu) (water-filling)",
           "priority": "; p from the priority program (noise against quality, held)"}.get(
            s.get("weights", "ratios"), "; p from the setting's ratios")
    )
    if vacuous:
        why = (f"VACUOUS: the bound is at least Theta = {s['Theta']:g} for every (T, mu) searched (least "
               f"{float(rec_T.fun):.4g}), so it guarantees no progress; shown is the least vacuous design "
               f"(fewest rounds that minimise it{', Lemma 2 mu*' if rec_T.evidence['mu_at_edge'] else ''}), "
               "not a supported one. " + why)
        warnings.insert(0, f"{SHORT}, Theorem 2 / eq. (48): the bound under the deployed noise is vacuous "
                           f"(>= Theta = {s['Theta']:g}) for every T and mu searched; least "
                           f"{float(rec_T.fun):.4g} at T = {T_rec}: fedbound cannot recommend a design "
                           "this bound supports")
    if bound_rec < 0:
        warnings.insert(int(vacuous), f"{SHORT}, Theorem 2 / eq. (48): the bound is negative "
                        f"({bound_rec:.4g}) at the recommendation: with lambda_2 < 0 the substitution "
                        "||grad L|| <= beta makes it decrease without limit until the noise catches up, so "
                        "it is not a valid bound there (the recommended T is where that term dominates)")
    rec = Recommendation(
        T=T_rec,
        K=None,
        sigma=sigma_rec,
        bound=bound_rec,
        accounting="exact Gaussian composition (analytic Gaussian, fedbound.accounting)",
        why=why,
        premises=premises,
        extra={
            "p": p_rec if p_rec.ndim == 1 else p_rec[0],
            "mu": mu_rec,
            "sigma_total": _one(noise_rec["total"]),
            "vacuous": vacuous,
        },
    )
    rows = (
        Row(
            "T",
            T_paper,
            T_rec,
            "paper: the minimiser of Theorem 2, eq. (46)"
            + (" (setting's T)" if "T" in s else "")
            + "; tight: minimiser under tight noise",
        ),
        Row(
            "sigma_client (uplink)",
            float(noise_paper["uplink"][0]),
            float(noise_rec["uplink"][0]),
            "eq. (8): 2BRc/(min m eps) vs sqrt(R) z 2B/min m",
        ),
        Row(
            "sigma_server",
            _one(noise_paper["server"]),
            _one(noise_rec["server"]),
            "Theorem 1, eq. (13) vs top-up to sqrt(T) z Delta f",
        ),
        Row(
            "sigma_total (sigma_A)",
            _one(noise_paper["total"]),
            _one(noise_rec["total"]),
            "proof of Theorem 1",
        ),
        Row("server_noise_threshold T_th", thr, None, "server noise only for T > T_th (Theorem 1)"),
        Row(
            "eps spent (exact accounting, worst client)",
            max(spent_paper.values()),
            max(spent_tight.values()),
            "analytic Gaussian, Gaussian-DP composition over the R uploads and T broadcasts",
        ),
        Row(
            "bound", bound_paper, bound_rec, f"Theorem 2 ({variant}) at the paper's T; tight: eq. (48)"
        ),
        Row("mu", mu, mu_rec, "paper: mu* = 2K/(1 - A gamma) minimises lambda_2 (or the setting's mu); "
            "tight: the bound's mu jointly with T (lambda_1 depends on mu too)"),
        Row(
            "objective of p (noise/uniform - quality)",
            weight_objective(problem, _groups(phases[0], design)),
            float(weights.fun),
            "setting's p vs the chosen p (" + ("priority program" if s.get("weights") == "priority" else
                                              "the bound's argmin, water-filling") + ")",
        ),
    )
    optima = {"T_recommended": rec_T, "mu": mu_opt, "impact_factors": weights}
    certificate = certify(s, p_rec, m, mu_given, rec_T, noise_rec, spent_tight, vacuous,
                          str(s.get("weights", "ratios")), check, recommended=(T_rec, mu_rec, bound_rec))
    if t_opt is not None:
        optima["T_opt"] = t_opt
    differences = []
    if T_paper != T_rec:
        differences.append(f"T: the paper's {T_paper} vs {T_rec} under tight accounting")
    if not math.isclose(mu, mu_rec, rel_tol=1e-9):
        differences.append(f"mu: Lemma 2's mu* = {mu:.4g} minimises lambda_2 only; {mu_rec:.4g} minimises "
                           "the bound (lambda_1 depends on mu too)")
    for stage in ("uplink", "server"):
        a, b = _fmt(noise_paper[stage]), _fmt(noise_rec[stage])
        if a != b:
            differences.append(f"sigma_{stage}: the paper's {a} vs {b} (tight, at T = {T_rec})")
    if use_planned:
        how_p = ("the priority program's trade-off" if s.get("weights") == "priority" else
                 "the bound's argmin over p (water-filling)")
        differences.append(f"p: {how_p} instead of the setting's ratios")
    data = {
        "p": phases[0] if len(phases) == 1 else phases,
        "p_planned": weights.x,
        "ratios_for_train": ",".join(f"{q:.6g}" for q in weights.evidence["per_group"]),
        "sigma_client": float(noise_paper["uplink"][0]),
        "sigma_client_tight": float(noise_rec["uplink"][0]),
        "sigma_server": _one(noise_paper["server"]),
        "sigma_server_tight": _one(noise_rec["server"]),
        "sigma_total": _one(noise_paper["total"]),
        "eps_spent_paper_sigma": spent_paper,
        "eps_spent_tight_sigma": spent_tight,
        "server_noise_threshold": thr,
        "T": T_paper,
        "T_opt": None if t_opt is None else int(t_opt.x),
        "T_opt_continuous": None if t_opt is None else float(t_opt.x_continuous),
        "bound_at_T_opt": None if t_opt is None else float(t_opt.fun),
        "bound_at_T": bound_paper,
        "k": list(k),
        "mu_opt": mu_opt.x,
        "lambda2_at_mu_opt": mu_opt.fun,
        "T_recommended": T_rec,
        "mu_recommended": mu_rec,
        "bound_recommended": bound_rec,
        "vacuous": vacuous,
    }
    return Plan(
        paper="adaptive",
        title=f"{SHORT}: design plan",
        variant=variant,
        recommendation=rec,
        rows=rows,
        optima=optima,
        warnings=tuple(warnings),
        data={k: json_number(v) for k, v in data.items()},
        differences=tuple(differences),
        certificate=certificate,
        caption="the recommendation calibrates the noise exactly (analytic Gaussian) at its own T; "
        "the paper's column is Theorem 2 with eqs. (8) and (13) as printed",
    )


def _fmt(x: np.ndarray) -> str:
    """A per-round std in words: one number, or its range over the rounds."""
    arr = np.asarray(x, dtype=float)
    lo, hi = float(arr.min()), float(arr.max())
    return f"{lo:.4g}" if np.isclose(lo, hi, rtol=1e-12, atol=0) else f"{lo:.4g}..{hi:.4g} over the rounds"


def _one(x: np.ndarray) -> float | np.ndarray:
    arr = np.asarray(x, dtype=float)
    return float(arr[0]) if np.allclose(arr, arr[0], rtol=1e-12, atol=0) else arr


def _groups(p: np.ndarray, design: Design) -> np.ndarray:
    starts = np.cumsum((0, *design.parts[:-1]))
    return np.asarray(p)[starts]


def _warn(
    warnings: list[str],
    s: Mapping[str, Any],
    design: Design,
    paper: Mapping[str, np.ndarray],
    tight: Mapping[str, np.ndarray],
    T: int,
    thr: float,
    k: tuple[float, float, float],
    variant: str,
) -> None:
    if float(paper["uplink"][0]) < float(tight["uplink"][0]) * (1 - 1e-9):
        warnings.append(
            f"sigma_client: {SHORT}, eq. (8) gives {float(paper['uplink'][0]):.4g}, below the "
            f"{float(tight['uplink'][0]):.4g} that is exactly (eps, delta)-DP over R exposures"
        )
    eff_paper = np.sqrt(paper["server"] ** 2 + paper["aggregated_client"] ** 2)
    eff_tight = np.sqrt(tight["server"] ** 2 + tight["aggregated_client"] ** 2)
    if np.any(eff_paper < eff_tight * (1 - 1e-9)):
        warnings.append(
            f"sigma_server: the broadcast noise of {SHORT}, Theorem 1 eq. (13) is below what exact "
            "composition needs for (eps, delta) over the T broadcasts: the paper's noise does not "
            "deliver its claimed privacy"
        )
    if s["eps"] / max(int(s["R"]), 1) >= 1:
        warnings.append(
            f"{SHORT}, Sec. III-A: the classic Gaussian constant is proven only for a per-release "
            f"eps < 1 (eps/R = {s['eps'] / s['R']:.3g}): compare the tight sigma's"
        )
    if T <= thr:
        warnings.append(
            f"{SHORT}, Theorem 2 eq. (46) assumes the broadcast std sigma_A, but at T = {T} <= T_th = "
            f"{thr:.4g} the server adds nothing and the injected noise sigma_AC is larger: the bound "
            "understates the noise"
        )
    if variant == "paper" and min(design.sizes) != max(design.sizes):
        warnings.append(
            f"{SHORT}, Theorem 2 eq. (46) uses max_i m_i where the noise (13) uses min_i m_i: the "
            f"bound assumes {max(design.sizes) / min(design.sizes):.3g}x less noise than is injected "
            "(see --variant corrected)"
        )
    if k[0] < 0:
        warnings.append(
            f"{SHORT}, Theorem 2 eq. (46) replaces lambda_2 ||grad L||^2 by lambda_2 beta^2 with "
            "lambda_2 < 0: the bound is not sound for large T (it turns negative)"
        )


# ---------------------------------------------------------------------------------------------------------
# Claims about the optima (M12, M13 and the weight program), checked by fedbound.bounds.claims
# ---------------------------------------------------------------------------------------------------------
def _k(values: Mapping[str, Any], variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = {key: x for key, x in values.items() if key in ba.NOTATION.params}
    return tuple(
        np.asarray(th.evaluate(v, variant=variant).value, dtype=float) for th in (ba.K2, ba.K1, ba.K0)
    )


def _t_star(values: Mapping[str, Any], variant: str) -> np.ndarray:
    """F47's T* over arrays of settings (the vectorised form of :func:`stationary_rounds`)."""
    k2, k1, k0 = _k(values, variant)
    e = np.asarray(values["eps"], dtype=float)
    with np.errstate(all="ignore"):
        inner = -k2 * e / (k1 + np.sqrt(k1 * k1 - 3 * k0 * k2))
    return np.where(k2 >= 0, 0.0, inner)


T_STAR = Computed("T_star", _t_star, "continuous minimiser of Theorem 2's bound (spec 001 F47)")


def _matches_scan(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    from scipy.optimize import minimize_scalar

    k = tuple(float(x) for x in _k(values, variant))
    res = optimal_rounds(values["Theta"], k, values["eps"])
    t_star = float(res.x_continuous)
    grid = np.arange(1, max(3 * (res.x + 2), 50))
    f = np.asarray(ba.convergence_bound(values["Theta"], grid, values["eps"], k))
    num = minimize_scalar(
        lambda t: float(ba.convergence_bound(values["Theta"], t, values["eps"], k)),
        bounds=(0, max(4 * t_star, 10)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    cont = abs(num.x - t_star) <= 1e-4 * max(1, t_star) or t_star == 0
    ok = cont and int(grid[np.argmin(f)]) == res.x
    return bool(ok), f"T* = {t_star:.6g} (scipy {num.x:.6g}), integer {res.x}, scan {int(grid[np.argmin(f)])}"


def _mu_optimum(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    from scipy.optimize import minimize_scalar

    res = best_mu(values["A"], values["gamma"], values["rho"])

    def lam2(mu: float) -> float:
        return ba.lemma2_lambdas(values["A"], values["gamma"], values["rho"], mu)[0]

    if not res.success:
        grid = np.geomspace(1e-3, 1e6, 400)
        return bool(all(lam2(x) > 0 for x in grid)), "A gamma >= 1: lambda_2 > 0 on the mu grid"
    num = minimize_scalar(lam2, bounds=(res.x / 50, res.x * 50), method="bounded", options={"xatol": 1e-9})
    thr = res.evidence["mu_threshold"]
    ok = abs(lam2(res.x) - res.fun) <= 1e-12 * (1 + abs(res.fun)) and lam2(res.x) <= num.fun + 1e-12
    ok &= lam2(thr * 1.001) < 0 < lam2(thr * 0.999)
    return bool(ok), f"mu* = {res.x:.6g}, lambda2* = {res.fun:.6g}, scipy {num.fun:.6g}"


def _program(values: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(int(values["draw"]))
    k = int(rng.integers(2, 5))
    n = rng.integers(1, 20, k)
    sizes = rng.integers(10, 300, k)
    prob = WeightProblem(
        tuple(int(x) for x in n),
        tuple(int(x) for x in sizes),
        T=float(rng.uniform(1e4, 1e5)),
        R=1,
        sensitivity=values.get("reading", "paper"),
    )
    return optimal_impact_factors(prob).evidence["per_group"], n, sizes


def _program_is_uniform(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    q, n, _ = _program(values)
    expected = np.full(len(q), 1 / n.sum())
    return bool(
        np.allclose(q, expected, rtol=1e-4, atol=1e-7)
    ), f"q = {np.round(q, 6)}, uniform {expected[0]:.6g}"


def _program_is_size(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    q, n, sizes = _program(values)
    expected = sizes / float(n @ sizes)
    return bool(np.allclose(q, expected, rtol=1e-4, atol=1e-7)), f"q = {np.round(q, 6)}, p ~ m {expected}"


_F47 = Region(
    {
        "eps": (0.5, 100, "log"),
        "c": (0.5, 5.0),
        "B": (0.1, 50, "log"),
        "N": (2, 200),
        "m_min": (10, 500),
        "_u": (0.0, 1.0),
        **{
            k: v
            for k, v in {
                "A": (1.0, 1.5),
                "gamma": (0.0, 0.3),
                "rho": (0.05, 2.0),
                "mu": (2.0, 40.0, "log"),
                "beta": (0.1, 5.0, "log"),
                "Theta": (0.1, 10, "log"),
            }.items()
        },
    },
    fixed={"rho_minus": 0.0, "T": 1.0},
    derived=(
        ("m_max", lambda v: v["m_min"]),
        ("p_max", lambda v: min(1.0, 1 / v["N"] + v["_u"] * (1 - 1 / v["N"]))),
    ),
    where=(("k2 < 0", lambda v: ba.lemma2_lambdas(v["A"], v["gamma"], v["rho"], v["mu"])[0] < 0),),
    integers=frozenset({"N", "m_min", "m_max"}),
    doc="settings with an interior optimum (k2 < 0)",
)
_MU = Region({"A": (1.0, 3.0), "gamma": (0.0, 1.0), "rho": (0.05, 2.0, "log")})
_DRAWS = Region({"draw": (0, 10**6)}, integers=frozenset({"draw"}))

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "M12",
        "mu* = 2K/(1 - A gamma) minimises lambda_2; lambda_2 < 0 iff A gamma < 1 and mu > K/(1 - A gamma)",
        Computed("mu_star", lambda v, var: np.asarray(best_mu(v["A"], v["gamma"], v["rho"]).x or np.nan)),
        "predicate",
        _MU,
        other=_mu_optimum,
        source="Lemma 2 eq. (23), spec 001 Sec. 3.10",
    ),
    Claim(
        "M13b",
        "F47's T* equals scipy's bounded argmin and the integer rule equals a dense integer scan",
        T_STAR,
        "predicate",
        _F47,
        other=_matches_scan,
        source="eq. (46), F47",
    ),
    Claim(
        "M13c", "T* is increasing in eps", T_STAR, "increasing", _F47, wrt="eps", line_points=8, source="F47"
    ),
    Claim(
        "M13d",
        "T* is decreasing in B (k_1, k_0 grow)",
        T_STAR,
        "decreasing",
        _F47,
        wrt="B",
        line_points=8,
        source="F47",
    ),
    Claim(
        "M16b",
        "the unconstrained impact-factor program gives uniform p (sensitivity (10))",
        Computed("weights", lambda v, var: np.asarray(0.0)),
        "predicate",
        _DRAWS,
        other=_program_is_uniform,
        source="Sec. 3.10, E26",
        fails_in="under the tight sensitivity max_i 2B p_i/m_i with unequal sizes the optimum is p ~ m",
        counterexamples=(({"draw": 3, "reading": "tight"}, "paper"),),
    ),
    Claim(
        "M16c",
        "under the tight sensitivity (sigma_A dominant) the program gives p ~ m",
        Computed("weights_tight", lambda v, var: np.asarray(0.0)),
        "predicate",
        Region({"draw": (0, 10**6)}, fixed={"reading": "tight"}, integers=frozenset({"draw"})),
        other=_program_is_size,
        source="Sec. 3.10",
    ),
)
"""Declared claims about PADPFL's optima (the checker is fedbound.bounds.claims)."""
