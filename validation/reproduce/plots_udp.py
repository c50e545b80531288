"""``fedbound plot udp --vs T|eps|K|q``: UDP's bound and noise, the paper's reading beside the tight one.

Each ``draw(ax, settings, variant)`` draws labelled lines on a matplotlib axis and returns the title; the
generic command makes the figure, the legend, PNG/SVG and the ``--json`` curves from the lines.

* ``T``: Theorem 2's bound (22) with eq. (10)'s noise and with the deployed (exact) noise, the paper's T* and
  the plan's recommended T marked, Theta drawn.
* ``eps``: the bound at the optimal T, paper and tight, against eps.
* ``K``: the bound at the optimal T against the number of clients per round.
* ``q``: sigma per client against q = K/N at the setting's T (paper (10), corrected, tight).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import udp
from fedbound.scheduling import udp as sched

__all__ = ["PLOTS"]


def _setting(settings: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**settings, **changes}


def _by_T(ax: Any, settings: Mapping[str, Any], variant: str) -> str:
    """Eq. (22) with the paper's noise and with the noise the plan deploys (exact calibration at every T),
    the paper's T* and the plan's recommended T (a user-set T is held, as in the plan) marked, Theta drawn."""
    co = sched.coeffs(settings)
    t_opt = sched.optimal_T(co)
    rec_T, rec_bound = sched.recommended(settings, co)
    hi = int(max(3 * max(int(t_opt.x), rec_T), 20))
    Ts = np.unique(np.append(np.linspace(1, hi, 60).round().astype(int), [int(t_opt.x), rec_T]))
    ax.plot(Ts, udp.bound(Ts, co), label="bound (22), paper's noise (10)")
    ax.plot(Ts, sched.bound_tight_curve(settings, co, Ts), color="k", lw=1.6,
            label="deployed noise (exact), bound (22)")
    ax.plot([int(t_opt.x)], [float(t_opt.fun)], "o", label=f"T* paper = {int(t_opt.x)}")
    ax.plot([rec_T], [rec_bound], "s", color="k", label=f"recommended T = {rec_T}")
    ax.axhline(co["theta0"], color="grey", lw=0.8, ls=":", label=r"$\Theta$ (vacuous above)")
    ax.set_xlabel("communication rounds T")
    ax.set_ylabel("E F(w^T) - F* (bound)")
    return f"{udp.SHORT}: Theorem 2's bound against T"


def _optimum_curve(ax: Any, settings: Mapping[str, Any], key: str, values: np.ndarray, label: str) -> None:
    points = [_setting(settings, **{key: v}) for v in values]
    paper = [float(sched.optimal_T(sched.coeffs(s)).fun) for s in points]
    tight = [fun for _, fun in sched.optimal_T_tight_many(points)]  # the scans' calibrations batched
    ax.plot(values, paper, label="bound at T*, paper's noise (10)")
    ax.plot(values, tight, label="bound at T*, tight noise")
    ax.set_xlabel(label)
    ax.set_ylabel("bound (22) at the optimal T")


def _by_eps(ax: Any, settings: Mapping[str, Any], variant: str) -> str:
    eps = float(np.min(np.atleast_1d(settings["eps"])))
    values = np.geomspace(max(eps / 8, 0.05), eps * 4, 16)
    _optimum_curve(ax, {k: v for k, v in settings.items() if k != "eps_clients"}, "eps", values, "epsilon")
    ax.set_xscale("log")
    return f"{udp.SHORT}: the bound at the optimal T against epsilon"


def _by_K(ax: Any, settings: Mapping[str, Any], variant: str) -> str:
    n = int(settings["N"])
    values = np.unique(np.linspace(1, n, min(n, 16)).round().astype(int))
    _optimum_curve(ax, settings, "K", values, "clients per round K")
    return f"{udp.SHORT}: the bound at the optimal T against K (N = {n})"


def _by_q(ax: Any, settings: Mapping[str, Any], variant: str) -> str:
    n = int(settings["N"])
    co = sched.coeffs(settings)
    T = int(settings.get("T") or sched.optimal_T(co).x)
    ks = np.unique(np.linspace(1, n, min(n, 16)).round().astype(int))
    for method, label in (
        ("paper", "sigma (10), paper"),
        ("corrected", "sigma corrected"),
        ("tight", "sigma tight (release RDP)"),
    ):
        ax.plot(
            ks / n,
            [float(np.max(udp.noise(_setting(settings, K=int(k)), T, method)["uplink"])) for k in ks],
            label=label,
        )
    ax.set_xlabel("sampling ratio q = K/N")
    ax.set_ylabel(f"noise std per client at T = {T}")
    return f"{udp.SHORT}: noise std against q"


PLOTS = {"T": _by_T, "eps": _by_eps, "K": _by_K, "q": _by_q}
