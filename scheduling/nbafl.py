"""NbAFL optimal designs: rounds T (Theorem 2), clients per round K and joint (T, K) (Theorem 3).

Seed 002, Remarks 4-5; spec 002 F21, F36, F37.  Every function takes the setting as a mapping of the spec's
notation names (scalars or broadcastable arrays: one call solves a whole grid of settings) and returns a
certificate (:class:`~fedbound.scheduling.integer_search.Optimum` or :class:`JointOptimum`).

* :func:`optimal_T`: h(T) is strictly quasi-convex for every admissible setting (spec F21: h' = P^T phi with
  phi strictly increasing), so bisection on h' over the bracket (0, T_Theta] plus integer rounding is exact.
* :func:`optimal_T_linear`: the Lambert-W closed form with kappa_0 dropped (an upper bound on T*, S16).
* :func:`optimal_K`: h_K(T, .) is not quasi-convex in K (spec F36), so exhaustive search over every feasible
  K, K = N included, reporting when the argmin sits on the edge of the feasible set.
* :func:`optimal_T_k` and :func:`optimal_TK`: exhaustive in T (h_K is not unimodal in T, F37) and over the
  (T, K) grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb
from fedbound.bounds import provable
from fedbound.bounds.claims import Claim, Computed
from fedbound.errors import InfeasibleError, ParameterError
from fedbound.scheduling import nbafl_design as nbd
from fedbound.scheduling.certificate import Certificate, OptimumCheck, brute_force_argmin, reaccount
from fedbound.scheduling.integer_search import exhaustive_integer_min, unimodal_integer_min
from fedbound.scheduling.results import Optimum, Plan, Recommendation, Row

__all__ = ["optimal_T", "optimal_T_linear", "optimal_K", "optimal_T_k", "optimal_TK", "exhaustive_T",
           "T_STAR", "CLAIMS", "plan"]

F21_PROOF = ("spec 002 F21: h'(T) = P^T phi(T) with phi strictly increasing, phi(0) < 0, so h is strictly "
             "quasi-convex and T* < T_Theta")


def _settings(settings: Mapping[str, Any], drop: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in settings.items() if v is not None and k not in drop}


def _shape(values: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    return np.broadcast_shapes(*(v.shape for v in values.values())) if values else ()


def optimal_T(settings: Mapping[str, Any], variant: str = "paper") -> Optimum:
    """Integer T >= 1 minimising Theorem 2's bound h(T), with a certificate.  Spec 002 F21, S13.

    ``settings`` needs eps, delta, N, C, m, Theta, l, beta, rho, B, mu (plus L for ``regime_aware``/
    ``thm1_noise``, d for ``noise_dimension``, z for ``tight``); a T in it is ignored.  The continuous
    minimiser is ``x_continuous``.  For the paper reading the bracket (0, T_Theta] is proved (F21); other
    variants start from it and widen it until h' > 0 at its right end.
    """
    s = _settings(settings, ("T", "K"))
    nb.BOUND.evaluate(s, T=1.0, variant=variant).require(emit_warnings=False)
    hi = np.asarray(nb.T_THETA.evaluate(s).require(emit_warnings=False), dtype=float)

    def f(T: np.ndarray) -> np.ndarray:
        return np.asarray(nb.BOUND.evaluate(s, T=T, variant=variant).value, dtype=float)

    def df(T: np.ndarray) -> np.ndarray:
        return np.asarray(nb.BOUND_DT.evaluate(s, T=T, variant=variant).value, dtype=float)

    proof = F21_PROOF if variant == "paper" else f"variant {variant}: unimodality checked by the claims (S13)"
    lo = np.zeros(_shape(s))
    res = unimodal_integer_min(f, df, lo, np.broadcast_to(hi, lo.shape), x_min=1, proof=proof)
    return res


def optimal_T_linear(settings: Mapping[str, Any]) -> float | np.ndarray:
    """T*_lin = (s - W0(e^s))/r with s = 1 + r Theta eps/kappa_1, r = -ln P (kappa_0 dropped).

    Spec 002 F21 (our derivation); T*_lin >= T* (S16).  W0(e^s) solves w + ln w = s (Newton, no overflow).
    """
    s = _settings(settings, ("T", "K"))
    k1 = np.asarray(nb.KAPPA1(s), dtype=float)
    r = -np.log(np.asarray(nb.CONTRACTION_P(s), dtype=float))
    svar = 1 + r * s["Theta"] * s["eps"] / k1
    w = np.maximum(svar - np.log(svar), 1.0)
    for _ in range(100):
        step = (w + np.log(w) - svar) / (1 + 1 / w)
        w = w - step
        if np.all(np.abs(step) <= 1e-15 * w):
            break
    out = (svar - w) / r
    return float(out) if np.ndim(out) == 0 else out


def _x_along(x: np.ndarray, ndim: int) -> np.ndarray:
    return x.reshape((-1,) + (1,) * ndim)


def exhaustive_T(settings: Mapping[str, Any], T_max: int, variant: str = "paper",
                 theorem: Any = None) -> Optimum:
    """Exhaustive search of T in [1, T_max] for Theorem 2 (the test oracle of F21) or another theorem."""
    th = nb.BOUND if theorem is None else theorem
    s = _settings(settings, ("T",))
    ndim = len(_shape(s))

    def f(T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ev = th.evaluate(s, T=_x_along(T, ndim), variant=variant)
        return ev.value, ev.admissible

    return exhaustive_integer_min(f, 1, int(T_max), what="T")


def optimal_K(settings: Mapping[str, Any], variant: str = "paper",
              K_range: tuple[int, int] | None = None) -> Optimum:
    """Integer K minimising Theorem 3's bound h_K(T, K) at fixed T, by exhaustive search.  Spec 002 F36.

    The feasible set is every K in ``K_range`` (default [1, N], K = N included) where (60) holds and
    0 < Q(K) < 1.  ``at_lower_edge`` flags a minimiser on the smallest feasible K (the domain-edge artifact
    of the one-sided amplification, E9), ``at_upper_edge`` one at the largest (K = N: no scheduling gain).
    """
    s = _settings(settings, ("K",))
    if "T" not in s:
        raise ParameterError("T", None, "a number of rounds T >= 1", hint="optimal_K works at a fixed T")
    if "N" not in s:
        raise ParameterError("N", None, "integer in [1, inf)", hint="optimal_K needs the number of clients")
    lo, hi = (1, int(np.max(s["N"]))) if K_range is None else K_range
    ndim = len(_shape(s))

    def f(Ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ev = nb.K_BOUND.evaluate(s, K=_x_along(Ks, ndim), variant=variant)
        return ev.value, ev.admissible

    res = exhaustive_integer_min(f, lo, hi, what="K")
    return res


def optimal_T_k(settings: Mapping[str, Any], T_max: int = 1000, variant: str = "paper") -> Optimum:
    """Integer T in [1, T_max] minimising h_K(T, K) at fixed K (exhaustive: not unimodal, F37)."""
    if settings.get("K") is None:
        raise ParameterError("K", None, "integer in [1, N]", hint="optimal_T_k works at a fixed K")
    return exhaustive_T(settings, T_max, variant, theorem=nb.K_BOUND)


def optimal_TK(settings: Mapping[str, Any], T_max: int = 300, variant: str = "paper",
               K_range: tuple[int, int] | None = None) -> Optimum:
    """Joint integer (T, K) minimising h_K over [1, T_max] x K_range (default [1, N]).  Spec 002 F36.

    ``x = {"T": .., "K": ..}``; ``at_upper_edge`` (also ``evidence["at_T_edge"]``) flags T* = T_max (widen
    the range), ``evidence["at_K_upper_edge"]`` K* = N; ties go to the smaller T, then the smaller K.
    """
    s = _settings(settings, ("T", "K"))
    shape = _shape(s)
    ndim = len(shape)
    klo, khi = (1, int(np.max(s["N"]))) if K_range is None else K_range
    Ts = np.arange(1, int(T_max) + 1, dtype=float)
    Ks = np.arange(klo, khi + 1, dtype=float)
    ev = nb.K_BOUND.evaluate(s, T=Ts.reshape((-1, 1) + (1,) * ndim), K=Ks.reshape((1, -1) + (1,) * ndim),
                             variant=variant)
    full = (len(Ts), len(Ks), *shape)
    values = np.where(np.broadcast_to(ev.admissible, full), np.broadcast_to(ev.value, full), np.inf)
    flat = values.reshape((len(Ts) * len(Ks), *shape))
    idx = np.argmin(flat, axis=0)
    fun = np.take_along_axis(flat, idx[None], axis=0)[0]
    ok = np.isfinite(fun)
    if ndim == 0 and not ok:
        raise InfeasibleError(f"no feasible (T, K) in [1, {T_max}] x [{klo}, {khi}]")
    T_opt = np.where(ok, Ts[idx // len(Ks)], -1).astype(np.int64)
    K_opt = np.where(ok, Ks[idx % len(Ks)], -1).astype(np.int64)
    n_feasible = np.isfinite(flat).sum(axis=0)

    def sc(x: Any) -> Any:
        return np.asarray(x).item() if np.ndim(x) == 0 else x

    at_T_edge = sc(ok & (T_opt == T_max))
    return Optimum(x={"T": sc(T_opt), "K": sc(K_opt)}, fun=sc(np.where(ok, fun, np.inf)), success=sc(ok),
                   message=f"exhaustive search over T in [1, {T_max}] and K in [{klo}, {khi}]",
                   method="exhaustive 2-D grid", bracket=((1, klo), (int(T_max), khi)),
                   at_upper_edge=at_T_edge,
                   evidence={"T_range": [1, int(T_max)], "K_range": [klo, khi], "at_T_edge": at_T_edge,
                             "at_K_upper_edge": sc(ok & (K_opt == s["N"])), "n_feasible": sc(n_feasible)})


# ---------------------------------------------------------------------------------------------------------
# Claims about the optimum (spec 002 S13, S15, S16), checked by fedbound.bounds.claims
# ---------------------------------------------------------------------------------------------------------
def _t_star(values: Mapping[str, Any], variant: str) -> np.ndarray:
    return np.asarray(optimal_T(values, variant).x_continuous, dtype=float)


T_STAR = Computed("T_star", _t_star, "continuous minimiser of Theorem 2's bound (spec 002 F21)")


def _integer_optimum_is_exact(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    res = optimal_T(values, variant)
    t_max = int(min(np.ceil(float(nb.T_THETA(values))) + 2, 10**6))
    oracle = exhaustive_T(values, t_max, variant)
    in_pair = res.x in (np.floor(res.x_continuous), np.ceil(res.x_continuous), 1)
    same = res.x == oracle.x or np.isclose(res.fun, oracle.fun, rtol=1e-12)
    return bool(in_pair and same and res.success), (f"T* = {res.x} (continuous {res.x_continuous:.6f}), "
                                                    f"exhaustive over [1, {t_max}]: {oracle.x}")


def _linear_upper_bound(values: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    t_lin, t_star = optimal_T_linear(values), _t_star(values, variant)
    return bool(t_lin >= t_star * (1 - 1e-9)), f"T*_lin = {t_lin:.6f}, T* = {float(t_star):.6f}"


_R = nb.ADMISSIBLE
CLAIMS: tuple[Claim, ...] = (
    Claim("S13b", "the integer optimum is floor or ceil of T* and equals an exhaustive search", T_STAR,
          "predicate", _R, other=_integer_optimum_is_exact, source="F21"),
    Claim("S15a", "T* is strictly increasing in eps (Fig. 7)", T_STAR, "increasing", _R, wrt="eps",
          line_points=8, source="F21, Fig. 7"),
    Claim("S15b", "T* is strictly increasing in N", T_STAR, "increasing", _R, wrt="N", line_points=8,
          source="F21"),
    Claim("S15c", "T* is strictly increasing in m", T_STAR, "increasing", _R, wrt="m", line_points=8,
          source="F21"),
    Claim("S15d", "T* is strictly increasing in Theta", T_STAR, "increasing", _R, wrt="Theta", line_points=8,
          source="F21"),
    Claim("S15e", "T* is strictly increasing in delta", T_STAR, "increasing", _R, wrt="delta", line_points=8,
          source="F21"),
    Claim("S15f", "T* is strictly decreasing in C", T_STAR, "decreasing", _R, wrt="C", line_points=8,
          source="F21"),
    Claim("S16", "T*_lin >= T* (dropping kappa_0 pushes the optimum right)", T_STAR, "predicate", _R,
          other=_linear_upper_bound, source="F21"),
)
"""Declared claims about the optimal T (the checker is fedbound.bounds.claims)."""


# ---------------------------------------------------------------------------------------------------------
# The designer's plan: sigma's (paper and tight), T*, the bound, K* and every validity warning
# ---------------------------------------------------------------------------------------------------------
def _collect(warnings: list[str], *evaluations: Any) -> None:
    for ev in evaluations:
        for w in ev.warnings:
            if not any(x.endswith(w) for x in warnings):
                warnings.append(f"{ev.theorem}: {w}")


def _tight(fn: Any, *args: Any, warnings: list[str]) -> float | None:
    try:
        return float(fn(*args))
    except NotImplementedError as exc:
        text = f"tight counterpart unavailable: {exc}"
        if text not in warnings:
            warnings.append(text)
        return None


PAPER = "NbAFL (Wei et al. 2020)"
SENSITIVITY_PREMISE = ("NbAFL's sensitivity 2C/m of a client's clipped upload (eq. (6)): replacing one "
                       "record moves the upload by at most 2C/m. This holds for one local step; multi-step "
                       "local training can exceed it (check with an empirical audit)")


def _paper_answer(s: dict[str, Any], variant: str, warnings: list[str]) -> tuple[dict[str, Any], Optimum]:
    """The paper's own answer: its sigma's at its T (the setting's or Theorem 2's T*), T*, the bound, K*."""
    t_res = optimal_T(s, variant)
    T_opt = int(t_res.x)
    T_used = float(s["T"]) if "T" in s else float(T_opt)
    at = {**s, "T": T_used}
    ev_up = nb.SIGMA_UPLINK.evaluate(at)
    ev_down = nb.SIGMA_DOWNLINK.evaluate(at)
    ev_agg = nb.SIGMA_AGGREGATE.evaluate(at, variant=variant)
    ev_opt = nb.BOUND.evaluate({**s, "T": T_opt}, variant=variant)
    _collect(warnings, ev_up, ev_down, ev_agg, ev_opt)
    out: dict[str, Any] = {
        "setting": dict(s), "variant": variant, "T": T_used, "T_source": "config" if "T" in s else "T_opt",
        "sigma_uplink": ev_up.value, "sigma_downlink": ev_down.value, "sigma_aggregate": ev_agg.value,
        "T_opt": T_opt, "T_opt_continuous": float(t_res.x_continuous), "bound_at_T_opt": float(ev_opt.value),
        "T_opt_certificate": t_res.to_dict(), "T_opt_linear": optimal_T_linear(s),
    }
    if "T" in s:
        ev_t = nb.BOUND.evaluate(at, variant=variant)
        _collect(warnings, ev_t)
        out["bound_at_T"] = float(ev_t.value)
    args = (s["eps"], s["delta"], s["C"], s["m"], s["N"], T_used, s["L"])
    out["sigma_uplink_tight"] = float(nb.sigma_uplink_tight(*args[:4], s["L"]))
    out["sigma_downlink_tight"] = float(nb.sigma_downlink_tight(*args))
    out["sigma_aggregate_tight"] = float(nb.sigma_aggregate_tight(*args))
    for key, what in (("sigma_uplink", "client noise std"), ("sigma_aggregate", "aggregate noise std")):
        tight = out[f"{key}_tight"]
        if float(out[key]) < tight * (1 - 1e-9):
            warnings.append(f"{key}: the paper's {what} {float(out[key]):.4g} is below the smallest std that "
                            f"is exactly (eps, delta)-DP ({tight:.4g}): the paper's noise does not deliver "
                            f"its claimed privacy here (the classic Gaussian mechanism of {PAPER}, "
                            "Sec. II-C, "
                            "is proven only for eps < 1)")
    z = float(nb.tight_noise_multiplier(s["eps"], s["delta"]))
    t_tight = optimal_T({**s, "z": z}, "tight")
    out.update(z_tight=z, T_opt_tight=int(t_tight.x), bound_at_T_opt_tight=float(t_tight.fun))
    out.update(K=s.get("K"), K_opt=None)
    out.update(_plan_k(s, at, variant, warnings))
    return out, t_res


def _plan_k(s: dict[str, Any], at: dict[str, Any], variant: str, warnings: list[str]) -> dict[str, Any]:
    """Theorem 3 at the setting's K (when given) and K* over 1..N (always), plus the joint (T, K) optimum."""
    N, T_used = int(s["N"]), at["T"]
    out: dict[str, Any] = {}
    if "K" in s:
        ev_dk = nb.SIGMA_DOWNLINK_K.evaluate(at, variant=variant)
        ev_ak = nb.SIGMA_AGGREGATE_K.evaluate(at, variant=variant)
        ev_hk = nb.K_BOUND.evaluate(at, variant=variant)
        _collect(warnings, ev_dk, ev_ak, ev_hk)
        out.update(sigma_downlink_k=ev_dk.value, sigma_aggregate_k=ev_ak.value,
                   bound_k_at_T=float(ev_hk.value) if ev_hk.defined and ev_hk.admissible else None)
    try:
        k_res = optimal_K(at, variant)
    except InfeasibleError as exc:
        warnings.append(f"K_opt: {exc} (Theorem 3 of {PAPER} needs condition (60) and 0 < Q < 1)")
        k_res = None
    if k_res is not None:
        out.update(K_opt=int(k_res.x), bound_at_K_opt=float(k_res.fun), K_opt_is_N=bool(k_res.x == N),
                   K_opt_at_domain_edge=bool(k_res.at_lower_edge), K_opt_certificate=k_res.to_dict())
        if k_res.at_lower_edge:
            warnings.append(f"K_opt = {k_res.x} is the smallest feasible K: an artifact of the edge of Lemma "
                            f"4's domain (condition (60) of {PAPER}, whose one-sided amplification blows up "
                            "there), not a real optimum; compare --variant two_sided")
        if k_res.x == N:
            warnings.append("K_opt = N: scheduling fewer clients does not improve Theorem 3's bound here")
    try:
        joint = optimal_TK(s, T_max=_joint_T_max(T_used, N), variant=variant)
        out["joint_opt"] = {**joint.to_dict(), **joint.evidence}
    except InfeasibleError as exc:
        warnings.append(f"joint (T, K) optimum: {exc} (Theorem 3 of {PAPER} needs condition (60) and "
                        "0 < Q < 1)")
        out["joint_opt"] = {"success": False, "message": str(exc)}
    if "K" in s:
        k_args = (s["eps"], s["delta"], s["C"], s["m"], N, int(s["K"]), int(round(max(T_used, 1))), s["L"])
        out["sigma_downlink_k_tight"] = _tight(nb.sigma_downlink_k_tight, *k_args, warnings=warnings)
        out["sigma_aggregate_k_tight"] = _tight(nb.sigma_aggregate_k_tight, *k_args, warnings=warnings)
    return out


