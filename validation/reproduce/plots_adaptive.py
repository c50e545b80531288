"""PADPFL (Talaei and Izadi 2024) figures for ``fedbound plot adaptive --vs T|eps|p``: labelled lines on a
matplotlib axis.

Each ``draw(ax, settings, variant) -> title`` draws Theorem 2's bound (eq. (46)) as printed and corrected
(E1-E4), and the bound under the tight calibration actually planned (Theta + T x Lemma 2's increment with the
injected noise, :mod:`fedbound.scheduling.adaptive`), for the [adaptive] setting's impact factors.  The
generic command makes the figure, the legend, PNG/SVG and the ``--json`` curves from these lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import adaptive as ba
from fedbound.errors import DomainError
from fedbound.scheduling import adaptive as sa

__all__ = ["PLOTS", "draw_T", "draw_eps", "draw_p"]


def _setup(settings: Mapping[str, Any]) -> tuple[dict[str, Any], np.ndarray, np.ndarray, float]:
    s = sa.normalised_settings(settings)
    design = ba.design_from_settings(s)
    m = design.client_sizes
    p = design.phase_rows
    mu = float(s["mu"]) if s.get("mu") is not None else sa.best_mu(s["A"], s["gamma"], s["rho"]).x
    if mu is None:
        raise DomainError("A gamma", s["A"] * s["gamma"], "< 1", hint="set mu: no mu makes lambda_2 < 0")
    return s, p, m, float(mu)


def _theorem_values(s: Mapping[str, Any], p: np.ndarray, m: np.ndarray, mu: float) -> dict[str, Any]:
    return {
        "eps": s["eps"],
        "c": float(ba.gaussian_c(s["delta"])),
        "B": s["C"],
        "Theta": s["Theta"],
        "A": s["A"],
        "gamma": s["gamma"],
        "rho": s["rho"],
        "mu": mu,
        "rho_minus": s.get("rho_minus", 0.0),
        "beta": s["beta"],
        **ba.summaries(p, m),
    }


def draw_T(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """Theorem 2's bound against T (paper and corrected) and the tight-noise bound; F47's optima marked."""
    s, p, m, mu = _setup(settings)
    v = _theorem_values(s, p, m, mu)
    k = tuple(float(th(v)) for th in (ba.K2, ba.K1, ba.K0))
    t_opt = sa.optimal_rounds(s["Theta"], k, s["eps"], T_min=int(s["R"]))
    top = int(max(60, 4 * t_opt.x, s.get("T") or 0))
    Ts = np.arange(1, top + 1, dtype=float)
    for name in ("paper", "corrected"):
        ax.plot(Ts, ba.BOUND({**v, "T": Ts}, variant=name), label=f"Theorem 2 ({name})")
    ax.plot(Ts, sa.tight_bound(s, p, m, mu, Ts), label="tight noise (eq. (48), injected noise)")
    ax.axvline(t_opt.x, linestyle=":", label=f"T* = {t_opt.x} (minimiser of eq. (46))")
    _recommended(ax, settings, s, p, m, top)
    ax.set_xlabel("rounds T")
    ax.set_ylabel("bound on E[L(x_T) - L*]")
    return f"PADPFL: bound vs T (eps = {s['eps']:g}, mu = {mu:.3g})"


def _recommended(ax: Any, settings: Mapping[str, Any], s: Mapping[str, Any], p: np.ndarray, m: np.ndarray,
                 top: int) -> None:
    """The plan's design on the figure (issue 23): the tight-noise bound at its mu (and planned weights)
    through its T, marked, and Theta, above which the bound is vacuous."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = sa.plan(settings).recommendation
    if s.get("weights") in ("planned", "priority"):
        p = np.atleast_2d(rec.extra["p"])
    Td = np.arange(1, max(top, rec.T) + 1, dtype=float)
    ax.plot(Td, sa.tight_bound(s, p, m, rec.extra["mu"], Td), color="k", lw=1.6,
            label=f"deployed noise (tight), mu = {rec.extra['mu']:.3g}")
    ax.plot([rec.T], [rec.bound], "s", color="k", label=f"recommended T = {rec.T}")
    ax.axhline(s["Theta"], color="grey", lw=0.8, ls=":", label=r"$\Theta$ (vacuous above)")


def draw_eps(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """The bound at the setting's T (default 30) against eps: lower for larger eps (E14)."""
    s, p, m, mu = _setup(settings)
    T = float(s.get("T") or 30)
    eps_grid = np.geomspace(0.5, 100, 60)
    v = _theorem_values(s, p, m, mu)
    for name in ("paper", "corrected"):
        ax.plot(eps_grid, ba.BOUND({**v, "T": T, "eps": eps_grid}, variant=name), label=f"Theorem 2 ({name})")
    tight = [float(sa.tight_bound({**s, "eps": e}, p, m, mu, np.asarray(T))) for e in eps_grid]
    ax.plot(eps_grid, tight, label="tight noise (eq. (48), injected noise)")
    ax.set_xscale("log")
    ax.set_xlabel("privacy budget eps")
    ax.set_ylabel(f"bound at T = {T:g}")
    return f"PADPFL: bound vs eps (T = {T:g})"


def draw_p(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """The bound along p(a) = (1 - a) uniform + a p_setting, a in [0, 1] (E26: uniform minimises it)."""
    s, p, m, mu = _setup(settings)
    T = float(s.get("T") or 30)
    uniform = ba.impact_factors_uniform(p.shape[-1])
    mix = np.linspace(0, 1, 41)
    rows = [(1 - a) * uniform + a * p for a in mix]
    for name in ("paper", "corrected"):
        values = [float(ba.BOUND({**_theorem_values(s, r, m, mu), "T": T}, variant=name)) for r in rows]
        ax.plot(mix, values, label=f"Theorem 2 ({name})")
    ax.plot(
        mix,
        [float(sa.tight_bound(s, r, m, mu, np.asarray(T))) for r in rows],
        label="tight noise (eq. (48), injected noise)",
    )
    ax.set_xlabel("a: p = (1 - a) uniform + a (the setting's impact factors)")
    ax.set_ylabel(f"bound at T = {T:g}")
    return "PADPFL: bound between uniform and the setting's impact factors"


PLOTS = {"T": draw_T, "eps": draw_eps, "p": draw_p}
"""``fedbound plot adaptive --vs T|eps|p``."""
