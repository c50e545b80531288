"""Renyi DP of the (subsampled) Gaussian: oracles (dp-accounting at integer orders, Opacus at fractional
orders, 30-digit quadrature everywhere), spec 003 regression values, extremes, and the conversions."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting import (
    DEFAULT_ORDERS,
    rdp_gaussian,
    rdp_sampled_without_replacement,
    rdp_subsampled_gaussian,
    rdp_to_delta,
    rdp_to_dp,
)
from fedbound.errors import ParameterError
from fedbound.tests._accounting_oracles import sgm_log_a

INT_ORDERS = np.arange(2.0, 65.0)


def _dp_accounting_rdp(q, z, orders):
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(orders))
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)))
    return acc.rdp


@given(log_q=st.floats(-9.0, -0.01), log_z=st.floats(-0.5, 1.5))
def test_integer_orders_match_dp_accounting(log_q, log_z):
    q, z = 10.0**log_q, 10.0**log_z
    ours = rdp_subsampled_gaussian(INT_ORDERS, q, z)
    # dp-accounting sums probabilities that add up to ~1 in log space, so its absolute error is ~1e-16
    np.testing.assert_allclose(ours, _dp_accounting_rdp(q, z, INT_ORDERS), rtol=1e-6, atol=1e-13)


@given(log_q=st.floats(-4.0, -0.01), log_z=st.floats(-0.3, 1.0), alpha=st.floats(1.05, 11.0))
def test_fractional_orders_match_opacus_series(log_q, log_z, alpha):
    from opacus.accountants.analysis.rdp import compute_rdp

    q, z = 10.0**log_q, 10.0**log_z
    if float(alpha).is_integer():
        alpha += 0.5
    ours = rdp_subsampled_gaussian(alpha, q, z)
    theirs = compute_rdp(q=q, noise_multiplier=z, steps=1, orders=alpha)
    # Opacus stops its series once terms fall below e^-30 in absolute value: an absolute error of about
    # 1e-13 / (alpha - 1) in the RDP (we checked such cases against 40-digit quadrature: ours is right)
    assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-11)


@pytest.mark.parametrize("alpha, q, z", [
    (1.01, 0.5, 0.5), (1.1, 0.001, 3.0), (1.5, 0.2, 0.8), (2.5, 1e-6, 0.3), (3.7, 0.9, 1.2),
    (10.5, 0.01, 20.0), (7.25, 0.3, 0.05), (1.3, 0.6, 0.03), (24.0, 0.05, 2.0), (5.5, 1e-9, 10.0),
])
def test_against_30_digit_quadrature(alpha, q, z):
    """Covers all three routes: integer sum, quadrature (z not tiny) and the MTZ series (z = 0.05, 0.03)."""
    expected = sgm_log_a(alpha, q, z) / (alpha - 1)
    assert rdp_subsampled_gaussian(alpha, q, z) == pytest.approx(expected, rel=1e-10)


def test_dp_accounting_fractional_orders_are_only_upper_bounds():
    """The trap docs/design.md warns of: dp-accounting 0.6 sums |terms| at fractional orders (an upper
    bound) and drops orders <= 1.5 at small sigma (inf); our values are exact there."""
    orders = [1.25, 1.5, 2.5, 4.5]
    ours = rdp_subsampled_gaussian(orders, 0.1, 0.7)
    theirs = _dp_accounting_rdp(0.1, 0.7, orders)
    assert np.isinf(theirs[:2]).all() and np.isfinite(ours).all()
    assert ours[2] < theirs[2] * (1 - 1e-3) and ours[3] <= theirs[3]
    for k in (0, 2):
        assert ours[k] == pytest.approx(sgm_log_a(orders[k], 0.1, 0.7) / (orders[k] - 1), rel=1e-10)


def test_spec003_lemma1_moments():
    """spec 003 Sec. 8.3: ln D10 (eq. D2) at lambda = alpha - 1, sigma = 1, i.e. z = 1/Delta_l."""
    cases = [((1, 0.6, 1.0), 0.4815501226), ((4, 0.6, 0.5), 1.170461273), ((8, 0.1, 0.5), 0.1284903874),
             ((3, 1.0, 1.0), 6.0)]
    for (lam, q, sens), expected in cases:
        assert lam * rdp_subsampled_gaussian(lam + 1, q, 1.0 / sens) == pytest.approx(expected, rel=1e-9)


def test_q_one_is_the_gaussian_and_steps_compose():
    z = 1.7
    np.testing.assert_allclose(rdp_subsampled_gaussian(DEFAULT_ORDERS, 1.0, z), DEFAULT_ORDERS / (2 * z**2),
                               rtol=1e-15)
    np.testing.assert_allclose(rdp_gaussian(DEFAULT_ORDERS, z, 7), 7 * DEFAULT_ORDERS / (2 * z**2),
                               rtol=1e-15)
    one = rdp_subsampled_gaussian(DEFAULT_ORDERS, 0.01, z)
    np.testing.assert_allclose(rdp_subsampled_gaussian(DEFAULT_ORDERS, 0.01, z, 1000), 1000 * one, rtol=1e-14)


def test_shapes():
    out = rdp_subsampled_gaussian(DEFAULT_ORDERS, np.array([0.01, 0.1]), np.array([[1.0], [2.0], [3.0]]))
    assert out.shape == (3, 2, DEFAULT_ORDERS.size)
    assert out[2, 1, 5] == pytest.approx(rdp_subsampled_gaussian(DEFAULT_ORDERS[5], 0.1, 3.0), rel=1e-14)
    assert isinstance(rdp_subsampled_gaussian(2.0, 0.1, 1.0), float)
    assert rdp_to_dp(DEFAULT_ORDERS, out, 1e-5).shape == (3, 2)


@given(log_q=st.floats(-9.0, 0.0), log_z=st.floats(-1.3, 2.0))
def test_monotone_in_order_finite_and_never_above_the_gaussian(log_q, log_z):
    q, z = 10.0**log_q, 10.0**log_z
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rdp = rdp_subsampled_gaussian(DEFAULT_ORDERS, q, z)
    assert np.all(np.isfinite(rdp)) and np.all(rdp >= 0)
    assert np.all(np.diff(rdp) >= -1e-12 * rdp[1:])  # Renyi divergence is non-decreasing in the order
    assert np.all(rdp <= DEFAULT_ORDERS / (2 * z**2) * (1 + 1e-12))  # subsampling never hurts


@given(q1=st.floats(1e-9, 1.0), q2=st.floats(1e-9, 1.0), z1=st.floats(0.1, 50.0), z2=st.floats(0.1, 50.0))
def test_monotone_in_q_and_noise(q1, q2, z1, z2):
    (qa, qb), (za, zb) = sorted([q1, q2]), sorted([z1, z2])
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    base = rdp_subsampled_gaussian(orders, qa, za)
    assert np.all(base <= rdp_subsampled_gaussian(orders, qb, za) * (1 + 1e-9))
    assert np.all(rdp_subsampled_gaussian(orders, qa, zb) <= base * (1 + 1e-9))


def test_extremes_stay_finite():
    tiny_q = rdp_subsampled_gaussian(DEFAULT_ORDERS, 1e-9, 1.0, 10**6)
    assert np.all(np.isfinite(tiny_q)) and tiny_q[0] > 0
    # leading order for tiny q: rdp ~ q^2 alpha (e^(1/z^2) - 1) / 2 per step
    assert tiny_q[10] == pytest.approx(1e6 * 1e-18 * DEFAULT_ORDERS[10] * math.expm1(1.0) / 2, rel=1e-6)
    small_z = rdp_subsampled_gaussian(np.array([1.5, 4096.0, 1e4 + 0.5]), 0.5, 0.05)
    assert np.all(np.isfinite(small_z)) and np.all(np.diff(small_z) > 0)


def test_conversions_match_dp_accounting():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_delta, compute_epsilon

    rdp = rdp_subsampled_gaussian(INT_ORDERS, 0.01, 1.1, 1000)
    for delta in [1e-10, 1e-5, 0.3]:
        eps, order = rdp_to_dp(INT_ORDERS, rdp, delta, return_order=True)
        ref_eps, ref_order = compute_epsilon(INT_ORDERS, rdp, delta)
        assert eps == pytest.approx(ref_eps, rel=1e-12) and order == ref_order
    for eps in [0.5, 1.0, 3.0]:
        assert rdp_to_delta(INT_ORDERS, rdp, eps) == pytest.approx(compute_delta(INT_ORDERS, rdp, eps)[0],
                                                                   rel=1e-12)


def test_classic_conversion_is_the_moments_accountant_tail_bound():
    rdp = rdp_subsampled_gaussian(INT_ORDERS, 0.05, 2.0, 300)
    expected_eps = np.min(rdp + math.log(1e5) / (INT_ORDERS - 1))
    assert rdp_to_dp(INT_ORDERS, rdp, 1e-5, conversion="classic") == pytest.approx(expected_eps, rel=1e-14)
    expected_delta = np.exp(np.min((INT_ORDERS - 1) * (rdp - 2.0)))
    got_delta = rdp_to_delta(INT_ORDERS, rdp, 2.0, conversion="classic")
    assert got_delta == pytest.approx(expected_delta, rel=1e-12)
    # the improved conversion is never worse
    assert rdp_to_dp(INT_ORDERS, rdp, 1e-5) <= rdp_to_dp(INT_ORDERS, rdp, 1e-5, conversion="classic")


def test_kl_branch_gives_zero_eps_for_huge_delta():
    assert rdp_to_dp([2.0, 3.0], [1e-4, 2e-4], 0.5) == 0.0
    assert rdp_to_delta([2.0], [0.0], 0.1) == 0.0


def test_without_replacement_reduces_to_the_gaussian_at_q_one():
    orders = np.array([1.5, 2.0, 10.0])
    full = rdp_sampled_without_replacement(orders, 1.0, 2.0, 3)
    np.testing.assert_allclose(full, 3 * orders / 8, rtol=1e-12)
    wor = rdp_sampled_without_replacement(orders, 0.1, 2.0)
    assert np.all(wor > 0) and np.all(wor < orders / 8)


@pytest.mark.parametrize("orders", [1.0, 0.5, [2.0, 1.0], [[2.0, 3.0]], math.nan, []])
def test_bad_orders(orders):
    with pytest.raises(ParameterError, match="orders"):
        rdp_subsampled_gaussian(orders, 0.1, 1.0)


def test_bad_rdp_shape_and_conversion():
    with pytest.raises(ParameterError, match="rdp"):
        rdp_to_dp([2.0, 3.0], [0.1, 0.2, 0.3], 1e-5)
    with pytest.raises(ParameterError, match="conversion"):
        rdp_to_dp([2.0], [0.1], 1e-5, conversion="tight")
    with pytest.raises(ParameterError, match="q"):
        rdp_subsampled_gaussian(2.0, 0.0, 1.0)
    with pytest.raises(ParameterError, match="noise_multiplier"):
        rdp_subsampled_gaussian(2.0, 0.5, -1.0)
