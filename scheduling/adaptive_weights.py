"""PADPFL impact factors as a convex program (PADPFL; derived in spec 001 Sec. 3.10).

p enters Theorem 2's bound (eq. (46)) only through max_i p_i / min_i m_i, so its unconstrained optimum is
uniform p (E26), and p ~ m under the tight sensitivity max_i 2B p_i / m_i.  What a designer needs is the
constrained program over client groups (all clients of a group share one weight q_k):

    minimise   noise(q) / noise(uniform)  -  w * sum_k n_k q_k s_k / max s
    subject to sum_k n_k q_k = 1,  q_k >= floor / N,  gmin_k <= n_k q_k <= gmax_k,

where noise(q) = max(a * max_k q_k / m_ref_k, b * sqrt(sum_k n_k q_k^2)) is the broadcast noise std
max(sigma_A, sigma_AC) of eqs. (12)-(14) up to a constant (a = T, b = R / min m under the paper's linear
composition; sqrt(T), sqrt(R) / min m under exact composition; m_ref = min m for eq. (10), m_k for the tight
sensitivity).  It is DCP (a max of linear terms and a norm): :func:`optimal_impact_factors` solves it with
cvxpy; :func:`impact_factors_slsqp` solves the same problem in epigraph form with scipy (an independent
check; the tests also compare with brute force on small simplices).

:func:`bound_optimal_impact_factors` is what the *bound* asks for: the reported bound depends on p only
through the broadcast noise max(a max_i p_i, b ||p||_2) (both scaled by 1/min m, eq. (10)), increasing in
it, and the water-filling point p_i = clip(nu, L_i, U_i) (one level nu, the feasible box of each client)
minimises every Schur-convex function of p on the box-constrained simplex at once, for every a, b (proof
in its docstring).  So the bound's argmin over p is the same at every (T, mu): the joint optimum is
min over (T, mu) at that p.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.bounds import adaptive as ba
from fedbound.errors import InfeasibleError, ParameterError
from fedbound.scheduling.results import Optimum

__all__ = [
    "WeightProblem",
    "weight_objective",
    "optimal_impact_factors",
    "impact_factors_slsqp",
    "bound_optimal_impact_factors",
]


@dataclass(frozen=True)
class WeightProblem:
    """The impact-factor program over client groups (all clients of a group get the same p_i).

    ``part_sizes``: clients per group; ``sizes``: local dataset size of a client of each group; ``T``, ``R``:
    rounds and uplink exposures (they weigh sigma_A against sigma_AC); ``accounting``: ``"paper"`` (T and R,
    linear composition) or ``"tight"`` (sqrt(T), sqrt(R)); ``sensitivity``: ``"paper"`` (eq. (10):
    max p / min m) or ``"tight"`` (max_i p_i/m_i); ``scores``: data quality per group (>= 0) favoured with
    ``quality_weight``; ``group_min``/``group_max``: bounds on a group's total weight; ``floor``: a minimum
    weight of every client, as a multiple of 1/N (fairness).
    """

    part_sizes: tuple[int, ...]
    sizes: tuple[int, ...]
    T: float
    R: int = 1
    accounting: str = "tight"
    sensitivity: str = "paper"
    scores: tuple[float, ...] | None = None
    quality_weight: float = 0.0
    group_min: tuple[float, ...] | None = None
    group_max: tuple[float, ...] | None = None
    floor: float = 0.0

    def __post_init__(self) -> None:
        n = np.asarray(self.part_sizes)
        k = len(n)
        if k == 0 or np.any(n < 1) or len(self.sizes) != k or np.any(np.asarray(self.sizes) < 1):
            raise ParameterError(
                "part_sizes, sizes",
                (self.part_sizes, self.sizes),
                "one client count >= 1 and one dataset size >= 1 per group",
            )
        for name, vec in (
            ("scores", self.scores),
            ("group_min", self.group_min),
            ("group_max", self.group_max),
        ):
            if vec is not None and (len(vec) != k or np.any(np.asarray(vec) < 0)):
                raise ParameterError(name, vec, f"{k} non-negative numbers, one per group")
        if self.accounting not in ("paper", "tight") or self.sensitivity not in ("paper", "tight"):
            raise ParameterError(
                "accounting/sensitivity", (self.accounting, self.sensitivity), "'paper' or 'tight' each"
            )
        if not 0 <= self.floor <= 1:
            raise ParameterError("floor", self.floor, "[0, 1] (a multiple of 1/N)")
        if self.quality_weight < 0:
            raise ParameterError("quality_weight", self.quality_weight, "[0, inf)")
        ba.NOTATION.params["T"].check(self.T)
        ba.NOTATION.params["R"].check(self.R)

    @property
    def N(self) -> int:
        return int(sum(self.part_sizes))

    def coefficients(self) -> dict[str, np.ndarray | float]:
        """Scaled noise terms: sigma_A ~ a * max_k q_k / m_ref_k, sigma_AC ~ b * sqrt(sum_k n_k q_k^2)."""
        m = np.asarray(self.sizes, dtype=float)
        m_ref = m if self.sensitivity == "tight" else np.full_like(m, m.min())
        t, r = (math.sqrt(self.T), math.sqrt(self.R)) if self.accounting == "tight" else (self.T, self.R)
        return {"a": t, "b": r / m.min(), "m_ref": m_ref, "n": np.asarray(self.part_sizes, dtype=float)}

    def bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-client lower/upper weight bounds, and group-total lower/upper bounds."""
        n = np.asarray(self.part_sizes, dtype=float)
        lo = np.full(len(n), self.floor / self.N)
        hi = np.ones(len(n))
        gmin = np.zeros(len(n)) if self.group_min is None else np.asarray(self.group_min, dtype=float)
        gmax = np.ones(len(n)) if self.group_max is None else np.asarray(self.group_max, dtype=float)
        return lo, hi, gmin, gmax


