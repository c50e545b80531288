"""Hypothesis: calibrated noise is monotone in every argument, never NaN/inf, and bad input names itself."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import calibrate_noise, epsilon
from fedbound.errors import InfeasibleError, ParameterError

eps_st = st.floats(0.05, 100.0)
log_delta_st = st.floats(-300.0, math.log10(0.5))
log_q_st = st.floats(-9.0, 0.0)
steps_st = st.integers(1, 10**6)


@given(eps=eps_st, log_delta=st.floats(-30.0, -1.0), log_q=log_q_st, steps=st.integers(1, 10**5),
       bump=st.floats(1.05, 3.0))
def test_sigma_decreases_in_eps_and_delta_and_increases_in_q_and_steps(eps, log_delta, log_q, steps, bump):
    delta, q = 10.0**log_delta, 10.0**log_q
    # one vectorised call: the base point and each argument moved in one direction
    e = np.array([eps, eps * bump, eps, eps, eps])
    d = np.array([delta, delta, min(delta * bump, 0.5), delta, delta])
    qq = np.array([q, q, q, min(q * bump, 1.0), q])
    t = np.array([steps, steps, steps, steps, int(steps * bump) + 1])
    try:
        z = calibrate_noise(e, d, qq, t)
    except InfeasibleError:
        return
    tol = 1 + 1e-8
    assert z[1] <= z[0] * tol  # more eps, less noise
    assert z[2] <= z[0] * tol  # more delta, less noise
    assert z[3] >= z[0] / tol  # higher sampling rate, more noise
    assert z[4] >= z[0] / tol  # more rounds, more noise


@given(eps=eps_st, log_delta=log_delta_st, log_q=log_q_st, steps=steps_st)
def test_extremes_give_a_finite_private_answer_or_a_clear_error(eps, log_delta, log_q, steps):
    delta, q = 10.0**log_delta, 10.0**log_q
    try:
        z = calibrate_noise(eps, delta, q, steps)
    except InfeasibleError as exc:
        assert "cannot be met" in str(exc) or "above" in str(exc)
        return
    assert math.isfinite(z) and z > 0
    assert epsilon(z, q, steps, delta) <= eps


@pytest.mark.parametrize("delta", [1e-300, 1 - 1e-12])
@pytest.mark.parametrize("q", [1e-9, 1.0])
@pytest.mark.parametrize("steps", [1, 10**6])
def test_named_extremes(delta, q, steps):
    z = calibrate_noise(5.0, delta, q, steps)
    assert math.isfinite(z) and z > 0
    assert epsilon(z, q, steps, delta) <= 5.0 < epsilon(z * (1 - 1e-4), q, steps, delta)


bad_float = st.one_of(st.just(math.nan), st.just(math.inf), st.just(-math.inf), st.floats(-1e9, 0.0))


@given(value=bad_float, which=st.sampled_from(["target_eps", "delta", "sample_rate"]))
def test_bad_values_name_the_parameter(value, which):
    args = dict(target_eps=1.0, delta=1e-5, sample_rate=0.1, steps=10)
    args[which] = value
    with pytest.raises(ParameterError) as info:
        calibrate_noise(**args)
    assert info.value.name == which


@given(value=st.one_of(st.floats(1.0 + 1e-9, 1e9), st.just(math.nan)),
       which=st.sampled_from(["delta", "sample_rate"]))
def test_probabilities_above_their_range(value, which):
    args = dict(target_eps=1.0, delta=1e-5, sample_rate=0.1, steps=10)
    args[which] = value
    with pytest.raises(ParameterError) as info:
        calibrate_noise(**args)
    assert info.value.name == which
