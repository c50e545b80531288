"""The classic Gaussian mechanism as the papers use it: formulas, eps >= 1 warnings, what it truly
delivers."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import (
    amplify_by_subsampling,
    analytic_gaussian_std,
    classic_composed_epsilon,
    classic_composed_std,
    classic_gaussian_check,
    classic_gaussian_constant,
    classic_gaussian_epsilon,
    classic_gaussian_std,
    classic_subsampled_epsilon,
    classic_subsampled_std,
)
from fedbound.errors import ClassicGaussianRangeWarning, InfeasibleError, ParameterError
from fedbound.tests._accounting_oracles import balle_wang_delta


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClassicGaussianRangeWarning)
        return fn(*args, **kwargs)


def test_spec002_regression_values():
    # spec 002 Sec. 8: c(0.01) = 3.10751146009224, sigma_U = c L 2C/(m eps) for TV1 (eps 60, m 100) and TV2
    assert classic_gaussian_constant(0.01) == pytest.approx(3.10751146009224, rel=1e-12)
    assert _quiet(classic_gaussian_std, 60.0, 0.01, 0.4) == pytest.approx(0.02071674307, rel=1e-9)
    assert _quiet(classic_gaussian_std, 6.0, 0.01, 0.078125) == pytest.approx(0.0404623888, rel=1e-9)


def test_warns_at_eps_one_and_above_only():
    with pytest.warns(ClassicGaussianRangeWarning, match="eps = 1"):
        classic_gaussian_std(1.0, 1e-5)
    with pytest.warns(ClassicGaussianRangeWarning, match="2 of 3 values"):
        classic_gaussian_std(np.array([0.5, 2.0, 60.0]), 1e-5)
    with pytest.warns(ClassicGaussianRangeWarning):
        classic_gaussian_epsilon(0.5, 1e-5)  # the resulting eps is 9.7 >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        classic_gaussian_std(np.array([0.01, 0.5, 0.999]), 1e-5)
        classic_gaussian_epsilon(100.0, 1e-5)
        classic_composed_std(5.0, 1e-5, 10)  # eps per step 0.5


@given(eps=st.floats(1e-3, 0.999), log10_delta=st.floats(-12.0, -1.0))
def test_classic_sigma_is_private_where_the_theorem_applies(eps, log10_delta):
    """Dwork & Roth Thm A.1 holds for eps < 1: the exact delta of the classic sigma is at most delta."""
    delta = 10.0**log10_delta
    sigma = classic_gaussian_std(eps, delta)
    assert balle_wang_delta(eps, sigma) <= delta
    assert sigma >= analytic_gaussian_std(eps, delta)


def test_check_reports_what_the_sigma_delivers():
    bad = classic_gaussian_check(60.0, 0.01)  # NbAFL TV1: eps = 60
    assert bad.valid is False and bad.sigma == pytest.approx(3.10751146009224 / 60, rel=1e-12)
    assert bad.delivered_delta > 0.999  # no guarantee at all
    assert bad.delivered_delta == pytest.approx(balle_wang_delta(60.0, bad.sigma), rel=1e-9)
    assert bad.tight_sigma > bad.sigma and bad.saving_percent < 0
    assert len(bad.warnings) == 2 and "under-delivers" in bad.warnings[1]
    good = classic_gaussian_check(0.5, 1e-5)
    assert good.valid is True and good.warnings == () and good.delivered_delta < 1e-5
    assert good.saving_percent == pytest.approx(100 * (1 - analytic_gaussian_std(0.5, 1e-5) / good.sigma))
    arr = classic_gaussian_check(np.array([0.5, 60.0]), 0.01)
    assert arr.valid.tolist() == [True, False] and arr.sigma.shape == (2,)


def test_linear_composition_formulas():
    T, eps, delta = 25, 6.0, 0.01
    expected = math.sqrt(2 * math.log(1.25 * T / delta)) * T / eps
    assert classic_composed_std(eps, delta, T) == pytest.approx(expected, rel=1e-12)
    paper = _quiet(classic_composed_std, eps, delta, T, split_delta=False)  # seed 002: delta not split
    assert paper == pytest.approx(3.10751146009224 * T / eps, rel=1e-12)
    assert classic_composed_epsilon(classic_composed_std(eps, delta, T), delta, T) == pytest.approx(eps)
    with pytest.warns(ClassicGaussianRangeWarning, match="per step"):
        classic_composed_std(60.0, 0.01, 25)


@given(eps=st.floats(0.1, 100.0), q=st.floats(0.01, 1.0), T=st.integers(1, 1000))
def test_subsampled_classic_round_trips_and_amplifies_to_the_round_budget(eps, q, T):
    delta = 1e-5
    sigma = _quiet(classic_subsampled_std, eps, delta, q, T)
    assert _quiet(classic_subsampled_epsilon, sigma, delta, q, T) == pytest.approx(eps, rel=1e-9)
    eps0 = math.sqrt(2 * math.log(1.25 * T * q / delta)) / sigma  # per release before amplification
    assert T * amplify_by_subsampling(eps0, 0.0, q).epsilon == pytest.approx(eps, rel=1e-9)
    # subsampling credit: never more noise than without it
    assert sigma <= _quiet(classic_composed_std, eps, delta, T) * (1 + 1e-12)


def test_subsampled_classic_infeasible_when_delta_cannot_be_split():
    with pytest.raises(InfeasibleError):
        classic_subsampled_std(1.0, 0.5, 0.01, 10)
    with pytest.raises(InfeasibleError):
        classic_subsampled_epsilon(1.0, 0.5, 0.01, 10)


@pytest.mark.parametrize("kwargs, name", [
    (dict(eps=0.0, delta=1e-5), "eps"), (dict(eps=1.0, delta=1.5), "delta"),
    (dict(eps=0.5, delta=0.0), "delta"),
    (dict(eps=0.5, delta=1e-5, sensitivity=-1.0), "sensitivity"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ParameterError) as info:
        classic_gaussian_std(**kwargs)
    assert info.value.name == name


@pytest.mark.parametrize("steps", [0, 2.5, -3, math.nan])
def test_bad_steps(steps):
    with pytest.raises(ParameterError, match="steps"):
        classic_composed_std(1.0, 1e-5, steps)
