"""WPFL's per-round min-max fair schedule (seed 004 Sec. VI, Alg. 2; spec 004 Sec. 4) and its plan.

Problem P (32): minimise max_n Phi_n^{t+1} over selection, subchannels, power, eta_F, eta_P and lambda.
Because Theta_L^t and the mean eps_F raise every Phi_n (spec Sec. 4.2), P splits into steps, each its own
function here, composed as the paper does in :func:`schedule_rounds`:

1. power: P_n = P_th for the selected clients (closed form, spec S6; :func:`fedbound.scheduling.wireless.
   power_control`);
2. selection + subchannels: Kuhn-Munkres (``linear_sum_assignment``, BIG = K + 1, max-cardinality reading
   of P3; :func:`fedbound.scheduling.wireless.assign_channels`), then Theta_{L,min} (F19);
3. eta_F* = mu / (2 (1 + phi1) L^2) (F28, closed form);
4. per client, P7 (39): lambda(eta) (F29) on the feasible intervals Omega_0 U Omega_1 (F30), a bounded 1-D
   search on each interval (:func:`solve_P7`), vectorised over every client and every round at once;
5. the min-max value max_n Phi_n*, reported.

Why not cvxpy for P7: Phi(eta, lambda(eta)) contains (eta^2 + 1) lambda(eta)^2, eta^3 / lambda(eta) and
(1 + lambda^3) eta^2 (G0 + lambda Q0)^2 -- products and ratios of convex functions, which DCP's composition
rules reject, although Theorem 5 proves the composite convex on each interval.  So P7 is solved by a
bounded golden-section search (the derivative-free part of scipy's bounded Brent, written out over numpy
arrays so all N clients of all T rounds are one search; :func:`solve_P7` with ``method="scipy"`` runs
``scipy.optimize.minimize_scalar(method="bounded")`` per client, the spec's normative method, as oracle).
A search on a convex function finds its global minimum on the interval; the certificate records which
interval, its ends, the value, the second derivative (sympy) there, and that Phi* is no larger than Phi at
the interval's ends.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound.bounds import wpfl as wb
from fedbound.errors import ParameterError
from fedbound.kept import LastKept
from fedbound.scheduling.results import Optimum

__all__ = ["P7Solution", "solve_P7", "assign_and_theta", "schedule_round_minmax", "RoundsSchedule",
           "schedule_rounds", "POLICIES", "CONSTANTS", "plan", "CLAIMS"]

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
POLICIES = ("proposed", "non_adjustment", "round_robin", "random", "error_free")
CONSTANTS = ("mu", "L", "G0", "M", "phi1", "phi2", "vphi1", "vphi2", "eps_P")


@dataclass(frozen=True)
class P7Solution:
    """Per-client optimum of P7 (arrays of the input shape): ``eta_P``, ``lam``, ``Phi``, ``interval``
    (0: Omega_0, 1: Omega_1), the interval ends ``lo``/``hi`` actually searched, ``curvature`` (d^2 Phi /
    d eta^2 at the optimum, sympy), ``edge`` (True where the optimum sits at the searched interval's end)."""

    eta_P: np.ndarray
    lam: np.ndarray
    Phi: np.ndarray
    interval: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    curvature: np.ndarray
    edge: np.ndarray
    etas: tuple[float, float, float]

    def certificate(self) -> Optimum:
        """The min-max value as a scipy-style certificate (over the flattened clients)."""
        worst = int(np.argmax(self.Phi))
        ok = bool(np.all(np.isfinite(self.Phi)) and np.all(self.curvature >= 0))
        return Optimum(x={"eta_P": float(np.ravel(self.eta_P)[worst]),
                          "lam": float(np.ravel(self.lam)[worst])},
                       fun=float(np.ravel(self.Phi)[worst]), success=ok,
                       message=("max_n min Phi_n: each client's P7 minimised on Omega_0 and Omega_1 (convex "
                                "there by Theorem 5); the value is the worst client's"),
                       method="bounded golden-section search per interval (Theorem 5: convex)",
                       bracket=(float(self.etas[0]), float(self.etas[1])),
                       at_lower_edge=bool(np.any(self.edge)),
                       evidence={"worst_client": worst, "eta1": self.etas[0], "eta2": self.etas[1],
                                 "eta3": self.etas[2], "min_curvature": float(np.min(self.curvature)),
                                 "interval_of_worst": int(np.ravel(self.interval)[worst])})


_COMPILED: dict[str, tuple[Any, Any]] = {}
_P7_ARGS = ("eta_P", "eps_P", "Gamma_n", "eps_F_mean", "G0", "mu", "M")


def _p7_functions(variant: str) -> tuple[Any, Any]:
    """numpy functions of Phi(eta, lambda(eta)) and lambda(eta), compiled once per variant from the
    theorems (fedbound.bounds.wpfl.PHI_P7, LAM_OF_ETA): the search calls them ~100 times, without
    Theorem.evaluate's per-call input checks (the inputs are checked once in solve_P7)."""
    if variant not in _COMPILED:
        _COMPILED[variant] = (wb.PHI_P7.unchecked(_P7_ARGS, variant),
                              wb.LAM_OF_ETA.unchecked(_P7_ARGS, variant))
    return _COMPILED[variant]


def _phi(eta: np.ndarray, gamma: np.ndarray, eps_P: float, eps_F_mean: Any, consts: Mapping[str, float],
         variant: str) -> np.ndarray:
    """Phi(eta, lambda(eta)) of P7; +inf where lambda(eta) leaves (0, 2] by rounding at an interval's end or
    the value is not finite (Phi -> +inf as lambda -> 0+, spec S17)."""
    phi_fn, lam_fn = _p7_functions(variant)
    args = (eta, eps_P, gamma, eps_F_mean, consts["G0"], consts["mu"], consts["M"])
    with np.errstate(all="ignore"):
        value = np.asarray(phi_fn(*args), dtype=float)
        lam = np.asarray(lam_fn(*args), dtype=float)
    return np.where(np.isfinite(value) & (lam > 0) & (lam <= 2 + 1e-12), value, np.inf)


def _golden(f, lo: np.ndarray, hi: np.ndarray, iters: int) -> np.ndarray:
    """Golden-section search of every element at once, ``iters`` steps; in-place masked copies (the same
    floats as the np.where form: each element takes the same branch and the same arithmetic)."""
    a, b = lo.copy(), hi.copy()
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        left = fc <= fd  # the minimum lies in [a, d]
        right = ~left
        np.copyto(b, d, where=left)
        np.copyto(a, c, where=right)
        width = GOLDEN * (b - a)
        c_new = b - width
        np.copyto(c_new, d, where=right)
        np.add(a, width, out=d)
        np.copyto(d, c, where=left)
        c = c_new
        x = d.copy()
        np.copyto(x, c, where=left)
        fnew = f(x)
        fc, fd = np.where(left, fnew, fd), np.where(left, fc, fnew)
    return (a + b) / 2.0


def solve_P7(eps_P: float, mu: float, Gamma_n: Any, eps_F_mean: Any, G0: float, M: float,
             variant: str = "paper", method: str = "golden", xi: float = 1e-9, iters: int = 80) -> P7Solution:
    """P7 (seed 004 eq. (39), Theorem 5; spec 004 F31, Sec. 4.6) for every client at once.

    ``Gamma_n`` (any shape) is Gamma_{n,t+1} (F22) per client, ``eps_F_mean`` the mean FL contraction factor
    (broadcastable).  Each non-empty interval (l, r) of (38) is searched on [l + xi (r-l), r - xi (r-l)]
    (all intervals and clients in one golden-section search of ``iters`` steps: the bracket shrinks by
    0.618^iters, 2e-17 at 80); the smaller value wins; lambda* = lambda(eta*) by (37).  An interval end that
    beats the search's point is taken instead and flagged (``edge``).  ``method="scipy"``:
    minimize_scalar(bounded, xatol 1e-13) per client and interval (spec Sec. 4.6).  DomainError outside
    mu < 2, 1 - mu^2/4 <= eps_P < 1 (E23).
    """
    etas, intervals = wb.feasible_intervals(eps_P, mu)
    gamma = np.asarray(wb.NOTATION.params["Gamma_n"].check(Gamma_n), dtype=float)
    efm = np.broadcast_to(np.asarray(wb.NOTATION.params["eps_F_mean"].check(eps_F_mean), dtype=float),
                          gamma.shape)
    wb.NOTATION.params["G0"].check(G0)
    wb.NOTATION.params["M"].check(M)
    wb.PHI_P7.notation.variant_names(variant)
    consts = {"G0": float(G0), "mu": float(mu), "M": float(M)}
    if method not in ("golden", "scipy"):
        raise ParameterError("method", method, "golden or scipy")
    shape = (len(intervals), *gamma.shape)
    lo = np.stack([np.full(gamma.shape, l_ + xi * (r_ - l_)) for l_, r_ in intervals])
    hi = np.stack([np.full(gamma.shape, r_ - xi * (r_ - l_)) for l_, r_ in intervals])
    g = np.ascontiguousarray(np.broadcast_to(gamma, shape))  # contiguous: faster arithmetic in the search
    e = np.ascontiguousarray(np.broadcast_to(efm, shape))

    def f(eta: np.ndarray) -> np.ndarray:
        return _phi(eta, g, eps_P, e, consts, variant)

    if method == "golden":
        x = _golden(f, lo, hi, iters)
    else:
        from scipy.optimize import minimize_scalar

        x = np.empty(shape)
        for idx in np.ndindex(shape):
            g_i, e_i = g[idx], e[idx]
            res = minimize_scalar(lambda v, g_i=g_i, e_i=e_i: float(_phi(np.asarray(v), g_i, eps_P, e_i,
            consts,
                                                                         variant)),
                                  bounds=(lo[idx], hi[idx]), method="bounded", options={"xatol": 1e-13})
            x[idx] = res.x
    fx, f_lo, f_hi = f(x), f(lo), f(hi)
    edge = np.minimum(f_lo, f_hi) < fx  # an end beats the search: the minimum is at that end
    x = np.where(edge, np.where(f_lo <= f_hi, lo, hi), x)
    fx = np.where(edge, np.minimum(f_lo, f_hi), fx)
    which = np.argmin(fx, axis=0)
    pick = np.expand_dims(which, 0)
    x, fx = np.take_along_axis(x, pick, 0)[0], np.take_along_axis(fx, pick, 0)[0]
    lo, hi = np.take_along_axis(lo, pick, 0)[0], np.take_along_axis(hi, pick, 0)[0]
    edge = np.take_along_axis(edge, pick, 0)[0]
    lam = np.asarray(wb.LAM_OF_ETA.evaluate(eta_P=x, eps_P=eps_P, mu=mu).value, dtype=float)
    curv = np.asarray(wb.PHI_P7_D2.evaluate(eta_P=x, eps_P=eps_P, Gamma_n=gamma, eps_F_mean=efm, G0=G0, mu=mu,
                                            M=M, variant=variant).value, dtype=float)
    return P7Solution(x, lam, fx, which.astype(int), lo, hi, curv, edge.astype(bool), etas)


# ---------------------------------------------------------------------------------------------------------
# One round, step by step (Alg. 2)
# ---------------------------------------------------------------------------------------------------------


def assign_and_theta(rho: np.ndarray, feasible: np.ndarray, allowed: np.ndarray, C: float, sigma_dp: float,
                     R: int, n_params: int) -> tuple[list[tuple[int, int]], float]:
    """Step 2: the Kuhn-Munkres pairs of P3 (:func:`fedbound.scheduling.wireless.assign_channels`) and
    Theta_L,min = F19 over them (seed 004 eqs. (26), (33); spec 004 Sec. 4.4).  0 for an empty round."""
    from fedbound.scheduling.wireless import assign_channels

    pairs = assign_channels(rho, feasible, allowed)
    return pairs, wb.theta_L(C, sigma_dp, R, n_params, [rho[i, c] for i, c in pairs])


def schedule_round_minmax(uplink_gain: Any, downlink_gain: Any, uploads: Any, radio: Any,
                          settings: Mapping[str, Any], sigma_dp: float, variant: str = "paper"
                          ) -> dict[str, Any]:
    """Seed 004 Alg. 2 for one round, composed from its steps: power (closed form), KM + Theta_L,min,
    eta_F* (F28), P7 per client (vectorised), the min-max value.  ``uplink_gain`` ``(N, K)``,
    ``downlink_gain`` ``(N,)`` are |h|^2; ``uploads`` ``(N,)`` the uploads so far (C7 with T0 =
    ``settings["T"]``).  Returns ``pairs``, ``power``, ``theta_L_min``, ``eta_F``, ``eps_F``, ``Gamma``,
    ``eta_P``, ``lam``, ``Phi``, ``max_bound``, ``worst_client``."""
    from fedbound.checks import check_int
    from fedbound.scheduling.wireless import dbm_to_watt, power_control

    c = _consts(settings)
    allowed = check_int("uploads", uploads, 0, int(settings["T"])) < int(settings["T"])
    _, rho, feasible = radio.links(np.asarray(uplink_gain, dtype=float), radio.P_th_dbm)
    pairs, theta = assign_and_theta(rho, feasible, allowed, c["C"], sigma_dp, int(c["R"]), int(c["n_params"]))
    power = power_control(pairs, radio.num_clients, float(dbm_to_watt(radio.P_th_dbm)))
    _, rho_g, _ = radio.links(np.asarray(downlink_gain, dtype=float), radio.P_bs_dbm)
    eta_F = wb.optimal_eta_F(c["mu"], c["L"], c["phi1"])
    eps_F = wb.optimal_eps_F(c["mu"], c["L"], c["phi1"], c["phi2"], c["vphi1"])
    common = {k: c[k] for k in ("C", "R", "n_params", "phi1", "phi2", "vphi1", "vphi2")}
    gamma = np.asarray(wb.GAMMA_NEXT.evaluate(theta_L=theta, rho_G=rho_g, sigma_dp=sigma_dp, variant=variant,
                                              **common).value, dtype=float)
    sol = solve_P7(c["eps_P"], c["mu"], gamma, eps_F, c["G0"], c["M"], variant)
    return {"pairs": pairs, "power": power, "theta_L_min": theta, "eta_F": eta_F, "eps_F": eps_F,
            "Gamma": gamma, "eta_P": sol.eta_P, "lam": sol.lam, "Phi": sol.Phi,
            "max_bound": float(sol.Phi.max()), "worst_client": int(np.argmax(sol.Phi)),
            "certificate": sol.certificate()}


# ---------------------------------------------------------------------------------------------------------
# A T-round schedule in one call
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundsSchedule:
    """Every round of a run (arrays ``(rounds, N)`` unless said): ``assignment`` (subchannel, -1 when not
    selected), ``power`` (W), ``rho_L`` (uplink element-error probability of the selected, 0 otherwise),
    ``rho_G`` (downlink ending the round), ``theta_L_min`` ``(rounds,)`` (F19), ``eta_F`` ``(rounds,)``,
    ``eps_F`` ``(rounds,)``, ``Gamma`` (F22), ``eta_P``, ``lam``, ``eps_P`` (achieved PL contraction),
    ``Phi`` (F25), ``max_bound`` ``(rounds,)`` (max_n Phi_n), ``jain_index`` ``(rounds,)`` (F33 of Phi over
    clients), ``wireless``: the underlying ``WirelessSchedule`` (for training)."""

    policy: str
    variant: str
    sigma_dp: float
    assignment: np.ndarray
    power: np.ndarray
    rho_L: np.ndarray
    rho_G: np.ndarray
    theta_L_min: np.ndarray
    eta_F: np.ndarray
    eps_F: np.ndarray
    Gamma: np.ndarray
    eta_P: np.ndarray
    lam: np.ndarray
    eps_P: np.ndarray
    Phi: np.ndarray
    max_bound: np.ndarray
    jain_index: np.ndarray
    wireless: Any = field(repr=False, default=None)
    certificate: Optimum | None = None
    warnings: tuple[str, ...] = ()

    @property
    def rounds(self) -> int:
        return int(self.assignment.shape[0])

    def round_dict(self, t: int) -> dict[str, Any]:
        """Round ``t`` as JSON-ready keys: ``assignment`` (client -> subchannel, None if unselected),
        ``power``, ``eta_fl``, ``eta_pl``, ``lambda``, ``Phi``, ``rho_L``, ``rho_G``, ``theta_L_min``,
        ``max_bound``, ``jain_index``."""
        from fedbound.scheduling.results import json_number

        chan = self.assignment[t]
        return {"round": t + 1, "assignment": [int(c) if c >= 0 else None for c in chan],
                "power": json_number(self.power[t]), "eta_fl": float(self.eta_F[t]),
                "eta_pl": json_number(self.eta_P[t]), "lambda": json_number(self.lam[t]),
                "Phi": json_number(self.Phi[t]), "rho_L": json_number(self.rho_L[t]),
                "rho_G": json_number(self.rho_G[t]), "theta_L_min": float(self.theta_L_min[t]),
                "max_bound": json_number(self.max_bound[t]), "jain_index": float(self.jain_index[t])}

    def to_dict(self) -> dict[str, Any]:
        """The whole schedule: policy, sigma_DP, every round (:meth:`round_dict`), the run's worst min-max
        value and warnings."""
        return {"policy": self.policy, "variant": self.variant, "sigma_dp": self.sigma_dp,
                "rounds": self.rounds,
                "max_bound": float(self.max_bound.max()), "mean_jain_index": float(self.jain_index.mean()),
                "per_round": [self.round_dict(t) for t in range(self.rounds)],
                "certificate": None if self.certificate is None else self.certificate.to_dict(),
                "warnings": list(self.warnings)}


def _consts(settings: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(settings[k]) for k in (*CONSTANTS, "C", "R", "n_params")}


@functools.lru_cache(maxsize=64)
def _schedule_run(radio: Any, T0: int, scheduler: str, seed: int, max_rounds: int | None,
                  channel_errors: bool) -> Any:
    """:func:`fedbound.scheduling.wireless.schedule_run`, kept per process: the radio schedule does not
    depend on sigma_DP, so the plan, its figures and a curve over sigma share one run per (radio, T0, seed)
    (``WirelessSetting`` is a frozen dataclass of scalars; the run is only read)."""
    from fedbound.scheduling.wireless import schedule_run

    return schedule_run(radio, T0, scheduler, seed, max_rounds=max_rounds, channel_errors=channel_errors)


SCHEDULE_CACHE_SIZE = 64
_SCHEDULES = LastKept(SCHEDULE_CACHE_SIZE)
"""Schedules kept per process (:func:`schedule_rounds`): the explorer's plan draws the schedules its figures
draw (the T0 curve's point at the setting's T0, the lambda and assignment views at the deployed sigma)."""


def _schedule_key(radio: Any, settings: Mapping[str, Any], sigma_dp: float, policy: str, variant: str,
                  seed: int, max_rounds: int | None) -> tuple:
    """Every input :func:`_schedule_rounds` reads, exactly (floats as given, no rounding)."""
    fixed = tuple(float(settings[k]) for k in ("eta_F", "eta_P", "lam")) if policy not in (
        "proposed", "error_free") else ()
    return (radio, tuple(_consts(settings).items()), int(settings["T"]), float(sigma_dp), policy, variant,
            int(seed), max_rounds, fixed)


def schedule_rounds(radio: Any, settings: Mapping[str, Any], sigma_dp: float, policy: str = "proposed",
                    variant: str = "paper", seed: int = 0, max_rounds: int | None = None) -> RoundsSchedule:
    """Seed 004 Alg. 2 for a whole run (every client uploads T0 = ``settings["T"]`` times), in one call.

    Kept per process (the last ``SCHEDULE_CACHE_SIZE``), keyed by every input it reads
    (:func:`_schedule_key`): a repeated call returns the same (read-only) schedule, which equals a fresh
    computation (tested); the plan, its figures and the explorer's curves share them.

    ``radio``: a :class:`~fedbound.scheduling.wireless.WirelessSetting`; ``settings``: the bound constants
    (``mu L G0 M phi1 phi2 vphi1 vphi2 eps_P``), ``C``, ``R``, ``n_params``, ``T`` and, for the fixed
    policies, ``eta_F``, ``eta_P``, ``lam`` (the paper's defaults 0.01, 0.01, 0.5).  ``policy``:
    ``proposed`` (KM + eta_F* + P7 per client), ``error_free`` (the same with every BER 0), and the baselines
    of spec Sec. 6.4 with fixed rates: ``non_adjustment`` (KM), ``round_robin``, ``random``.
    """
    if policy not in POLICIES:
        raise ParameterError("policy", policy, "one of " + ", ".join(POLICIES))
    key = _schedule_key(radio, settings, sigma_dp, policy, variant, seed, max_rounds)
    return _SCHEDULES.get(key, lambda: _read_only(_schedule_rounds(radio, settings, sigma_dp, policy, variant,
                                                                   seed, max_rounds)))


def _read_only(sched: RoundsSchedule) -> RoundsSchedule:
    """``sched`` with its arrays read-only: a kept schedule is shared between callers."""
    for value in vars(sched).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return sched


def _schedule_rounds(radio: Any, settings: Mapping[str, Any], sigma_dp: float, policy: str, variant: str,
                     seed: int, max_rounds: int | None) -> RoundsSchedule:
    """:func:`schedule_rounds` computed (no cache)."""
    scheduler = {"round_robin": "round_robin", "random": "random"}.get(policy, "km")
    run = _schedule_run(radio, int(settings["T"]), scheduler, int(seed), max_rounds, policy != "error_free")
    c = _consts(settings)
    n, t = radio.num_clients, len(run.rounds)
    assignment = np.full((t, n), -1, dtype=np.int64)
    for i, r in enumerate(run.rounds):
        for client, channel in r.pairs:
            assignment[i, client] = channel
    power = np.vstack([r.power_w for r in run.rounds])
    rho_L = np.vstack([r.uplink_rho for r in run.rounds])
    rho_G = np.vstack([r.downlink_rho for r in run.rounds])
    selected = assignment >= 0
    mean_rho = (rho_L * selected).sum(1) / np.maximum(selected.sum(1), 1)
    theta = np.asarray(wb.THETA_L.evaluate(C=c["C"], sigma_dp=sigma_dp, R=c["R"], n_params=c["n_params"],
                                           rho_L=mean_rho).value, dtype=float)
    common = {k: c[k] for k in ("C", "R", "n_params", "phi1", "phi2", "vphi1", "vphi2")}
    gamma = np.asarray(wb.GAMMA_NEXT.evaluate(theta_L=theta[:, None], rho_G=rho_G, sigma_dp=sigma_dp,
                                              variant=variant, **common).value, dtype=float)
    warns: list[str] = []
    cert = None
    if policy in ("proposed", "error_free"):
        eta_F = wb.optimal_eta_F(c["mu"], c["L"], c["phi1"])
        eps_F = wb.optimal_eps_F(c["mu"], c["L"], c["phi1"], c["phi2"], c["vphi1"])
        sol = solve_P7(c["eps_P"], c["mu"], gamma, eps_F, c["G0"], c["M"], variant)
        eta_P, lam, Phi = sol.eta_P, sol.lam, sol.Phi
        cert = sol.certificate()
    else:
        eta_F = float(settings["eta_F"])
        eps_F = float(wb.EPS_F(eta_F=eta_F, mu=c["mu"], L=c["L"], phi1=c["phi1"], phi2=c["phi2"],
                               vphi1=c["vphi1"]))
        if not 0 < eps_F < 1:
            warns.append(f"eta_F = {eta_F:g} gives eps_F = {eps_F:.6g}, outside (0, 1): WPFL (Zhao et al. "
                         "2025), eq. (28b), C11 fails and Theorem 2 does not contract")
        eta_P = np.full((t, n), float(settings["eta_P"]))
        lam = np.full((t, n), float(settings["lam"]))
        Phi = np.asarray(wb.PHI.evaluate(eta_P=eta_P, lam=lam, Gamma_n=gamma, eps_F_mean=eps_F, G0=c["G0"],
                                         mu=c["mu"], M=c["M"], variant=variant).value, dtype=float)
    eps_P = np.asarray(wb.EPS_P.evaluate(eta_P=eta_P, lam=lam, mu=c["mu"]).value, dtype=float)
    jain = wb.jain_indices(Phi)
    return RoundsSchedule(policy, variant, float(sigma_dp), assignment, power, rho_L, rho_G, theta,
                          np.full(t, eta_F), np.full(t, eps_F), gamma, eta_P, lam, eps_P, Phi, Phi.max(1),
                          jain, run, cert, tuple(warns))

# ---------------------------------------------------------------------------------------------------------
# The plan: recommendation first (fedbound plan wpfl)
# ---------------------------------------------------------------------------------------------------------
SHORT = "WPFL (Zhao et al. 2025)"
RADIO_KEYS = {"N": "num_clients", "K": "num_subchannels", "n_params": "n_params", "R": "R",
              "tau_max": "tau_max",
              "P_th_dbm": "P_th_dbm", "P_bs_dbm": "P_bs_dbm", "bandwidth_hz": "total_bandwidth_hz",
              "N0_dbm_hz": "noise_dbm_per_hz", "pathloss_1m_db": "pathloss_1m_db",
              "pathloss_exponent": "pathloss_exponent", "M_qam": "qam_order", "d_min": "distance_min",
              "d_max": "distance_max"}


def radio_setting(settings: Mapping[str, Any]) -> Any:
    """The radio side (:class:`~fedbound.scheduling.wireless.WirelessSetting`, Table I) of a [wpfl] setting;
    keys absent from ``settings`` take WirelessSetting's Table I defaults."""
    from fedbound.scheduling.wireless import WirelessSetting

    if settings.get("d_max", 100.0) < settings.get("d_min", 10.0):
        raise ParameterError("d_max", settings["d_max"], f"[d_min, inf) = [{settings['d_min']}, inf)")
    return WirelessSetting(**{new: settings[old] for old, new in RADIO_KEYS.items() if old in settings})


_NOTE_ORDERS = tuple(float(a) for a in range(2, 65))


def _psi1_note(s: Mapping[str, Any], sigma: float) -> str | None:
    from fedbound.accounting import epsilon, qa_gaussian_log_psi

    log_psi, log_psi1, _, _ = qa_gaussian_log_psi(s["C"], sigma, s["R"], s["q"])
    if log_psi1 + s["eps"] / s["T"] >= log_psi + math.log(1e-12):
        return None
    try:  # RDP at the integer orders 2-64: an upper bound within a few 0.1 % of the full order set's,
        # at a tenth of its cost (this note is written on every plan in this regime)
        tight = f"{float(epsilon(sigma / (2 * s['C']), s['q'], s['T'], s['delta'], orders=_NOTE_ORDERS)):.4g}"
    except (ValueError, OverflowError):
        tight = "unbounded"
    return (f"{SHORT}, Theorem 1, eqs. (23)-(24): at sigma_DP = {sigma:.4g} psi1 = e^({float(log_psi1):.4g}) "
            f"underflows, so delta_Q does not depend on eps and Theorem 1 certifies eps = 0 for {s['T']} "
            f"uploads; its delta_Q is a per-outcome delta (Def. 2, eq. (5)), not set-based (eps, delta)-DP: "
            f"the "
            f"subsampled Gaussian mechanism at this sigma (sensitivity 2C) gives eps <= {tight} at delta = "
            f"{s['delta']:g}")


def _theorem4(sched: RoundsSchedule, s: Mapping[str, Any]) -> float:
    """Theorem 4 (eq. (31)) after the run's rounds with eps_P^max = the target and Phi^max over the run."""
    return float(wb.geometric_bound(s["eps_P"], sched.rounds, s["D0"], float(sched.Phi.max())))


def certify(s: Mapping[str, Any], sched: RoundsSchedule, sigma: float, bound: float, vacuous: bool,
            variant: str, full: bool = False) -> Any:
    """The plan's certificate.  Domain: T0, K and the radio are the setting's (held); per round the schedule
    is exact KM, the closed-form eta_F* and P7 per client.  Check: P7 re-solved by scipy's bounded scalar
    minimiser (the spec's normative method) for every client of the first round (every round with
    ``full``); the golden-section optimum must be no worse and within 1e-6.  Privacy: the T0 uploads of a
    client re-accounted exactly, sensitivity 2C: at q = 1 the analytic Gaussian; at q < 1 the PLD eps of the
    exact calibration's own final evaluation (:func:`fedbound.bounds.wpfl.tight_calibration`, stated
    discretisation 1 % of eps), with ``full`` dp-accounting's PLD afresh at discretisation 1e-4."""
    from fedbound.scheduling.certificate import Certificate, OptimumCheck, PrivacyCheck, reaccount

    c = _consts(s)
    rows = slice(None) if full else slice(0, 1)
    gamma, eps_F = sched.Gamma[rows], sched.eps_F[rows, None]
    ref = solve_P7(c["eps_P"], c["mu"], gamma, eps_F, c["G0"], c["M"], variant, method="scipy").Phi
    ours = sched.Phi[rows]
    gap = float(np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-300)))
    agrees = bool(np.all(ours <= ref * (1 + 1e-9) + 1e-12) and gap <= 1e-6)
    worst = np.unravel_index(int(np.argmax(ref)), ref.shape)
    check = OptimumCheck("scipy minimize_scalar (bounded) per client and interval of P7", int(ref.size),
                         {"round": int(worst[0]), "client": int(worst[1])}, float(ref.max()), agrees,
                         note=f"largest relative difference from the golden-section optimum {gap:.2e}")
    T0, sens, q = int(s["T"]), 2 * float(s["C"]), float(s["q"])
    stage = f"uplink ({T0} uploads per client)"
    tight = wb.tight_calibration(s["eps"], s["delta"], q, T0)
    deployed_is_tight = math.isclose(tight["z"] * sens, sigma, rel_tol=1e-12)
    if q < 1 and deployed_is_tight and tight["eps_achieved"] is not None and not full:
        privacy = (PrivacyCheck(stage, sigma, float(s["eps"]), float(s["delta"]), tight["eps_achieved"],
                                tight["method"] + " (the calibration's own final evaluation)",
                                sigma_exact=sigma, slack=tight["slack"]),)
    elif q < 1:  # PLD afresh: an upper bound off by at most T0 x the discretisation (1e-4 with full)
        from fedbound.accounting.pld import discretization_for, discretization_for_target, pld_epsilon

        want = 1e-4 if full else discretization_for_target(s["eps"], T0)  # eps error <= 1 % of the target
        disc = float(discretization_for(sigma / sens, q, T0, want))
        privacy = (PrivacyCheck(stage, sigma, float(s["eps"]), float(s["delta"]),
                                float(pld_epsilon(sigma / sens, q, T0, s["delta"], disc)),
                                f"PLD (dp-accounting), discretisation {disc:.0e}",
                                sigma_exact=tight["z"] * sens, slack=T0 * disc),)
    else:
        privacy = (reaccount(stage, sigma, sens, s["eps"], s["delta"], steps=T0,
                             sigma_exact=tight["z"] * sens),)
    domain = {"T0": f"{T0} uploads per client (the setting's; held)",
              "K": f"{int(s['K'])} subchannels (held)",
              "rounds": f"{sched.rounds}: until every client has uploaded T0 times (what the run does)",
              "schedule": "per round: Kuhn-Munkres assignment (exact), eta_F* (closed form), P7 per client "
                          "(golden section on each feasible interval, convex by Theorem 5)"}
    notes = (f"Theorem 4 after {sched.rounds} rounds: {bound:.4g} against D0 = {float(s['D0']):g}",)
    return Certificate(domain=domain, search="exact per round (KM, closed form, convex 1-D searches)",
                       check=check, privacy=privacy, vacuous=vacuous, notes=notes)


