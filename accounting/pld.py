"""Privacy loss distribution (PLD) accounting, delegated to Google's ``dp_accounting`` (not rewritten here).

The PLD accountant (Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022, "Connect the Dots")
computes the privacy profile of the composed mechanism numerically; it is the tightest of our methods, up to
its discretisation (``discretization`` = value_discretization_interval, default 1e-4, pessimistic rounding,
so the eps it reports is an upper bound).  Only Poisson sampling (add/remove relation) is supported, as in
dp-accounting 0.6.  dp-accounting truncates the noise tails at e^-50 of mass, so deltas below about 1e-15
cannot be resolved: we raise a DomainError there instead of returning its inf.

Functions loop over grid points (PLD is the slow exact method: ~0.1-2 s per point) and return a float for
scalar input, an array otherwise.

Cost: dp-accounting's time and memory grow with the number of discretisation points, i.e. with the range of
the privacy loss (about 1/(2 z^2) + 10/z for one step, Meiser & Mohammadi 2018) and, after composition,
with steps times its mean plus 10 standard deviations, all divided by the discretisation.
:func:`discretization_for` estimates both from the input and coarsens the discretisation so that one
evaluation stays within ``PLD_STEP_POINTS`` / ``PLD_TOTAL_POINTS`` (about 4 s and well under 1 GB on 2
cores; measured).  Coarser is still an upper bound (pessimistic rounding), off by at most steps x
discretisation in eps.  Where even ``PLD_MAX_DISCRETIZATION`` would not do, :class:`PldTooCostly` is raised
and ``fedbound.accounting.epsilon`` (method="pld") falls back to RDP, saying so with an
AccountingFallbackWarning.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedbound.accounting.events import make_accountant, poisson_gaussian_event
from fedbound.checks import broadcast, check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import DomainError

__all__ = ["pld_epsilon", "pld_delta", "pld_calibrate", "discretization_for", "discretization_for_target",
           "PldTooCostly", "subsampled_gaussian_pld", "PLD_STEP_POINTS", "PLD_TOTAL_POINTS", "PLD_MAX_STEPS",
           "PLD_MAX_DISCRETIZATION", "composed_pld_epsilon", "pld_epsilon_fast",
           "subsampled_gaussian_epsilon"]

PLD_STEP_POINTS = 5e5
"""Points of one step's privacy-loss distribution (~4 s per evaluation on this 2-core machine, measured)."""
PLD_TOTAL_POINTS = 2e6
"""Points of the composed distribution (its FFT's memory: 16 bytes each, a few copies)."""
PLD_MAX_STEPS = 10**6
"""More steps than this: dp-accounting's self-composition takes minutes (10^6: ~4 s; 10^8: > 100 s)."""
PLD_MAX_DISCRETIZATION = 0.05
"""Coarser than this, PLD is no longer worth its cost: PldTooCostly (RDP is the fallback)."""


class PldTooCostly(DomainError):
    """PLD would need more points than the cost limits allow even at ``PLD_MAX_DISCRETIZATION``."""


