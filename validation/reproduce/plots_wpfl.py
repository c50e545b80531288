"""Figures of WPFL for ``fedbound plot wpfl CONFIG --vs X`` (``PLOTS = {vs: draw}``).

* ``lam``: the P7 objective Phi_n(eta(lambda), lambda) along the constraint eps_P,n = eps_P (eqs. (37),
  (39)) against lambda, one line per client of the first scheduled round (the Omega_0 branch, where the
  optimum lies, spec S17), each client's optimum marked;
* ``assignment``: the subchannel each client uses in each round (the Kuhn-Munkres assignment of P3; a gap
  where the client is not selected);
* ``T``: Theorem 4's PL bound (eq. (31)) after the whole run against the uploads per client T (= T0), at
  Theorem 1's sigma_DP and at the tight (set-based) sigma_DP the plan deploys, the plan's T0 marked, D0 drawn.

``lam`` and ``assignment`` are drawn at the plan's recommended (tight) sigma_DP.

Each ``draw(ax, settings, variant)`` draws labelled lines and returns the title; the generic command makes
the figure, the legend, PNG + SVG and the ``--json`` curves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds import wpfl as wb
from fedbound.scheduling import wpfl as ws

__all__ = ["PLOTS", "draw_lambda", "draw_assignment", "draw_T"]

MAX_LINES = 8


def _deployed(s: Mapping[str, Any], T0: int) -> float:
    """The plan's deployed sigma_DP: the exact calibration of the T0 uploads (wb.tight_calibration)."""
    return wb.tight_calibration(s["eps"], s["delta"], s["q"], T0)["z"] * 2.0 * float(s["C"])


def _schedule(settings: Mapping[str, Any], variant: str, sigma: float | None = None) -> ws.RoundsSchedule:
    s = dict(settings)
    if sigma is None:  # the plan's recommended (exact) sigma_DP, not Theorem 1's (issue 23)
        sigma = _deployed(s, int(s["T"]))
    return ws.schedule_rounds(ws.radio_setting(s), s, sigma, "proposed", variant,
                              int(s.get("channel_seed", 0)), s.get("max_rounds"))


def draw_lambda(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """Phi_n against lambda on Omega_0 for the clients of round 1 (at most MAX_LINES, worst first)."""
    sched = _schedule(settings, variant)
    s = settings
    (_, _), intervals = (None, None), wb.feasible_intervals(s["eps_P"], s["mu"])[1]
    lo, hi = intervals[0]
    eta = np.linspace(lo, hi, 802)[1:-1]
    lam = np.asarray(wb.lam_of_eta(eta, s["eps_P"], s["mu"]), dtype=float)
    order = np.argsort(-sched.Phi[0])[:MAX_LINES]
    for n in order:
        phi = wb.PHI_P7.evaluate(eta_P=eta, eps_P=s["eps_P"], Gamma_n=sched.Gamma[0, n],
                                 eps_F_mean=sched.eps_F[0], G0=s["G0"], mu=s["mu"], M=s["M"],
                                 variant=variant).value
        ax.plot(lam, phi, label=f"client {n} (rho_G = {sched.rho_G[0, n]:.2g})")
        ax.plot([sched.lam[0, n]], [sched.Phi[0, n]], marker="o", linestyle="none",
                label=f"client {n} optimum lambda* = {sched.lam[0, n]:.4g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lambda (eta_P = eta(lambda) on Omega_0, eq. (37))")
    ax.set_ylabel("Phi_n (Theorem 3, eq. (30a))")
    return (f"WPFL P7: Phi_n along eps_P = {s['eps_P']:g}, round 1, sigma_DP = {sched.sigma_dp:.3g}; "
            f"min-max value {sched.max_bound[0]:.4g}")


def draw_assignment(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """Subchannel of each client per round (NaN gaps when not selected), at most MAX_LINES clients."""
    sched = _schedule(settings, variant)
    rounds = np.arange(1, sched.rounds + 1)
    for n in range(min(sched.assignment.shape[1], MAX_LINES)):
        chan = np.where(sched.assignment[:, n] >= 0, sched.assignment[:, n], np.nan).astype(float)
        ax.plot(rounds, chan, marker="o", linestyle="-", label=f"client {n}")
    ax.set_xlabel("round t")
    ax.set_ylabel("subchannel k (Kuhn-Munkres, P3)")
    return (f"WPFL: client-subchannel assignment over {sched.rounds} rounds (T0 = {settings['T']} uploads "
            "each)")


def draw_T(ax: Any, settings: Mapping[str, Any], variant: str = "paper") -> str:
    """Theorem 4's bound after the run against T0, at Theorem 1's sigma and at the tight sigma."""
    base = int(settings["T"])
    ts = sorted({max(1, int(round(base * f))) for f in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)})
    tight = wb.tight_calibrations(settings["eps"], settings["delta"], settings["q"], ts)  # = _deployed's
    rounds_at = {}
    for method, label, style in (("paper", "Theorem 1 sigma_DP (per-outcome delta)", {}),
                                 ("tight", "deployed noise: exact sigma_DP (subsampled Gaussian, PLD)",
                                  {"color": "k", "lw": 1.6})):
        values = []
        for t, record in zip(ts, tight, strict=True):
            s = {**settings, "T": t}
            sigma = (record["z"] * 2.0 * float(s["C"]) if method == "tight"
                     else wb.noise(s, t, method)["uplink"])
            sched = _schedule(s, variant, sigma)
            bound = wb.geometric_bound(s["eps_P"], sched.rounds, s["D0"], float(sched.Phi.max()))
            values.append(float(bound))
            rounds_at[t] = sched.rounds
        ax.plot(ts, values, marker="o", label=label, **style)
        if method == "tight":  # the plan's design: T0 held (the setting's), its rounds and bound
            rounds = rounds_at[base]  # the schedule just drawn at T0 = base with the deployed sigma
            ax.plot([base], [values[ts.index(base)]], "s", color="k",
                    label=f"recommended T0 = {base} ({rounds} rounds)")
    ax.axhline(settings["D0"], color="grey", lw=0.8, ls=":", label="D0 (initial distance: vacuous above)")
    ax.set_yscale("log")
    ax.set_xlabel("uploads per client T0")
    ax.set_ylabel("Theorem 4 PL bound after the run (eq. (31))")
    return f"WPFL: Theorem 4 bound against T0 (eps = {settings['eps']:g}, delta = {settings['delta']:g})"


PLOTS = {"lam": draw_lambda, "assignment": draw_assignment, "T": draw_T}
