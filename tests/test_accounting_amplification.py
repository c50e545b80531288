"""Amplification by subsampling for (eps, delta)-DP (Balle, Barthe & Gaboardi 2018) and its inverse."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import amplify_by_subsampling, inverse_amplify_by_subsampling
from fedbound.errors import InfeasibleError, ParameterError


@pytest.mark.parametrize("eps, delta, q", [(1.0, 1e-5, 0.1), (0.24, 0.01, 0.4), (6.0, 1e-3, 0.6),
                                           (3.0, 0.0, 0.01)])
def test_formula(eps, delta, q):
    out = amplify_by_subsampling(eps, delta, q)
    assert out.epsilon == pytest.approx(math.log(1 + q * (math.exp(eps) - 1)), rel=1e-13)
    assert out.delta == pytest.approx(q * delta, rel=1e-15)


def test_identities_at_the_edges():
    assert amplify_by_subsampling(2.5, 1e-5, 1.0) == (2.5, 1e-5)
    assert amplify_by_subsampling(0.0, 0.0, 0.3) == (0.0, 0.0)
    assert inverse_amplify_by_subsampling(2.5, 1e-5, 1.0) == (pytest.approx(2.5, rel=1e-15), 1e-5)
    # large eps: no overflow, eps' -> eps + ln q
    assert amplify_by_subsampling(800.0, 0.0, 0.1).epsilon == pytest.approx(800.0 + math.log(0.1), rel=1e-15)
    assert inverse_amplify_by_subsampling(800.0, 0.0, 0.1).epsilon == pytest.approx(800.0 - math.log(0.1))


def test_spec002_two_sided_b():
    """spec 002 E9 / TV3 (eps = 6, T = 25, K = 20, N = 50): b_std = T/eps * eps0(eps/T, K/N) = 2.156982637."""
    eps, T = 6.0, 25
    eps0 = inverse_amplify_by_subsampling(eps / T, 0.0, 20 / 50).epsilon
    assert T / eps * eps0 == pytest.approx(2.156982637, rel=1e-9)


@given(eps=st.floats(0.0, 300.0), log_q=st.floats(-20.0, 0.0), delta=st.floats(0.0, 0.999))
def test_inverse_round_trip(eps, log_q, delta):
    q = math.exp(log_q)
    if delta / q >= 1:
        return
    e0, d0 = inverse_amplify_by_subsampling(eps, delta, q)
    e1, d1 = amplify_by_subsampling(e0, d0, q)
    assert e1 == pytest.approx(eps, rel=1e-9, abs=1e-12)
    assert d1 == pytest.approx(delta, rel=1e-12, abs=1e-300)
    assert e0 >= eps * (1 - 1e-12)  # the per-release budget is never smaller


@given(eps=st.floats(0.0, 50.0), q1=st.floats(1e-6, 1.0), q2=st.floats(1e-6, 1.0))
def test_monotone_in_q_and_never_above_eps(eps, q1, q2):
    lo, hi = sorted([q1, q2])
    a, b = amplify_by_subsampling(eps, 0.0, lo).epsilon, amplify_by_subsampling(eps, 0.0, hi).epsilon
    assert a <= b * (1 + 1e-12) + 1e-300 and b <= eps * (1 + 1e-12)


def test_broadcasting():
    out = amplify_by_subsampling(np.array([0.5, 1.0, 2.0])[:, None], 1e-5, np.array([0.1, 1.0]))
    assert out.epsilon.shape == (3, 2) and out.delta.shape == (3, 2)
    assert isinstance(amplify_by_subsampling(1.0, 1e-5, 0.5).epsilon, float)


def test_errors():
    with pytest.raises(InfeasibleError, match="delta / q"):
        inverse_amplify_by_subsampling(1.0, 0.05, 0.01)
    with pytest.raises(ParameterError, match="q"):
        amplify_by_subsampling(1.0, 1e-5, 0.0)
    with pytest.raises(ParameterError, match="eps"):
        amplify_by_subsampling(-1.0, 1e-5, 0.5)