def _loss_widths(z: float, q: float, t: int) -> tuple[float, float]:
    """(one step's privacy-loss range, the composed range) of the q-subsampled Gaussian, as estimated above.

    One step: losses L(x) = (1 - 2x) / (2 z^2) over x in [-10 z, 1 + 10 z] (dp-accounting's e^-50 tail
    truncation), i.e. |L| <= 1/(2 z^2) + 10/z, subsampled by log(1 - q + q e^L).  Composed: steps * mean
    + 10 sqrt(steps) * sd, with mean <= min(q / (2 z^2), chi^2)
    and sd <= min(chi, sqrt(q) (1/z + 1/(2 z^2)), one step's range), chi^2 = q^2 (e^{1/z^2} - 1) (the
    chi-square divergence of the subsampled Gaussian, Mironov et al. 2019).
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        z = np.float64(z)
        l_hi = 0.5 / z**2 + 10.0 / z
        l_lo = -l_hi
        log_q = np.log(q)
        if q >= 1.0:
            step = 2.0 * l_hi
        else:  # log(1 - q + q e^L) at both ends, without overflow
            log_keep = np.log1p(-q)
            step = np.logaddexp(log_keep, log_q + l_hi) - np.logaddexp(log_keep, log_q + l_lo)
        chi2 = np.exp(min(2.0 * log_q + min(1.0 / z**2, 700.0), 700.0))
        mean = min(q * 0.5 / z**2, chi2)
        sd = min(np.sqrt(chi2), np.sqrt(q) * (1.0 / z + 0.5 / z**2), step)
        total = min(t * step, t * mean + 10.0 * np.sqrt(t) * sd) + step
    return float(step), float(total)


def discretization_for(noise_multiplier: float, sample_rate: float, steps: int, requested: float = 1e-4,
                       step_points: float = PLD_STEP_POINTS) -> float:
    """The discretisation PLD uses for this input: ``requested``, coarsened to keep the cost bounded.

    PldTooCostly (naming the noise multiplier, the steps and the sample rate) beyond
    ``PLD_MAX_DISCRETIZATION``.
    """
    if steps > PLD_MAX_STEPS:
        raise PldTooCostly("steps", int(steps), f"integer in [1, {PLD_MAX_STEPS:.0e}] for method='pld'",
                           "dp-accounting's composition of more steps takes minutes; use method='rdp'")
    step, total = _loss_widths(float(noise_multiplier), float(sample_rate), int(steps))
    disc = max(requested, step / step_points, total / PLD_TOTAL_POINTS)
    if not (math.isfinite(step) and math.isfinite(total) and disc <= PLD_MAX_DISCRETIZATION):
        raise PldTooCostly("noise_multiplier", float(noise_multiplier),
                           "large enough for PLD at these steps and sample rate",
                           f"PLD of {int(steps)} steps at q = {float(sample_rate):g} would need "
                           f"{total / requested:.3g} discretisation points; use method='rdp'")
    return disc


def discretization_for_target(target_eps: float, steps: int, fraction: float = 0.01, finest: float = 1e-4,
                              coarsest: float = 1e-2) -> float:
    """The coarsest discretisation (within [finest, coarsest]) whose worst-case eps error, steps x
    discretisation (pessimistic rounding: an upper bound), is at most ``fraction`` of ``target_eps``: what a
    re-accounting that labels "tight" within 1 % needs, and often 100x cheaper than 1e-4."""
    e = float(check_real("target_eps", target_eps, 0.0, low_open=True))
    t = int(check_int("steps", steps, 1))
    return float(min(max(fraction * e / t, finest), coarsest))


def _gaussian_loss_class():
    """dp-accounting's GaussianPrivacyLoss with ``get_delta_for_epsilon`` vectorised over its epsilons.

    dp-accounting builds a one-step PLD (connect the dots) from the hockey-stick divergences at every
    discretised loss, inverting the loss point by point in Python: 80 % of a PLD evaluation.  This does the
    same arithmetic (``inverse_privacy_loss`` of the subsampled Gaussian, add and remove, q < 1) on the whole
    array at once; tests/test_accounting_pld_fast.py pins it against dp-accounting's own.
    """
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss

    class VectorGaussianPrivacyLoss(GaussianPrivacyLoss):
        def get_delta_for_epsilon(self, epsilon):
            q, s = self.sampling_prob, self.sensitivity
            if isinstance(epsilon, (int, float)) or q >= 1.0 or self.adjacency_type not in (
                    AdjacencyType.ADD, AdjacencyType.REMOVE):
                return super().get_delta_for_epsilon(epsilon)
            eps = np.asarray(epsilon, dtype=float)
            deltas = np.zeros_like(eps)
            a, c, var = 1 / q, 1 - 1 / q, self._standard_deviation**2
            add = self.adjacency_type == AdjacencyType.ADD
            edge = -math.log1p(-q) if add else math.log1p(-q)
            inv = eps < edge if add else eps > edge
            if not add:
                deltas[~inv] = -np.expm1(eps[~inv])
            e = eps[inv]
            d = (-e if add else e) + np.log(a)  # log(a e^(-+e) + c) = common.log_a_times_exp_b_plus_c
            with np.errstate(divide="ignore", invalid="ignore"):
                loss = np.where(e == 0, np.log(a + c), d + np.log1p(-np.exp(np.log(-c) - d)))
            loss = -loss if add else loss
            x = -0.5 * s - loss * var / s + (s if add else 0.0)
            near = np.abs(e - edge) <= 1e-9 * np.maximum(np.abs(e), abs(edge))  # math.isclose, as there
            x[near] = -math.inf if add else math.inf
            deltas[inv] = self.mu_upper_cdf(x) - np.exp(e + self.mu_lower_log_cdf(x))
            if not np.isfinite(deltas).all():  # where dp-accounting's scalar path raises
                raise ValueError("hockey-stick divergence not finite")
            return np.clip(deltas, 0, 1)

    return VectorGaussianPrivacyLoss


def subsampled_gaussian_pld(z: float, q: float, t: int, discretization: float):
    """dp-accounting's PLD of ``t`` Poisson-subsampled Gaussian steps (add/remove), as its PLDAccountant
    builds it (``PLD.from_gaussian_mechanism(z, sampling_prob=q)`` self-composed ``t`` times, composed onto
    the identity), with the one-step PLD's hockey-stick divergences vectorised (:func:`_gaussian_loss_class`),
    about 4x faster.  q < 1 only."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    step = pld_lib.PrivacyLossDistribution(*_one_step_pld(z, q, discretization))
    return pld_lib.identity(discretization).compose(step.self_compose(t))


class _Pld:
    """The accountant's ``get_epsilon`` / ``get_delta`` on a PLD built by :func:`subsampled_gaussian_pld`."""

    def __init__(self, pld):
        self.get_epsilon, self.get_delta = pld.get_epsilon_for_delta, pld.get_delta_for_epsilon