PLAN_MAX_CLIENT_ROUNDS = 100_000
"""Clients x rounds the plan's schedules may hold (it solves P7 for every client in every round of two whole
runs, ~35 us per client-round: 100,000 take ~3.5 CPU s; issue 36: N = 1000 had no answer in 150 s)."""


def _check_plan_size(s: Mapping[str, Any]) -> None:
    """ParameterError naming N, T and K when the run's schedule exceeds :data:`PLAN_MAX_CLIENT_ROUNDS`: the
    KM schedule needs at least ceil(N T0 / K) rounds for every client to upload T0 times."""
    n, t0, k = int(s["N"]), int(s["T"]), int(s["K"])
    rounds = -(-n * t0 // k)
    if s.get("max_rounds"):
        rounds = min(rounds, int(s["max_rounds"]))
    if n * rounds > PLAN_MAX_CLIENT_ROUNDS:
        raise ParameterError("N", n, f"N x rounds <= {PLAN_MAX_CLIENT_ROUNDS:,} client-rounds for plan (N = "
                             f"{n} clients over the >= {rounds:,} rounds in which K = {k} subchannels give "
                             f"each T0 = {t0} uploads: {n * rounds:,})", "the plan solves P7 for every "
                             "client in every round; fedbound schedule wpfl --rounds R schedules the first R "
                             "rounds")


def plan(settings: Mapping[str, Any], variant: str = "paper", check: bool = False) -> Any:
    """Seed 004 design for one [wpfl] setting: sigma_DP under proven accounting, the min-max schedule it
    implies, and the PL bound it predicts (Theorem 4, eq. (31)); the paper's Theorem 1 sigma beside it.
    The recommendation's T is the number of communication rounds the schedule (and the run) takes for
    every client to upload T0 = ``settings["T"]`` times; ``check``: the certificate re-solves P7 for every
    round (not only the first).

    ``settings``: N, K, T (uploads per client, the paper's T0), eps, delta, C, R, q, the radio keys, the
    bound constants mu, L, G0, M, phi1, phi2, vphi1, vphi2, eps_P, D0 (initial PL distance) and
    channel_seed.  The schedule is the proposed policy (KM + eta_F* + P7) for the whole run.
    """
    from fedbound.accounting import qa_gaussian_delta, qa_gaussian_epsilon
    from fedbound.errors import FedboundError
    from fedbound.scheduling.results import Plan, Recommendation, Row

    s = dict(settings)
    _check_plan_size(s)
    radio = radio_setting(s)
    T, seed = int(s["T"]), int(s.get("channel_seed", 0))
    warnings: list[str] = []
    tight_cal = wb.tight_calibration(s["eps"], s["delta"], s["q"], T)  # exact: what the plan deploys
    sigma_tight = tight_cal["z"] * 2.0 * float(s["C"])
    try:
        sigma_paper: float | None = wb.noise(s, T, "paper")["uplink"]
    except FedboundError as exc:
        sigma_paper = None
        warnings.append(f"{SHORT}, Theorem 1 (Sec. IV search): {exc}")
    policy = "proposed"  # the recommendation is the min-max schedule; its rounds are what the run does
    tight = schedule_rounds(radio, s, sigma_tight, policy, variant, seed, s.get("max_rounds"))
    if s.get("policy") not in (None, "proposed"):
        other = schedule_rounds(radio, s, sigma_tight, s["policy"], variant, seed, s.get("max_rounds"))
        warnings.append(f"{SHORT}: the setting's policy '{s['policy']}' is a baseline; the recommendation is "
                        f"the proposed schedule ({tight.rounds} rounds"
                        + ("" if other.rounds == tight.rounds else f"; '{s['policy']}' runs {other.rounds}")
                        + "): train with policy = \"proposed\" to run it")
    paper = (schedule_rounds(radio, s, sigma_paper, policy, variant, seed, s.get("max_rounds"))
             if sigma_paper is not None else None)
    bound_tight = _theorem4(tight, s)
    bound_paper = _theorem4(paper, s) if paper is not None else None
    eta_F = wb.optimal_eta_F(s["mu"], s["L"], s["phi1"])
    eps_F = wb.optimal_eps_F(s["mu"], s["L"], s["phi1"], s["phi2"], s["vphi1"])
    if sigma_paper is not None:
        note = _psi1_note(s, sigma_paper)
        if note:
            warnings.append(note)
        delta_paper = float(qa_gaussian_delta(s["eps"], s["C"], sigma_paper, s["R"], s["q"], T))
        eps_thm1 = float(qa_gaussian_epsilon(s["delta"], s["C"], sigma_paper, s["R"], s["q"], T))
    else:
        delta_paper = eps_thm1 = None
    for sched in (tight, paper):
        if sched is not None and sched.certificate is not None and np.any(sched.certificate.at_lower_edge):
            warnings.append(f"{SHORT}, P7 (39): some client's optimum sits at an end of its feasible "
                            "interval")
    warnings.extend(tight.warnings)
    vacuous = bound_tight >= float(s["D0"])
    rec = Recommendation(
        T=tight.rounds, K=int(s["K"]), sigma={"uplink": sigma_tight}, bound=bound_tight,
        accounting=f"Poisson-subsampled Gaussian mechanism calibrated exactly ({tight_cal['method']}), "
                   f"sensitivity 2C, composed over T = {T} uploads per client",
        why=("VACUOUS: " if vacuous else "") + (
             f"T = {tight.rounds} rounds: the {policy} schedule needs them for every client to upload "
             f"T0 = {T} times; "
             f"sigma_DP = {sigma_tight:.4g} is the smallest noise whose exact (set-based) accounting "
             "meets "
             f"(eps, delta) = ({s['eps']:g}, {s['delta']:g}) over {T} uploads; the proposed min-max schedule "
             f"(KM, eta_F* = {eta_F:.4g}, P7 per client) then runs {tight.rounds} rounds and Theorem 4 "
             "bounds "
             f"every PL model's distance by {bound_tight:.4g}"
             + (f", not below the initial D0 = {float(s['D0']):g}: no design with these T0 and K is "
                "supported by the bound" if vacuous else "")),
        premises=("every upload is clipped to norm C, so two neighbouring uploads differ by at most 2C "
                  "(eq. (2))",
                  "mini-batches are Poisson samples at rate q with one local step (eq. (20a); the paper "
                  "states "
                  "neither)",
                  "quantization (eq. (8)) and bit errors (eq. (15)) are post-processing of the Gaussian "
                  "release",
                  "the bound constants (mu, L, G0, M, phi's, eps_P, D0) hold for the model (Assumption 1)"),
        extra={"rounds": tight.rounds, "uploads_per_client": T, "vacuous": vacuous,
               "max_bound_first_round": float(tight.max_bound[0]),
               "eta_F": eta_F})
    rows = (
        Row("sigma_DP", sigma_paper, sigma_tight,
            "paper: Theorem 1 (per-outcome delta); tight: exact calibration, set-based"),
        Row("sigma_DP, RDP calibration", None, tight_cal["z_rdp"] * 2.0 * float(s["C"]),
            "valid, not tight: what the exact calibration saves (fedbound train runs the exact one)"),
        Row("delta certified at the paper's sigma", delta_paper, None, "Theorem 1, eq. (23)"),
        Row("eps certified by Theorem 1 at the paper's sigma", eps_thm1, None,
            "0 where psi1 underflows (S5)"),
        Row("rounds to use T uploads per client", paper.rounds if paper else None, tight.rounds,
            "KM: at most K clients per round"),
        Row("eta_F* (F28)", eta_F, eta_F, "closed form, every client and round"),
        Row("eps_F* (F28)", eps_F, eps_F, "FL contraction factor"),
        Row("min-max Phi, first round", float(paper.max_bound[0]) if paper else None,
            float(tight.max_bound[0]),
            "max_n Phi_n* (Theorem 3)"),
        Row("Jain's index of Phi*, first round", float(paper.jain_index[0]) if paper else None,
            float(tight.jain_index[0]), "F33 over clients"),
        Row("Theorem 4 PL bound after the run", bound_paper, bound_tight,
            f"eps_P = {s['eps_P']:g}, D0 = {s['D0']:g}"),
    )
    optima = {"P7": tight.certificate} if tight.certificate is not None else {}
    optima["eta_F"] = Optimum(x=eta_F, fun=eps_F, success=True, method="closed form (F28)",
                              message="eps_F is a convex quadratic in eta_F; its vertex lies in (0, 1)")
    differences = ()
    if sigma_paper is not None:
        differences = (f"the paper's Theorem 1 noise sigma_DP = {sigma_paper:.4g} is "
                       f"{sigma_tight / sigma_paper:.3g}"
                       f" times smaller than the noise that meets (eps, delta) in the standard sense",)
    data = {"sigma_dp_paper": sigma_paper, "sigma_dp_tight": sigma_tight, "delta_Q_theorem1": delta_paper,
            "eps_theorem1": eps_thm1, "eta_F_star": eta_F, "eps_F_star": eps_F, "rounds": tight.rounds,
            "theta_L_min": float(tight.theta_L_min[0]), "max_bound": float(tight.max_bound[0]),
            "jain_index": float(tight.jain_index[0]), "bound_theorem4": bound_tight,
            "bound_theorem4_paper_sigma": bound_paper}
    if vacuous:
        warnings.insert(0, f"{SHORT}, Theorem 4 eq. (31): the bound after the run ({bound_tight:.4g}) is "
                           f"not below the initial distance D0 = {float(s['D0']):g}: vacuous for this design "
                           f"(T0 = {T}, K = {int(s['K'])} are the setting's)")
    data["vacuous"] = vacuous
    certificate = certify(s, tight, sigma_tight, bound_tight, vacuous, variant, check)
    return Plan(paper="wpfl", title=f"{SHORT}: N = {s['N']}, K = {s['K']}, T0 = {T}, eps = {s['eps']:g}, "
                                    f"delta = {s['delta']:g}", variant=variant, recommendation=rec, rows=rows,
                optima=optima, warnings=tuple(warnings), data=data, differences=differences,
                certificate=certificate)


# ---------------------------------------------------------------------------------------------------------
# Claims about the channel model and the optimisers (spec 004 S6, S17, S18, S22, Sec. 4.7)
# ---------------------------------------------------------------------------------------------------------
from fedbound.bounds.claims import Claim, Computed, Region  # noqa: E402


def _wireless() -> Any:
    from fedbound.scheduling import wireless

    return wireless


BER = Computed("ber", lambda v, variant: _wireless().ber_mqam(v["gamma"], int(v["M_qam"])),
               "M-QAM bit error rate (13)")
RHO = Computed("rho", lambda v, variant: _wireless().element_error_prob(v["ber"], v["R"]),
               "element error probability (14)")
RATE = Computed("rate", lambda v, variant: _wireless().uplink_rate(1e6, _wireless().snr(v["P"], v["h2"],
                                                                                        1e-14)),
                "uplink rate (11)-(12) on B = 1 MHz, noise 1e-14 W")
_TV3_G = {"eps_P": 0.999, "mu": 0.13, "G0": 2.0, "M": 1.0, "eps_F_mean": 0.9812073277447267}
_TV3_BASE = {"C": 3.0, "sigma_dp": 0.006, "R": 16, "n_params": 7850, "phi1": 0.1, "phi2": 0.001,
             "vphi1": 0.001, "vphi2": 1.0, "theta_L": 1.6229940589e-01}


def _phi_star_of_rho_g(v: Mapping[str, Any], variant: str) -> np.ndarray:
    gamma = wb.GAMMA_NEXT.evaluate(_TV3_BASE, rho_G=v["rho_G"], variant=variant).value
    return solve_P7(v["eps_P"], v["mu"], gamma, v["eps_F_mean"], v["G0"], v["M"], variant).Phi


PHI_STAR = Computed("Phi_star", _phi_star_of_rho_g, "min of P7 for client n (39)")
P7_OPT = Computed("P7", lambda v, variant: solve_P7(v["eps_P"], v["mu"], v["Gamma_n"], v["eps_F_mean"],
                                                    v["G0"], v["M"], variant).Phi, "P7 optimum")
_P7_REGION = Region({"mu": (0.01, 1.99), "_f": (0.0, 0.999), "G0": (1e-3, 1e3, "log"),
                     "M": (1e-3, 1e3, "log"), "Gamma_n": (1e-4, 1e5, "log"), "eps_F_mean": (1e-3, 0.999)},
                    derived=(("eps_P", lambda v: min(1 - v["mu"] ** 2 / 4 * (1 - v["_f"]), 1 - 1e-5)),))


def _p7_interior_and_grid(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    sol = solve_P7(v["eps_P"], v["mu"], v["Gamma_n"], v["eps_F_mean"], v["G0"], v["M"], variant)
    _, intervals = wb.feasible_intervals(v["eps_P"], v["mu"])
    best = math.inf
    for lo, hi in intervals:
        grid = np.linspace(lo, hi, 20003)[1:-1]
        values = _phi(grid, np.asarray(v["Gamma_n"]), v["eps_P"], v["eps_F_mean"], v, variant)
        best = min(best, float(np.nanmin(values)))
    phi = float(sol.Phi)
    ok = phi <= best * (1 + 1e-9) and not bool(sol.edge) and int(sol.interval) == 0
    return ok, (f"Phi* = {phi:.12g} (interval {int(sol.interval)}, edge {bool(sol.edge)}) vs grid min "
                f"{best:.12g}")


def _blow_up(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    (_, e2, e3), intervals = wb.feasible_intervals(v["eps_P"], v["mu"])
    near = [e2 * (1 - 1e-9)] + ([e3 * (1 + 1e-9)] if len(intervals) > 1 else [])
    far = _phi(np.array(near), np.asarray(v["Gamma_n"]), v["eps_P"], v["eps_F_mean"], v, variant)
    opt = float(solve_P7(v["eps_P"], v["mu"], v["Gamma_n"], v["eps_F_mean"], v["G0"], v["M"], variant).Phi)
    return bool(np.all(far > 1e3 * opt)), f"Phi near eta2/eta3 = {far.tolist()}, Phi* = {opt:.6g}"


def _brute_force_pairs(rho: np.ndarray, ok: np.ndarray) -> tuple[int, float]:
    import itertools

    n, k = rho.shape
    best = (0, 0.0)
    for chans in itertools.product(range(-1, k), repeat=n):
        used = [c for c in chans if c >= 0]
        if len(used) != len(set(used)) or any(c >= 0 and not ok[i, c] for i, c in enumerate(chans)):
            continue
        total = sum(rho[i, c] for i, c in enumerate(chans) if c >= 0)
        if len(used) > best[0] or (len(used) == best[0] and total < best[1]):
            best = (len(used), total)
    return best


def _km_is_optimal(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(int(v["seed"]))
    n, k = int(v["n"]), int(v["k"])
    rho = 10.0 ** rng.uniform(-13, 0, (n, k))
    ok = rng.random((n, k)) >= v["p_infeasible"]
    pairs = _wireless().assign_channels(rho, ok)
    count, total = _brute_force_pairs(rho, ok)
    mine = sum(rho[i, c] for i, c in pairs)
    same = math.isclose(mine, total, rel_tol=1e-12, abs_tol=1e-300)
    good = len(pairs) == count and all(ok[i, c] for i, c in pairs) and same
    return good, f"KM {len(pairs)} pairs, sum rho {mine:.6g}; brute force {count} pairs, {total:.6g}"


def _minmax_beats_every_assignment(v: Mapping[str, Any], variant: str) -> tuple[bool, str]:
    """P1 (Sec. VI-D): with Theta_L,min from KM, max_n Phi_n* is no larger than under any other
    max-cardinality assignment (P7 solved for each)."""
    import itertools

    rng = np.random.default_rng(int(v["seed"]))
    n, k = 4, 3
    rho = 10.0 ** rng.uniform(-10, -0.5, (n, k))
    rho_g = 10.0 ** rng.uniform(-12, -0.5, n)
    perms = list(itertools.permutations(range(n), k))
    means = np.array([np.mean([rho[c, j] for j, c in enumerate(clients)]) for clients in perms])
    pairs = _wireless().assign_channels(rho, np.ones((n, k), bool))
    means = np.append(means, np.mean([rho[i, c] for i, c in pairs]))  # the last row: KM's
    theta = np.asarray(wb.THETA_L.evaluate(_TV3_BASE, rho_L=means).value)[:, None]
    gamma = wb.GAMMA_NEXT.evaluate({**_TV3_BASE, "theta_L": theta}, rho_G=rho_g[None, :]).value
    worst = solve_P7(0.999, 0.13, gamma, _TV3_G["eps_F_mean"], 2.0, 1.0).Phi.max(axis=1)
    km, values = float(worst[-1]), worst[:-1]
    return km <= min(values) * (1 + 1e-9), (f"KM min-max {km:.10g}, best of {len(values)} assignments "
                                            f"{min(values):.10g}")


CLAIMS: tuple[Claim, ...] = (
    Claim("S6a", "the M-QAM bit error rate decreases in the SNR", BER, "decreasing",
          Region({"gamma": (1e-2, 1e3, "log"), "M_qam": (256, 256)}), wrt="gamma",
          source="eq. (13); spec S6"),
    Claim("S6b", "the element error probability increases in the BER", RHO, "increasing",
          Region({"ber": (1e-12, 0.5, "log"), "R": (1, 32)}, integers=frozenset({"R"})), wrt="ber",
          source="eq. (14); spec S6"),
    Claim("S6c", "the element error probability increases in R", RHO, "increasing",
          Region({"ber": (1e-12, 0.5, "log"), "R": (1, 32)}, integers=frozenset({"R"})), wrt="R",
          source="eq. (14); spec S6"),
    Claim("S6d", "the rate increases in the transmit power, so P = P_th is optimal", RATE, "increasing",
          Region({"P": (1e-3, 1.0, "log"), "h2": (1e-14, 1e-9, "log")}), wrt="P",
          source="eqs. (11)-(12); S6"),
    Claim("S17", "P7's minimiser is interior, in Omega_0, and no grid point beats it", P7_OPT, "predicate",
          _P7_REGION, other=_p7_interior_and_grid, source="Theorem 5; spec S17"),
    Claim("S17b", "Phi grows without bound at eta2- and eta3+ (lambda -> 0)", P7_OPT, "predicate", _P7_REGION,
          other=_blow_up, source="spec S17"),
    Claim("S18", "Kuhn-Munkres returns the brute-force optimum of P3 (max cardinality, then min sum rho)",
          BER, "predicate", Region({"seed": (0, 10**6), "n": (1, 5), "k": (1, 4), "p_infeasible": (0.0, 0.6)},
                                   integers=frozenset({"seed", "n", "k"})),
          other=_km_is_optimal, source="P3 (33), Sec. VI-B; spec S18, E13"),
    Claim("S22", "Phi* is increasing in the client's downlink error probability rho_G", PHI_STAR,
          "increasing",
          Region({"rho_G": (1e-12, 0.9, "log"), **{k: (v, v) for k, v in _TV3_G.items()}}), wrt="rho_G",
          source="F32; spec S22"),
    Claim("P1", "the decomposed schedule (KM, then P7 per client) is min-max optimal over the assignments",
          BER, "predicate", Region({"seed": (0, 10**6)}, integers=frozenset({"seed"})),
          other=_minmax_beats_every_assignment, source="Sec. VI-D (optimality for P1); spec Sec. 4.7"),
)
"""The optimiser claims of seed 004 (fedbound.bounds.wpfl.CLAIMS has the formula claims)."""
