import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.checks import check_int, check_probability, check_real, interval, scalar_or_array
from fedbound.errors import FedboundError, ParameterError


def test_error_names_parameter_value_and_range():
    with pytest.raises(ParameterError) as info:
        check_real("delta", 1.5, 0, 1, low_open=True, high_open=True)
    msg = str(info.value)
    assert "delta" in msg and "1.5" in msg and "(0, 1)" in msg
    assert info.value.name == "delta" and info.value.value == 1.5
    assert isinstance(info.value, ValueError)


def test_nan_and_inf_rejected():
    with pytest.raises(ParameterError, match="eps"):
        check_real("eps", math.nan, 0, None, low_open=True)
    with pytest.raises(ParameterError, match="eps"):
        check_real("eps", math.inf, 0, None, low_open=True)
    assert check_real("eps", math.inf, 0, None, low_open=True, allow_inf=True) == math.inf


def test_array_reports_first_offending_index():
    with pytest.raises(ParameterError, match=r"index 2"):
        check_real("q", np.array([0.1, 0.5, 1.5, 2.0]), 0, 1)


def test_non_numeric_input_is_a_parameter_error():
    with pytest.raises(ParameterError, match="sigma"):
        check_real("sigma", "abc", 0)


def test_check_int():
    assert check_int("T", 3.0, 1).dtype == np.int64
    with pytest.raises(ParameterError, match=r"integer in \[1, 1e\+12\]"):
        check_int("T", 0, 1)
    with pytest.raises(ParameterError, match="T"):
        check_int("T", 2.5, 1)


def test_probability_ends():
    with pytest.raises(ParameterError):
        check_probability("q", 0.0)
    assert check_probability("q", 1.0, allow_one=True) == 1.0


def test_interval_notation():
    assert interval(0, 1, True, True) == "(0, 1)"
    assert interval(1, None) == "[1, inf)"
    assert interval(None, 0.5, high_open=True) == "(-inf, 0.5)"
    assert interval(1, 50, integer=True) == "integer in [1, 50]"


def test_scalar_or_array_refuses_nan():
    assert scalar_or_array(np.array(2.0)) == 2.0
    with pytest.raises(FedboundError):
        scalar_or_array(np.array(np.nan))


@given(st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True))
def test_values_inside_range_pass_unchanged(x):
    assert check_real("x", x, 0, 1, low_open=True, high_open=True) == x


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v <= 0 or v >= 1))
def test_values_outside_range_fail(x):
    with pytest.raises(ParameterError):
        check_real("x", x, 0, 1, low_open=True, high_open=True)
