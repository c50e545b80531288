"""Seed 000 Theorem 1 (fedbound.bounds.dppfl): spec 000 Sec. 8.1 regression values and dp-accounting."""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest

from fedbound.bounds.dppfl import rdp_pfl_epsilon, rdp_pfl_noise_multiplier, rdp_pfl_rdp

SETTINGS = {  # (eps, delta, T, tau0, q): spec 000 Sec. 8.1 settings A, B, C
    "A": (2.0, 1e-3, 200, 1, 0.1),
    "B": (6.0, 1e-3, 200, 2, 0.1),
    "C": (4.0, 1e-3, 50, 3, 1.0),
}


@pytest.mark.parametrize("name,sigma,alpha", [("A", 3.34841371, 6.0), ("B", 1.9969362, 3.1),
                                              ("C", 15.6581817, 4.0)])
def test_sigma_star_reproduces_spec_vectors(name, sigma, alpha):
    """Spec 000 Sec. 8.1: sigma* (rtol 1e-6) and eps_DP(sigma*) = eps at alpha*."""
    eps, delta, T, tau0, q = SETTINGS[name]
    found = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q, q)
    assert found == pytest.approx(sigma, rel=1e-6)
    spent, order = rdp_pfl_epsilon(T, tau0, q, found, q, found, delta)
    assert spent <= eps and spent == pytest.approx(eps, rel=1e-9)
    assert order == pytest.approx(alpha)
    assert rdp_pfl_epsilon(T, tau0, q, found * (1 - 1e-8), q, found * (1 - 1e-8), delta)[0] > eps


@pytest.mark.parametrize("name,eps,alpha", [("A", 12.2478752, 2.1), ("B", 18.9281859, 1.8),
                                            ("C", 211.835409, 1.2)])
def test_epsilon_at_sigma_one(name, eps, alpha):
    _, delta, T, tau0, q = SETTINGS[name]
    assert rdp_pfl_epsilon(T, tau0, q, 1.0, q, 1.0, delta) == pytest.approx((eps, alpha), rel=1e-6)


def test_fixed_order_rdp_table():
    """Spec 000 Sec. 8.1, fixed-alpha table at sigma = 1: eps' totals of A and C, each stage half of it."""
    orders = np.array([2.0, 8.0, 10.5, 32.0])
    total_a, inner_a, outer_a = rdp_pfl_rdp(orders, 200, 1, 0.1, 1.0, 0.1, 1.0)
    np.testing.assert_allclose(total_a, [6.81474529, 551.344565, 1082.3144, 5449.25519], rtol=1e-6)
    np.testing.assert_allclose(inner_a, total_a / 2, rtol=1e-12)
    np.testing.assert_allclose(outer_a, total_a / 2, rtol=1e-12)
    total_c, _, _ = rdp_pfl_rdp(orders, 50, 3, 1.0, 1.0, 1.0, 1.0)
    np.testing.assert_allclose(total_c, [300.0, 1200.0, 1575.0, 4800.0], rtol=1e-12)


@pytest.mark.parametrize("args,eps,alpha,inner,outer,share", [
    ((0.05, 1.5, 0.1, 1.5, 1e-3), 3.09628044, 4.3, 0.323933674, 1.38578470, 0.189466),   # D1
    ((0.1, 1.0, 0.1, 2.0, 1e-3), 6.04643467, 2.8, 2.81672256, 0.405913833, 0.874043),    # D2
    ((0.01, 1.0, 0.01, 1.0, 1e-5), 1.34011117, 8.6, None, None, 0.5),                     # D3
])
def test_budget_allocation_vectors(args, eps, alpha, inner, outer, share):
    """Spec 000 Sec. 8.1, extra privacy vectors (T = 100, tau0 = 1): unequal rates and noise."""
    q_in, s_in, q_out, s_out, delta = args
    assert rdp_pfl_epsilon(100, 1, q_in, s_in, q_out, s_out, delta) == pytest.approx((eps, alpha), rel=1e-6)
    _, e_in, e_out = rdp_pfl_rdp(np.array([alpha]), 100, 1, q_in, s_in, q_out, s_out)
    if inner is not None:
        np.testing.assert_allclose([e_in[0], e_out[0]], [inner, outer], rtol=1e-6)
    assert e_in[0] / (e_in[0] + e_out[0]) == pytest.approx(share, abs=1e-6)


def test_q_one_sigma_scales_with_sqrt_T():
    """Spec 000 Sec. 8.1, analytic cross-checks for q = 1 (setting C): sigma*(200)/sigma*(50) = 2 exactly,
    sigma*(T = 1) = 2.21440129."""
    s50, s200 = (rdp_pfl_noise_multiplier(4.0, 1e-3, t, 3, 1.0, 1.0) for t in (50, 200))
    assert s200 / s50 == pytest.approx(2.0, rel=1e-8)
    assert rdp_pfl_noise_multiplier(4.0, 1e-3, 1, 3, 1.0, 1.0) == pytest.approx(2.21440129, rel=1e-6)


@pytest.mark.parametrize("T,tau0,q_in,q_out,sigma,delta,expected", [
    (200, 1, 0.1, 0.1, 1.0, 1e-3, 12.3362062),        # spec: A at sigma = 1, integer orders (alpha 2)
    (200, 2, 0.1, 0.1, 1.9969362, 1e-3, 6.01052600),  # spec: B at sigma*, integer orders (alpha 3)
    (100, 1, 0.05, 0.1, 1.5, 1e-3, None),             # D1's unequal rates
    (7, 3, 0.3, 0.02, 0.9, 1e-5, None),
])
def test_composition_matches_dp_accounting_at_integer_orders(T, tau0, q_in, q_out, sigma, delta, expected):
    """Eq. (12)'s composition of both stages over T tau0 epochs against dp-accounting's RdpAccountant
    (exact at integer orders, spec 000 Sec. 3.4 backend caveat)."""
    orders = np.arange(2, 64, dtype=float)
    acc = dpa.rdp.RdpAccountant([float(a) for a in orders])
    acc.compose(dpa.PoissonSampledDpEvent(q_in, dpa.GaussianDpEvent(sigma)), T * tau0)
    acc.compose(dpa.PoissonSampledDpEvent(q_out, dpa.GaussianDpEvent(sigma)), T * tau0)
    ours, _ = rdp_pfl_epsilon(T, tau0, q_in, sigma, q_out, sigma, delta, orders=orders)
    assert ours == pytest.approx(acc.get_epsilon(delta), rel=1e-9)
    if expected is not None:
        assert ours == pytest.approx(expected, rel=1e-6)