def _accountant(z: float, q: float, t: int, discretization: float, step_points: float = PLD_STEP_POINTS):
    disc = discretization_for(z, q, t, discretization, step_points)
    if q < 1.0:
        return _Pld(subsampled_gaussian_pld(z, q, t, disc))
    acc = make_accountant("pld", "poisson", pld_discretization=disc)
    acc.compose(poisson_gaussian_event(z, q, t))
    return acc


def _evaluate(query: str, z: float, q: float, t: int, x: float, discretization: float,
              step_points: float, accountant=None) -> float:
    """``get_epsilon(x)`` or ``get_delta(x)`` of the PLD accountant (``accountant``: :func:`_accountant`'s
    signature, default it); dp-accounting's arithmetic errors at extreme inputs become a DomainError naming
    them."""
    try:
        acc = (accountant or _accountant)(z, q, t, discretization, step_points)
        return float(getattr(acc, query)(x))
    except DomainError:
        raise
    except (ArithmeticError, ValueError, MemoryError) as exc:
        raise PldTooCostly("noise_multiplier", z, "a value dp-accounting's PLD can evaluate",
                           f"PLD failed at q = {q:g}, steps = {t} ({type(exc).__name__}); use method='rdp'"
                           ) from None


def _prepare(noise_multiplier, sample_rate, steps, other_name, other_check, discretization):
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    q = check_probability("sample_rate", sample_rate, allow_one=True)
    t = check_int("steps", steps, 1)
    o = other_check()
    check_real("discretization", discretization, 0.0, 0.1, low_open=True)
    return broadcast(noise_multiplier=z, sample_rate=q, steps=t, **{other_name: o})


def pld_epsilon(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, delta: ArrayLike,
                discretization: float = 1e-4, *, step_points: float = PLD_STEP_POINTS) -> float | np.ndarray:
    """eps of ``steps`` Poisson-subsampled Gaussian rounds at ``delta`` by dp-accounting's PLDAccountant.

    ``discretization`` is coarsened where the input would make PLD too costly (module docstring).
    """
    z, q, t, d = _prepare(noise_multiplier, sample_rate, steps, "delta",
                          lambda: check_probability("delta", delta), discretization)
    out = np.empty(z.shape)
    for i in np.ndindex(z.shape):
        eps = _evaluate("get_epsilon", float(z[i]), float(q[i]), int(t[i]), float(d[i]), discretization,
                        step_points)
        if not math.isfinite(eps):
            raise DomainError("delta", float(d[i]), "[1e-15, 1) for method='pld'",
                              "dp-accounting's PLD truncates tail mass below e^-50; use method='rdp'")
        out[i] = eps
    return scalar_or_array(out)


def pld_delta(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, eps: ArrayLike,
              discretization: float = 1e-4, *, step_points: float = PLD_STEP_POINTS) -> float | np.ndarray:
    """delta at ``eps`` of ``steps`` Poisson-subsampled Gaussian rounds by dp-accounting's PLDAccountant."""
    z, q, t, e = _prepare(noise_multiplier, sample_rate, steps, "eps", lambda: check_real("eps", eps, 0.0),
                          discretization)
    out = np.empty(z.shape)
    for i in np.ndindex(z.shape):
        out[i] = _evaluate("get_delta", float(z[i]), float(q[i]), int(t[i]), float(e[i]), discretization,
                           step_points)
    return scalar_or_array(np.clip(out, 0.0, 1.0))


_STARTS: dict[tuple[float, float], dict[tuple[int, float], tuple[float, float]]] = {}
"""(delta, q) -> {(steps, target eps): (log(z / upper), d log eps / d log z)}: this process's calibrations."""


def _warm_start(delta: float, q: float, t: int, eps: float) -> tuple[float, float] | None:
    """The start of the calibration nearest in (log steps, log eps) at the same delta and q, if any."""
    near = _STARTS.get((delta, q))
    if not near:
        return None
    key = min(near, key=lambda k: abs(math.log(k[0] / t)) + abs(math.log(k[1] / eps)))
    return near[key]


def _remember(delta: float, q: float, t: int, eps: float, ratio: float, seen: dict) -> None:
    """Keep the log ratio to ``upper`` and the secant slope through the last two evaluations (at most 256
    settings per (delta, q); the oldest goes first)."""
    items, slope = list(seen.items()), None
    if len(items) > 1:
        (x0, (v0, _)), (x1, (v1, _)) = items[-2:]
        slope = (v1 - v0) / (x1 - x0)
    if slope is None or not (slope < 0 and math.isfinite(slope)):
        prev = _warm_start(delta, q, t, eps)
        slope = prev[1] if prev else -1.0
    near = _STARTS.setdefault((delta, q), {})
    near[(t, eps)] = (ratio, slope)
    while len(near) > 256:
        near.pop(next(iter(near)))


