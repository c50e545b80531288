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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist

from fedbound.errors import ParameterError

__all__ = ["clopper_pearson_upper", "epsilon_from_rates", "choose_threshold", "LowerBound",
           "epsilon_lower_bound", "GaussianFit", "gaussian_fit", "roc_curve"]


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
