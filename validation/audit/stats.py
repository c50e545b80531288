"""Statistics of a privacy audit: an epsilon lower bound from a distinguishing test, and a Gaussian fit.

The adversary of an audit sees one score per trial (larger: "the canary was in"), ``scores_out`` from runs on
D and ``scores_in`` from runs on the neighbouring D'.  Both halves of the trials play a part: the first half
picks the threshold, the second half (independent of the choice) measures the test.

Lower bound (:func:`epsilon_lower_bound`).  A mechanism that is (eps, delta)-DP bounds every test's false
positive rate (FPR: says "in" on D) and false negative rate (FNR: says "out" on D') by
``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta`` (Kairouz, Oh & Viswanath 2015,
Thm 2.1), hence

    eps >= eps_lb = max( log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u), 0 )

with ``FPR_u``, ``FNR_u`` one-sided Clopper-Pearson upper bounds on the held-out half, each at level
``1 - alpha/2`` so that both hold together with probability ``>= 1 - alpha`` (Bonferroni); this is the
estimator of Jagielski, Ullman & Oprea 2020 (Sec. 4) and Nasr et al. 2021 (Sec. 3.2).  A mechanism whose
true epsilon is at most the reported one gives ``eps_lb`` above it with probability at most ``alpha``.

Gaussian fit (:func:`gaussian_fit`): the two held-out score samples fitted as ``N(m0, s^2)`` and
``N(m1, s^2)`` give ``mu = |m1 - m0| / s``, a mu-GDP mechanism (Dong, Roth & Su 2019), whose epsilon at
delta is the analytic Gaussian curve (Balle & Wang 2018, Thm 8) with noise multiplier ``1/mu``; the interval
is a percentile bootstrap over both samples.  It is an estimate, not a bound.

Thresholds fixed in advance (:func:`threshold_grid`, :func:`epsilon_lower_bound_at`).  The audit knows,
before any trial runs, how its score is distributed under the plan (``N(0, s^2)`` on D, ``N(s^2, s^2)`` on D'
for the likelihood-ratio score of a Gaussian release, ``s`` the planned shift over the noise).  Thresholds
placed from ``s`` alone are independent of the trials, so every trial counts (no half spent on choosing
one), and a union bound over the ``K`` thresholds (each rate's Clopper-Pearson bound at ``1 - alpha/(2K)``)
keeps the level: on a Gaussian mechanism with ``eps`` 1-6 at ``delta = 0.01`` and 2,000 trials per side
this raises the mean lower bound from about 0.5 to about 0.58 of ``eps``, and its worst seed from 0.2 to 0.5.

Gaussian-DP estimate (:func:`gdp_estimate`; Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini &
Terzis 2023, "Tight auditing of differentially private machine learning", Sec. 4).  A mu-GDP mechanism's
tests obey ``FNR >= Phi(Phi^-1(1 - FPR) - mu)`` (Dong, Roth & Su 2019), so every threshold's rates give
``mu >= Phi^-1(1 - FPR) - Phi^-1(FNR)``: with Clopper-Pearson upper bounds on both rates, a lower bound on
``mu`` (valid if the mechanism's tradeoff is Gaussian, the premise of the method); with the observed rates,
an estimate (inverse-variance weighted over the thresholds, delta method).  Each converts to epsilon at delta
by the analytic Gaussian curve.

One-run estimate (:func:`one_run_epsilon`; Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1)
training run", Thm 5.2).  ``m`` canaries, each included independently with probability 1/2; the auditor
guesses "in" for the ``k`` highest scores and "out" for the ``k`` lowest (``r = 2k`` guesses) and gets ``v``
right.  If the mechanism is (eps, delta)-DP towards each canary, ``P[W >= v] <= P[Bin(r, q) >= v] + 2 m delta
max_{1 <= i <= v} P[v - i <= Bin(r, q) < v] / i`` with ``q = e^eps / (1 + e^eps)``; the lower bound is the
largest eps whose bound is at most ``beta`` (a union over the guess counts tried).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import chi2, norm

from fedbound.errors import ParameterError

__all__ = ["clopper_pearson_upper", "epsilon_from_rates", "choose_threshold", "LowerBound",
           "epsilon_lower_bound", "GaussianFit", "gaussian_fit", "roc_curve", "std_ratio_interval",
           "expected_lower_bound", "detectable_epsilon", "trials_needed", "GRID", "threshold_grid",
           "epsilon_lower_bound_at", "GaussianDP", "gdp_estimate", "OneRun", "one_run_p_value",
           "one_run_epsilon", "gdp_epsilon"]

GRID = 33
"""Thresholds of :func:`threshold_grid`."""


def clopper_pearson_upper(errors: np.ndarray | int, n: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound at ``level`` on a rate seen as ``errors`` out of ``n``:
    the ``level`` quantile of Beta(errors + 1, n - errors) (1 when errors = n)."""
    k = np.asarray(errors, dtype=float)
    if n < 1:
        raise ParameterError("trials", n, "integer in [1, inf)")
    with np.errstate(invalid="ignore"):
        up = beta_dist.ppf(level, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, up)


