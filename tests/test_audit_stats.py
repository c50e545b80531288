"""The audit's statistics: Clopper-Pearson bounds, the epsilon lower bound, the Gaussian fit, the ROC
bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import analytic_gaussian_epsilon
from fedbound.errors import ParameterError
from fedbound.validation.audit_plot import dp_roc_bound
from fedbound.validation.audit_stats import (
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