JOINT_GRID_POINTS = 2_000_000
"""The joint (T, K) search evaluates at most this many points (T_max x N): bounded time and memory; a T* on
the range's edge is flagged (``at_T_edge``)."""


def _joint_T_max(T_used: float, N: int) -> int:
    return int(max(1, min(max(300, 4 * T_used), JOINT_GRID_POINTS // max(N, 1))))


def _recommend(s: dict[str, Any], paper: dict[str, Any], variant: str, warnings: list[str],
               check: bool) -> tuple[Recommendation, Any]:
    """The design to deploy: the argmin over the open T of the bound that applies to the design (Theorem 2
    for K = N, Theorem 3 for K < N), evaluated with the noise it deploys (:mod:`.nbafl_design`)."""
    found = nbd.optimal_design(s, joint_k=True)
    d = found.design
    theta = float(s["Theta"])
    vacuous = d.bound >= theta
    K = s.get("K")
    if variant != "paper":
        warnings.append(f"variant {variant} changes the paper's answer only: the recommendation reads "
                        f"{d.theorem} of {PAPER} as printed, with the noise the design deploys")
    if d.K is None:
        accounting = ("exact composition of the T Gaussian releases (analytic Gaussian mechanism, Balle & "
                      "Wang 2018) for every adversary view")
        regime = (f"the server adds no noise for T <= L N = {int(s.get('L', 1) * s['N'])}, so the aggregate "
                  "carries the uplink floor sigma_U/sqrt(N) there (the regime the printed bound drops)")
        why = (f"T = {d.T} minimises Theorem 2's bound of {PAPER} (eq. (14)) evaluated with the noise each T "
               f"deploys under exact accounting: {regime}")
    else:
        accounting = ("RDP of K-of-N sampling without replacement (Wang, Balle & Kasiviswanathan 2019) for "
                      "the server's broadcasts; exact Gaussian composition for the uploads")
        why = (("(T, K) jointly: " if K is None else "") + f"T = {d.T} minimises Theorem 3's bound of "
               f"{PAPER} (eq. (17)) with K = {d.K} of N = {s['N']} "
               "clients per round, evaluated with the aggregate noise each T deploys (RDP-calibrated "
               "K-of-N server noise, never below the uplink floor sigma_U/sqrt(K))")
    if K is None and d.K is not None:
        warnings.append(f"K = {d.K} < N = {s['N']} is chosen by comparing Theorem 3 of {PAPER} (eq. "
                        "(17)) with Theorem 2 (eq. (14)) for K = N; the two are not like-for-like (Theorem 3 "
                        "at K = N does not reduce to Theorem 2: its noise lacks Theorem 2's sqrt(N) and "
                        "Q > P), so K < N may win by that normalisation, not by scheduling; set K to fix it")
    if vacuous:
        why = (f"VACUOUS: every design searched has a bound >= the initial gap Theta = {theta:g}, so "
               f"{PAPER}'s theorem promises nothing for this privacy target; the design shown is the least "
               "vacuous one (it trains and meets (eps, delta), but no convergence is promised). " + why)
        warnings.insert(0, f"vacuous: at eps = {s['eps']:g} every design's bound ({d.theorem} of {PAPER}, "
                           f"with the noise it deploys) is >= Theta = {theta:g}; the smallest is "
                           f"{d.bound:.4g} at T = {d.T}")
    premises = (SENSITIVITY_PREMISE,
                "the loss constants Theta, l, beta, rho, B, mu of the setting (Theorem 2 needs 0 < P < 1, "
                "Theorem 3 0 < Q < 1)",
                f"the adversary sees each client's uploads and the server's broadcasts ({PAPER}, Sec. III)")
    rec = Recommendation(T=d.T, K=int(K) if K is not None else d.K,
                         sigma={"uplink": d.sigma_uplink, "server": d.sigma_server}, bound=d.bound,
                         accounting=accounting, why=why, premises=premises,
                         extra={"sigma_aggregate": d.sigma_aggregate, "theorem": d.theorem,
                                "vacuous": vacuous, "noise_multiplier": d.z})
    return rec, found


def _rows(s: dict[str, Any], d: dict[str, Any], rec: Recommendation) -> tuple[Row, ...]:
    t_note = "paper at the config's T" if d["T_source"] == "config" else "paper at its T*"
    at_t = f"{t_note} = {d['T']:g}; tight at the recommended T = {rec.T}"
    rows = [
        Row("sigma_uplink (client noise std)", d["sigma_uplink"], rec.sigma["uplink"], "per coordinate"),
        Row("sigma_downlink (server noise std)", d["sigma_downlink"],
            rec.sigma["server"] if rec.K is None or rec.K >= s["N"] else None, at_t),
        Row("sigma_aggregate (effective)", d["sigma_aggregate"],
            rec.extra["sigma_aggregate"] if rec.K is None or rec.K >= s["N"] else None, at_t),
        Row("T_opt (Theorem 2)", d["T_opt"], d["T_opt_tight"],
            f"continuous {d['T_opt_continuous']:.4g}; Lambert-W upper {d['T_opt_linear']:.4g}"),
        Row("bound at T_opt", d["bound_at_T_opt"], d["bound_at_T_opt_tight"], f"Theta = {s['Theta']:g}"),
        Row("noise multiplier z of one (eps, delta) release", None, d["z_tight"], "analytic Gaussian"),
    ]
    if "bound_at_T" in d:
        rows.append(Row("bound at the config's T", d["bound_at_T"], None, ""))
    if d.get("K") is not None:
        rows += [
            Row("K (config)", d["K"], None, f"of N = {s['N']}"),
            Row("sigma_downlink_k (Lemma 4)", d["sigma_downlink_k"], rec.sigma["server"],
                f"paper at T = {d['T']:g}; tight (RDP, K-of-N without replacement) at T = {rec.T}"),
            Row("sigma_aggregate_k", d["sigma_aggregate_k"], rec.extra["sigma_aggregate"], ""),
            Row("Theorem 3 bound at (T, K)", d["bound_k_at_T"], None, "- = outside condition (60)"),
        ]
    if d.get("K_opt") is not None:
        edge = "K = N" if d["K_opt_is_N"] else ("domain edge" if d["K_opt_at_domain_edge"] else "interior")
        rows.append(Row("K_opt (Theorem 3, over 1..N)", d["K_opt"], None,
                        f"{edge}; bound {d['bound_at_K_opt']:.4g} at T = {d['T']:g}"))
    j = d["joint_opt"]
    if j["success"]:
        rows.append(Row("joint (T, K) optimum (Theorem 3)", f"({j['T']}, {j['K']})", None,
                        f"bound {j['fun']:.4g}"))
    return tuple(rows)


def _differences(s: dict[str, Any], d: dict[str, Any], rec: Recommendation) -> tuple[str, ...]:
    out = []
    if d["T_opt"] != rec.T:
        out.append(f"T: the paper's T* = {d['T_opt']} (classic Gaussian mechanism, noise linear in T; bound "
                   f"{d['bound_at_T_opt']:.4g} by its own reading) against the recommended {rec.T} "
                   f"({rec.extra['theorem']} with the noise that design deploys: {rec.bound:.4g})")
    if rec.K is None and d["T_opt_tight"] != rec.T:
        at = float(nbd.deployed_bound_full(s, np.array([d["T_opt_tight"]]))[0])
        out.append(f"T: Theorem 2 as printed, with exact noise, is smallest at T = {d['T_opt_tight']} "
                   f"({d['bound_at_T_opt_tight']:.4g}), but it drops the uplink floor sigma_U/sqrt(N) the "
                   f"aggregate carries for T <= L N: with the noise deployed there the bound is {at:.4g}")
    if d["sigma_uplink"] < d["sigma_uplink_tight"] * (1 - 1e-9):
        out.append(f"sigma_uplink: the paper's {d['sigma_uplink']:.4g} is below the exact "
                   f"{d['sigma_uplink_tight']:.4g}: it under-delivers (eps, delta)")
    elif d["sigma_uplink"] > d["sigma_uplink_tight"] * (1 + 1e-9):
        saving = 100 * (1 - d["sigma_uplink_tight"] / d["sigma_uplink"])
        out.append(f"sigma_uplink: the paper's {d['sigma_uplink']:.4g} is more than the exact "
                   f"{d['sigma_uplink_tight']:.4g} needed: {saving:.1f} % less noise meets the same "
                   "(eps, delta)")
    if d.get("K_opt_at_domain_edge"):
        out.append(f"K: the paper's K* = {d['K_opt']} sits on the edge of Lemma 4's domain; it is an "
                   "artifact, not a recommendation")
    return tuple(out)


def _independent_full(s: dict[str, Any], T: np.ndarray) -> np.ndarray:
    """Theorem 2 (eq. (14), F18) at each T with the noise :func:`fedbound.bounds.nbafl.noise` deploys: the
    aggregate of N uploads and the server's noise, sqrt(sigma_U^2/N + sigma_D^2) (another path than the
    search's closed form)."""
    P = float(nb.CONTRACTION_P(s))
    lam0, lam1, _ = nb.lambdas(s["mu"], s["rho"], s["B"])
    out = np.empty(len(T))
    for i, t in enumerate(T):
        sig = nb.noise({**s, "K": None}, float(t), "tight")
        agg = np.sqrt(sig["uplink"] ** 2 / s["N"] + sig["server"] ** 2)
        out[i] = nb.recursive_bound(float(t), s["Theta"], P, lam1, lam0, s["beta"], agg * np.sqrt(s["N"]) / 2)
    return out


def _independent_k(s: dict[str, Any], K: int, T: np.ndarray) -> np.ndarray:
    """Theorem 3 (eq. (17)) at each T with the K-of-N aggregate of fedbound.accounting.calibrate_noise."""
    ev_q = nb.CONTRACTION_Q.evaluate({**s, "K": K})
    a0, a1, _ = nb.ksched_alphas(s["mu"], s["rho"], s["B"], K, s["N"])
    return np.array([float(nb.recursive_bound(float(t), s["Theta"], float(ev_q.value), a1, a0, s["beta"],
                                              nb.sigma_aggregate_k_tight(s["eps"], s["delta"], s["C"], s["m"],
                                                                         s["N"], K, int(t), s["L"]) / 2))
                     for t in T])


def _check_every_k(s: dict[str, Any], rec: Recommendation, d: Any) -> Any:
    """:func:`fedbound.scheduling.nbafl_kcheck.check_every_k` at the Renyi orders the search deployed (the
    capped set unless the cap binds at a K < N argmin, as :func:`.nbafl_design._joint_search`)."""
    from fedbound.accounting.rdp import DEFAULT_ORDERS
    from fedbound.scheduling.nbafl_kcheck import check_every_k

    orders = DEFAULT_ORDERS[DEFAULT_ORDERS <= nbd.ORDER_CAP]
    if d.K is not None and nbd.KofNCalibration(s["eps"], s["delta"], d.K / s["N"]).best_order(
            d.z, d.T, DEFAULT_ORDERS) >= nbd.ORDER_CAP:
        orders = DEFAULT_ORDERS
    return check_every_k(s, float(rec.bound), orders, _independent_full)


def _certificate(s: dict[str, Any], rec: Recommendation, found: Any, check: bool) -> Certificate:
    """Domain searched, an independent check of the argmin, and every deployed view re-accounted."""
    notes: list[str] = []
    d = found.design
    T_fixed = s.get("T") is not None
    if T_fixed:
        T_dom = np.array([rec.T])
    elif d.K is None:
        stop = int(found.domain["T"].split("..")[1].split(" ")[0])
        T_dom = np.arange(1, (4 if check else 2) * stop + 1)
    else:
        T_dom = np.arange(max(1, rec.T - 3), rec.T + 4) if check else None
    opt_check = None
    if T_dom is not None:
        def objective(T: np.ndarray) -> np.ndarray:
            return _independent_full(s, T) if d.K is None else _independent_k(s, int(d.K), T)

        x, fun, points = brute_force_argmin(objective, {"T": T_dom})
        agrees = x["T"] == rec.T and abs(fun - rec.bound) <= 1e-9 * max(1.0, abs(fun))
        method = "brute force" if d.K is None or T_fixed else "brute force around the argmin"
        note = (f"T in {T_dom[0]}..{T_dom[-1]}, noise from fedbound.bounds.nbafl.noise"
                if d.K is None else f"T in {T_dom[0]}..{T_dom[-1]}, K-of-N noise by calibrate_noise (RDP)")
        if d.K is not None and not agrees and x["T"] == rec.T:
            agrees = abs(fun - rec.bound) <= 1e-5 * max(1.0, abs(fun))  # two RDP calibrations, rtol 1e-6
        if d.K is not None and s.get("K") is None and check:  # K open: the neighbours in K at the argmin's T
            near = {K: (_independent_full(s, np.array([rec.T]))[0] if K >= s["N"] else
                        _independent_k(s, K, np.array([rec.T]))[0] if nbd._thm3(s, K) is not None else np.inf)
                    for K in (d.K - 1, d.K + 1) if K >= 1}
            agrees = agrees and all(v >= fun * (1 - 1e-5) for v in near.values())
            note += "; at that T, K = " + ", ".join(f"{K}: {v:.6g}" for K, v in near.items())
        opt_check = OptimumCheck(method, points, x, fun, bool(agrees), note)
    if s.get("K") is None and not T_fixed and check:  # K open: every K checked independently
        kc = _check_every_k(s, rec, d)
        if opt_check is None:
            opt_check = OptimumCheck("interval lower bounds over every (K, T)", kc.points, {"T": rec.T},
                                     float(rec.bound), kc.passed, kc.note)
        else:
            opt_check = OptimumCheck(opt_check.method + " + interval lower bounds over every (K, T)",
                                     opt_check.points + kc.points, opt_check.x, opt_check.fun,
                                     bool(opt_check.agrees and kc.passed), opt_check.note + "; " + kc.note)
    elif d.K is None and s.get("K") is None:
        notes.append("K < N (Theorem 3): excluded by the joint search's branch and bound (RDP brackets of "
                     "every (K, T)); the independent check over every K runs with --check"
                     + (" (not at a T the user set)" if T_fixed else ""))
    if T_dom is None:
        notes.append("K < N: the independent check (calibrate_noise at the argmin's neighbours) runs with "
                     "--check")
    eps, delta, C, m, N, L = (s[k] for k in ("eps", "delta", "C", "m", "N", "L"))
    how = "pld" if check else "auto"
    z_up = float(nb.tight_noise_multiplier(eps, delta))
    privacy = [reaccount("uplink (each client, L exposures)", d.sigma_uplink, 2 * C / m, eps, delta,
                         steps=int(L), method=how, sigma_exact=float(np.sqrt(L)) * z_up * 2 * C / m)]
    if d.K is None:
        exact = float(np.sqrt(d.T)) * z_up * 2 * C / (m * N)
        privacy.append(reaccount(f"server broadcasts (aggregate, T = {d.T})", d.sigma_aggregate,
                                 2 * C / (m * N), eps, delta, steps=d.T, method=how, sigma_exact=exact))
        if d.T < L * N:
            notes.append(f"T = {d.T} <= L N: the broadcasts carry only the uplink floor sigma_U/sqrt(N), "
                         "more than their own (eps, delta) needs; no server noise is added")
    else:
        privacy.append(reaccount(f"server broadcasts (K = {d.K} of N, T = {d.T})", d.sigma_aggregate,
                                 2 * C / (m * d.K), eps, delta, steps=d.T, sample_rate=d.K / N,
                                 sampling="without_replacement"))
    return Certificate(domain=found.domain, search=found.search, check=opt_check, privacy=tuple(privacy),
                       vacuous=bool(rec.extra["vacuous"]), capped=found.capped, notes=tuple(notes))


def plan(settings: Mapping[str, Any], variant: str = "paper", check: bool = False) -> Plan:
    """What a designer deploys for one NbAFL setting: the recommendation, then the paper's own answer.

    ``settings``: the [nbafl] keys (N, m, C, eps, delta, L and the loss constants; T and K optional).
    Recommendation: T* of Theorem 2 (seed 002, eq. (14)) under exact accounting, the tight sigma's calibrated
    at that T (:func:`fedbound.bounds.nbafl.noise`, method "tight"), and the bound it predicts.  The paper's
    answer: its sigma's at the setting's T (else at its T*), T*, the bound, K* over 1..N at that T (always)
    and the joint (T, K) optimum.  ``Plan.data`` keeps every key of the earlier ``plan nbafl --json``.
    With ``sensitivity = "provable"`` every formula reads the provable sensitivity
    (:func:`fedbound.bounds.provable.for_planner`) and the first warning says how much more noise it costs.
    """
    set_ = {k: v for k, v in settings.items() if v is not None}
    how = {"clip_key": "C", "m": settings["m"], "paper": PAPER, "assumption": "sensitivity 2C/m of eq. (6)"}
    given, provable_note = provable.for_planner(set_, **how)
    s = nb.with_tight_z(given, variant)
    s.setdefault("L", 1)
    if "K" in s and s["K"] > s["N"]:
        raise ParameterError("K", s["K"], f"integer in [1, N = {s['N']}]",
                             hint="at most N clients per round")
    warnings: list[str] = [provable_note] if provable_note else []
    data, t_paper = _paper_answer(s, variant, warnings)
    rec, found = _recommend(s, data, variant, warnings, check)
    deployed = provable.premise(set_, **how)  # the sensitivity the design deploys
    rec = replace(rec, premises=(deployed, *rec.premises[1:]))
    data["warnings"] = warnings
    t_tight = optimal_T({**s, "z": data["z_tight"]}, "tight")
    deployed = Optimum(x=rec.T, fun=rec.bound, success=True, message=found.search, method=found.search,
                       evidence={"domain": "; ".join(f"{k}: {v}" for k, v in found.domain.items())})
    optima = {"T_opt": t_paper, "T_opt_tight": t_tight, "T_recommended": deployed}
    return Plan(paper="nbafl", title=f"{PAPER}: plan", variant=variant, recommendation=rec,
                rows=_rows(s, data, rec), optima=optima, warnings=tuple(warnings), data=data,
                caption="paper: the paper's formulas (classic Gaussian mechanism, linear composition); "
                        "tight: exact accounting through fedbound.accounting",
                differences=_differences(s, data, rec), certificate=_certificate(s, rec, found, check))