def epsilon_from_rates(fpr: np.ndarray, fnr: np.ndarray, delta: float) -> np.ndarray:
    """``max(log((1 - delta - FNR)/FPR), log((1 - delta - FPR)/FNR), 0)`` (module docstring); 0 where a
    numerator is not positive."""
    fpr, fnr = np.asarray(fpr, float), np.asarray(fnr, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(1 - delta - fnr > 0, np.log(np.maximum(1 - delta - fnr, 1e-300) / fpr), 0.0)
        b = np.where(1 - delta - fpr > 0, np.log(np.maximum(1 - delta - fpr, 1e-300) / fnr), 0.0)
    return np.maximum(np.maximum(np.nan_to_num(a, posinf=0.0), np.nan_to_num(b, posinf=0.0)), 0.0)


def _rates(scores_out: np.ndarray, scores_in: np.ndarray, thresholds: np.ndarray) -> tuple:
    """Error counts of "in iff score > t" for every threshold: (false positives on D, false negatives)."""
    out_sorted, in_sorted = np.sort(scores_out), np.sort(scores_in)
    fp = len(out_sorted) - np.searchsorted(out_sorted, thresholds, side="right")
    fn = np.searchsorted(in_sorted, thresholds, side="right")
    return fp, fn


def choose_threshold(scores_out: np.ndarray, scores_in: np.ndarray, delta: float, alpha: float) -> float:
    """The threshold (among the observed scores) whose Clopper-Pearson bound is largest on these scores."""
    candidates = np.unique(np.concatenate([scores_out, scores_in]))
    fp, fn = _rates(scores_out, scores_in, candidates)
    level = 1 - alpha / 2
    eps = epsilon_from_rates(clopper_pearson_upper(fp, len(scores_out), level),
                             clopper_pearson_upper(fn, len(scores_in), level), delta)
    return float(candidates[int(np.argmax(eps))])


@dataclass(frozen=True)
class LowerBound:
    """The held-out test: threshold, error counts, their upper bounds and the epsilon lower bound."""

    epsilon: float
    threshold: float
    false_positives: int
    false_negatives: int
    n_out: int
    n_in: int
    fpr_upper: float
    fnr_upper: float
    alpha: float


def _halves(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = len(scores) // 2
    return scores[:h], scores[h:]


def epsilon_lower_bound(scores_out: np.ndarray, scores_in: np.ndarray, delta: float, alpha: float = 0.05
                        ) -> LowerBound:
    """eps_lb (module docstring): the threshold chosen on the first half of each sample, measured on the
    second."""
    scores_out, scores_in = np.asarray(scores_out, float), np.asarray(scores_in, float)
    if min(len(scores_out), len(scores_in)) < 4:
        raise ParameterError("trials per side", min(len(scores_out), len(scores_in)), "integer in [4, inf)")
    if not 0 < alpha < 1:
        raise ParameterError("alpha", alpha, "(0, 1)")
    (pick_out, test_out), (pick_in, test_in) = _halves(scores_out), _halves(scores_in)
    t = choose_threshold(pick_out, pick_in, delta, alpha)
    fp, fn = _rates(test_out, test_in, np.array([t]))
    level = 1 - alpha / 2
    fpr_u = float(clopper_pearson_upper(fp[0], len(test_out), level))
    fnr_u = float(clopper_pearson_upper(fn[0], len(test_in), level))
    eps = float(epsilon_from_rates(fpr_u, fnr_u, delta))
    return LowerBound(eps, t, int(fp[0]), int(fn[0]), len(test_out), len(test_in), fpr_u, fnr_u, alpha)


@dataclass(frozen=True)
class GaussianFit:
    """``mu = |mean_in - mean_out| / pooled std`` of the held-out scores and its epsilon at delta, with a
    percentile bootstrap interval (``level``)."""

    mu: float
    epsilon: float
    epsilon_low: float
    epsilon_high: float
    level: float


def _mu(out: np.ndarray, inn: np.ndarray) -> np.ndarray:
    """mu per row of ``(B, n)`` samples."""
    pooled = np.sqrt(0.5 * (out.var(axis=-1, ddof=1) + inn.var(axis=-1, ddof=1)))
    shift = np.abs(inn.mean(axis=-1) - out.mean(axis=-1))
    return np.where(pooled > 0, shift / np.maximum(pooled, 1e-300), np.inf)


def _gdp_epsilon(mu: np.ndarray, delta: float) -> np.ndarray:
    from fedbound.accounting import analytic_gaussian_epsilon

    mu = np.asarray(mu, float)
    out = np.full(mu.shape, np.inf)
    small = mu < 1e-9
    out[small] = 0.0
    live = ~small & np.isfinite(mu)
    if live.any():
        uniq, where = np.unique(mu[live], return_inverse=True)
        out[live] = np.asarray(analytic_gaussian_epsilon(1.0 / uniq, delta), dtype=float)[where]
    return out


def gaussian_fit(scores_out: np.ndarray, scores_in: np.ndarray, delta: float, *, level: float = 0.95,
                 bootstrap: int = 200, seed: int = 0) -> GaussianFit:
    """The mu-GDP estimate of the held-out halves (module docstring) with a bootstrap interval."""
    test_out, test_in = _halves(np.asarray(scores_out, float))[1], _halves(np.asarray(scores_in, float))[1]
    mu = float(_mu(test_out, test_in))
    rng = np.random.default_rng(seed)
    boot = _mu(test_out[rng.integers(0, len(test_out), (bootstrap, len(test_out)))],
               test_in[rng.integers(0, len(test_in), (bootstrap, len(test_in)))])
    # quantiles of mu map to quantiles of eps (eps is increasing in mu): one conversion per end
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    eps, eps_lo, eps_hi = _gdp_epsilon(np.array([mu, lo, hi]), delta)
    return GaussianFit(mu, float(eps), float(eps_lo), float(eps_hi), level)


def roc_curve(scores_out: np.ndarray, scores_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) of "in iff score > t" over all thresholds of the held-out halves."""
    test_out, test_in = _halves(np.asarray(scores_out, float))[1], _halves(np.asarray(scores_in, float))[1]
    t = np.concatenate([[-np.inf], np.unique(np.concatenate([test_out, test_in])), [np.inf]])
    fp, fn = _rates(test_out, test_in, t)
    return fp / len(test_out), 1.0 - fn / len(test_in)


def std_ratio_interval(sum_sq: float, n: int, alpha: float) -> tuple[float, float, float]:
    """(low, high, estimate) of ``s / sigma`` from ``sum_sq``, the sum of ``n`` squared draws of
    ``N(0, s^2) / sigma``: ``sum_sq / s^2 * sigma^2 ~ chi^2(n)``, so ``sqrt(sum_sq / chi2_(1-alpha/2)(n))``
    and ``sqrt(sum_sq / chi2_(alpha/2)(n))`` cover ``s / sigma`` with probability ``1 - alpha`` (the
    textbook interval for a normal variance with known mean)."""
    if n < 1:
        raise ParameterError("noise draws", n, "integer in [1, inf)")
    if not 0 < alpha < 1:
        raise ParameterError("alpha", alpha, "(0, 1)")
    return (math.sqrt(sum_sq / chi2.ppf(1 - alpha / 2, n)), math.sqrt(sum_sq / chi2.ppf(alpha / 2, n)),
            math.sqrt(sum_sq / n))


def expected_lower_bound(mu: float, held_out: int, delta: float, alpha: float, thresholds: int = 1
                         ) -> float:
    """The lower bound (:func:`epsilon_lower_bound`, or :func:`epsilon_lower_bound_at` over ``thresholds``
    fixed thresholds, at its best one) that a test between ``N(0, 1)`` and ``N(mu, 1)`` scores gives with
    ``held_out`` trials per side when the error counts equal their expectations: ``max_t eps(CP(n Phi(-t)),
    CP(n Phi(t - mu)))``.  Slightly optimistic (the threshold is the best one and the counts are not noisy):
    simulated audits fall short by about 0.2 at mu = 2.5."""
    t = np.linspace(-4.0, mu + 12.0, 600)
    level = 1 - alpha / (2 * thresholds)
    fp = clopper_pearson_upper(held_out * norm.sf(t), held_out, level)
    fn = clopper_pearson_upper(held_out * norm.cdf(t - mu), held_out, level)
    return float(epsilon_from_rates(fp, fn, delta).max())


def detectable_epsilon(trials: int, epsilon: float, delta: float, alpha: float, mu_max: float = 40.0,
                       thresholds: int = GRID) -> float:
    """The smallest epsilon at ``delta`` of a Gaussian mechanism (mu-GDP) whose expected lower bound with
    ``trials`` per side over ``thresholds`` fixed thresholds exceeds ``epsilon``: what an audit of this size
    can call a LEAK against ``epsilon``; inf when none can."""
    if expected_lower_bound(mu_max, trials, delta, alpha, thresholds) <= epsilon:
        return math.inf
    lo, hi = 0.0, mu_max
    for _ in range(24):
        mid = 0.5 * (lo + hi)
        below = expected_lower_bound(mid, trials, delta, alpha, thresholds) <= epsilon
        lo, hi = (mid, hi) if below else (lo, mid)
    return float(_gdp_epsilon(np.array([hi]), delta)[0])


def trials_needed(mu: float, epsilon: float, delta: float, alpha: float, limit: int = 1_000_000,
                  thresholds: int = GRID) -> int | None:
    """The fewest trials per side (a multiple of 2) at which a ``mu``-GDP pair's expected lower bound
    (``thresholds`` fixed thresholds) exceeds ``epsilon``; None beyond ``limit``."""
    def ok(trials: int) -> bool:
        return expected_lower_bound(mu, trials, delta, alpha, thresholds) > epsilon

    if not math.isfinite(mu) or mu <= 0 or not ok(limit):
        return None
    lo, hi = 4, 8
    while not ok(hi):
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > max(2, lo // 50):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not ok(mid) else (lo, mid)
    return int(hi + hi % 2)


def gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon at ``delta`` of a ``mu``-GDP mechanism (Dong, Roth & Su 2019, Cor. 2.13: the analytic
    Gaussian curve of Balle & Wang 2018, Thm 8, at noise multiplier ``1/mu``); 0 for mu <= 0."""
    return float(_gdp_epsilon(np.array([max(float(mu), 0.0)]), delta)[0])


def threshold_grid(planned_std: float, count: int = GRID) -> np.ndarray:
    """Thresholds fixed before any trial (module docstring): ``s c_k`` with ``c_k`` evenly spaced over
    ``[-4, s + 8]``, ``s = planned_std`` the score's planned std (its planned mean on D' is ``s^2``); ``[0]``
    when ``s`` is 0 (nothing to tell apart)."""
    s = float(planned_std)
    if not (math.isfinite(s) and s > 0):
        return np.zeros(1)
    return s * np.linspace(-4.0, s + 8.0, int(count))


def _counts(scores_out: np.ndarray, scores_in: np.ndarray, thresholds: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    return _rates(np.asarray(scores_out, float), np.asarray(scores_in, float), np.asarray(thresholds, float))


def epsilon_lower_bound_at(scores_out: np.ndarray, scores_in: np.ndarray, thresholds: np.ndarray,
                           delta: float, alpha: float = 0.05) -> LowerBound:
    """eps_lb (module docstring) over ``thresholds`` fixed in advance, every trial measured: each rate's
    Clopper-Pearson bound at level ``1 - alpha / (2 K)``, the largest epsilon over the ``K`` thresholds."""
    scores_out, scores_in = np.asarray(scores_out, float), np.asarray(scores_in, float)
    if min(len(scores_out), len(scores_in)) < 2:
        raise ParameterError("trials per side", min(len(scores_out), len(scores_in)), "integer in [2, inf)")
    if not 0 < alpha < 1:
        raise ParameterError("alpha", alpha, "(0, 1)")
    t = np.atleast_1d(np.asarray(thresholds, float))
    fp, fn = _counts(scores_out, scores_in, t)
    level = 1 - alpha / (2 * len(t))
    fpr_u = clopper_pearson_upper(fp, len(scores_out), level)
    fnr_u = clopper_pearson_upper(fn, len(scores_in), level)
    eps = epsilon_from_rates(fpr_u, fnr_u, delta)
    k = int(np.argmax(eps))
    return LowerBound(float(eps[k]), float(t[k]), int(fp[k]), int(fn[k]), len(scores_out), len(scores_in),
                      float(fpr_u[k]), float(fnr_u[k]), alpha)


@dataclass(frozen=True)
class GaussianDP:
    """The Gaussian-DP reading of a test's rates (module docstring): ``mu`` (estimate) and ``mu_low`` (its
    lower confidence bound at level ``1 - alpha``), each with its epsilon at ``delta``."""

    mu: float
    epsilon: float
    mu_low: float
    epsilon_low: float
    alpha: float


def gdp_estimate(scores_out: np.ndarray, scores_in: np.ndarray, thresholds: np.ndarray, delta: float,
                 alpha: float = 0.05) -> GaussianDP:
    """Nasr et al. 2023's Gaussian-DP estimate and lower bound over ``thresholds`` (module docstring)."""
    out, inn = np.asarray(scores_out, float), np.asarray(scores_in, float)
    t = np.atleast_1d(np.asarray(thresholds, float))
    fp, fn = _counts(out, inn, t)
    n0, n1 = len(out), len(inn)
    level = 1 - alpha / (2 * len(t))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = norm.isf(clopper_pearson_upper(fp, n0, level)) - norm.ppf(clopper_pearson_upper(fn, n1, level))
    mu_low = float(np.nanmax(np.where(np.isfinite(low), low, -np.inf))) if len(low) else 0.0
    mu_low = max(mu_low, 0.0) if math.isfinite(mu_low) else 0.0
    p0, p1 = (fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0)  # continuity-corrected rates
    z0, z1 = norm.isf(p0), norm.ppf(p1)
    var = p0 * (1 - p0) / (n0 * norm.pdf(z0) ** 2) + p1 * (1 - p1) / (n1 * norm.pdf(z1) ** 2)
    live = (fp > 0) & (fp < n0) & (fn > 0) & (fn < n1)
    if live.any():
        w = 1.0 / var[live]
        mu = float(np.sum(w * (z0 - z1)[live]) / np.sum(w))
    else:  # every threshold separates one side completely: the estimate is at least the bound
        mu = max(mu_low, float(np.max(z0 - z1)))
    mu = max(mu, 0.0)
    return GaussianDP(mu, gdp_epsilon(mu, delta), mu_low, gdp_epsilon(mu_low, delta), alpha)


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Steinke, Nasr & Jagielski 2023, Thm 5.2 (module docstring): the probability bound of ``v`` or more
    correct guesses out of ``r`` among ``m`` canaries for an (epsilon, delta)-DP mechanism."""
    from scipy.stats import binom

    if not 0 <= v <= r <= m:
        raise ParameterError("one-run counts (v, r, m)", (v, r, m), "0 <= v <= r <= m")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(binom.sf(v - 1, r, q))
    if delta <= 0 or v == 0:
        return min(tail, 1.0)
    cdf = binom.cdf(np.arange(-1, v), r, q)  # cdf[k + 1] = P[Bin <= k]
    i = np.arange(1, v + 1)
    between = cdf[v] - cdf[v - i]  # P[v - i <= Bin < v] = P[Bin <= v - 1] - P[Bin <= v - i - 1]
    return min(tail + 2 * m * delta * float(np.max(between / i)), 1.0)


@dataclass(frozen=True)
class OneRun:
    """The one-run lower bound: ``epsilon`` at confidence ``1 - beta``, from ``correct`` of ``guesses``
    guesses among ``canaries``."""

    epsilon: float
    canaries: int
    guesses: int
    correct: int
    beta: float


def one_run_epsilon(scores: np.ndarray, included: np.ndarray, delta: float, beta: float = 0.05,
                    fractions: tuple[float, ...] = (1 / 16, 1 / 8, 1 / 4, 1 / 2)) -> OneRun:
    """The one-run lower bound (module docstring) of canaries with ``scores`` and inclusion ``included``
    (booleans, each a fair coin): for each fraction ``f`` of guesses (``k = max(1, round(f m / 2))`` "in" for
    the highest scores, ``k`` "out" for the lowest), the largest eps with ``one_run_p_value <= beta / F``
    (bisection), the best over the ``F`` fractions."""
    scores, included = np.asarray(scores, float), np.asarray(included, bool)
    m = len(scores)
    if m < 2 or len(included) != m:
        raise ParameterError("one-run canaries", m, "at least 2, one inclusion per score")
    order = np.argsort(scores, kind="stable")
    best = OneRun(0.0, m, 0, 0, beta)
    level = beta / len(fractions)
    for f in fractions:
        k = max(1, min(m // 2, round(f * m / 2)))
        v = int(np.sum(included[order[m - k:]]) + np.sum(~included[order[:k]]))
        if one_run_p_value(m, 2 * k, v, 0.0, delta) > level:
            continue
        lo, hi = 0.0, 1.0
        while one_run_p_value(m, 2 * k, v, hi, delta) <= level and hi < 64:
            lo, hi = hi, 2 * hi
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if one_run_p_value(m, 2 * k, v, mid, delta) <= level else (lo, mid)
        if lo > best.epsilon:
            best = OneRun(lo, m, 2 * k, v, beta)
    return best
