"""WPFL: bounds of wireless personalized FL with quantization-assisted DP (WPFL, spec 004).

X. Zhao et al., "Enhancing Convergence, Privacy and Fairness for Wireless Personalized Federated Learning:
Quantization-Assisted Min-Max Fair Scheduling" (IEEE, 2025).  Lemma 1, Theorems 2-5 and the learning-rate /
lambda results of Sec. VI-C as data (spec 004 F18-F33), plus ONE noise function :func:`noise` (Theorem 1,
eqs. (23)-(24), through :mod:`fedbound.accounting.quantized_gaussian`), and ``CLAIMS``: the formula claims
(S1-S5, S7-S16, S19-S21, F32; at the end of this module).  The per-round min-max schedule (P1-P7) and the
optimiser claims are in :mod:`fedbound.scheduling.wpfl`.

Where the seed and the spec disagree: the spec's readings below were checked against the seed text
(eqs. (7), (26), (28d), (30), (37)-(38), (47)-(69)); no value of spec 004 Sec. 9 had to change.

Parameters (sympy names = code names): ``rho_L`` is the *mean* uplink element-error probability over the
round's selected clients (F19 divides the sum by |N_t|), ``D`` the (common) distance E||w_hat - w*||^2 of
the selected clients' received global models, ``Gamma_n`` = Gamma_{n,t+1} of F22, ``eps_F_mean`` the mean
FL contraction factor over the selected clients (F25), ``eps_P`` the common PL contraction target (C1).

Variants (spec 004 Sec. 8; ``"paper"`` reproduces the printed formulas):

* ``corrected``: E4 (Gamma_0's last term uses E_G^max, as the derivation (54c) gives) and E6 (drift constant
  kappa = (G0 + M mu)^2 / mu^2, dimensionally consistent with (62)-(63)).
* ``psi_young`` (E7): Psi with eta^2/lambda (what Young's inequality on the shown cross term gives) instead
  of the printed eta^3/lambda.  Flag only: spec and fedbound keep the printed Psi by default.

Errata handled without a switch (decisions, checked against the seed text):

* E1: E_G^max = Delta_G / 2 = C/(2^R - 1) (the printed Delta_L/2 contradicts the same line's beta_G C).
* E2: Lemma 1's "-u eta" is read -mu eta (the seed's (47d)-(47e) and (28b) have mu).
* E5: Gamma_{t+1} depends on the receiving client n through rho_{n,G}; the code writes Gamma_n.
* E8: "Psi first increases and then decreases with lambda" is false: Psi is strictly convex in lambda
  (declared claim S12b with counterexamples).
* E9: the closed form (69) of d^2 Phi / d eta^2 is not implemented; the sympy derivative is
  (``PHI_P7.derivative("eta_P", 2)``), and Theorem 5's conclusion is a declared claim (S16).
* E18: Omega_1 is non-empty iff eps_P < 2 - mu (strict; at equality eta_3 = 1).
* E23: lambda(eta) (37) needs mu < 2 and Theorem 5 needs 1 - mu^2/4 <= eps_P < 1; outside, a DomainError
  (:func:`feasible_intervals`); the non-convexity below 1 - mu^2/4 is a declared counterexample of S16.

Noise (:func:`noise`), stage ``"uplink"`` (sigma_DP per element of every upload), for ``T`` uploads per
client (the paper's T0):

* ``"paper"``: Theorem 1's one-dimensional search, ``calibrate_sigma_dp(eps, delta, C, R, q, T)``.  At the
  paper's settings psi1 underflows and delta_Q is a per-outcome delta (spec E17): not a set-based guarantee.
* ``"tight"``: the Poisson-subsampled Gaussian (RDP, sensitivity 2C: two clipped models differ by at most
  2C) over the T uploads, ``fedbound.accounting.calibrate_noise``; quantization and bit errors are
  post-processing of that release, so this meets (eps, delta) in the standard sense.  The plan deploys, and
  ``fedbound train`` (``[train] noise = "tight"``) trains, the exact calibration of the same release,
  :func:`tight_calibration` (the analytic
  Gaussian at q = 1, PLD at a stated discretisation otherwise), ~24-27 % less noise at the examples.
* ``"gaussian"``: the DP baseline "Gaussian mechanism ignoring quantization" of Fig. 2 (classic constant,
  basic composition over T releases, sensitivity 2C; proven only for eps/T < 1).
* ``"moments"``: the baseline "moments accountant" (Abadi et al. 2016, Thm 1, sampling rate q).
* ``"none"``: the "WPFL without DP" baseline (sigma = 0).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from fedbound.bounds.lazy import Theory
from fedbound.checks import check_real
from fedbound.errors import DomainError, ParameterError

SEED = "004"
Number = float | np.ndarray
__all__ = ["NOTATION", "THEOREMS", "CLAIMS", "NOISE_METHODS", "noise", "tight_calibration", "jain_index",
           "feasible_intervals", "optimal_eta_F", "geometric_bound", "theta_L", "gamma_next", "Phi",
           "lam_of_eta"]


_THEORY = Theory("fedbound.bounds.wpfl_theory")
NOTATION = _THEORY.notation()
(E_L_MAX, E_G_MAX, THETA_L, LEMMA1, EPS_F, H1, GAMMA0, GAMMA1, GAMMA_NEXT, THM2_STEP,
 GEOMETRIC, ETA_F_STAR, EPS_F_STAR, EPS_P, PSI, G_N, KAPPA, PHI, PHI_MAX, LAM_OF_ETA, ETA1,
 ETA2, ETA3, PHI_P7, GAMMA2, GAMMA3) = _THEORY.theorems(
    "E_L_MAX E_G_MAX THETA_L LEMMA1 EPS_F H1 GAMMA0 GAMMA1 GAMMA_NEXT THM2_STEP GEOMETRIC ETA_F_STAR "
    "EPS_F_STAR EPS_P PSI G_N KAPPA PHI PHI_MAX LAM_OF_ETA ETA1 ETA2 ETA3 PHI_P7 GAMMA2 GAMMA3")
PHI_P7_D1, PHI_P7_D2, PSI_D_LAM = _THEORY.theorems("PHI_P7_D1 PHI_P7_D2 PSI_D_LAM")
THEOREMS = _THEORY.mapping("THEOREMS")


def __getattr__(name: str) -> Any:
    """The declarations' other names (symbols, definitions, conditions), from wpfl_theory (imports sympy)."""
    return _THEORY.attribute(__name__, name)


