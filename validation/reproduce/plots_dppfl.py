"""DP-PFL (Wei et al. 2023) figures: the bound against T (Remark 1), eps (Figs. 2-3 in shape), C (Table II /
Fig. 7)
and the model size S (Remark 3, Fig. 6), each drawn on a matplotlib axis for ``fedbound plot dppfl``.

``PLOTS = {vs: draw}`` with ``draw(ax, settings, variant) -> title`` (the generic command makes the figure,
the legend, PNG/SVG and the ``--json`` curves).  The noise is Theorem 1's sigma*(T) (Opacus' orders) for the
(eps, delta) of each curve; undefined points (a hypothesis of the theorem fails) are gaps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import dppfl as dp
from fedbound.scheduling import dppfl as sched

__all__ = ["PLOTS", "draw_T", "draw_eps", "draw_C", "draw_S"]

EPS_FACTORS = (0.5, 1.0, 2.0)


def _y(ev: Any) -> np.ndarray:
    ok = np.asarray(ev.defined) & np.asarray(ev.admissible)
    return np.where(ok, np.asarray(ev.value, dtype=float), np.nan)


def _bound_name(s: Mapping[str, Any]) -> str:
    return "Theorem 3, eq. (32)" if s.get("bound", "nonconvex") == "nonconvex" else "Theorem 2, eq. (31)"


def _log_axes(ax: Any, xlabel: str, T: int) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"bound at T = {T}")


def _rounds(s: Mapping[str, Any], variant: str) -> int:
    return int(s["T"]) if s.get("T") else int(sched.optimal_T(s, variant).x)


def draw_T(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """Phi(T) = bound(T, sigma*(T)) for eps/2, eps, 2 eps, with T* marked (Remark 1)."""
    s = dict(settings)
    T_max = int(s.get("T_max") or sched.T_MAX_DEFAULT)
    Ts = np.unique(np.round(np.geomspace(1, T_max, 60)))
    for f in EPS_FACTORS:
        at = {**s, "eps": s["eps"] * f}
        sig = sched.sigma_curve(at, Ts)
        ax.plot(Ts, _y(sched.bound_curve(at, Ts, sig, variant)), label=f"eps = {at['eps']:g}")
        res = sched.optimal_T(at, variant, T_max=T_max)
        ax.plot([res.x], [res.fun], "o", color=ax.get_lines()[-1].get_color(), label=f"_T* = {res.x}")
        ax.annotate(f"T* = {res.x}", (res.x, res.fun), textcoords="offset points", xytext=(4, 6), fontsize=8)
    _recommended(ax, s, variant, Ts)
    ax.set_xscale("log")
    ax.set_xlabel("rounds T")
    ax.set_ylabel("bound at sigma*(T)")
    return f"DP-PFL (Wei et al. 2023), {_bound_name(s)} at Theorem 1's sigma*(T): optimal T (Remark 1)"


def _recommended(ax: Any, s: Mapping[str, Any], variant: str, Ts: np.ndarray) -> None:
    """The plan's design on the figure (issue 23): the bound with the noise it deploys at every T (its C and
    split, the tight sigma*(T)), its T marked, and the level above which the bound is vacuous."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = sched.plan(s, variant)
    rec = plan.recommendation
    ratio = float(plan.data["sigma_ratio"])
    Td = np.unique(np.append(Ts, rec.T))
    at = {**s, "C": rec.extra["C"]}
    label = f"C = {rec.extra['C']:.3g}, eps = {s['eps']:g}"
    rdp = sched.sigma_curve(at, Td, "tight", ratio)
    if float(s["q_in"]) == 1.0 and float(s["q_out"]) == 1.0:  # the tight curve is the exact one here
        ax.plot(Td, _y(sched.bound_curve(at, Td, rdp, variant, ratio)), color="k", lw=1.6,
                label=f"deployed noise (exact), {label}")
    else:  # q < 1: the deployed sigma is PLD-exact; the RDP sigma*(T) (never below it) bounds it from above
        from fedbound.scheduling.dppfl_sigma import calibrated_exact, exact_sigma

        ax.plot(Td, _y(sched.bound_curve(at, Td, rdp, variant, ratio)), color="k", lw=1.0, ls="--",
                label=f"at the RDP sigma*(T) (valid; above the deployed noise), {label}")
        exact = calibrated_exact(at, ratio)
        exact.setdefault(int(rec.T), exact_sigma(at, int(rec.T), ratio))  # the plan's own (cached)
        Te = np.array(sorted(exact), dtype=float)
        ze = np.array([exact[int(t)]["z"] for t in Te])
        ax.plot(Te, _y(sched.bound_curve(at, Te, ze, variant, ratio)), "o-", color="k", lw=1.6, ms=3,
                label="deployed noise (exact, PLD), at the T the plan calibrated")
    if rec.bound is not None:
        ax.plot([rec.T], [rec.bound], "s", color="k", label=f"recommended T = {rec.T}")
        ax.annotate(f"recommended T = {rec.T}", (rec.T, rec.bound), textcoords="offset points",
                    xytext=(4, -14), fontsize=8)
    level, what = sched.trivial_level(s)
    ax.axhline(level, color="grey", lw=0.8, ls=":", label=f"vacuous above ({what})")


