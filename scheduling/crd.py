"""Communication-rounds discounting (CRD) as a pure policy, its baselines, and their costs (UDP,
Sec. 4.3, Theorem 4, Algorithm 2; Sec. 5's "optimal UDP" heuristic search and Lei et al.'s linear
noise decay).

* :class:`CRDPolicy`: given the observed loss sequence, the next T and sigma.  The trigger (Alg. 2, Step 8):
  discount when V(w^t) - V(w^{t+1}) < zeta; the discount: T <- floor(beta (T - t)) + t (0-based t, computed in
  exact rational arithmetic so that e.g. beta = 0.57 never floors 56.999...); sigma by Theorem 4, eq. (25).
  The simulator's UDP receives this object as data (fedbound.training imports nothing from scheduling).
* :func:`run_crd`: Algorithm 2's control loop against a loss oracle or a recorded loss curve (the training
  itself is replaced by the losses), returning every decision (:class:`CRDTrace`).
* :func:`lei_run`: the baseline of Yu, Liu, Pu, Gursoy, Truex (S&P 2019), "noise reduced linearly": sigma_t =
  sigma_0 max(1 - k t, sigma_min/sigma_0) until the next round would spend more than eps (k, sigma_min are
  parameters; the paper gives neither).
* :func:`heuristic_search_T`: the exhaustive search over a grid of T ("optimal UDP"), with its cost in runs
  and training rounds.

Decisions: sigma follows the broadcast T for every client, selected or not (Alg. 2 leaves sigma undefined for
rounds a client sits out); an exhausted budget ends the run (never a reused sigma); the executed rounds can be
T_final + 1 (the last discount may cut T below the round just run), and the last global model is returned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from fedbound.bounds import udp_moments as um
from fedbound.checks import check_int, check_real
from fedbound.errors import ParameterError, PrivacyBudgetExceeded
from fedbound.scheduling.results import Optimum

__all__ = ["CRDPolicy", "CRDTrace", "run_crd", "lei_schedule", "lei_run", "heuristic_search_T"]


@dataclass(frozen=True)
class CRDPolicy:
    """Algorithm 2's rule: discount factor ``beta`` in (0, 1), trigger threshold ``zeta`` > 0."""

    beta: float = 0.9
    zeta: float = 0.001

    def __post_init__(self) -> None:
        if not 0.0 < float(self.beta) < 1.0:
            raise ParameterError(
                "beta", self.beta, "(0, 1)", hint="the CRD discount factor of UDP (Wei et al. 2021), Alg. 2"
            )
        if not float(self.zeta) > 0.0 or not math.isfinite(float(self.zeta)):
            raise ParameterError("zeta", self.zeta, "(0, inf)", hint="the CRD trigger threshold")

    def should_discount(self, v_prev: float, v_new: float) -> bool:
        """V(w^t) - V(w^{t+1}) < zeta: the loss improved by less than zeta, or got worse (Alg. 2, line 16)."""
        return bool(float(v_prev) - float(v_new) < self.zeta)

    def discount(self, T: int, t: int) -> int:
        """floor(beta (T - t)) + t (Alg. 2, line 17; 0-based t), in exact arithmetic."""
        left = int(T) - int(t)
        return math.floor(Fraction(repr(float(self.beta))) * left) + int(t)

    def next_T(self, T: int, t: int, v_prev: float, v_new: float) -> int:
        """The T in force after round t, given the losses before and after it."""
        return self.discount(T, t) if self.should_discount(v_prev, v_new) else int(T)

    def sigma(self, t: int, T: int, phi: Any, inverse_variance_spent: Any) -> Any:
        """sigma^t per client, Theorem 4 eq. (25) (PrivacyBudgetExceeded when the budget is used up)."""
        return um.sigma_crd(t, T, phi, inverse_variance_spent)