VARIANTS = ("paper", *NOTATION.variants)

# ---------------------------------------------------------------------------------------------------------
# Plain-number functions (each one theorem of the table above, or a closed form of Sec. VI-C)
# ---------------------------------------------------------------------------------------------------------


def theta_L(C: float, sigma_dp: float, R: int, n_params: int, rho_selected: Sequence[float] | np.ndarray
            ) -> float:
    """Theta_L^t = coef * mean(rho of the selected clients); 0 for an empty selection.
    WPFL Lemma 1, eq. (26); spec 004 F19."""
    r = check_real("rho_selected", rho_selected, 0.0, 1.0)
    if r.size == 0:
        return 0.0
    return float(THETA_L(C=C, sigma_dp=sigma_dp, R=R, n_params=n_params, rho_L=float(r.mean())))


def lemma1_bound(theta: float, C: float, sigma_dp: float, R: int, n_params: int, eta_F: Number, D: Number,
                 mu: float, L: float, phi1: float, phi2: float) -> float:
    """RHS of Lemma 1 with per-client eta_F and D (mean over the selected clients of the eta-coefficient
    times D).  WPFL eq. (26) with E2 (-mu eta); spec 004 F18."""
    e, d = np.broadcast_arrays(check_real("eta_F", eta_F, 0.0, low_open=True), check_real("D", D, 0.0))
    base = LEMMA1(theta_L=theta, C=C, sigma_dp=sigma_dp, R=R, n_params=n_params, eta_F=e, D=0.0, mu=mu, L=L,
                  phi1=phi1, phi2=phi2)
    coef = (1 + phi2) + (1 + phi1) * L**2 * e**2 - mu * e
    return float(np.mean(base) + np.mean(coef * d))


def gamma_next(theta: float, rho_G: Number, C: float, sigma_dp: float, R: int, n_params: int, phi1: float,
               phi2: float, vphi1: float, vphi2: float, variant: str = "paper") -> Number:
    """Gamma_{n,t+1} = h1(rho_G) Theta_L + Gamma_0 rho_G + Gamma_1 (per client through rho_G).
    WPFL eq. (28a); spec 004 F22."""
    return GAMMA_NEXT(theta_L=theta, rho_G=rho_G, C=C, sigma_dp=sigma_dp, R=R, n_params=n_params, phi1=phi1,
                      phi2=phi2, vphi1=vphi1, vphi2=vphi2, variant=variant)


def Phi(eta_P: Number, lam: Number, Gamma_n: Number, eps_F_mean: Number, G0: float, mu: float, M: float,
        variant: str = "paper") -> Number:
    """Phi_n^{t+1} = (1 + lam^3) eta^2 G_n + Psi (Gamma_n + kappa mean eps_F).
    WPFL Theorem 3, eq. (30a); spec 004 F25."""
    return PHI(eta_P=eta_P, lam=lam, Gamma_n=Gamma_n, eps_F_mean=eps_F_mean, G0=G0, mu=mu, M=M,
               variant=variant)


def geometric_bound(rate: Number, steps: Number, init: Number, const: Number) -> Number:
    """r^s init + (r^s - 1)/(r - 1) const: Theorem 2 unrolled (27b) and Theorem 4 (31).  Spec 004 F21, F26."""
    return GEOMETRIC.evaluate(rate=rate, steps=steps, init=init, const=const).require(emit_warnings=False)


def optimal_eta_F(mu: float, L: float, phi1: float) -> float:
    """eta_F* = mu / (2 (1 + phi1) L^2) (Sec. VI-C1, P5; spec 004 F28).  DomainError unless 0 < eta_F* < 1
    (C10: mu < 2 (1 + phi1) L^2; audit A6)."""
    value = float(ETA_F_STAR(mu=mu, L=L, phi1=phi1))
    if not value < 1:
        raise DomainError("mu", mu, f"mu < 2 (1 + phi1) L^2 = {2 * (1 + phi1) * L**2:.6g}",
                          "eta_F* = mu/(2(1+phi1)L^2) must lie in (0, 1) (C10, WPFL Sec. VI-C1)")
    return value