def draw_eps(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """The bound against eps at the setting's T (or T*), for delta and 10 delta (Figs. 2-3 in shape)."""
    s = dict(settings)
    T = _rounds(s, variant)
    eps_grid = np.geomspace(max(s["eps"] / 8, 0.05), s["eps"] * 8, 16)
    for d in (s["delta"], min(10 * s["delta"], 0.5)):
        sig = np.array([dp.rdp_pfl_noise_multiplier(e, d, T, int(s.get("tau0", 1)), s["q_in"], s["q_out"],
                                                    rtol=1e-8) for e in eps_grid])
        ev = sched.bound_curve(s, T, sig, variant)
        ax.plot(eps_grid, _y(ev), label=f"delta = {d:g}")
    _log_axes(ax, "privacy budget eps", T)
    return f"DP-PFL (Wei et al. 2023), {_bound_name(s)} against eps (sigma*(eps) from Theorem 1)"


def draw_C(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """The bound against C at the setting's T (sigma* does not depend on C), paper's Theta and the exact one,
    with C* of Lemma 4's candidate set marked (Table II, Fig. 7)."""
    s = dict(settings)
    T = _rounds(s, variant)
    sig = float(sched.sigma_curve(s, np.array([T]))[0])
    a = 1 + s["eta"] * s["L"]
    hi = 4 * max(1.0, s["B"] ** 2, a * a, s["C"])
    Cs = np.geomspace(1e-3, hi, 200)
    for v in dict.fromkeys((variant, "+".join(x for x in ("theta_exact", variant) if x != "paper"))):
        ev = sched.bound_curve({**s, "C": Cs}, T, sig, v)
        ax.plot(Cs, _y(ev), label=f"{v} (sigma* = {sig:.3g})")
        clip = sched.optimal_clip(s, sig, v)
        if not clip.at_lower_edge:
            val = float(sched.bound_curve({**s, "C": clip.x}, T, sig, v).value)
            ax.plot([clip.x], [val], "o", color=ax.get_lines()[-1].get_color(), label=f"_C* {v}")
    _log_axes(ax, "clipping threshold C", T)
    return f"DP-PFL (Wei et al. 2023), {_bound_name(s)} against the clipping threshold (Lemma 4)"


def draw_S(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """The bound against the model size S at the setting's T: the paper's Theta on odd and on even S
    (parity artifact, E14), the exact Theta, and Psi(S) = a0 S^-kappa + bound when a0 and kappa are set."""
    s = dict(settings)
    T = _rounds(s, variant)
    sig = float(sched.sigma_curve(s, np.array([T]))[0])
    S0 = int(s["S"])
    grid = np.unique(np.round(np.geomspace(max(1, S0 // 100), S0 * 100, 80)))
    odd, even = grid + (grid % 2 == 0), grid + (grid % 2 == 1)
    base = variant.replace("theta_exact", "").strip("+") or "paper"
    for label, Ss, v in (("paper Theta, odd S", odd, base), ("paper Theta, even S", even, base),
                         ("exact Theta", grid, "+".join(x for x in ("theta_exact", base) if x != "paper"))):
        ax.plot(Ss, _y(sched.bound_curve({**s, "S": Ss}, T, sig, v)), label=label)
    if s.get("a0") is not None and s.get("kappa") is not None:
        psi = s["a0"] * grid ** (-s["kappa"]) + _y(sched.bound_curve({**s, "S": grid}, T, sig, variant))
        ax.plot(grid, psi, "--", label=f"Psi(S) = {s['a0']:g} S^-{s['kappa']:g} + bound (extension)")
    _log_axes(ax, "model size S (parameters)", T)
    return f"DP-PFL (Wei et al. 2023), {_bound_name(s)} against the model size (Remark 3)"


PLOTS = {"T": draw_T, "eps": draw_eps, "C": draw_C, "S": draw_S}
