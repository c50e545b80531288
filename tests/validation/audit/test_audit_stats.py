"""The audit's statistics: Clopper-Pearson bounds, the epsilon lower bound, the Gaussian fit, the ROC
bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import analytic_gaussian_epsilon
from fedbound.errors import ParameterError
from fedbound.validation.audit.plot import dp_roc_bound
from fedbound.validation.audit.stats import (
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
    gaussian_fit,
    roc_curve,
)


@given(st.integers(1, 5000), st.floats(0.5, 0.999))
def test_clopper_pearson_with_no_errors_has_its_closed_form(n, level):
    # 0 errors in n: P(0 errors | p) = (1 - p)^n = 1 - level  =>  p = 1 - (1 - level)^(1/n)
    assert clopper_pearson_upper(0, n, level) == pytest.approx(1 - (1 - level) ** (1 / n), rel=1e-9)


def test_clopper_pearson_matches_the_binomial_tail():
    from scipy.stats import binom

    up = float(clopper_pearson_upper(7, 100, 0.975))
    # at the upper bound, seeing <= 7 errors has probability 1 - level
    assert binom.cdf(7, 100, up) == pytest.approx(0.025, rel=1e-6)
    assert clopper_pearson_upper(100, 100, 0.975) == 1.0


def test_epsilon_from_rates_by_hand():
    assert epsilon_from_rates(0.1, 0.2, 0.0) == pytest.approx(np.log(8.0))
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0
    assert epsilon_from_rates(0.01, 0.3, 0.05) == pytest.approx(np.log(0.65 / 0.01))


def test_lower_bound_is_below_the_true_epsilon_of_a_gaussian_mechanism():
    delta = 1e-3
    for mu in (0.5, 1.0, 2.0, 3.0):
        true = float(analytic_gaussian_epsilon(1.0 / mu, delta))
        for seed in range(4):
            rng = np.random.default_rng(seed)
            lb = epsilon_lower_bound(rng.standard_normal(2000), rng.standard_normal(2000) + mu, delta)
            assert 0.0 <= lb.epsilon <= true
    rng = np.random.default_rng(9)
    strong = epsilon_lower_bound(rng.standard_normal(2000), rng.standard_normal(2000) + 3.0, delta)
    assert strong.epsilon > 2.0  # the test has power: mu = 3 is eps ~ 11 at this delta
    assert strong.n_out == strong.n_in == 1000


def test_identical_samples_give_no_evidence():
    rng = np.random.default_rng(0)
    lb = epsilon_lower_bound(rng.standard_normal(1000), rng.standard_normal(1000), 1e-5)
    assert lb.epsilon < 0.3


def test_lower_bound_rejects_tiny_samples():
    with pytest.raises(ParameterError, match="trials per side"):
        epsilon_lower_bound(np.zeros(3), np.ones(3), 0.01)


def test_gaussian_fit_recovers_mu_and_its_interval_covers_it():
    rng = np.random.default_rng(1)
    fit = gaussian_fit(rng.standard_normal(4000) * 2.0, rng.standard_normal(4000) * 2.0 + 2.0, 1e-3)
    assert fit.mu == pytest.approx(1.0, abs=0.08)
    true = float(analytic_gaussian_epsilon(1.0, 1e-3))
    assert fit.epsilon_low <= true <= fit.epsilon_high


def test_roc_and_its_dp_bound():
    rng = np.random.default_rng(2)
    fpr, tpr = roc_curve(rng.standard_normal(500), rng.standard_normal(500) + 1)
    assert fpr[0] == 1.0 and tpr[0] == 1.0 and fpr[-1] == 0.0 and tpr[-1] == 0.0
    grid = np.linspace(0, 1, 11)
    b = dp_roc_bound(grid, 1.0, 0.01)
    assert b[0] == pytest.approx(0.01) and b[-1] == 1.0
    assert np.all(np.diff(b) >= 0)
    assert b[1] == pytest.approx(min(np.e * 0.1 + 0.01, 1 - np.exp(-1) * (0.99 - 0.1)))


# --- power and noise statistics (issue 21) -----------------------------------------------------------------

def _gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2019, Cor. 2.13), written out independently of the code."""
    from scipy.stats import norm

    return float(norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def test_std_ratio_interval_covers_at_its_level_by_monte_carlo():
    from fedbound.validation.audit.stats import std_ratio_interval

    rng = np.random.default_rng(7)
    true = 0.7
    sums = ((true * rng.standard_normal((4000, 30))) ** 2).sum(axis=1)
    covered = [lo <= true <= hi for lo, hi, _ in (std_ratio_interval(float(x), 30, 0.05) for x in sums)]
    assert 0.935 <= np.mean(covered) <= 0.965


def test_std_ratio_interval_matches_the_normal_approximation_for_many_draws():
    from scipy.stats import norm

    from fedbound.validation.audit.stats import std_ratio_interval

    n = 200_000
    lo, hi, est = std_ratio_interval(0.25 * n, n, 0.01)  # measured ratio 0.5 exactly
    half = norm.ppf(0.995) / np.sqrt(2 * n)
    assert est == pytest.approx(0.5)
    assert lo == pytest.approx(0.5 * (1 - half), rel=2e-4) and hi == pytest.approx(0.5 * (1 + half), rel=2e-4)
    with pytest.raises(ParameterError, match="alpha"):
        std_ratio_interval(1.0, 10, 1.5)


def test_expected_lower_bound_at_perfect_separation_is_the_zero_error_limit():
    from fedbound.validation.audit.stats import expected_lower_bound

    n, delta, alpha = 1000, 0.01, 0.05
    u = 1 - (alpha / 2) ** (1 / n)  # Clopper-Pearson upper bound of 0 errors in n
    assert expected_lower_bound(60.0, n, delta, alpha) == pytest.approx(np.log((1 - delta - u) / u), rel=1e-3)
    assert expected_lower_bound(0.0, n, delta, alpha) == 0.0


def test_expected_lower_bound_agrees_with_simulated_audits():
    from fedbound.validation.audit.stats import expected_lower_bound

    rng = np.random.default_rng(3)
    mu, n = 2.5, 4000
    sims = [epsilon_lower_bound(rng.standard_normal(2 * n), mu + rng.standard_normal(2 * n), 0.01).epsilon
            for _ in range(5)]
    # the expectation knows the best threshold and has no count noise: a real audit falls a little short
    expected = expected_lower_bound(mu, n, 0.01, 0.05)
    assert expected - 0.35 < np.mean(sims) < expected + 0.05


def test_detectable_epsilon_is_where_the_expected_bound_crosses_the_reported_one():
    from scipy.optimize import brentq

    from fedbound.validation.audit.stats import GRID, detectable_epsilon, expected_lower_bound

    delta, alpha, reported = 0.01, 0.05, 2.0
    small = detectable_epsilon(500, reported, delta, alpha)
    large = detectable_epsilon(8000, reported, delta, alpha)
    assert small > large > reported
    mu = brentq(lambda m: _gdp_delta(large, m) - delta, 0.05, 30)  # the mechanism of epsilon `large`
    # every trial measured, each rate's bound at 1 - alpha / (2 GRID) (thresholds fixed in advance)
    assert expected_lower_bound(1.01 * mu, 8000, delta, alpha, GRID) > reported
    assert expected_lower_bound(0.99 * mu, 8000, delta, alpha, GRID) <= reported
    assert np.isinf(detectable_epsilon(10, 8.0, delta, alpha))


def test_trials_needed_is_the_smallest_count_that_detects():
    from fedbound.validation.audit.stats import GRID, expected_lower_bound, trials_needed

    n = trials_needed(2.0, 1.5, 0.01, 0.05)
    assert n % 2 == 0
    assert expected_lower_bound(2.0, n, 0.01, 0.05, GRID) > 1.5
    assert expected_lower_bound(2.0, int(0.95 * n), 0.01, 0.05, GRID) <= 1.5
    assert trials_needed(0.1, 5.0, 0.01, 0.05) is None and trials_needed(0.0, 1.0, 0.01, 0.05) is None