def pld_calibrate(target_eps: float, delta: float, sample_rate: float, steps: int, discretization: float,
                  upper: float, rtol: float = 1e-3, max_evaluations: int = 40,
                  cpu_seconds: float = 4.0, evaluate=None) -> tuple[float, float]:
    """The smallest noise multiplier whose PLD eps (this module's :func:`pld_epsilon` at ``discretization``)
    of ``steps`` Poisson-subsampled Gaussian rounds is at most ``target_eps``: ``(z, eps_pld(z))`` with
    ``(1 - rtol) target <= eps_pld(z) <= target``.

    PLD's pessimistic rounding makes ``eps_pld`` an upper bound on the true eps, off by at most ``steps x
    discretization`` (dp-accounting's connect-the-dots construction): the returned z meets the target and
    its true eps lies within ``rtol`` plus that stated error of it.  ``upper``: a noise multiplier known to
    meet the target (e.g. the RDP calibration, which PLD undercuts by 3-27 %).  A safeguarded secant in
    log z on log eps_pld aimed at the middle of the window (log eps is nearly linear in log z, so 3-4
    evaluations), bisection where the secant leaves the bracket; only an evaluated point that meets the
    target is returned.  A later call at the same delta and q starts from the nearest earlier one (its ratio
    to ``upper`` and its slope: one Newton step), so a re-plan at a new eps takes 1-2 evaluations; the
    answer is still an evaluated point inside the window.  PldTooCostly where PLD cannot be evaluated at
    this input or no bracket is found.  The search stops after ``cpu_seconds`` of CPU time (bounded time at
    extreme inputs such as q = 1e-308, where eps_pld is 0 at every z): PldTooCostly, and the caller falls
    back to a valid (not tight) calibration.  ``evaluate``: the eps function (default :func:`pld_epsilon`;
    :func:`pld_epsilon_fast` gives the same floats, cheaper).
    """
    import time

    from fedbound.budget import check

    deadline = time.process_time() + cpu_seconds
    e = float(check_real("target_eps", target_eps, 0.0, low_open=True))
    t = int(check_int("steps", steps, 1))
    up = float(check_real("upper", upper, 0.0, low_open=True))
    aim, floor = math.log1p(-rtol / 2), math.log1p(-rtol)
    seen: dict[float, tuple[float, float]] = {}  # log z -> (log eps - log target, eps)

    def f(x: float) -> float:
        try:
            eps = float((evaluate or pld_epsilon)(math.exp(x), sample_rate, t, delta, discretization))
        except PldTooCostly:
            raise
        except DomainError:  # no finite eps at this delta (PLD's mass at infinite loss exceeds it): this z
            eps = math.inf   # is too small, as a larger eps would be (issue 36: eps = 495 failed here)
        seen[x] = (math.log(max(eps, 1e-300)) - math.log(e), eps)
        return seen[x][0] - aim

    lo, hi = -math.inf, math.inf  # log z: lo fails the target, hi meets it
    start = _warm_start(float(delta), float(sample_rate), t, e)
    if start is None:  # cold: two points below the RDP answer
        x0, x1 = math.log(0.8 * up), math.log(0.84 * up)
        g0, g1 = f(x0), f(x1)
    else:  # warm: the ratio to RDP and the slope of the nearest earlier calibration, then one Newton step
        x0 = math.log(up) + start[0]
        g0 = f(x0)
        x1 = x0 - min(max(g0 / start[1], -0.2), 0.2) if floor > seen[x0][0] or seen[x0][0] > 0 else x0
        g1 = f(x1) if x1 != x0 else g0
    for x in (x0, x1):
        if seen[x][0] <= 0:
            hi = min(hi, x)
        else:
            lo = max(lo, x)
    for _ in range(max_evaluations):
        done = [x for x, (v, _) in seen.items() if floor <= v <= 0]
        if done:
            _remember(float(delta), float(sample_rate), t, e, min(done) - math.log(up), seen)
            return math.exp(min(done)), seen[min(done)][1]
        if g1 == g0 or not math.isfinite(g1 - g0):
            x2 = x1 + (0.1 if g1 > 0 else -0.1)
        else:
            x2 = x1 - g1 * (x1 - x0) / (g1 - g0)
        if math.isfinite(lo) and math.isfinite(hi):
            if not lo < x2 < hi or hi - lo < 1e-12:
                x2 = (lo + hi) / 2
        elif math.isfinite(hi) and not x2 < hi:
            x2 = hi - 0.2
        elif math.isfinite(lo) and not x2 > lo:
            x2 = lo + 0.2
        check("a PLD calibration of the noise")
        if time.process_time() > deadline:
            raise PldTooCostly("target_eps", e, "a target PLD calibrates in bounded time", f"no noise "
                               f"multiplier within {rtol:g} of eps = {e:g} found in {cpu_seconds:g} CPU s at "
                               f"q = {sample_rate:g}, steps = {t}")
        if math.isfinite(lo) and math.isfinite(hi) and hi - lo < 1e-12:
            break
        x0, g0, x1, g1 = x1, g1, x2, f(x2)
        if seen[x2][0] <= 0:
            hi = min(hi, x2)
        else:
            lo = max(lo, x2)
    private = [x for x, (v, _) in seen.items() if v <= 0]
    if not private:
        raise PldTooCostly("target_eps", e, "a target PLD can bracket", f"no noise multiplier meeting eps = "
                           f"{e:g} found at q = {sample_rate:g}, steps = {t}")
    best = min(private)
    return math.exp(best), seen[best][1]