def weight_objective(problem: WeightProblem, q: np.ndarray) -> float:
    """The program's objective at per-client group weights ``q``: noise(q)/noise(uniform) - w score(q)."""
    co = problem.coefficients()
    q = np.asarray(q, dtype=float)

    def noise(x: np.ndarray) -> float:
        return max(co["a"] * float(np.max(x / co["m_ref"])), co["b"] * math.sqrt(float(co["n"] @ x**2)))

    uniform = np.full(len(q), 1.0 / problem.N)
    score = 0.0
    if problem.scores is not None and max(problem.scores) > 0:
        score = float((co["n"] * np.asarray(problem.scores)) @ q) / max(problem.scores)
    return noise(q) / noise(uniform) - problem.quality_weight * score


def _result(
    problem: WeightProblem, q: np.ndarray, method: str, status: str, extra: dict[str, Any], converged: bool
) -> Optimum:
    """The certificate: success = the solver converged and the (renormalised) point meets the constraints."""
    n = np.asarray(problem.part_sizes)
    q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
    q = q / float(n @ q)
    lo, hi, gmin, gmax = problem.bounds()
    feasible = bool(np.all(q >= lo - 1e-7) and np.all(n * q >= gmin - 1e-7) and np.all(n * q <= gmax + 1e-7))
    p = np.repeat(q, n)
    return Optimum(
        x=p,
        fun=weight_objective(problem, q),
        success=bool(feasible and converged),
        method=method,
        message=f"{method}: {status}",
        evidence={
            "per_group": q,
            "group_totals": n * q,
            "objective_uniform": weight_objective(problem, np.full(len(q), 1 / problem.N)),
            **extra,
        },
    )


def optimal_impact_factors(problem: WeightProblem) -> Optimum:
    """Solve the impact-factor program (module docstring) as a DCP problem with cvxpy.

    ``x``: the per-client impact factors (N,), ``evidence["per_group"]`` the weight of one client of each
    group.  InfeasibleError when the constraints leave no point of the simplex.
    """
    import cvxpy as cp

    co = problem.coefficients()
    n, k = co["n"], len(problem.part_sizes)
    lo, hi, gmin, gmax = problem.bounds()
    u = np.full(k, 1.0 / problem.N)
    base = max(co["a"] * float(np.max(u / co["m_ref"])), co["b"] * math.sqrt(float(n @ u**2)))
    g = cp.Variable(k, name="group_totals")  # g_k = n_k q_k, order 1 (well scaled)
    sensitivity = cp.max(cp.multiply(co["a"] / (n * co["m_ref"] * base), g))
    aggregated = cp.norm(cp.multiply(co["b"] / (np.sqrt(n) * base), g), 2)
    objective = cp.maximum(sensitivity, aggregated)  # broadcast noise std / its value at uniform p
    if problem.scores is not None and max(problem.scores) > 0 and problem.quality_weight > 0:
        objective = (
            objective - problem.quality_weight * (np.asarray(problem.scores) / max(problem.scores)) @ g
        )
    constraints = [cp.sum(g) == 1, g >= n * lo, g <= n * hi, g >= gmin, g <= gmax]
    prob = cp.Problem(cp.Minimize(objective), constraints)
    if not prob.is_dcp():  # pragma: no cover - the construction above is DCP by design
        raise RuntimeError("impact-factor program is not DCP")
    try:
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    except cp.error.SolverError:
        prob.solve(solver=cp.SCS, eps=1e-9)
    if prob.status in ("infeasible", "infeasible_inaccurate") or g.value is None:
        raise InfeasibleError(
            f"impact factors: no point of the simplex meets the constraints (group_min = "
            f"{problem.group_min}, group_max = {problem.group_max}, floor = {problem.floor})"
        )
    return _result(
        problem,
        g.value / n,
        f"cvxpy DCP program ({prob.solver_stats.solver_name})",
        prob.status,
        {"dcp": True},
        prob.status == "optimal",
    )


