"""The analytic Gaussian mechanism against 40-digit Balle-Wang and dp-accounting's exact calibration."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import analytic_gaussian_delta, analytic_gaussian_epsilon, analytic_gaussian_std
from fedbound.errors import ParameterError
from fedbound.tests._accounting_oracles import balle_wang_delta

eps_st = st.floats(1e-3, 100.0)


@given(eps=eps_st, log10_delta=st.floats(-12.0, -0.01))
def test_std_delivers_the_target_delta_exactly(eps, log10_delta):
    delta = 10.0**log10_delta
    sigma = analytic_gaussian_std(eps, delta)
    assert balle_wang_delta(eps, sigma) == pytest.approx(delta, rel=1e-9)


@given(eps=eps_st, log10_delta=st.floats(-300.0, -1e-13))
def test_std_round_trips_through_delta_over_the_whole_domain(eps, log10_delta):
    delta = 10.0**log10_delta
    sigma = analytic_gaussian_std(eps, delta)
    assert math.isfinite(sigma) and sigma > 0
    assert analytic_gaussian_delta(eps, sigma) == pytest.approx(delta, rel=1e-9)


@pytest.mark.parametrize("eps, delta", [(1e-3, 1e-300), (1.0, 1e-300), (0.5, 1 - 1e-12), (100.0, 1 - 1e-12),
                                        (100.0, 1e-300)])
def test_extreme_deltas(eps, delta):
    sigma = analytic_gaussian_std(eps, delta)
    assert math.isfinite(sigma) and sigma > 0
    assert analytic_gaussian_delta(eps, sigma) == pytest.approx(delta, rel=1e-9)
    assert analytic_gaussian_epsilon(sigma, delta) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-5), (1.0, 1e-5), (6.0, 0.01), (60.0, 0.01), (3.0, 1e-10)])
def test_matches_dp_accounting_exact_gaussian(eps, delta):
    import dp_accounting

    assert analytic_gaussian_std(eps, delta) == pytest.approx(dp_accounting.get_sigma_gaussian(eps, delta),
                                                              rel=1e-9)
    exact_eps = dp_accounting.get_epsilon_gaussian(2.0, delta)
    assert analytic_gaussian_epsilon(2.0, delta) == pytest.approx(exact_eps, rel=1e-9)


def test_sensitivity_scales_sigma():
    assert analytic_gaussian_std(1.0, 1e-5, 3.0) == pytest.approx(3.0 * analytic_gaussian_std(1.0, 1e-5),
                                                                  rel=1e-12)
    assert analytic_gaussian_delta(1.0, 6.0, 2.0) == pytest.approx(balle_wang_delta(1.0, 3.0), rel=1e-10)


def test_epsilon_is_zero_when_already_zero_delta_private():
    # delta(0) = 2 Phi(1/(2 sigma)) - 1 = 0.0399 for sigma = 10 < 0.05
    assert analytic_gaussian_epsilon(10.0, 0.05) == 0.0
    assert analytic_gaussian_epsilon(10.0, 0.03) > 0.0


@given(eps=st.floats(0.01, 50.0), eps2=st.floats(0.01, 50.0), ld=st.floats(-30.0, -0.5),
       ld2=st.floats(-30.0, -0.5))
def test_sigma_decreases_in_eps_and_delta(eps, eps2, ld, ld2):
    lo_e, hi_e = sorted([eps, eps2])
    lo_d, hi_d = sorted([10.0**ld, 10.0**ld2])
    assert analytic_gaussian_std(hi_e, lo_d) <= analytic_gaussian_std(lo_e, lo_d) * (1 + 1e-12)
    assert analytic_gaussian_std(lo_e, hi_d) <= analytic_gaussian_std(lo_e, lo_d) * (1 + 1e-12)


def test_broadcasting_and_return_types():
    out = analytic_gaussian_std(np.array([0.5, 1.0, 2.0])[:, None], np.array([1e-5, 1e-3]))
    assert isinstance(out, np.ndarray) and out.shape == (3, 2)
    assert out[0, 0] == pytest.approx(analytic_gaussian_std(0.5, 1e-5), rel=1e-12)
    assert isinstance(analytic_gaussian_std(1.0, 1e-5), float)
    assert isinstance(analytic_gaussian_delta(1.0, 2.0), float)


@pytest.mark.parametrize("kwargs, name", [
    (dict(eps=0.0, delta=1e-5), "eps"), (dict(eps=-1.0, delta=1e-5), "eps"),
    (dict(eps=1.0, delta=0.0), "delta"),
    (dict(eps=1.0, delta=1.0), "delta"), (dict(eps=math.nan, delta=1e-5), "eps"),
    (dict(eps=1.0, delta=1e-5, sensitivity=0.0), "sensitivity"), (dict(eps=math.inf, delta=1e-5), "eps"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ParameterError) as info:
        analytic_gaussian_std(**kwargs)
    assert info.value.name == name


def test_no_warnings_on_normal_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analytic_gaussian_std(np.geomspace(1e-3, 100, 50), 1e-300)
        analytic_gaussian_epsilon(np.geomspace(1e-3, 1e3, 50), 1 - 1e-12)


@given(log_z=st.floats(-5.0, 7.0), log10_delta=st.floats(-250.0, -0.05))
def test_epsilon_is_the_exact_root_on_the_private_side(log_z, log10_delta):
    """Newton's path (and its fallback) against the 40-digit Balle-Wang profile: eps is the root to 1e-9
    relative, i.e. eps (1 + 1e-9) is private and eps (1 - 1e-9) is not (an upper bound that is also tight)."""
    z, delta = math.exp(log_z), 10.0**log10_delta
    eps = analytic_gaussian_epsilon(z, delta)
    if eps == 0.0:
        assert balle_wang_delta(0.0, z) <= delta * (1 + 1e-9)
        return
    assert balle_wang_delta(eps * (1 + 1e-9), z) <= delta
    assert balle_wang_delta(eps * (1 - 1e-9), z) > delta


def test_epsilon_vectorised_equals_pointwise():
    rng = np.random.default_rng(7)
    z, delta = np.exp(rng.uniform(-4.0, 6.0, 64)), 10.0 ** rng.uniform(-30.0, -0.5, 64)
    together = analytic_gaussian_epsilon(z, delta)
    alone = np.array([analytic_gaussian_epsilon(float(a), float(b)) for a, b in zip(z, delta, strict=True)])
    np.testing.assert_allclose(together, alone, rtol=1e-11)