def optimal_eps_F(mu: float, L: float, phi1: float, phi2: float, vphi1: float) -> float:
    """eps_F at eta_F*; DomainError unless in (0, 1) (C11).  WPFL Sec. VI-C1; spec 004 F28."""
    value = float(EPS_F_STAR(mu=mu, L=L, phi1=phi1, phi2=phi2, vphi1=vphi1))
    if not 0 < value < 1:
        raise DomainError("phi2", phi2, f"values giving eps_F* in (0, 1) (here eps_F* = {value:.10g})",
                          "C11 needs (1 + vphi1)(1 + phi2 - mu^2/(4(1+phi1)L^2)) < 1: phi2 < mu^2/(4(1+phi1)"
                          "L^2) and a small vphi1 (WPFL Sec. VI-C1)")
    return value


def lam_of_eta(eta: Number, eps_P: float, mu: float) -> Number:
    """lambda(eta) = ((1 - eps_P)/eta + eta - mu) / (1 - mu/2).  WPFL eq. (37); spec 004 F29."""
    return LAM_OF_ETA(eta_P=eta, eps_P=eps_P, mu=mu)


def feasible_intervals(eps_P: float, mu: float
                       ) -> tuple[tuple[float, float, float], list[tuple[float, float]]]:
    """((eta1, eta2, eta3), [Omega_0, Omega_1 if non-empty]) of (38): Omega_0 = (eta1, eta2), Omega_1 =
    (eta3, 1) iff eps_P < 2 - mu (E18, strict).  DomainError unless mu < 2 and 1 - mu^2/4 <= eps_P < 1
    (E23).  WPFL eq. (38); spec 004 F30."""
    m = float(NOTATION.params["mu"].check(mu))
    e = float(NOTATION.params["eps_P"].check(eps_P))
    if not m < 2:
        raise DomainError("mu", m, "(0, 2)", "lambda(eta) of (37) divides by 1 - mu/2")
    if e < 1 - m**2 / 4:
        raise DomainError("eps_P", e, f"[1 - mu^2/4, 1) = [{1 - m**2 / 4:.10g}, 1)",
                          "below it lambda(eta) > 0 for every eta and Theorem 5 does not apply (WPFL "
                          "(38))")
    root = np.sqrt(max(m**2 - 4 * (1 - e), 0.0))
    eta1, eta2, eta3 = 1 - np.sqrt(e), (m - root) / 2, (m + root) / 2
    intervals = [(float(eta1), float(eta2))]
    if e < 2 - m:
        intervals.append((float(eta3), 1.0))
    return (float(eta1), float(eta2), float(eta3)), intervals