def impact_factors_slsqp(problem: WeightProblem, x0: np.ndarray | None = None) -> Optimum:
    """The same program by scipy SLSQP in epigraph form (an independent check of the cvxpy solution)."""
    from scipy.optimize import minimize

    co = problem.coefficients()
    n, k = co["n"], len(problem.part_sizes)
    lo, hi, gmin, gmax = problem.bounds()
    u = np.full(k, 1.0 / problem.N)
    base = max(co["a"] * float(np.max(u / co["m_ref"])), co["b"] * math.sqrt(float(n @ u**2)))
    s = (
        np.zeros(k)
        if problem.scores is None or max(problem.scores) == 0
        else n * np.asarray(problem.scores) / max(problem.scores)
    )

    # variables: group totals g = n q (order 1) and the noise relative to uniform p, t (order 1)
    def obj(z: np.ndarray) -> float:
        return z[-1] - problem.quality_weight * float(s @ (z[:-1] / n))

    cons = [
        {"type": "eq", "fun": lambda z: np.sum(z[:-1]) - 1.0},
        {"type": "ineq", "fun": lambda z: z[-1] - co["a"] * z[:-1] / (n * co["m_ref"] * base)},
        {
            "type": "ineq",
            "fun": lambda z: z[-1] ** 2 - (co["b"] / base) ** 2 * float(np.sum(z[:-1] ** 2 / n)),
        },
        {"type": "ineq", "fun": lambda z: z[:-1] - gmin},
        {"type": "ineq", "fun": lambda z: gmax - z[:-1]},
    ]
    # default start: uniform tilted by group index (uniform itself is often the kink where SLSQP stalls)
    tilt = u * (1 + 0.5 * np.arange(k) / max(k - 1, 1))
    start = n * np.clip(tilt if x0 is None else np.asarray(x0, dtype=float), lo, hi)
    z0 = np.append(start / start.sum(), 2.0)
    res = minimize(
        obj,
        z0,
        method="SLSQP",
        constraints=cons,
        bounds=[*zip(n * lo, n * hi, strict=True), (0, None)],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    return _result(
        problem,
        res.x[:-1] / n,
        "scipy SLSQP (epigraph form)",
        res.message,
        {"nit": int(res.nit)},
        bool(res.success),
    )


def bound_optimal_impact_factors(problem: WeightProblem) -> Optimum:
    """The impact factors minimising the reported bound (PADPFL eq. (48) with the deployed noise (49))
    over the program's feasible set, for every (T, mu) at once: the water-filling point.

    Each client i of group k has the box L_k = max(floor/N, group_min_k/n_k) <= p_i <= U_k =
    min(1, group_max_k/n_k) and sum_i p_i = 1.  By the KKT conditions, for every strictly convex phi the
    minimiser of sum_i phi(p_i) on that set is p_i = clip(nu, L_i, U_i) with the one level nu where the
    weights sum to 1, independent of phi; so (Hardy-Littlewood-Polya) this point is majorised by every
    feasible p and minimises every Schur-convex function of p, in particular max_i p_i and ||p||_2 together,
    hence the broadcast std max(sqrt(T) z 2C max p/min m, sqrt(R) z 2C ||p||/min m) at every T.  The bound
    Theta + T (lambda_2 beta^2 + lambda_1 E||n|| beta + lambda_0 E||n||^2) increases in that std
    (lambda_1 = 1 + rho A (1+gamma)/mu_bar > 0, lambda_0 = rho/2 > 0), so this p is its argmin over p at
    every (T, mu).  It gives all clients of a group one weight.  ``nu`` is exact: f(nu) = sum n_k clip(nu,
    L_k, U_k) is piecewise linear, solved on the segment between breakpoints where it crosses 1.
    The scores and quality weight are ignored (they are the program's, not the bound's).
    """
    n = np.asarray(problem.part_sizes, dtype=float)
    lo, hi, gmin, gmax = problem.bounds()
    low, up = np.maximum(lo, gmin / n), np.minimum(hi, gmax / n)
    if np.any(low > up) or float(n @ low) > 1 + 1e-12 or float(n @ up) < 1 - 1e-12:
        raise InfeasibleError(
            f"impact factors: no point of the simplex meets the constraints (group_min = "
            f"{problem.group_min}, group_max = {problem.group_max}, floor = {problem.floor})"
        )
    knots = np.unique(np.concatenate([low, up]))
    total = np.array([float(n @ np.clip(v, low, up)) for v in knots])  # non-decreasing in nu
    j = int(np.searchsorted(total, 1.0))
    if j == 0:
        nu = float(knots[0])
    elif j >= len(knots):
        nu = float(knots[-1])
    else:  # f is linear on [knots[j-1], knots[j]]: interpolate exactly
        a, b, fa, fb = knots[j - 1], knots[j], total[j - 1], total[j]
        nu = float(a + (1.0 - fa) * (b - a) / (fb - fa)) if fb > fa else float(b)
    q = np.clip(nu, low, up)
    return _result(
        problem,
        q,
        "water-filling (exact argmin of the bound over p at every (T, mu))",
        f"level nu = {nu:.10g}",
        {"level": nu, "box_low": low, "box_high": up},
        True,
    )