def composed_pld_epsilon(components: tuple[tuple[float, float, int], ...], gaussian_multiplier: float | None,
                         delta: float, target_eps: float, fraction: float = 0.01,
                         discretization: float | None = None) -> tuple[float, float]:
    """``(eps, stated error)`` at ``delta`` of the composition of ``k`` Poisson-subsampled Gaussian releases
    per component ``(q, z, k)`` (add/remove relation) and, if ``gaussian_multiplier`` is not None, one
    unsampled Gaussian of that noise multiplier, by dp-accounting's PLD (Meiser & Mohammadi 2018; Koskela et
    al. 2020), pessimistic: an upper bound on the true eps, off by at most the stated error ``n x disc``
    (``n``: the releases composed).

    The discretisation is ``discretization`` if given, else :func:`discretization_for_target` (``fraction``
    of ``target_eps`` over the ``n`` releases), coarsened where PLD would be too costly
    (:func:`discretization_for` of the smallest z at the largest q over all sampled releases; the stated
    error then exceeds ``fraction``).  Each component is one k-fold self-composition (FFT), not k composes.
    One component and no Gaussian is exactly :func:`pld_epsilon` (what :func:`pld_calibrate` evaluates, so a
    z it calibrated re-accounts to the same eps); several components re-account exactly too when their
    calibration evaluated this function (DP-PFL's two-stage calibration does, and the training ledger
    re-accounts by it).  PldTooCostly / DomainError where PLD cannot answer.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    n = sum(int(k) for _, _, k in components) + (gaussian_multiplier is not None)
    if not n:
        return 0.0, 0.0
    want = discretization_for_target(target_eps, n) if discretization is None else float(discretization)
    if len(components) == 1 and gaussian_multiplier is None:
        q, z, k = components[0]
        disc = discretization_for(z, q, k, want)
        return float(pld_epsilon(z, q, k, delta, want)), k * disc
    parts = sorted((float(q), float(z), int(k)) for q, z, k in components)  # one order: one rounding
    # the cost estimate of the worst component over all sampled releases (as DP-PFL's two-stage calibration)
    sampled = [(q, z, k) for q, z, k in parts if q < 1.0]
    disc = max([want] + ([discretization_for(min(z for _, z, _ in sampled), max(q for q, _, _ in sampled),
                                             sum(k for _, _, k in sampled), want)] if sampled else [])
               + [discretization_for(z, 1.0, k, want) for q, z, k in parts if q >= 1.0]
               + ([discretization_for(gaussian_multiplier, 1.0, 1, want)] if gaussian_multiplier else []))
    try:
        pld = pld_lib.identity(disc)
        for q, z, k in parts:
            pld = pld.compose(subsampled_gaussian_pld(z, q, k, disc) if q < 1.0 else
                              pld_lib.from_gaussian_mechanism(z, value_discretization_interval=disc,
                                                              use_connect_dots=True).self_compose(k))
        if gaussian_multiplier is not None:
            pld = pld.compose(pld_lib.from_gaussian_mechanism(gaussian_multiplier,
                                                              value_discretization_interval=disc,
                                                              use_connect_dots=True))
        eps = float(pld.get_epsilon_for_delta(delta))
    except (ArithmeticError, ValueError, MemoryError) as exc:
        raise PldTooCostly("components", components, "releases dp-accounting's PLD can compose",
                           f"PLD failed ({type(exc).__name__})") from None
    if not math.isfinite(eps):
        raise DomainError("delta", float(delta), "[1e-15, 1) for method='pld'",
                          "dp-accounting's PLD truncates tail mass below e^-50")
    return eps, n * disc


# ---------------------------------------------------------------------------------------------------------
# The same PLD eps, cheaper (issue 25): dp-accounting's arithmetic, vectorised where it loops in Python.
# ---------------------------------------------------------------------------------------------------------


def _self_convolve_bounds(probs: np.ndarray, t: int, tail_mass_truncation: float) -> tuple[int, int]:
    """dp-accounting's ``common.compute_self_convolve_bounds``: the Chernoff bound (dp-accounting's
    supplement, eq. (5)) at its 40 orders k/n, k = +-1..+-20, on the pmf ``probs`` of n points composed
    ``t`` times, the same integers, without its 40 ``logsumexp`` calls (40 n exponentials).

    The moment sums S_k = sum_i p_i e^(i k/n) are formed as powers (e^(i/n))^k by repeated products:
    relative error below (2|k| + log2 n + 4) u <= 1e-13 (u = 2^-53), so |log S_k - log S_k(dp-accounting)|
    <= 1e-12 and the bound (t log S_k + log(2/tail)) n / k moves by at most t n 1e-12 / |k|.  Only where
    that could cross an integer (or is not finite) is the order's ``logsumexp`` evaluated as there: each
    ceil/floor, hence each bound, is the one dp-accounting computes; tests pin them."""
    from scipy import special

    n, upper, lower = len(probs), (len(probs) - 1) * t, 0
    if tail_mass_truncation == 0:
        return lower, upper
    ks = np.concatenate((np.arange(-20, 0), np.arange(1, 21)))
    orders, index = ks / n, np.arange(n)
    step = np.exp(index / n)
    sums = np.empty(len(ks))
    for sign, base in ((1, step), (-1, 1.0 / step)):
        power = probs.astype(float)
        for k in range(1, 21):
            power = power * base
            sums[ks == sign * k] = power.sum()
    with np.errstate(divide="ignore"):
        log_sums = np.log(sums)
    c = math.log(2 / tail_mass_truncation)
    for k, order, approx in zip(ks.tolist(), orders.tolist(), log_sums.tolist(), strict=True):
        bound = (t * approx + c) / order
        slack = t * n * 1e-12 / abs(k) + 1e-12 * abs(bound)
        if not math.isfinite(bound) or math.floor(bound - slack) != math.floor(bound + slack):
            bound = (t * special.logsumexp(index * order, b=probs) + c) / order  # as dp-accounting
        if math.isfinite(bound):
            if order > 0:
                upper = min(upper, math.ceil(bound))
            else:
                lower = max(lower, math.floor(bound))
    return lower, upper


def _dense_self_compose(pmf, t: int, tail_mass_truncation: float = 1e-15):
    """``DensePLDPmf.self_compose`` of dp-accounting 0.6 (FFT power of the pmf, truncated by the Chernoff
    bounds), with :func:`_self_convolve_bounds` for its bounds: the same pmf."""
    from dp_accounting.pld.pld_pmf import DensePLDPmf
    from scipy import fft

    probs = pmf._probs
    lo, hi = _self_convolve_bounds(probs, t, tail_mass_truncation)
    size = hi - lo + 1
    out = np.real(fft.ifft(fft.fft(probs, fft.next_fast_len(max(size, len(probs)))) ** t))
    out = np.array(np.roll(out, -lo)[:size])
    inf_prob = tail_mass_truncation - math.expm1(t * math.log1p(-pmf._infinity_mass))
    return DensePLDPmf(pmf._discretization, pmf._lower_loss * t + lo, out, inf_prob,
                       pmf._pessimistic_estimate)


def _dense_epsilon_for_delta(pmf, delta: float) -> float:
    """``DensePLDPmf.get_epsilon_for_delta`` of dp-accounting 0.6 (the smallest eps whose hockey-stick
    divergence is at most delta, scanning losses from the top), as cumulative sums: the same running sums
    in the same order (``np.cumsum`` adds left to right, ``math.exp`` per term as there, losses by repeated
    subtraction as ``itertools.count``), the stopping index confirmed with ``math.log`` among candidates
    found with a 1e-12 relative margin (a last-bit difference cannot skip one): the same float.  The exact
    terms are formed only up to the first candidate that ``np.exp`` sums give (all of them if it fails)."""
    inf_mass, d = float(pmf._infinity_mass), pmf._discretization
    if inf_mass > delta:
        return math.inf
    probs = np.flip(pmf._probs)
    n = len(probs)
    losses = np.cumsum(np.concatenate(([(pmf._lower_loss + n - 1) * d], np.full(n - 1, -d))))
    if losses[-1] < -700:  # exp(-loss) may overflow where dp-accounting's scan may stop first: its own loop
        return pmf.get_epsilon_for_delta(delta)
    m_up = np.cumsum(np.concatenate(([inf_mass], probs)))  # before step i: m_up[i]; after: m_up[i + 1]

    def candidates(m_low: np.ndarray) -> np.ndarray:
        k = min(len(m_low), n)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            margin = 1e-12 * np.maximum(np.abs(losses[:k]), 1)
            return np.flatnonzero((m_up[:k] > delta) & (m_low[:k] > 0) & (
                np.log((m_up[:k] - delta) / m_low[:k]) >= losses[:k] - margin))

    limit = n
    if losses[0] < 700:  # no exp(-loss) near underflow: the np.exp sums locate the stop
        first = candidates(np.cumsum(np.concatenate(([0.0], np.exp(-losses) * probs))))[:1]
        limit = int(first[0]) if first.size else n
    while True:
        exps = np.fromiter(map(math.exp, (-losses[:limit]).tolist()), float, limit)
        m_low = np.cumsum(np.concatenate(([0.0], exps * probs[:limit])))  # exact up to m_low[limit]
        stop = next((i for i in candidates(m_low).tolist()
                     if math.log((float(m_up[i]) - delta) / float(m_low[i])) >= float(losses[i])), n)
        if stop < n or limit == n:
            break
        limit = n
    early = np.flatnonzero((m_up[1:stop + 1] >= delta) & (m_low[1:stop + 1] == 0))
    if early.size:  # exp(-loss) underflowed to 0 (very large losses), as there
        return max(0, float(losses[early[0]]))
    up, low = float(m_up[stop]), float(m_low[stop])
    if up <= low + delta:
        return 0
    return math.log((up - delta) / low)


def _one_step_pld(z: float, q: float, discretization: float):
    """The one-step PLD pmfs (remove, add) that :func:`subsampled_gaussian_pld` self-composes, as there
    (dp-accounting's ``_create_pld_pmf_from_monotone_privacy_loss``, connect the dots, pessimistic).  Where
    the pmf is dense (more than dp-accounting's 1,000 points) it is made from the probability array
    directly (:func:`_connect_dots_dense`) instead of through a dict of every point and back."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType

    out = []
    for adjacency in (AdjacencyType.REMOVE, AdjacencyType.ADD):
        loss = _gaussian_loss_class()(z, sampling_prob=q, adjacency_type=adjacency)
        bounds = loss.connect_dots_bounds()
        lo = math.floor(bounds.epsilon_lower / discretization)
        hi = math.ceil(bounds.epsilon_upper / discretization)
        if hi - lo + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE:
            out.append(pld_lib._create_pld_pmf_from_monotone_privacy_loss(
                loss, pessimistic_estimate=True, value_discretization_interval=discretization,
                use_connect_dots=True))
        else:
            deltas = loss.get_delta_for_epsilon(np.arange(lo, hi + 1) * discretization)
            out.append(_connect_dots_dense(discretization, lo, hi, deltas))
    return out


def _connect_dots_dense(discretization: float, lo: int, hi: int, deltas):
    """dp-accounting 0.6's ``create_pmf_pessimistic_connect_dots_fixed_gap`` (Doroshenko et al. 2022,
    "Connect the Dots", Algorithm 1) for more than 1,000 points (hence dense): the same arithmetic and
    checks, the DensePLDPmf that its ``create_pmf`` makes from the dict ``{lo + i: probs[i]}``."""
    from dp_accounting.pld.pld_pmf import _DELTA_DIFF_TOLERANCE, DensePLDPmf

    deltas = np.asarray(deltas, dtype=np.float64)
    if deltas.size != hi - lo + 1 or np.any(deltas < 0) or np.any(deltas > 1):
        raise ValueError(f"deltas are not {hi - lo + 1} values between 0 and 1")
    if np.any(np.diff(deltas) > _DELTA_DIFF_TOLERANCE):
        raise ValueError("deltas are not in non-increasing order")
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(discretization)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(discretization)) / math.expm1(discretization)
    probs[-1] = diffs[-1] / math.expm1(-discretization)
    return DensePLDPmf(discretization, lo, np.maximum(0.0, probs), deltas[-1], True)


def subsampled_gaussian_epsilon(z: float, q: float, t: int, delta: float, discretization: float) -> float:
    """``subsampled_gaussian_pld(z, q, t, discretization).get_epsilon_for_delta(delta)``, the same float,
    about 2-2.5x cheaper at WPFL's calibrated points: dp-accounting's own arithmetic, with its Python loops
    (the dense one-step pmf's dict, the Chernoff truncation bounds of the self-composition, the tail
    truncation of the composition onto the identity, the eps scan) done on arrays by
    :func:`_one_step_pld`, :func:`_dense_self_compose`, :func:`_dense_compose` and
    :func:`_dense_epsilon_for_delta`.  q < 1 only."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld.pld_pmf import DensePLDPmf

    def self_compose(p):  # a sparse pmf's self_compose goes dense the same way above 1,000 points
        if isinstance(p, DensePLDPmf):
            return _dense_self_compose(p, t)
        if t > 1 and p.size > 1 and (t >= 10 or p.size**t > pld_pmf._MAX_PMF_SPARSE_SIZE):  # 2^10 > 1000
            return _dense_self_compose(p.to_dense_pmf(), t)
        return p.self_compose(t, 1e-15)

    composed = [self_compose(p) for p in _one_step_pld(z, q, discretization)]
    if all(isinstance(p, DensePLDPmf) for p in composed):  # onto the identity, as PrivacyLossDistribution
        one = pld_lib.identity(discretization)._pmf_remove.to_dense_pmf()
        return max(_dense_epsilon_for_delta(_dense_compose(one, p), delta) for p in composed)
    full = pld_lib.identity(discretization).compose(pld_lib.PrivacyLossDistribution(*composed))
    return max(_dense_epsilon_for_delta(p, delta) if isinstance(p, DensePLDPmf)
               else p.get_epsilon_for_delta(delta) for p in (full._pmf_remove, full._pmf_add))


def _dense_compose(a, b, tail_mass_truncation: float = 1e-15):
    """``DensePLDPmf.compose`` of dp-accounting 0.6 (``scipy.signal.fftconvolve``, then its pessimistic
    tail truncation) with the truncation's two prefix scans as ``np.cumsum`` (sequential sums, the same
    floats as its running sum): the same pmf."""
    from dp_accounting.pld.pld_pmf import DensePLDPmf
    from scipy import signal

    probs = signal.fftconvolve(a._probs, b._probs)
    inf_mass = a._infinity_mass + b._infinity_mass - a._infinity_mass * b._infinity_mass

    def prefix(arr):  # the longest prefix whose running sum stays <= tail / 2
        over = np.flatnonzero(np.cumsum(arr) > tail_mass_truncation / 2)
        return int(over[0]) if over.size else len(arr)

    left = prefix(probs)
    right = max(len(probs) - prefix(np.flip(probs)), left + 1)
    left_mass, right_mass = np.sum(probs[:left]), np.sum(probs[right:])
    kept = probs[left:right]
    kept[0] += left_mass
    return DensePLDPmf(a._discretization, a._lower_loss + b._lower_loss + left, kept, inf_mass + right_mass,
                       a._pessimistic_estimate)


def _fast_accountant(z: float, q: float, t: int, discretization: float, step_points: float):
    """:func:`_accountant` with ``get_epsilon`` by :func:`subsampled_gaussian_epsilon` where q < 1."""
    if q >= 1.0:
        return _accountant(z, q, t, discretization, step_points)
    disc = discretization_for(z, q, t, discretization, step_points)

    class Fast:
        def get_epsilon(self, delta: float) -> float:
            return subsampled_gaussian_epsilon(z, q, t, delta, disc)

    return Fast()


def pld_epsilon_fast(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                     discretization: float = 1e-4, *, step_points: float = PLD_STEP_POINTS) -> float:
    """:func:`pld_epsilon` at one point (the same eps, the same errors) through
    :func:`subsampled_gaussian_epsilon` where q < 1: what ``pld_calibrate(..., evaluate=pld_epsilon_fast)``
    evaluates."""
    z, q, t, d = (x.item() for x in _prepare(noise_multiplier, sample_rate, steps, "delta",
                                              lambda: check_probability("delta", delta), discretization))
    eps = _evaluate("get_epsilon", z, q, int(t), d, discretization, step_points, _fast_accountant)
    if not math.isfinite(eps):
        raise DomainError("delta", d, "[1e-15, 1) for method='pld'",
                          "dp-accounting's PLD truncates tail mass below e^-50; use method='rdp'")
    return eps


# ---------------------------------------------------------------------------------------------------------
# A calibration next to a known one (the explorer's re-plan at a nearby eps)
# ---------------------------------------------------------------------------------------------------------
def pld_calibrate_near(target_eps: float, delta: float, sample_rate: float, steps: int, discretization: float,
                       upper: float, near: tuple[float, float], rtol: float = 1e-3, newton_steps: int = 2,
                       evaluate=None) -> tuple[float, float]:
    """:func:`pld_calibrate`'s answer (the same contract: ``(z, eps_pld(z))`` with ``(1 - rtol) target <=
    eps_pld(z) <= target``, z an evaluated point), first trying Newton steps in log z off ``near`` =
    ``(z, eps_pld)``, an earlier calibration at the same delta, sample rate and steps (e.g. at a target a
    few % away): the first with the slope d log eps / d log z that :func:`pld_calibrate` recorded for the
    nearest setting (-1 when none), the next with the secant through the points evaluated.  log eps is nearly
    linear in log z, so the first step lands in the window from a target a few % away: one evaluation
    instead of :func:`pld_calibrate`'s two.  Where ``newton_steps`` steps miss (or PLD fails there),
    :func:`pld_calibrate`, its own search, as if this function had not been called."""
    e = float(check_real("target_eps", target_eps, 0.0, low_open=True))
    t = int(check_int("steps", steps, 1))
    x_prev = math.log(float(check_real("near z", near[0], 0.0, low_open=True)))
    v_prev = math.log(float(check_real("near eps", near[1], 0.0, low_open=True))) - math.log(e)
    start = _warm_start(float(delta), float(sample_rate), t, e)
    slope = start[1] if start is not None else -1.0
    aim = math.log1p(-rtol / 2)
    for _ in range(newton_steps):
        x = x_prev + (aim - v_prev) / slope
        try:
            eps = float((evaluate or pld_epsilon)(math.exp(x), sample_rate, t, delta, discretization))
        except (PldTooCostly, DomainError, OverflowError):
            break
        if not eps > 0:
            break
        if (1 - rtol) * e <= eps <= e:
            _remember(float(delta), float(sample_rate), t, e, x - math.log(float(upper)),
                      {x: (math.log(eps) - math.log(e), eps)})
            return math.exp(x), eps
        v = math.log(eps) - math.log(e)
        secant = (v - v_prev) / (x - x_prev) if x != x_prev else slope
        slope = secant if secant < 0 and math.isfinite(secant) else slope
        x_prev, v_prev = x, v
    return pld_calibrate(e, delta, sample_rate, t, discretization, upper, rtol, evaluate=evaluate)