def jain_index(x: Sequence[float] | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (N sum x^2) in [1/N, 1] (WPFL Sec. VII-3; spec 004 F33 with E12b:
    denominator N).  ParameterError for an empty or all-zero vector."""
    arr = check_real("x", x, 0.0)
    top = float(arr.max()) if arr.size else 0.0
    arr = arr / top if top > 0 else arr  # scale invariance; keeps tiny or huge losses from under/overflowing
    square = float(np.sum(arr**2))
    if arr.size == 0 or square == 0:
        raise ParameterError("x", arr.tolist(), "a non-empty, non-negative vector that is not all zero")
    return float(np.clip(np.sum(arr) ** 2 / (arr.size * square), 1.0 / arr.size, 1.0))  # rounding only


def jain_indices(rows: np.ndarray) -> np.ndarray:
    """:func:`jain_index` of every row of a 2-D array (a schedule's Phi per round) at once: the same floats
    as row by row (tested); a row it refuses is refused as :func:`jain_index` refuses it."""
    a = np.asarray(rows, dtype=float)
    if a.ndim != 2 or a.shape[1] == 0 or not np.all(np.isfinite(a) & (a >= 0)):
        return np.array([jain_index(r) for r in a])
    top = a.max(axis=1, keepdims=True)
    scaled = np.where(top > 0, a / np.where(top > 0, top, 1.0), a)
    square = np.sum(scaled**2, axis=1)
    if np.any(square == 0):
        return np.array([jain_index(r) for r in a])
    n = a.shape[1]
    return np.clip(np.sum(scaled, axis=1) ** 2 / (n * square), 1.0 / n, 1.0)


# ---------------------------------------------------------------------------------------------------------
# Noise: the one place that decides sigma_DP (module docstring)
# ---------------------------------------------------------------------------------------------------------
NOISE_METHODS = ("paper", "tight", "gaussian", "moments", "none")


def noise(setting: Mapping[str, Any], T: int, method: str = "paper") -> dict[str, float]:
    """{"uplink": sigma_DP} for ``T`` uploads per client (the paper's T0) at (eps, delta) = the setting's.

    ``setting`` needs ``eps``, ``delta``, ``C``, ``R``, ``q``.  ``"paper"``: WPFL Theorem 1, eqs.
    (23)-(24), the one-dimensional search of Sec. IV (``calibrate_sigma_dp``); ``"tight"``: the
    Poisson-subsampled Gaussian with sensitivity 2C (RDP, ``calibrate_noise``); ``"gaussian"``, ``"moments"``,
    ``"none"``: the DP baselines of Fig. 2 (module docstring).
    """
    import fedbound.accounting as acc

    if method not in NOISE_METHODS:
        raise ParameterError("method", method, "one of " + ", ".join(NOISE_METHODS))
    eps, delta, C_, R_, q = (setting[k] for k in ("eps", "delta", "C", "R", "q"))
    if method == "none":
        return {"uplink": 0.0}
    if method == "paper":
        return {"uplink": float(acc.calibrate_sigma_dp(eps, delta, C_, R_, q, T))}
    sens = 2.0 * float(C_)
    if method == "tight":
        return {"uplink": float(acc.calibrate_noise(eps, delta, q, T)) * sens}
    if method == "gaussian":
        return {"uplink": float(acc.classic_composed_std(eps, delta, T, sens))}
    return {"uplink": float(acc.moments_accountant_std(eps, delta, q, T, sens))}




_TIGHT: dict[tuple, dict[str, Any]] = {}


def tight_calibrations(eps: float, delta: float, q: float, Ts: Any) -> list[dict[str, Any]]:
    """:func:`tight_calibration` at every T of ``Ts`` (a curve against T0): the same records (the same
    cache), with the RDP calibrations of the missing ones in one vectorised ``calibrate_noise`` call (equal to
    the one-by-one values) and the PLD searches run nearest-first from the records already there, each
    warm-started from its neighbour (``fedbound.accounting.pld.pld_calibrate``)."""
    import fedbound.accounting as acc

    Ts = [int(t) for t in Ts]
    known = [t for t in Ts if (float(eps), float(delta), float(q), t) in _TIGHT]
    z_rdp: dict[int, float] = {}

    def rdp(T: int) -> float:
        if not z_rdp:  # the first miss computes every missing T's RDP calibration at once
            missing = sorted({t for t in Ts if t not in known})
            z_rdp.update(zip(missing, np.atleast_1d(acc.calibrate_noise(eps, delta, q, np.array(missing)))
                             .tolist(), strict=True))
        return z_rdp[T]

    def nearest(t: int) -> float:
        return min((abs(math.log(t / k)) for k in known), default=0.0)

    out = {t: tight_calibration(eps, delta, q, t, rdp) for t in sorted(set(Ts), key=nearest)}
    return [out[t] for t in Ts]


def tight_calibration(eps: float, delta: float, q: float, T: int,
                      _z_rdp: Callable[[int], float] | None = None) -> dict[str, Any]:
    """The exact calibration of the T uploads' release (module docstring, ``"tight"``), as a record:
    ``z`` (noise multiplier: sigma_DP = 2C z), ``eps_achieved`` (by ``method``), ``method``, ``slack``
    (the method's stated error in eps), ``z_rdp`` (the RDP calibration, what ``"tight"`` trains).

    q = 1: T Gaussians of std z compose to one of std z/sqrt(T) (Dong, Roth & Su 2022, Cor. 3.3), so the
    analytic Gaussian (Balle & Wang 2018, Thm 8) is exact: no discretisation.  q < 1: dp-accounting's PLD
    at the discretisation whose stated error T x disc is 1 % of eps
    (``fedbound.accounting.pld.discretization_for_target``); z is the smallest with PLD eps <= eps, found
    to 0.1 % of eps (``pld_calibrate``), so the true eps lies within ~1.1 % below the target, never above.
    Where PLD is too costly (``PldTooCostly``), the RDP calibration, labelled so (valid, not tight).
    Costs 3-4 PLD evaluations (~5-50 ms each: ``pld_epsilon_fast``, dp-accounting's eps at ~1/3 of its
    cost, the same floats) cold and 1-2 when an earlier calibration at the same delta and q warm-starts it
    (a re-plan at a new eps), and records are kept in memory and across runs (the
    compiled-formula cache, keyed by the inputs, this file, accounting/pld.py and dp-accounting's version).
    """
    key = (float(eps), float(delta), float(q), int(T))
    if key not in _TIGHT:
        with _TIGHT_GUARD:  # one lock per key: concurrent requests (the explorer's plan and its figure) for
            if len(_TIGHT_LOCKS) > 1024:  # the same calibration compute it once
                _TIGHT_LOCKS.clear()
            lock = _TIGHT_LOCKS.setdefault(key, threading.Lock())
        with lock:
            if key not in _TIGHT:
                _TIGHT[key] = _tight_record(key, _z_rdp)
    return dict(_TIGHT[key])


_TIGHT_LOCKS: dict[tuple, threading.Lock] = {}
_TIGHT_GUARD = threading.Lock()


def _tight_record(key: tuple, z_rdp: Callable[[int], float] | None) -> dict[str, Any]:
    """:func:`_calibrate_tight`, kept across runs for q < 1 (see :func:`tight_calibration`)."""
    from fedbound.bounds.compiled import cached_json, fingerprint

    if key[2] >= 1.0:
        return _calibrate_tight(*key, z_rdp)
    import importlib.metadata
    import importlib.util

    pld_file = importlib.util.find_spec("fedbound.accounting.pld").origin
    version = importlib.metadata.version("dp-accounting")
    tag = f"wpfl-tight|{fingerprint(__file__, pld_file)}|{version}|{key!r}"
    return cached_json(tag, lambda: _calibrate_tight(*key, z_rdp))


NEAR_LOG_EPS = 0.5
"""A kept calibration at the same (delta, q, T) starts a new one when its eps is within this of the target in
log (:func:`_near_record`)."""


def _near_record(eps: float, delta: float, q: float, T: int) -> tuple[float, float] | None:
    """(z, PLD eps) of the kept PLD calibration at the same delta, q and T whose target is nearest to ``eps``
    in log (within ``NEAR_LOG_EPS``), else None."""
    best, out = NEAR_LOG_EPS, None
    for (e, d, q_, t), rec in list(_TIGHT.items()):
        if (d, q_, t) == (float(delta), float(q), int(T)) and rec.get("eps_achieved") and \
                rec["method"].startswith("PLD") and abs(math.log(e / eps)) < best:
            best, out = abs(math.log(e / eps)), (float(rec["z"]), float(rec["eps_achieved"]))
    return out


def _calibrate_tight(eps: float, delta: float, q: float, T: int,
                     z_rdp_of: Callable[[int], float] | None = None) -> dict[str, Any]:
    import fedbound.accounting as acc
    from fedbound.accounting.pld import (
        PldTooCostly,
        discretization_for,
        discretization_for_target,
        pld_calibrate,
        pld_calibrate_near,
        pld_epsilon_fast,
    )

    z_rdp = float(acc.calibrate_noise(eps, delta, q, T) if z_rdp_of is None else z_rdp_of(T))
    if q >= 1.0:
        z = float(np.sqrt(T) * acc.analytic_gaussian_std(eps, delta))
        return {"z": z, "eps_achieved": float(eps), "method": "analytic Gaussian, exact", "slack": 0.0,
                "z_rdp": z_rdp}
    disc = discretization_for_target(eps, T)
    near = _near_record(eps, delta, q, T)
    try:
        if near is None:
            z, eps_pld = pld_calibrate(eps, delta, q, T, disc, z_rdp, evaluate=pld_epsilon_fast)  # same eps
        else:  # a re-plan at a nearby eps: one Newton step off the kept calibration, else the same search
            z, eps_pld = pld_calibrate_near(eps, delta, q, T, disc, z_rdp, near, evaluate=pld_epsilon_fast)
    except PldTooCostly as exc:
        return {"z": z_rdp, "eps_achieved": None, "slack": 0.0, "z_rdp": z_rdp,
                "method": f"RDP (an upper bound: PLD too costly here, {exc})"}
    disc = discretization_for(z, q, T, disc)  # what pld_epsilon used (coarser only where PLD is costly)
    return {"z": z, "eps_achieved": eps_pld, "slack": T * disc, "discretization": disc, "z_rdp": z_rdp,
            "method": f"PLD (dp-accounting), discretisation {disc:.0e}"}


# ---------------------------------------------------------------------------------------------------------
# Claims (spec 004 Sec. 5): S1-S5, S7-S16, S19-S21 and the F32 identity.  S6, S17, S18 and S22 concern the
# channel model and the optimisers: fedbound.scheduling.wpfl.CLAIMS.  S23 (accuracy first rises then falls
# with T0, Figs. 2-4) is an experimental observation, not a statement about a formula: `fedbound train` and
# the policy comparison of fedbound.validation.recipes.wpfl measure it.
# ---------------------------------------------------------------------------------------------------------
from fedbound.bounds.claims import Claim, Computed, Region  # noqa: E402


def _delta_q(v: Mapping[str, Any], variant: str) -> Any:
    from fedbound.accounting import qa_gaussian_delta

    return qa_gaussian_delta(v["eps"], v["C"], v["sigma_dp"], v["R"], v["q"], v["T"])


def _sigma_paper(v: Mapping[str, Any], variant: str) -> Any:
    return np.array([noise(v, int(t))["uplink"] for t in np.ravel(v["T"])]).reshape(np.shape(v["T"]))


DELTA_Q = Computed("delta_Q", _delta_q, "Theorem 1's delta_Q (WPFL eq. (23)), clamped at 0")
SIGMA_DP = Computed("sigma_dp", _sigma_paper, "Theorem 1's calibrated sigma_DP (Sec. IV)")
JAIN = Computed("jain", lambda v, variant: jain_index(np.random.default_rng(int(v["seed"])).exponential(
    size=int(v["n"])) ** v["spread"]), "Jain's index of a random loss vector (F33)")

_PRIV = Region({"C": (0.05, 10.0, "log"), "sigma_dp": (1e-3, 10.0, "log"), "R": (2, 20),
                "q": (1e-3, 1.0, "log"), "T": (1, 50), "eps": (0.01, 20.0, "log")},
               integers=frozenset({"R", "T"}))
_S4 = Region({"C": (0.05, 10.0, "log"), "_ratio": (3.0, 1000.0, "log"), "R": (2, 20),
              "q": (1e-3, 1.0, "log"), "T": (1, 50), "_per": (0.0, 20.0)}, integers=frozenset({"R", "T"}),
             derived=(("sigma_dp", lambda v: v["C"] / v["_ratio"]),
                      ("eps", lambda v: max(v["_per"] * v["T"], 1e-6))))
_MLR = {"C": 3.0, "sigma_dp": 0.006, "R": 16, "q": 0.01, "T": 20}
_BOUND = Region({"C": (0.1, 10.0, "log"), "sigma_dp": (1e-3, 1.0, "log"), "R": (1, 20), "n_params": (1, 1e5),
                 "rho_L": (0.0, 1.0), "rho_G": (0.0, 1.0), "theta_L": (0.0, 1e3), "phi1": (1e-3, 10.0, "log"),
                 "phi2": (1e-3, 10.0, "log"), "vphi1": (1e-3, 10.0, "log"), "vphi2": (1e-3, 10.0, "log")},
                integers=frozenset({"R", "n_params"}))
_PL = Region({"eta_P": (1e-3, 0.999), "lam": (1e-3, 1.999), "mu": (0.01, 1.99), "G0": (1e-2, 10.0, "log"),
              "M": (0.0, 10.0), "Gamma_n": (0.0, 1e6), "eps_F_mean": (1e-3, 0.999)})


def _interval_point(v: dict[str, Any]) -> float:
    """A point of Omega_0 (or Omega_1) at relative position _u, at least 1e-6 inside (spec S16 guidance)."""
    (_, _), intervals = (None, None), feasible_intervals(v["eps_P"], v["mu"])[1]
    lo, hi = intervals[min(int(v["_k"]), len(intervals) - 1)]
    return lo + (1e-6 + (1 - 2e-6) * v["_u"]) * (hi - lo)


_P7 = Region({"mu": (0.01, 1.99), "_f": (0.0, 1.0), "_k": (0, 1), "_u": (0.0, 1.0), "G0": (1e-3, 1e3, "log"),
              "M": (1e-3, 1e3, "log"), "Gamma_n": (1e-4, 1e5, "log"), "eps_F_mean": (1e-3, 0.999)},
             integers=frozenset({"_k"}),
             derived=(("eps_P", lambda v: min(1 - v["mu"] ** 2 / 4 * (1 - v["_f"]), 1 - 1e-5)),
                      ("eta_P", _interval_point)))
_E23 = {"eta_P": 0.567, "eps_P": 0.723, "Gamma_n": 26.25, "eps_F_mean": 0.98, "G0": 0.071, "mu": 0.976,
        "M": 0.034}


def _eps_independent(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    lo, hi = _delta_q({**v, "eps": 0.1}, variant), _delta_q({**v, "eps": 10.0}, variant)
    return bool(lo == hi), f"delta_Q(eps = 0.1) = {float(lo):.12g}, delta_Q(eps = 10) = {float(hi):.12g}"


def _eta_f_argmin(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    star = float(ETA_F_STAR(v))
    grid = np.linspace(0.0, 4 * star, 4001)[1:]
    best = grid[int(np.argmin(EPS_F.evaluate(v, eta_F=grid).value))]
    return bool(abs(best - star) <= 4 * star / 4000), f"grid argmin {best:.6g}, closed form {star:.6g}"


def _psi_rises_then_falls(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    lam_grid = np.linspace(1e-3, 2.0, 400)
    d = np.sign(np.asarray(PSI_D_LAM.evaluate(eta_P=v["eta_P"], lam=lam_grid).value))
    first_up = np.argmax(d > 0) if np.any(d > 0) else len(d)
    ok = bool(d[0] > 0 and np.all(np.diff(d[first_up:]) <= 0))
    return ok, f"dPsi/dlambda at lambda = 0.001 is {d[0]:+.0f}, at lambda = 2 is {d[-1]:+.0f} (convex, E8)"


def _psi_argmin(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    eta = v["eta_P"]
    hat = (eta**3 / (2 * (1 + eta**2))) ** (1 / 3)
    grid = np.linspace(hat / 10, min(hat * 10, 2.0), 20001)
    best = grid[int(np.argmin(PSI.evaluate(eta_P=eta, lam=grid).value))]
    return bool(abs(best - hat) <= 2 * (grid[1] - grid[0])), f"argmin {best:.8g} vs lambda_hat {hat:.8g}"


def _lam_argmin(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    star = np.sqrt(1 - v["eps_P"])
    d = float(LAM_OF_ETA.derivative("eta_P").evaluate(eta_P=star, eps_P=v["eps_P"], mu=v["mu"]).value)
    at1 = float(LAM_OF_ETA(eta_P=float(ETA1(v)), eps_P=v["eps_P"], mu=v["mu"]))
    ends = [float(LAM_OF_ETA(eta_P=float(e(v)), eps_P=v["eps_P"], mu=v["mu"])) for e in (ETA2, ETA3)]
    ok = abs(d) < 1e-9 * (1 + abs(v["mu"])) / star and abs(at1 - 2) < 1e-9 and max(map(abs, ends)) < 1e-8
    return ok, f"lambda'(sqrt(1-eps_P)) = {d:.3g}, lambda(eta1) = {at1:.12g}, lambda(eta2,3) = {ends}"


def _interval_order(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    (e1, e2, e3), intervals = feasible_intervals(v["eps_P"], v["mu"])
    ok = e1 < e2 <= e3 and (len(intervals) == 2) == (v["eps_P"] < 2 - v["mu"])
    return ok, f"eta = ({e1:.6g}, {e2:.6g}, {e3:.6g}), {len(intervals)} interval(s)"


def _jain_range(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    x = np.random.default_rng(int(v["seed"])).exponential(size=int(v["n"])) ** v["spread"]
    j = jain_index(x)
    same = jain_index(np.full(int(v["n"]), 3.0))
    return bool(1 / len(x) - 1e-12 <= j <= 1 + 1e-12 and same == 1.0), f"J = {j:.6g} for N = {len(x)}"


def _jain_scaled(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    x = np.random.default_rng(int(v["seed"])).exponential(size=int(v["n"])) ** v["spread"]
    j, scaled = jain_index(x), jain_index(v["scale"] * x)
    return bool(np.isclose(j, scaled, rtol=1e-12)), f"J(x) = {j:.15g}, J({v['scale']:.3g} x) = {scaled:.15g}"


def _geometric_limit(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    far = geometric_bound(v["rate"], 1e5, v["init"], v["const"])
    limit = v["const"] / (1 - v["rate"])
    return bool(np.isclose(far, limit, rtol=1e-9)), f"bound after 1e5 steps {far:.10g}, limit {limit:.10g}"


_GEOM = Region({"rate": (0.01, 0.99), "steps": (0.0, 200.0), "init": (0.0, 1e3), "const": (1e-3, 1e3)})
_JAIN = Region({"seed": (0, 10**6), "n": (1, 200), "spread": (0.0, 4.0)}, integers=frozenset({"seed", "n"}))

CLAIMS: tuple[Claim, ...] = (
    Claim("S1", "Theorem 1's delta_Q is non-increasing in sigma_DP", DELTA_Q, "decreasing", _PRIV,
          wrt="sigma_dp",
          strict=False, source="Theorem 1, eq. (23)"),
    Claim("S2", "delta_Q is non-increasing in eps_Q", DELTA_Q, "decreasing", _PRIV, wrt="eps", strict=False,
          source="eq. (23)"),
    Claim("S3", "delta_Q is non-decreasing in T0 (the uploads per client)", DELTA_Q, "increasing", _PRIV,
          wrt="T", strict=False, source="eq. (23)"),
    Claim("S4", "coarser quantization gives a larger delta_Q (non-increasing in R), for C >= 3 sigma_DP and "
          "eps_Q/T0 <= 20", DELTA_Q, "decreasing", _S4, wrt="R", strict=False, line=(2, 20),
          source="Sec. IV discussion",
          fails_in="C < 3 sigma_DP, and eps_Q/T0 >~ 24.5 (the clamped delta_Q is 0 at R and positive at "
                   "R + 1)",
          counterexamples=(({"C": 1.0, "sigma_dp": 1.658, "q": 0.01, "T": 25, "eps": 49.7, "R": 2},
                            "paper"),)),
    Claim("S5", "at C >> sigma_DP, delta_Q does not depend on eps_Q (psi1 underflows)", DELTA_Q, "predicate",
          Region(points=(_MLR, {**_MLR, "C": 7.0, "sigma_dp": 0.016}, {**_MLR, "C": 20.0, "sigma_dp": 0.009},
                         {**_MLR, "sigma_dp": 0.05})),
          other=_eps_independent, source="eq. (24)"),
    Claim("S7a", "Theta_L is increasing in the mean uplink rho", THETA_L, "increasing", _BOUND, wrt="rho_L",
          source="Lemma 1, F19"),
    Claim("S7b", "Theta_L is increasing in sigma_DP", THETA_L, "increasing",
          Region({**_BOUND.ranges, "rho_L": (1e-6, 1.0)}, integers=_BOUND.integers), wrt="sigma_dp",
          source="F19"),
    Claim("S8a", "Gamma_{t+1} (RHS of (27a)) is increasing in rho_G", GAMMA_NEXT, "increasing", _BOUND,
          wrt="rho_G", source="eq. (28)"),
    Claim("S8b", "Gamma_{t+1} is increasing in Theta_L", GAMMA_NEXT, "increasing", _BOUND, wrt="theta_L",
          source="eq. (28)"),
    Claim("S8c", "Gamma_{t+1} is increasing in sigma_DP (both readings of Gamma_0)", GAMMA_NEXT, "increasing",
          _BOUND, wrt="sigma_dp", source="eq. (28)"),
    Claim("S8d", "Gamma_{t+1} (corrected Gamma_0, E4) is increasing in sigma_DP", GAMMA_NEXT, "increasing",
          _BOUND, wrt="sigma_dp", variant="corrected", source="eq. (28), (54c)"),
    Claim("S9", "eps_F is a convex quadratic in eta_F minimised at mu / (2 (1 + phi1) L^2)", EPS_F,
          "predicate",
          Region({"mu": (0.01, 1.0), "_r": (1.0, 10.0), "phi1": (1e-3, 1.0), "phi2": (1e-4, 1.0),
                  "vphi1": (1e-4, 1.0)}, derived=(("L", lambda v: v["mu"] * v["_r"]),)),
          other=_eta_f_argmin, source="Sec. VI-C1, P5"),
    Claim("S10a", "for mu < 2, eps_P is decreasing in lambda", EPS_P, "decreasing", _PL, wrt="lam",
          source="eq. (30a)"),
    Claim("S10b", "for mu > 2, eps_P is increasing in lambda", EPS_P, "increasing",
          Region({**_PL.ranges, "mu": (2.01, 10.0)}), wrt="lam", source="eq. (30a)"),
    Claim("S11a", "for mu < 2 and lambda < 2, eps_P first decreases then increases in eta_P", EPS_P,
          "unimodal",
          _PL, wrt="eta_P", source="eq. (30a)"),
    Claim("S11b", "for mu >= 2, eps_P is decreasing in eta_P on (0, 1)", EPS_P, "decreasing",
          Region({**_PL.ranges, "mu": (2.0, 10.0)}), wrt="eta_P", source="eq. (30a)"),
    Claim("S12a", "Psi is strictly increasing in eta_P", PSI, "increasing", _PL, wrt="eta_P",
          source="eq. (30b)"),
    Claim("S12b", "Psi first increases and then decreases with lambda (the paper, after Theorem 3)", PSI,
          "predicate", None, other=_psi_rises_then_falls, source="text after Theorem 3",
          fails_in="everywhere: Psi is strictly convex in lambda, decreasing on (0, lambda_hat) and "
                   "increasing "
                   "after, lambda_hat = (eta^3 / (2 (1 + eta^2)))^(1/3)",
          counterexamples=tuple(({"eta_P": e}, "paper") for e in (0.01, 0.1, 0.5, 0.9))),
    Claim("S12c", "Psi is strictly convex in lambda with its minimum at (eta^3/(2(1+eta^2)))^(1/3)", PSI,
          "predicate", Region({"eta_P": (0.01, 0.99)}), other=_psi_argmin,
          source="text after Theorem 3, corrected by fedbound"),
    Claim("S13a", "for fixed lambda, Phi is increasing in eta_P", PHI, "increasing", _PL, wrt="eta_P",
          source="eq. (30a)"),
    Claim("S13b", "Phi is increasing in Gamma_{t+1} (hence in Theta_L and rho_G)", PHI, "increasing", _PL,
          wrt="Gamma_n", source="eq. (30a)"),
    Claim("S13c", "Phi is increasing in the mean eps_F", PHI, "increasing", _PL, wrt="eps_F_mean",
          source="eq. (30a)"),
    Claim("S14a", "lambda(eta) is convex (unimodal) in eta", LAM_OF_ETA, "unimodal",
          Region({"mu": (0.01, 1.99), "_f": (0.0, 1.0)}, derived=(("eps_P", lambda v: 1 - v["mu"] ** 2 / 4 * (
              1 - v["_f"]) * 0.999),)), wrt="eta_P", line=(1e-4, 1.0), source="eq. (37)"),
    Claim("S14b", "lambda has its minimum at sqrt(1 - eps_P), equals 2 at eta1 and 0 at eta2, eta3",
          LAM_OF_ETA, "predicate", Region({"mu": (0.01, 1.99), "_f": (0.0, 0.999)}, derived=(
              ("eps_P", lambda v: 1 - v["mu"] ** 2 / 4 * (1 - v["_f"])),)),
          other=_lam_argmin, source="eqs. (37)-(38)"),
    Claim("S15", "eta1 < eta2 <= eta3, and Omega_1 is non-empty iff eps_P < 2 - mu (E18: strict)", ETA1,
          "predicate", Region({"mu": (0.01, 1.99), "_f": (0.0, 0.999)}, derived=(
              ("eps_P", lambda v: 1 - v["mu"] ** 2 / 4 * (1 - v["_f"])),)),
          other=_interval_order, source="eq. (38)"),
    Claim("S16", "Theorem 5: Phi(eta, lambda(eta)) is convex on Omega_0 and on Omega_1", PHI_P7_D2, "compare",
          _P7, other=0.0, op=">=", source="Theorem 5, App. F",
          fails_in="eps_P < 1 - mu^2/4, outside the theorem's region (E23)",
          counterexamples=((_E23, "paper"),)),
    Claim("S16c", "Theorem 5 holds for the corrected bound too", PHI_P7_D2, "compare", _P7, other=0.0,
          op=">=",
          variant="corrected", source="Theorem 5"),
    Claim("F32", "Gamma_2 rho_G + Gamma_3 = h1(rho_G) Theta_L + Gamma_0 rho_G + Gamma_1", GAMMA_NEXT,
          "compare",
          _BOUND, other=lambda v: GAMMA2(v) * v["rho_G"] + GAMMA3(v), op="==", rtol=1e-11,
          source="eqs. (34)-(35)"),
    Claim("S19", "Jain's index lies in [1/N, 1] and equals 1 for equal losses", JAIN, "predicate", _JAIN,
          other=_jain_range, source="Sec. VII-3"),
    Claim("S19b", "Jain's index is scale invariant", JAIN, "predicate",
          Region({**_JAIN.ranges, "scale": (1e-200, 1e200, "log")}, integers=_JAIN.integers),
          other=_jain_scaled, source="derived"),
    Claim("S20a", "the unrolled bound tends to const / (1 - r)", GEOMETRIC, "predicate", _GEOM,
          other=_geometric_limit, source="eqs. (27b), (31)"),
    Claim("S20b", "the unrolled bound is increasing in const", GEOMETRIC, "increasing",
          Region({**_GEOM.ranges, "steps": (1.0, 200.0)}), wrt="const", source="derived"),
    Claim("S20c", "the unrolled bound is increasing in init", GEOMETRIC, "increasing",
          Region({**_GEOM.ranges, "steps": (0.0, 200.0), "init": (1e-3, 1e3)}), wrt="init", strict=False,
          source="derived"),
    Claim("S21", "the calibrated sigma_DP increases with T0 (Table II)", SIGMA_DP, "increasing",
          Region(points=({"C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3},
                         {"C": 7.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3},
                         {"C": 20.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 5e-3})),
          wrt="T", line=(5, 30), line_points=6, source="Table II"),
)
"""Every declared claim of WPFL about its formulas, checked by fedbound.bounds.claims."""
