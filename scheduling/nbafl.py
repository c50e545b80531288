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
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb
from fedbound.bounds.claims import Claim, Computed
from fedbound.errors import InfeasibleError, ParameterError
from fedbound.scheduling.integer_search import Optimum, exhaustive_integer_min, unimodal_integer_min

__all__ = ["optimal_T", "optimal_T_linear", "optimal_K", "optimal_T_k", "optimal_TK", "JointOptimum",
           "exhaustive_T", "T_STAR", "CLAIMS", "plan"]

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


@dataclass(frozen=True)
class JointOptimum:
    """Certificate of the joint (T, K) search for Theorem 3 (exhaustive over the integer grid)."""

    T: Any
    K: Any
    fun: Any
    success: Any
    message: str
    method: str
    T_range: tuple[int, int]
    K_range: tuple[int, int]
    at_T_edge: Any
    at_K_upper_edge: Any
    n_feasible: Any

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            return np.asarray(v).tolist()

        return {"T": plain(self.T), "K": plain(self.K), "fun": plain(self.fun),
                "success": plain(self.success),
                "message": self.message, "method": self.method, "T_range": list(self.T_range),
                "K_range": list(self.K_range), "at_T_edge": plain(self.at_T_edge),
                "at_K_upper_edge": plain(self.at_K_upper_edge), "n_feasible": plain(self.n_feasible)}


def optimal_TK(settings: Mapping[str, Any], T_max: int = 300, variant: str = "paper",
               K_range: tuple[int, int] | None = None) -> JointOptimum:
    """Joint integer (T, K) minimising h_K over [1, T_max] x K_range (default [1, N]).  Spec 002 F36.

    ``at_T_edge`` flags T* = T_max (widen the range); ties go to the smaller T, then the smaller K.
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

    return JointOptimum(T=sc(T_opt), K=sc(K_opt), fun=sc(np.where(ok, fun, np.inf)), success=sc(ok),
                        message=f"exhaustive search over T in [1, {T_max}] and K in [{klo}, {khi}]",
                        method="exhaustive 2-D grid", T_range=(1, int(T_max)), K_range=(klo, khi),
                        at_T_edge=sc(ok & (T_opt == T_max)), at_K_upper_edge=sc(ok & (K_opt == s["N"])),
                        n_feasible=sc(n_feasible))


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


def plan(settings: Mapping[str, Any], variant: str = "paper") -> dict[str, Any]:
    """Everything a designer needs for one NbAFL setting, as one JSON-ready dict.

    ``settings``: the [nbafl] keys (N, m, C, eps, delta, L and the loss constants; T and K optional).  The
    sigma's are reported at the setting's T when it has one, else at the optimal T.  With K set, K* is
    searched over every feasible K including K = N, and the joint (T, K) optimum is reported too.
    Tight counterparts come from fedbound.accounting (exact Gaussian composition; numerical accounting of
    sampling without replacement for K-scheduling).
    """
    s = {k: v for k, v in settings.items() if v is not None}
    warnings: list[str] = []
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
    out["sigma_uplink_tight"] = _tight(nb.sigma_uplink_tight, *args[:4], s["L"], warnings=warnings)
    out["sigma_downlink_tight"] = _tight(nb.sigma_downlink_tight, *args, warnings=warnings)
    out["sigma_aggregate_tight"] = _tight(nb.sigma_aggregate_tight, *args, warnings=warnings)
    for key in ("sigma_uplink", "sigma_aggregate"):
        tight = out[f"{key}_tight"]
        if tight is not None and float(out[key]) < tight * (1 - 1e-9):
            warnings.append(f"{key}: the paper's value {float(out[key]):.4g} is below the smallest std "
                            f"that is exactly (eps, delta)-DP ({tight:.4g}): the paper's noise does not "
                            "deliver its claimed privacy here (classic mechanism at eps >= 1, spec 002 E6)")
    z = _tight(nb.tight_noise_multiplier, s["eps"], s["delta"], warnings=warnings)
    if z is not None:
        t_tight = optimal_T({**s, "z": z}, "tight")
        out.update(z_tight=z, T_opt_tight=int(t_tight.x), bound_at_T_opt_tight=float(t_tight.fun))
    else:
        out.update(z_tight=None, T_opt_tight=None, bound_at_T_opt_tight=None)
    out.update(K=s.get("K"), K_opt=None)
    if "K" in s:
        out.update(_plan_k(s, at, variant, warnings))
    out["warnings"] = warnings
    return out


def _plan_k(s: dict[str, Any], at: dict[str, Any], variant: str, warnings: list[str]) -> dict[str, Any]:
    K, N, T_used = int(s["K"]), int(s["N"]), at["T"]
    ev_dk = nb.SIGMA_DOWNLINK_K.evaluate(at, variant=variant)
    ev_ak = nb.SIGMA_AGGREGATE_K.evaluate(at, variant=variant)
    ev_hk = nb.K_BOUND.evaluate(at, variant=variant)
    _collect(warnings, ev_dk, ev_ak, ev_hk)
    out: dict[str, Any] = {"sigma_downlink_k": ev_dk.value, "sigma_aggregate_k": ev_ak.value,
                           "bound_k_at_T": float(ev_hk.value) if ev_hk.defined and ev_hk.admissible else None}
    try:
        k_res = optimal_K(at, variant)
    except InfeasibleError as exc:
        warnings.append(f"K_opt: {exc}")
        k_res = None
    if k_res is not None:
        out.update(K_opt=int(k_res.x), bound_at_K_opt=float(k_res.fun), K_opt_is_N=bool(k_res.x == N),
                   K_opt_at_domain_edge=bool(k_res.at_lower_edge), K_opt_certificate=k_res.to_dict())
        if k_res.at_lower_edge:
            warnings.append(f"K_opt = {k_res.x} is the smallest feasible K: a domain-edge artifact of the "
                            "one-sided amplification in Lemma 4 (spec 002 E9); compare --variant two_sided")
        if k_res.x == N:
            warnings.append("K_opt = N: scheduling fewer clients does not improve Theorem 3's bound here")
    T_max = int(max(300, 4 * T_used))
    joint = optimal_TK(s, T_max=T_max, variant=variant)
    out["joint_opt"] = joint.to_dict()
    k_args = (s["eps"], s["delta"], s["C"], s["m"], N, K, int(round(max(T_used, 1))), s["L"])
    out["sigma_downlink_k_tight"] = _tight(nb.sigma_downlink_k_tight, *k_args, warnings=warnings)
    out["sigma_aggregate_k_tight"] = _tight(nb.sigma_aggregate_k_tight, *k_args, warnings=warnings)
    return out