@dataclass(frozen=True)
class CRDTrace:
    """Every decision of one CRD run: T in force and sigma per executed round, the discounts (t, T_old,
    T_new), the final T, the total inverse variance spent and why the run stopped."""

    T_in_force: tuple[int, ...]
    sigmas: np.ndarray
    discounts: tuple[tuple[int, int, int], ...]
    T_final: int
    inverse_variance: np.ndarray
    stopped: str
    losses: tuple[float, ...] = field(default=())

    @property
    def rounds(self) -> int:
        return len(self.T_in_force)

    def eps_spent(self, delta: Any, q: float, sens: Any) -> Any:
        """Privacy spent under the paper's accountant (inverse of eq. (25))."""
        return um.eps_spent(self.sigmas, delta, q, sens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "T_final": self.T_final,
            "T_in_force": list(self.T_in_force),
            "discounts": [list(d) for d in self.discounts],
            "stopped": self.stopped,
            "sigma_first": np.atleast_1d(self.sigmas[0]).tolist() if self.rounds else [],
            "sigma_last": np.atleast_1d(self.sigmas[-1]).tolist() if self.rounds else [],
        }


def run_crd(
    policy: CRDPolicy,
    losses: Callable[[int], float] | Sequence[float],
    T_init: int,
    phi: Any,
    max_rounds: int | None = None,
) -> CRDTrace:
    """Algorithm 2's control loop: ``losses(t)`` (or ``losses[t]``) is V(w^t), t = 0 the initial model.

    ``phi``: each client's inverse-variance budget (eq. (25); scalar or array).  Runs while t < T; a recorded
    curve that ends first stops the run with ``stopped = "losses ran out"``.
    """
    T = int(check_int("T_init", T_init, 1))
    phi_ = check_real("phi", phi, 0.0, low_open=True)
    cap = T if max_rounds is None else int(max_rounds)
    get = losses if callable(losses) else None
    seq = None if callable(losses) else [float(x) for x in losses]

    def loss(i: int) -> float | None:
        if get is not None:
            return float(get(i))
        return seq[i] if i < len(seq) else None

    spent = np.zeros_like(phi_, dtype=float)
    t, T_force, sigmas, discounts, seen = 0, [], [], [], []
    v_prev = loss(0)
    if v_prev is None:
        raise ParameterError("losses", [], "at least one loss (the initial model's)")
    seen.append(v_prev)
    stopped = "t reached T"
    while t < T and t < cap:
        v_new = loss(t + 1)
        if v_new is None:
            stopped = "losses ran out"
            break
        try:
            sig = policy.sigma(t, T, phi_, spent)
        except PrivacyBudgetExceeded:
            stopped = "budget exhausted"
            break
        spent = spent + np.asarray(sig, dtype=float) ** -2.0
        T_force.append(T)
        sigmas.append(sig)
        seen.append(v_new)
        T_new = policy.next_T(T, t, v_prev, v_new)
        if T_new != T:
            discounts.append((t, T, T_new))
        T, v_prev, t = T_new, v_new, t + 1
    return CRDTrace(
        tuple(T_force),
        np.asarray(sigmas, dtype=float),
        tuple(discounts),
        T,
        np.asarray(spent),
        stopped,
        tuple(seen),
    )


def lei_schedule(sigma0: float, k: float, t: int, sigma_min: float = 0.0) -> float:
    """sigma_t = sigma_0 max(1 - k t, sigma_min/sigma_0): the linear decay of Lei's approach as UDP uses
    it (Sec. 5; the rate k is not given there)."""
    s0 = float(check_real("sigma0", sigma0, 0.0, low_open=True))
    kk = float(check_real("k", k, 0.0))
    floor_ = float(check_real("sigma_min", sigma_min, 0.0, s0))
    return s0 * max(1.0 - kk * int(t), floor_ / s0)


def lei_run(
    sigma0: float,
    k: float,
    eps: float,
    delta: float,
    q: float,
    sens: float,
    T_max: int,
    sigma_min: float | None = None,
) -> np.ndarray:
    """The sigma's Lei's approach uses: the schedule, stopping before the first round that would make the
    privacy spent (inverse of eq. (25)) exceed eps, or at T_max.  ``sigma_min`` defaults to sigma0/100."""
    floor_ = float(sigma0) / 100.0 if sigma_min is None else float(sigma_min)
    phi = float(um.budget_phi(eps, delta, q, sens))
    out, spent = [], 0.0
    for t in range(int(check_int("T_max", T_max, 1))):
        s = lei_schedule(sigma0, k, t, floor_)
        if spent + s**-2.0 > phi * (1 + 1e-12):
            break
        spent += s**-2.0
        out.append(s)
    return np.asarray(out)


