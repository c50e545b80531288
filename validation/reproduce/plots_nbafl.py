"""NbAFL's figures: the bound against T, eps, N and K, optimum marked (``PLOTS``, drawn by validation.plots).

NbAFL's figures 7-10 in shape: Theorem 2's bound against T (one curve per eps, T* marked), against eps
or N (at the setting's T and at the optimal T), and Theorem 3's bound against K (K* marked, the paper's
one-sided amplification next to the two-sided variant).  Curves: the setting's eps times each of
``FACTORS`` (for ``vs="eps"``: N times the factors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedbound.bounds import nbafl as nb
from fedbound.scheduling import nbafl as sched
from fedbound.scheduling import nbafl_design as nbd
from fedbound.validation.reproduce.plots import masked as _masked

__all__ = ["PLOTS", "FACTORS"]

FACTORS = (0.5, 1.0, 2.0, 4.0)


def _at(s: dict[str, Any], variant: str, **changes: Any) -> dict[str, Any]:
    """The setting with ``changes``; the tight reading's z recomputed for the changed eps."""
    out = {**s, **changes}
    if "tight" in nb.NOTATION.variant_names(variant):
        out = nb.with_tight_z({**out, "z": None}, variant)
    return out


def _theta_line(ax: Any, s: dict[str, Any]) -> None:
    ax.axhline(s["Theta"], color="grey", lw=0.8, ls=":", label=r"$\Theta$ (vacuous above)")


def _vs_T(ax: Any, s: dict[str, Any], variant: str, factors: Sequence[float] = FACTORS) -> str:
    eps_values = [s["eps"] * f for f in factors]
    opts = sched.optimal_T(_at(s, variant, eps=np.array(eps_values)), variant)
    full = s.get("K") is None or s["K"] >= s["N"]
    rec = nbd.optimal_design({k: v for k, v in s.items() if k not in ("T", "z")}).design if full else None
    t_max = int(max(3 * np.max(opts.x), 20, 1.5 * (rec.T if rec else 0)))
    T = np.arange(0, t_max + 1, dtype=float)
    if rec is not None:  # the recommended design: Theorem 2 with the noise each T deploys (issue 23)
        Td = T[T >= 1]
        ax.plot(Td, nbd.deployed_bound_full(s, Td), color="k", lw=1.6,
                label=rf"deployed noise (Thm 2), $\epsilon$={s['eps']:g}")
        ax.plot([rec.T], [rec.bound], "s", color="k")
        ax.annotate(f"recommended T={rec.T}", (rec.T, rec.bound), textcoords="offset points", xytext=(4, 8),
                    fontsize=8)
    for i, (eps, t_star, h_star) in enumerate(zip(eps_values, np.atleast_1d(opts.x), np.atleast_1d(opts.fun),
                                                  strict=True)):
        line, = ax.plot(T, _masked(nb.BOUND.evaluate(_at(s, variant, eps=eps), T=T, variant=variant)),
                        label=rf"Thm 2, $\epsilon$={eps:g}")
        ax.plot([t_star], [h_star], "o", color=line.get_color())
        dy = -12 - 9 * (i % 2)  # alternate offsets: neighbouring T*'s labels do not overlap
        ax.annotate(f"T*={t_star}", (t_star, h_star), textcoords="offset points", xytext=(4, dy), fontsize=8)
        if "K" in s:
            ev = nb.K_BOUND.evaluate(s, T=T, eps=eps, variant=variant)
            ax.plot(T, _masked(ev), ls="--", color=line.get_color(), lw=1,
                    label=rf"Thm 3, K={s['K']}, $\epsilon$={eps:g}")
    _theta_line(ax, s)
    ax.set_ylim(0, 2.5 * s["Theta"])
    ax.set_xlabel("rounds T")
    ax.set_ylabel("bound on E[F(w_T)] - F*")
    return (f"NbAFL bound vs T (N={s['N']}, m={s['m']}, C={s['C']:g}, {variant}); dots: paper's T*, "
            "square: recommended")


def _vs_eps(ax: Any, s: dict[str, Any], variant: str, factors: Sequence[float] = FACTORS) -> str:
    eps = np.geomspace(s["eps"] / 10, s["eps"] * 10, 60)
    for n in sorted({max(1, int(round(s["N"] * f))) for f in factors}):
        opt = sched.optimal_T(_at(s, variant, eps=eps, N=n), variant)
        line, = ax.plot(eps, opt.fun, label=f"N={n} at T*(eps)")
        if "T" in s:
            ax.plot(eps, _masked(nb.BOUND.evaluate(_at(s, variant, eps=eps, N=n), variant=variant)), ls="--",
                    color=line.get_color(), lw=1, label=f"N={n} at T={s['T']:g}")
    ax.axvline(s["eps"], color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel(r"privacy budget $\epsilon$")
    ax.set_ylabel("bound at the optimal T")
    _theta_line(ax, s)
    return f"NbAFL bound vs eps (Remark 2; variant {variant}); vertical line: the setting's eps"


def _vs_N(ax: Any, s: dict[str, Any], variant: str, factors: Sequence[float] = FACTORS) -> str:
    N = np.arange(2, max(4 * s["N"], 10) + 1, dtype=float)
    for f in factors:
        eps = s["eps"] * f
        opt = sched.optimal_T(_at(s, variant, eps=eps, N=N), variant)
        ax.plot(N, opt.fun, label=rf"$\epsilon$={eps:g} at T*(N)")
    ax.axvline(s["N"], color="k", lw=0.8, ls="--")
    ax.set_xlabel("clients N")
    ax.set_ylabel("bound at the optimal T")
    _theta_line(ax, s)
    return f"NbAFL bound vs N (Remark 3; variant {variant}); vertical line: the setting's N"


def _vs_K(ax: Any, s: dict[str, Any], variant: str, factors: Sequence[float] = FACTORS) -> str:
    if "T" not in s:
        s = {**s, "T": float(sched.optimal_T(s, variant).x)}
    K = np.arange(1, int(s["N"]) + 1, dtype=float)
    for f, color in zip(factors, ("C0", "C1", "C2", "C3", "C4", "C5"), strict=False):
        eps = s["eps"] * f
        for var, ls in ((variant, "-"), ("two_sided", "--")):
            at = {**s, "eps": eps, "K": K}
            values = _masked(nb.K_BOUND.evaluate(at, variant=var))
            if not np.isfinite(values).any():
                continue
            i = int(np.nanargmin(values))
            ax.plot(K, values, ls=ls, color=color, label=rf"$\epsilon$={eps:g} ({var})")
            ax.plot([K[i]], [values[i]], "o", color=color)
    ax.set_xlabel("clients per round K")
    ax.set_ylabel("Theorem 3 bound")
    _theta_line(ax, s)
    return (f"NbAFL K-scheduling bound vs K at T={s['T']:g} (N={s['N']}); dots: K*; "
            "dashed: two-sided amplification (E9)")


def _completed(draw: Any) -> Any:
    def run(ax: Any, s: dict[str, Any], variant: str) -> str:
        return draw(ax, _at({"L": 1, **s}, variant), variant)

    return run


PLOTS = {vs: _completed(draw) for vs, draw in (("T", _vs_T), ("eps", _vs_eps), ("N", _vs_N), ("K", _vs_K))}
"""NbAFL's figures by x-axis variable; each ``draw(ax, settings, variant) -> title``."""
