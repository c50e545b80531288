"""Tight accounting of T rounds of a (subsampled) Gaussian mechanism: eps, delta, and the noise that meets a
target.

``epsilon`` / ``delta_for_epsilon`` / ``calibrate_noise`` take a noise multiplier z = std / sensitivity, a
sample rate q in (0, 1] (q = 1: every round uses everyone, a plain T-fold Gaussian composition), a number of
rounds ``steps`` and the other privacy parameter.  All arguments broadcast (grids of (eps, q, steps) in one
call); results are floats for scalar input and arrays otherwise.

Methods:

* ``"rdp"`` (default): Renyi DP, exact subsampled-Gaussian RDP on ``orders`` (default ``CALIBRATION_ORDERS``,
  never looser than Opacus' or dp-accounting's defaults; ``DEFAULT_ORDERS`` without replacement) and
  the improved conversion (``conversion="classic"`` gives the moments accountant of Abadi et al. 2016 with
  integer orders).  Calibration is vectorised over all grid points (see ``_calibrate_rdp``).
* ``"pld"``: dp-accounting's PLD accountant (Poisson only), per grid point; the tightest method.
* ``"analytic"``: q = 1 only.  T Gaussian releases with std z compose to one Gaussian with std z / sqrt(T)
  (Dong, Roth & Su 2022, Cor. 3.3), so Balle & Wang's exact formula gives the exact answer.

Sampling (see ``fedbound.accounting.events`` for the neighbouring relations): ``"poisson"`` (add/remove one)
or ``"without_replacement"`` (K-of-N scheduling, replace-one; RDP via dp-accounting only, per grid point).

Calibration returns the smallest noise multiplier (to ~1e-9 relative, on the private side) whose eps is at
most the target.  Unreachable targets raise InfeasibleError, never inf or NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from fedbound.accounting import _sgm
from fedbound.accounting._numerics import decreasing_root
from fedbound.accounting.analytic import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_std,
)
from fedbound.accounting.events import check_sampling
from fedbound.accounting.pld import PldTooCostly, pld_delta, pld_epsilon
from fedbound.accounting.rdp import (
    DEFAULT_ORDERS,
    _check_conversion,
    check_orders,
    conversion_offset,
    kl_budget,
    rdp_sampled_without_replacement,
    rdp_subsampled_gaussian,
    rdp_to_delta,
    rdp_to_dp,
)
from fedbound.checks import broadcast, check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import (
    AccountingFallbackWarning,
    DomainError,
    InfeasibleError,
    ParameterError,
    UnsupportedError,
)

__all__ = ["METHODS", "CALIBRATION_ORDERS", "REFERENCE_ORDERS", "MAX_NOISE_MULTIPLIER",
           "MIN_NOISE_MULTIPLIER", "epsilon", "delta_for_epsilon", "calibrate_noise"]

METHODS = ("rdp", "pld", "analytic")
#: Calibration gives up (InfeasibleError) beyond this noise multiplier.
MAX_NOISE_MULTIPLIER = 1e12
#: dp-accounting's RDP for sampling without replacement fails somewhere above this (2.7e8 at q = 0.1: math
#: domain error), and each of its evaluations costs ~0.5 s: its calibration stops here (InfeasibleError).
WOR_MAX_NOISE_MULTIPLIER = 1e7
#: Targets met by even this little noise are refused (ParameterError naming target_eps): no privacy left, and
#: the RDP series lose meaning as 1/z^2 approaches the float range.
MIN_NOISE_MULTIPLIER = 1e-10
#: PLD points per step during a calibration search (~20 evaluations; a coarser discretisation only makes the
#: calibrated noise slightly larger, never smaller than needed: pessimistic rounding).
PLD_CALIBRATION_STEP_POINTS = 5e4
#: Opacus' default orders (opacus.accountants.RDPAccountant.DEFAULT_ALPHAS) united with dp-accounting's
#: (dp_accounting.rdp.DEFAULT_RDP_ORDERS, a superset): 1.1, 1.2, ..., 10.9; 11, ..., 63; 128, 256, 512, 1024.
REFERENCE_ORDERS = np.concatenate([1.0 + np.arange(1, 100) / 10.0, np.arange(11.0, 64.0),
                                   [128.0, 256.0, 512.0, 1024.0]])
#: The orders of method="rdp" with Poisson sampling when none are given (200): REFERENCE_ORDERS united with
#: DEFAULT_ORDERS.  A superset gives an eps (and a calibrated noise) never above either library's default,
#: since the conversion minimises over the orders; calibration costs < 2x the integer orders 2..64 alone
#: (``_calibrate_screened``; bench/calibrate_orders.py).
CALIBRATION_ORDERS = np.union1d(REFERENCE_ORDERS, DEFAULT_ORDERS)
for _a in (REFERENCE_ORDERS, CALIBRATION_ORDERS):
    _a.setflags(write=False)
_SAFETY = 1e-9  # relative margin added to calibrated noise so that rounding never lands on the wrong side


def _check_method(method: str, sampling: str, q: np.ndarray) -> None:
    if method not in METHODS:
        raise ParameterError("method", method, f"one of {METHODS}")
    check_sampling(sampling)
    if method == "pld" and sampling != "poisson":
        raise UnsupportedError("sampling", sampling, "'poisson' for method='pld'",
                             "dp-accounting 0.6 has no PLD for sampling without replacement; "
                             "use method='rdp'")
    if method == "analytic" and np.any(q < 1.0):
        raise ParameterError("sample_rate", float(np.min(q)), "exactly 1 for method='analytic'",
                             "the analytic Gaussian is exact only without subsampling; use 'rdp' or 'pld'")


def _inputs(noise_multiplier, sample_rate, steps, other, other_name, other_check):
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    q = check_probability("sample_rate", sample_rate, allow_one=True)
    t = check_int("steps", steps, 1)
    o = other_check(other_name, other)
    return broadcast(noise_multiplier=z, sample_rate=q, steps=t, **{other_name: o})


def epsilon(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, delta: ArrayLike,
            method: str = "rdp", *, sampling: str = "poisson", orders: ArrayLike | None = None,
            conversion: str = "improved", pld_discretization: float = 1e-4) -> float | np.ndarray:
    """eps after ``steps`` rounds of the (subsampled) Gaussian with noise multiplier z at ``delta``.

    See the module docstring for methods and sampling; e.g. ``epsilon(1.1, 0.01, 1000, 1e-5)`` (RDP, Poisson).
    """
    z, q, t, d = _inputs(noise_multiplier, sample_rate, steps, delta, "delta",
                         lambda n, v: check_probability(n, v))
    _check_method(method, sampling, q)
    _check_conversion(conversion)
    if method == "analytic":
        return _composed(analytic_gaussian_epsilon, z, t, d)
    if method == "pld":
        try:
            return pld_epsilon(z, q, t, d, pld_discretization)
        except PldTooCostly as exc:
            _fallback(exc)
    o = _orders(orders, sampling)
    rdp_fn = rdp_subsampled_gaussian if sampling == "poisson" else rdp_sampled_without_replacement
    rdp = rdp_fn(o.ravel(), q, z, t)
    return rdp_to_dp(o.ravel(), rdp, d, conversion=conversion)


def delta_for_epsilon(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, eps: ArrayLike,
                      method: str = "rdp", *, sampling: str = "poisson", orders: ArrayLike | None = None,
                      conversion: str = "improved", pld_discretization: float = 1e-4) -> float | np.ndarray:
    """delta after ``steps`` rounds at ``eps`` (at most 1): what a given noise truly delivers.

    Use it to report e.g. "the paper's sigma delivers delta = 0.034, not 0.001".
    """
    z, q, t, e = _inputs(noise_multiplier, sample_rate, steps, eps, "eps",
                         lambda n, v: check_real(n, v, 0.0))
    _check_method(method, sampling, q)
    _check_conversion(conversion)
    if method == "analytic":
        return _composed(lambda sigma, eps: analytic_gaussian_delta(eps, sigma), z, t, e)
    if method == "pld":
        try:
            return pld_delta(z, q, t, e, pld_discretization)
        except PldTooCostly as exc:
            _fallback(exc)
    o = _orders(orders, sampling)
    rdp_fn = rdp_subsampled_gaussian if sampling == "poisson" else rdp_sampled_without_replacement
    return rdp_to_delta(o.ravel(), rdp_fn(o.ravel(), q, z, t), e, conversion=conversion)


def calibrate_noise(target_eps: ArrayLike, delta: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike,
                    method: str = "rdp", *, sampling: str = "poisson", orders: ArrayLike | None = None,
                    conversion: str = "improved", pld_discretization: float = 1e-4) -> float | np.ndarray:
    """The smallest noise multiplier z (std / sensitivity) for which ``steps`` rounds are (target_eps,
    delta)-DP.

    Vectorised: ``calibrate_noise(eps_grid, 1e-5, q_grid, steps_grid)`` solves every grid point in one call
    (RDP + Poisson: one vectorised search; PLD and sampling without replacement: a root search per point). The
    result z satisfies ``epsilon(z, ...) <= target_eps`` and ``epsilon(z * (1 - 1e-4), ...) > target_eps``.
    """
    e = check_real("target_eps", target_eps, 0.0, low_open=True)
    d = check_probability("delta", delta)
    q = check_probability("sample_rate", sample_rate, allow_one=True)
    t = check_int("steps", steps, 1)
    e, d, q, t = broadcast(target_eps=e, delta=d, sample_rate=q, steps=t)
    _check_method(method, sampling, q)
    _check_conversion(conversion)
    shape = e.shape
    e, d, q, t = (a.ravel() for a in (e, d, q, t))
    if method == "analytic":
        z = np.sqrt(t) * np.asarray(analytic_gaussian_std(e, d)).ravel()
    elif method == "rdp" and sampling == "poisson":
        z = _calibrate_rdp(e, d, q, t, _orders(orders, sampling).ravel(), conversion)
    else:
        try:
            z = _calibrate_by_search(e, d, q, t, method, sampling, orders, conversion, pld_discretization)
        except PldTooCostly as exc:
            _fallback(exc)
            z = _calibrate_rdp(e, d, q, t, _orders(orders, sampling).ravel(), conversion)
        except (InfeasibleError, DomainError) as exc:  # at a noise the search tried: name the user's target
            where = (f"target_eps = {e[0]:g} at delta = {d[0]:g}, sample_rate = {q[0]:g}, steps = {t[0]}"
                     if e.size == 1 else f"target_eps (a grid of {e.size} points)")
            raise InfeasibleError(f"{where} cannot be calibrated: {exc}") from None
    return scalar_or_array(z.reshape(shape))


def _orders(orders: ArrayLike | None, sampling: str) -> np.ndarray:
    """The orders given, else CALIBRATION_ORDERS (Poisson) or DEFAULT_ORDERS (without replacement, where each
    order costs a dp-accounting evaluation)."""
    if orders is None:
        return CALIBRATION_ORDERS if sampling == "poisson" else DEFAULT_ORDERS
    return check_orders(orders)


def _composed(fn: Callable, z: np.ndarray, t: np.ndarray, other: np.ndarray) -> float | np.ndarray:
    """``fn(z / sqrt(steps), other)``: T Gaussian releases are one with std z / sqrt(T) (Dong, Roth & Su 2022,
    Cor. 3.3); an error about that derived std names the noise multiplier the user gave."""
    try:
        return fn(z / np.sqrt(t), other)
    except ParameterError as exc:
        raise DomainError("noise_multiplier", float(np.min(z)), "a value whose composed std z / sqrt(steps) "
                          "the analytic Gaussian can evaluate", str(exc)) from None


def _fallback(exc: PldTooCostly) -> None:
    """Say that RDP (a valid, looser upper bound on eps) answers where PLD would be too costly."""
    warnings.warn(f"method='pld' would be too costly here ({exc}); RDP answered instead (an upper bound on "
                  "eps, slightly looser than PLD)", AccountingFallbackWarning, stacklevel=3)


def _infeasible(e: np.ndarray, d: np.ndarray, bad: np.ndarray, orders: np.ndarray) -> InfeasibleError:
    i = int(np.flatnonzero(bad)[0])
    return InfeasibleError(
        f"target_eps = {e[i]:g} cannot be met at delta = {d[i]:g} with Renyi orders up to {orders.max():g}: "
        f"even infinite noise gives eps >= {float(np.min(conversion_offset(orders, d[i]))):.4g} there "
        f"(grid point {i}); raise target_eps or delta, or pass larger orders=")


def _calibrate_rdp(e: np.ndarray, d: np.ndarray, q: np.ndarray, t: np.ndarray, orders: np.ndarray,
                   conversion: str) -> np.ndarray:
    """Vectorised RDP calibration (Poisson sampling).

    For each point p and order a the target is met iff steps * rdp_a(z) <= eps - offset_a(delta), i.e. the
    per-step RDP stays within a budget b[p, a] (also met when steps * rdp <= -ln(1 - delta^2), the KL branch
    of the improved conversion).  rdp_a decreases in z, so z* = min_a z_a with rdp_a(z_a) = b[p, a].
    1. Upper bracket: the q = 1 answer min_a sqrt(a / (2 b)) (subsampling never adds RDP; exact at q = 1).
    2. Lower bracket and geometric bisection on all orders at once until hi / lo <= 1.5.
    3. Per-order roots (Illinois) only for the orders feasible at hi; z* = the smallest root.
    """
    budget = (e[:, None] - conversion_offset(orders, d, conversion)) / t[:, None]
    if conversion == "improved":
        budget = np.maximum(budget, kl_budget(d)[:, None] / t[:, None])
    usable = budget > 0
    if not usable.any(axis=1).all():
        raise _infeasible(e, d, ~usable.any(axis=1), orders)
    safe_budget = np.where(usable, budget, 1.0)
    with np.errstate(divide="ignore"):
        z_full = np.where(usable, np.sqrt(orders / (2.0 * safe_budget)), np.inf)
    z = z_full.min(axis=1)
    part = np.flatnonzero(q < 1.0)
    if part.size:
        z[part] = _calibrate_screened(q[part], z_full[part], budget[part], usable[part], orders)
    if np.any(z < MIN_NOISE_MULTIPLIER):  # nan-free: z is >= 0 or inf here
        i = int(np.argmin(z))
        raise ParameterError("target_eps", float(e[i]), f"a target that needs noise multiplier >= "
                             f"{MIN_NOISE_MULTIPLIER:g}", f"at delta = {d[i]:g}, q = {q[i]:g}, steps = "
                             f"{t[i]} even noise multiplier {MIN_NOISE_MULTIPLIER:g} meets it: no privacy")
    if np.any(z > MAX_NOISE_MULTIPLIER):
        i = int(np.argmax(z))
        raise InfeasibleError(f"target_eps = {e[i]:g} at delta = {d[i]:g}, q = {q[i]:g}, steps = {t[i]} "
                              f"needs a noise multiplier above {MAX_NOISE_MULTIPLIER:g}")
    return z * (1.0 + _SAFETY)


def _calibrate_screened(q, z_full, budget, usable, orders) -> np.ndarray:
    """``_calibrate_subsampled`` over all ``orders``, exact, at < 2x the cost of the integer orders 2..64.

    z* = min_a z_a, where rdp_a(z_a) = budget_a and rdp_a decreases in z, so an order can lower the minimum
    below z iff rdp_a(z) < budget_a there.
    1. Calibrate on the core orders (integers <= 64, short binomial series): z_c.
    2. Screen the other orders at z_c (``_screen``): log A_alpha = (alpha - 1) rdp(alpha) is convex in alpha,
       so chords of orders known exactly at z_c bound it from below (``_chord_lower``); an order whose bound
       already exceeds its budget cannot lower z*.  Known at first: the core orders around the others and
       two anchors in (1, 2]; the candidates nearest the middle of each gap are evaluated and become nodes,
       round by round; the candidates left are evaluated exactly at z_c.
    3. While some order beats the current z: solve the root of the one with the most slack per point (secant
       in log z from the tangent at z, bracket kept: ``_secant_root``), then re-check the others at the new
       z.  Only orders that provably cannot beat z are skipped, so z* is the exhaustive answer (to the
       roots' tolerance, 1e-11 in log z).
    Points with no usable core order, or a core answer outside (0, inf), take the direct route.
    """
    core = (orders == np.round(orders)) & (orders <= 64)
    if core.sum() < 3 or (~core).sum() < 3:
        return _calibrate_subsampled(q, z_full.min(axis=1), budget, usable, orders)
    z = np.full(q.size, np.inf)
    direct = ~usable[:, core].any(axis=1)
    fast = np.flatnonzero(~direct)
    if fast.size:
        z[fast] = _calibrate_subsampled(q[fast], z_full[fast][:, core].min(axis=1), budget[fast][:, core],
                                        usable[fast][:, core], orders[core])
    direct |= ~((z > 0) & np.isfinite(z))
    if direct.any():
        z[direct] = _calibrate_subsampled(q[direct], z_full[direct].min(axis=1), budget[direct],
                                          usable[direct], orders)
    fast = np.flatnonzero(~direct)
    if fast.size == 0:
        return z
    zf, q_fast = z[fast], q[fast]
    alpha, pts, log_r, log_b = _screen(q_fast, zf, budget[fast], usable[fast], orders, core)

    def log_rdp(x, idx):
        with np.errstate(divide="ignore"):
            return np.log(_sgm.log_a_batched(alpha[idx], q_fast[pts[idx]], np.exp(x)) / (alpha[idx] - 1.0))

    live = np.arange(pts.size)
    # z only decreases and RDP only grows as it does, so an order that cannot beat z now never will: each
    # round drops those, solves the root of the order with the most slack per point, re-checks the rest.
    for _ in range(pts.size + 1):
        slack = log_b[live] - log_r[live]
        # Below 1e-9 the gain is under the calibration's tolerance; an RDP of 0 in floats (q or the order's
        # series beyond float range) is no evidence: that order is dropped and z stays feasible on the others.
        use = np.isfinite(slack) & (slack > 1e-9)
        live, slack = live[use], slack[use]
        if live.size == 0:
            break
        by_slack = np.argsort(slack)
        best = np.full(fast.size, -1)
        best[pts[live[by_slack]]] = by_slack  # the last write per point: its largest slack
        pick = best[best >= 0]
        chosen, at = live[pick], pts[live[pick]]

        def f(x, i, chosen=chosen):
            return log_rdp(x, chosen[i]) - log_b[chosen[i]]

        # First point: the tangent at log z, its slope that of the integer orders around the chosen one
        # (log rdp is about linear in log z, steeper than -2); if f is still <= 0 there it becomes hi, and lo
        # goes to log z - slack, then down by halving z until the order misses its budget.
        hi = np.log(zf[at])
        f_hi = -slack[pick]
        lo = hi - slack[pick] / (1.02 * _log_rdp_slope(alpha[chosen], q_fast[at], zf[at]))
        f_lo = f(lo, np.arange(pick.size))
        for k in range(61):
            low = np.flatnonzero(f_lo <= 0)
            if low.size == 0:
                break
            step = slack[pick][low] + lo[low] - hi[low] if k == 0 else np.log(2.0)  # to log z - slack
            hi[low], f_hi[low] = lo[low], f_lo[low]
            lo[low] -= np.maximum(step, 1e-3) if k == 0 else step
            f_lo[low] = f(lo[low], low)
        keep = np.flatnonzero(f_lo > 0)  # an order feasible 2^-60 below z is float noise: dropped, as above
        root = _secant_root(lambda x, i, keep=keep: f(x, keep[i]), lo[keep], hi[keep], f_lo[keep],
                            f_hi[keep], xtol=1e-11)
        zf[at[keep]] = np.minimum(zf[at[keep]], np.exp(root))
        live = np.setdiff1d(live, chosen)
        log_r[live] = log_rdp(np.log(zf[pts[live]]), live)
    z[fast] = zf
    return z


def _log_rdp_slope(alpha: np.ndarray, q: np.ndarray, z: np.ndarray) -> np.ndarray:
    """-d log rdp_alpha / d log z at z (>= 2), interpolated in alpha from the integer orders on each side (a
    forward difference of 1 %: a guess for a root search, never a bound)."""
    k0 = np.maximum(np.floor(alpha), 2.0)
    out = []
    for k in (k0, k0 + 1.0):
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append((np.log(_sgm.log_a(k, q, z)) - np.log(_sgm.log_a(k, q, z * np.exp(0.01)))) / 0.01)
    s = out[0] + (alpha - k0) * (out[1] - out[0])
    return np.where(np.isfinite(s), np.maximum(s, 2.0), 2.0)


def _secant_root(f: Callable, lo: np.ndarray, hi: np.ndarray, f_lo: np.ndarray, f_hi: np.ndarray,
                 xtol: float) -> np.ndarray:
    """``decreasing_root``'s ``hi`` (f(hi) <= 0 < f(lo), hi - lo <= xtol) in fewer evaluations where f is
    smooth: secant steps on the latest two points (kept inside the bracket) until a step moves less than
    xtol / 4, then points at the estimate +- xtol / 2.2, which bracket the root that close; whatever is
    still wider than xtol after six calls finishes by ``decreasing_root``.  The bracket is kept at every
    step, so the answer is as certain as ``decreasing_root``'s."""
    lo, hi, f_lo, f_hi = lo.copy(), hi.copy(), f_lo.copy(), f_hi.copy()
    x0, f0, x1, f1 = lo.copy(), f_lo.copy(), hi.copy(), f_hi.copy()

    def estimate(i):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = x1[i] - f1[i] * (x1[i] - x0[i]) / (f1[i] - f0[i])
        return np.where(np.isfinite(r) & (r > lo[i]) & (r < hi[i]), r, 0.5 * (lo[i] + hi[i]))

    def update(i, x, fx):
        pos = fx > 0
        lo[i[pos]], f_lo[i[pos]] = x[pos], fx[pos]
        hi[i[~pos]], f_hi[i[~pos]] = x[~pos], fx[~pos]

    for _ in range(6):
        i = np.flatnonzero(hi - lo > xtol)
        if i.size == 0:
            return hi
        r = estimate(i)
        near = np.abs(r - x1[i]) < 0.25 * xtol  # converged: one point on each side of r closes the bracket
        a, c = np.maximum(r - xtol / 2.2, lo[i]), np.minimum(r + xtol / 2.2, hi[i])
        side_a, side_c = near & (a > lo[i]), near & (c < hi[i])
        step = ~near
        idx = np.concatenate([i[step], i[side_a], i[side_c]])
        x = np.concatenate([r[step], a[side_a], c[side_c]])
        fx = f(x, idx)
        update(idx, x, fx)
        k = np.flatnonzero(step)
        x0[i[k]], f0[i[k]], x1[i[k]], f1[i[k]] = x1[i[k]], f1[i[k]], x[:k.size], fx[:k.size]
    _, hi = decreasing_root(f, lo, hi, f_lo, f_hi, xtol=xtol)
    return hi


#: Screening refinement: rounds that each evaluate, per point and per gap between orders known exactly, the
#: candidate nearest the gap's middle, which then bounds its neighbours as a node.
_REFINE_ROUNDS = 3
#: Relative error allowed for a known log A in the chord bounds (series and quadrature are accurate to
#: ~1e-13): each chord is lowered by it, amplified by the extrapolation.
_NODE_RTOL = 1e-10


def _screen(q, z, budget, usable, orders, core):
    """The non-core orders that may beat each point's z, evaluated exactly there: (alpha, pts, log_r, log_b),
    one entry per (point, order), log_r = log rdp at z, log_b = log budget.

    An order a with rdp_a(z) >= budget_a cannot lower z* (rdp only grows as z falls), and ``_chord_lower``
    bounds rdp_a(z) from below from the orders known exactly at z.  Known at first: the core orders next to
    a non-core one (a short binomial series each) and two anchors in (1, 2] (the smallest order and the one
    nearest 1.5; integer chords cannot bound that range), which are always returned.  Then,
    ``_REFINE_ROUNDS`` times, in each gap between known orders that holds candidates (bound below budget,
    margin 1e-6), the candidate nearest the gap's middle is evaluated and becomes a node, tightening its
    neighbours' bounds; at last every candidate left is evaluated.
    """
    alpha, first = np.unique(orders, return_index=True)  # sorted, without repeats
    core, b, ok = core[first], budget[:, first], usable[:, first]
    anchor = np.zeros(alpha.size, dtype=bool)
    anchor[np.argmin(np.where(core, np.inf, alpha))] = True
    anchor[np.argmin(np.where(core, np.inf, np.abs(alpha - 1.5)))] = True
    rest = np.flatnonzero(~core & ~anchor)
    nodes = np.flatnonzero(core | anchor)
    j = np.searchsorted(alpha[nodes], alpha[rest])  # the two nodes on each side of every other order
    nodes = np.union1d(nodes[np.unique(np.clip(np.concatenate([j - 2, j - 1, j, j + 1]), 0, nodes.size - 1))],
                       np.flatnonzero(anchor))
    # The nodes' bounds on every other order (dense: the same nodes for every point); only the candidates
    # join the table (per point: the order 1 with log A = 0, the nodes, its candidates; sorted, flattened).
    xn = np.concatenate([[1.0], alpha[nodes]])
    yn = np.concatenate([np.zeros((q.size, 1)), _log_a_grid(q, z, alpha[nodes])], axis=1)
    j = np.searchsorted(xn, alpha[rest])
    lower = np.zeros((q.size, rest.size))
    for a, c, valid in ((j - 2, j - 1, j >= 2), (j, j + 1, j + 1 < xn.size)):
        a, c = np.clip(a, 0, xn.size - 1), np.clip(c, 0, xn.size - 1)
        line = _chord(xn[a], yn[:, a], xn[c], yn[:, c], alpha[rest])
        lower = np.where(valid & np.isfinite(line), np.maximum(lower, line), lower)
    p, i = np.nonzero(ok[:, rest] & (lower / (alpha[rest] - 1.0) < b[:, rest] * (1.0 + 1e-6)))
    pt = np.concatenate([np.repeat(np.arange(q.size), xn.size), p])
    col = np.concatenate([np.tile(np.concatenate([[-1], nodes]), q.size), rest[i]])
    y = np.concatenate([yn.ravel(), np.full(p.size, np.nan)])
    colc = np.maximum(col, 0)
    x = np.where(col < 0, 1.0, alpha[colc])
    by = np.lexsort((x, pt))
    pt, col, colc, x, y = pt[by], col[by], colc[by], x[by], y[by]
    other = np.isnan(y)
    evaluated = np.zeros(pt.size, dtype=bool)
    for rnd in range(_REFINE_ROUNDS + 1):
        lower, left, right = _chord_lower(pt, x, y)
        with np.errstate(invalid="ignore"):  # x = 1 (0 / 0) is never a candidate
            cand = other & ~evaluated & ok[pt, colc] & (lower / (x - 1.0) < b[pt, colc] * (1.0 + 1e-6))
        pick = np.flatnonzero(cand)
        if pick.size and rnd < _REFINE_ROUNDS:  # per gap: the candidate nearest the gap's middle
            gap = left[pick]
            mid = 0.5 * (x[gap] + np.where(right[pick] < x.size, x[np.minimum(right[pick], x.size - 1)],
                                           x[pick]))
            by = np.lexsort((np.abs(x[pick] - mid), gap))
            pick = pick[by[np.unique(gap[by], return_index=True)[1]]]
        keep = ~other | evaluated | cand  # orders left out now are left out for good
        new = np.zeros(pt.size, dtype=bool)
        new[pick] = True
        pt, col, colc, x, y, other, evaluated, new = (v[keep] for v in (pt, col, colc, x, y, other, evaluated,
                                                                        new))
        if pick.size == 0:
            break
        y[new] = _sgm.log_a_batched(x[new], q[pt[new]], z[pt[new]])
        evaluated |= new
    out = np.flatnonzero((evaluated | np.isin(col, np.flatnonzero(anchor))) & ok[pt, colc])
    p, c = pt[out], colc[out]
    with np.errstate(divide="ignore", invalid="ignore"):
        return alpha[c], p, np.log(y[out] / (alpha[c] - 1.0)), np.log(b[p, c])


def _chord_lower(pt: np.ndarray, x: np.ndarray, y: np.ndarray, rtol: float = _NODE_RTOL):
    """Lower bounds on log A_x from the known (not NaN) entries of a table sorted by (point ``pt``, order
    ``x``) whose rows each start with the order 1 (log A_1 = 0); returns (lower, left, right): the bound and
    the entries of the nearest known order on each side in the same row (-1 / len(x): none).

    log A_alpha is convex in alpha (A_alpha is a moment of the likelihood ratio: Hoelder's inequality; van
    Erven & Harremoes 2014, "Renyi divergence and Kullback-Leibler divergence") and >= 0, so the chord of
    the two nearest known orders on the left, extended right, and that of the two on the right, extended
    left, lie below it; each is lowered by ``rtol`` times its nodes' values, amplified by the extrapolation,
    so that rounding in the known values cannot lift a bound above the truth."""
    n = x.size
    idx = np.arange(n)
    known = ~np.isnan(y)
    left = np.concatenate([[-1], np.maximum.accumulate(np.where(known, idx, -1))[:-1]])
    right = np.concatenate([np.minimum.accumulate(np.where(known, idx, n)[::-1])[::-1][1:], [n]])
    left = np.where((left >= 0) & (pt[np.maximum(left, 0)] == pt), left, -1)
    right = np.where((right < n) & (pt[np.minimum(right, n - 1)] == pt), right, n)
    left2 = np.where(left >= 0, left[np.maximum(left, 0)], -1)
    right2 = np.where(right < n, right[np.minimum(right, n - 1)], n)
    lower = np.zeros(n)
    for a, c, valid in ((left2, left, left2 >= 0), (right, right2, right2 < n)):
        a, c = np.clip(a, 0, n - 1), np.clip(c, 0, n - 1)
        line = _chord(x[a], y[a], x[c], y[c], x, rtol)
        lower = np.where(valid & np.isfinite(line), np.maximum(lower, line), lower)
    return lower, left, right


def _chord(xa, ya, xc, yc, x, rtol: float = _NODE_RTOL):
    """The line through (xa, ya) and (xc, yc) at x, lowered by ``rtol`` times |ya| and |yc| amplified by
    the extrapolation (a lower bound on a convex function outside [xa, xc] even when ya, yc carry that
    relative error)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        line = ya + (x - xa) * (yc - ya) / (xc - xa)
        return line - rtol * (np.abs(ya) * np.abs(x - xc) + np.abs(yc) * np.abs(x - xa)) / (xc - xa)


def _log_a_grid(q: np.ndarray, z: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """log A of every point (q_p, z_p) at every order, shape (points, orders)."""
    a = np.tile(orders, q.size)
    return _sgm.log_a(a, np.repeat(q, orders.size), np.repeat(z, orders.size)).reshape(q.size, orders.size)


def _rdp_grid(q: np.ndarray, z: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """Per-step RDP of every point (q_p, z_p) at every order, shape (points, orders)."""
    return _log_a_grid(q, z, orders) / (orders - 1.0)


def _calibrate_subsampled(q, z_hi, budget, usable, orders) -> np.ndarray:
    hi, lo = z_hi.copy(), z_hi * np.clip(0.5 * q, 1e-4, 0.5)
    r_hi, r_lo = _rdp_grid(q, hi, orders), _rdp_grid(q, lo, orders)

    ok = (usable & (r_lo <= budget)).any(axis=1)
    while ok.any():  # the lower end is still private enough: move the bracket down
        if np.any(lo[ok] < MIN_NOISE_MULTIPLIER):  # below the calibration range: report, do not descend
            z = z_hi.copy()
            z[ok & (lo < MIN_NOISE_MULTIPLIER)] = 0.0
            return z
        hi[ok], r_hi[ok] = lo[ok], r_lo[ok]
        lo[ok] *= np.clip(0.5 * q[ok], 1e-4, 0.5)
        r_lo[ok] = _rdp_grid(q[ok], lo[ok], orders)
        ok[ok] = (usable[ok] & (r_lo[ok] <= budget[ok])).any(axis=1)
    while True:
        wide = np.flatnonzero(hi > 1.5 * lo)
        if wide.size == 0:
            break
        mid = np.sqrt(lo[wide] * hi[wide])
        r_mid = _rdp_grid(q[wide], mid, orders)
        ok = (usable[wide] & (r_mid <= budget[wide])).any(axis=1)
        up, down = wide[ok], wide[~ok]
        hi[up], r_hi[up] = mid[ok], r_mid[ok]
        lo[down], r_lo[down] = mid[~ok], r_mid[~ok]
    # Per-order roots in log z for the (point, order) pairs that are feasible at hi.
    pts, ords = np.nonzero(usable & (r_hi <= budget))
    alpha, qq, log_b = orders[ords], q[pts], np.log(budget[pts, ords])

    def f(x, idx):
        with np.errstate(divide="ignore"):
            return np.log(_sgm.log_a(alpha[idx], qq[idx], np.exp(x)) / (alpha[idx] - 1.0)) - log_b[idx]

    with np.errstate(divide="ignore"):
        f_lo = np.log(r_lo[pts, ords]) - log_b
        f_hi = np.log(r_hi[pts, ords]) - log_b
    _, root = decreasing_root(f, np.log(lo[pts]), np.log(hi[pts]), f_lo, f_hi, xtol=1e-11)
    z = hi.copy()
    np.minimum.at(z, pts, np.exp(root))
    return z


def _calibrate_by_search(e, d, q, t, method, sampling, orders, conversion, pld_discretization) -> np.ndarray:
    """Root search in log z per grid point for methods without a vectorised calibration (PLD, without
    replacement).

    Bracket: the RDP-Poisson calibration (x 1.25 for PLD, x 1.5 either way without replacement), widened
    until it holds; xtol 1e-6 relative (PLD's eps is discretised; dp-accounting's RDP without replacement
    costs ~0.4-1.5 s per evaluation, so each saved iteration counts).
    """
    def eps_at(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if method == "pld":  # a cheaper discretisation per evaluation: the search makes ~20 of them
            return np.atleast_1d(pld_epsilon(np.exp(x), q[idx], t[idx], d[idx], pld_discretization,
                                             step_points=PLD_CALIBRATION_STEP_POINTS))
        return np.atleast_1d(epsilon(np.exp(x), q[idx], t[idx], d[idx], method, sampling=sampling,
                                     orders=orders, conversion=conversion))

    def f(x, idx):  # log(eps / target), floored at log(1/4): where eps drops to 0 (delta near 1, KL branch),
        # an unfloored log would send the secant steps to the far end of the bracket, one evaluation at a time
        return np.log(np.maximum(eps_at(x, idx), np.maximum(0.25 * e[idx], 1e-300))) - np.log(e[idx])

    width = np.full(e.size, np.log(1.25))
    if method == "pld":  # PLD is tighter than RDP; at q = 1 it approximates the exact analytic answer
        guess = _calibrate_rdp(e, d, q, t, check_orders(None), "improved")
        full = q >= 1.0
        if full.any():
            guess[full] = np.sqrt(t[full]) * np.asarray(analytic_gaussian_std(e[full], d[full])).ravel()
            width[full] = 2e-3
    else:  # without replacement: the Poisson answer at the same q is a close, cheap guess (x 1.5 either way)
        guess = _calibrate_rdp(e, d, q, t, check_orders(orders).ravel(), conversion)
        width = np.full(e.size, np.log(1.5))
    z_max = MAX_NOISE_MULTIPLIER if method == "pld" else WOR_MAX_NOISE_MULTIPLIER
    if np.any(guess * np.exp(width) > z_max):
        raise InfeasibleError(f"the target needs a noise multiplier near {float(np.max(guess)):.3g}, above "
                              f"{z_max:g} (the limit of {method!r} with sampling {sampling!r})")
    everything = np.arange(e.size)
    upper = np.where(width < 0.1, width, 0.0) if method == "pld" else width
    lo, hi = _widen(f, np.log(guess) - width, np.log(guess) + upper, everything, z_max)
    _, hi = decreasing_root(f, lo[0], hi[0], lo[1], hi[1], xtol=1e-6)
    return np.exp(hi)


def _widen(f: Callable, lo: np.ndarray, hi: np.ndarray, idx: np.ndarray, z_max: float):
    """Move [lo, hi] (log z) until f(lo) > 0 >= f(hi); returns ((lo, f_lo), (hi, f_hi)).  When hi must move
    up, f at z_max is checked first: a target even z_max misses is refused at once, not after ~30
    doublings."""
    f_lo, f_hi = f(lo, idx), f(hi, idx)
    checked_max = False
    for _ in range(60):
        bad_hi = np.flatnonzero(f_hi > 0)
        if bad_hi.size and not checked_max:
            checked_max = True
            if np.any(f(np.full(bad_hi.size, np.log(z_max)), idx[bad_hi]) > 0):
                raise InfeasibleError(f"even a noise multiplier of {z_max:g} does not meet it")
        if bad_hi.size:
            lo[bad_hi], f_lo[bad_hi] = hi[bad_hi], f_hi[bad_hi]
            hi[bad_hi] += np.log(2.0)
            f_hi[bad_hi] = f(hi[bad_hi], idx[bad_hi])
        bad_lo = np.flatnonzero(f_lo <= 0)
        if bad_lo.size:
            hi[bad_lo], f_hi[bad_lo] = lo[bad_lo], f_lo[bad_lo]
            lo[bad_lo] -= np.log(2.0)
            f_lo[bad_lo] = f(lo[bad_lo], idx[bad_lo])
        if bad_hi.size == 0 and bad_lo.size == 0:
            return (lo, f_lo), (hi, f_hi)
        if np.any(hi > np.log(z_max)):
            raise InfeasibleError(f"the target needs a noise multiplier above {z_max:g}")
    raise InfeasibleError("could not bracket the noise multiplier")  # pragma: no cover