def heuristic_search_T(objective: Callable[[int], float], grid: Sequence[int]) -> Optimum:
    """ "Optimal UDP" (Sec. 5): run Algorithm 1 for every T of ``grid`` and keep the best final
    loss.  Cost: len(grid) runs and sum(grid) training rounds (evidence ``runs``, ``rounds``)."""
    g = [int(x) for x in check_int("grid", list(grid), 1)]
    if not g:
        raise ParameterError("grid", list(grid), "a non-empty list of rounds")
    values = np.array([float(objective(T)) for T in g])
    i = int(np.argmin(values))
    return Optimum(
        x=g[i],
        fun=float(values[i]),
        success=bool(np.isfinite(values[i])),
        message=f"best of {len(g)} runs on the grid {g[0]}..{g[-1]}",
        method="exhaustive grid search",
        bracket=(g[0], g[-1]),
        fun_below=float(values[i - 1]) if i > 0 else math.inf,
        fun_above=float(values[i + 1]) if i + 1 < len(g) else math.inf,
        at_lower_edge=i == 0,
        at_upper_edge=i == len(g) - 1,
        evidence={"runs": len(g), "rounds": int(sum(g))},
    )


def replay(setting: Any, losses: Sequence[float]) -> dict[str, Any]:
    """Algorithm 2 replayed on a recorded loss curve (``losses[t]`` = V(w^t), t = 0 the initial model) for a
    [udp] setting: every client's budget Phi_i (eq. (25); the corrected budget with ``calibration =
    "corrected"``), the decisions round by round, and what the sigma sequence spends under each accountant."""
    from fedbound.bounds import udp

    n = int(setting["N"])
    q = int(setting.get("K") or n) / n
    if not setting.get("T"):
        raise ParameterError("T", None, "an integer >= 1 (the initial T of the CRD run)")
    arr = udp.client_arrays(setting)
    corrected = setting.get("calibration") == "corrected"
    phi = (um.budget_phi_corrected if corrected else um.budget_phi)(arr["eps"], arr["delta"], q, arr["sens"])
    policy = CRDPolicy(float(setting.get("beta", 0.9)), float(setting.get("zeta", 0.001)))
    trace = run_crd(policy, [float(x) for x in losses], int(setting["T"]), phi)
    worst = int(np.argmax(np.atleast_1d(-np.log(arr["delta"]) * arr["sens"] ** 2 / arr["eps"] ** 2)))
    sig = trace.sigmas.reshape(trace.rounds, -1)[:, worst] if trace.rounds else np.zeros(0)
    rounds = []
    for t in range(trace.rounds):
        v0, v1 = trace.losses[t], trace.losses[t + 1]
        nxt = trace.T_in_force[t + 1] if t + 1 < trace.rounds else trace.T_final
        rounds.append(
            {
                "t": t,
                "T": trace.T_in_force[t],
                "loss_before": v0,
                "loss_after": v1,
                "improvement": v0 - v1,
                "discount": policy.should_discount(v0, v1),
                "T_next": nxt,
                "sigma": float(sig[t]),
            }
        )
    spent = {}
    if trace.rounds:
        e, d, s = float(arr["eps"][worst]), float(arr["delta"][worst]), float(arr["sens"][worst])
        spent = {
            "eps_spent_paper_accountant": float(um.eps_spent(sig, d, q, s)),
            **{f"delta_at_eps_{acc}": um.delta_from_sigmas(e, q, sig, s, acc) for acc in um.ACCOUNTANTS},
            "validity_x": um.validity_x(e, q, sig, s),
        }
    return {
        "policy": {"beta": policy.beta, "zeta": policy.zeta},
        "T_init": int(setting["T"]),
        "budget": "corrected" if corrected else "paper",
        "client": worst,
        **trace.to_dict(),
        "rounds_detail": rounds,
        **spent,
    }
