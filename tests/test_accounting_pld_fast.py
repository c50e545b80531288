"""The vectorised one-step PLD (accounting/pld.py: subsampled_gaussian_pld) against dp-accounting's own
PLDAccountant, and pld_calibrate's warm start (issue 25: WPFL's re-plan at a new eps)."""

import math

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.accounting import pld as P


def _reference(z, q, t, disc):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=disc)
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), t)
    return acc


@settings(max_examples=6, deadline=None)
@given(z=st.floats(0.3, 5.0), q=st.floats(1e-3, 0.95), t=st.integers(1, 30))
def test_vectorised_pld_equals_dp_accountings(z, q, t):
    """eps at two deltas and delta at two eps: those of dp-accounting's PLDAccountant (rtol 1e-12)."""
    ref, fast = _reference(z, q, t, 1e-2), P.subsampled_gaussian_pld(z, q, t, 1e-2)
    for d in (1e-3, 1e-6):
        assert fast.get_epsilon_for_delta(d) == pytest.approx(ref.get_epsilon(d), rel=1e-12, abs=1e-15)
    for e in (0.3, 2.0):
        assert fast.get_delta_for_epsilon(e) == pytest.approx(ref.get_delta(e), rel=1e-12, abs=1e-15)


def test_pld_epsilon_uses_the_same_numbers_as_dp_accounting():
    assert P.pld_epsilon(0.77, 0.01, 20, 1e-3, 5e-4) == pytest.approx(
        _reference(0.77, 0.01, 20, 5e-4).get_epsilon(1e-3), rel=1e-12)


def test_warm_start_meets_the_window_in_fewer_evaluations(monkeypatch):
    """A second calibration at a nearby eps starts from the first's ratio and slope: it lands in the same
    (1 - rtol, 1] window of the target by dp-accounting's PLD, in at most two evaluations here (the cold
    start needs at least three), and a cold start gives a noise within the window's width of it."""
    monkeypatch.setattr(P, "_STARTS", {})
    calls = []
    real = P.pld_epsilon
    monkeypatch.setattr(P, "pld_epsilon", lambda *a, **k: calls.append(a) or real(*a, **k))
    q, t, delta, disc, upper = 0.02, 10, 1e-3, 1e-3, 2.0
    P.pld_calibrate(1.0, delta, q, t, disc, upper)
    cold = len(calls)
    calls.clear()
    z, eps = P.pld_calibrate(1.04, delta, q, t, disc, upper)
    warm = len(calls)
    assert cold >= 3 and warm <= 2
    ref = _reference(z, q, t, disc).get_epsilon(delta)
    assert ref == pytest.approx(eps, rel=1e-12) and 1.04 * (1 - 1e-3) <= ref <= 1.04
    monkeypatch.setattr(P, "_STARTS", {})
    z_cold, _ = P.pld_calibrate(1.04, delta, q, t, disc, upper)
    assert math.isclose(z, z_cold, rel_tol=2e-3)


@pytest.mark.parametrize("z, q, t, disc", [(0.05, 0.99, 1, 0.05), (0.2, 0.999999, 2, 0.05),
                                           (3.0, 1e-9, 1, 1e-4), (50.0, 1e-6, 5, 1e-4)])
def test_vectorised_pld_at_extreme_inputs(z, q, t, disc):
    """Tiny or huge noise, q near 0 or 1: still dp-accounting's numbers, exactly."""
    ref, fast = _reference(z, q, t, disc), P.subsampled_gaussian_pld(z, q, t, disc)
    assert fast.get_epsilon_for_delta(1e-5) == ref.get_epsilon(1e-5)
    assert fast.get_delta_for_epsilon(1.0) == ref.get_delta(1.0)
