"""σ calibration's default Renyi orders (issue 25 item 4): never looser than Opacus' or dp-accounting's
defaults, and the screened calibration equals the direct one over all orders."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from fedbound.accounting import calibrate as cal
from fedbound.accounting.calibrate import CALIBRATION_ORDERS, calibrate_noise

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS  # noqa: E402

# Opacus' RDPAccountant.DEFAULT_ALPHAS as written in opacus/accountants/rdp.py (opacus is an optional extra).
OPACUS_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))

# (eps, delta, q, steps): small and large eps, tiny and large q, few and many steps, delta near 0 and 1.
GRID = [(0.5, 1e-5, 0.01, 1000), (1.0, 1e-5, 0.001, 10_000), (2.0, 1e-6, 0.1, 100), (6.0, 0.01, 0.4, 25),
        (8.0, 1e-5, 0.05, 50), (20.0, 1e-5, 0.5, 10), (50.0, 1e-3, 0.2, 5), (3.0, 0.5, 0.3, 30)]


def test_default_orders_contain_opacus_and_dp_accounting_defaults():
    assert np.isin(np.asarray(OPACUS_ORDERS, dtype=float), CALIBRATION_ORDERS).all()
    assert np.isin(np.asarray(DEFAULT_RDP_ORDERS, dtype=float), CALIBRATION_ORDERS).all()
    try:
        from opacus.accountants import RDPAccountant
    except ImportError:
        return
    assert list(RDPAccountant.DEFAULT_ALPHAS) == OPACUS_ORDERS  # the literal above is Opacus' own list


def _dp_accounting_epsilon(z: float, q: float, steps: int, delta: float, orders) -> float:
    acc = dpa.rdp.RdpAccountant(orders)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps)
    return acc.get_epsilon(delta)


def _opacus_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    """Opacus' accountant formula on its default orders (opacus.accountants.analysis.rdp), if installed; else
    dp-accounting's RDP on Opacus' orders (an independent implementation of the same quantity)."""
    try:
        from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
    except ImportError:
        return _dp_accounting_epsilon(z, q, steps, delta, OPACUS_ORDERS)
    rdp = compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=OPACUS_ORDERS)
    return float(get_privacy_spent(orders=OPACUS_ORDERS, rdp=rdp, delta=delta)[0])


def _their_sigma(eps_of_z, target: float, z_ours: float) -> float:
    """The smallest z with eps_of_z(z) <= target, by brentq in log z on the other library's eps."""
    lo, hi = z_ours / 1.5, z_ours * 1.5
    while eps_of_z(lo) <= target:
        lo /= 1.5
    while eps_of_z(hi) > target:
        hi *= 1.5
    x = brentq(lambda x: math.log(eps_of_z(math.exp(x))) - math.log(target), math.log(lo), math.log(hi),
               xtol=1e-12)
    return math.exp(x)


@pytest.mark.parametrize("eps, delta, q, steps", GRID)
def test_default_sigma_never_above_opacus_or_dp_accounting(eps, delta, q, steps):
    z = calibrate_noise(eps, delta, q, steps)
    z_dpa = _their_sigma(lambda x: _dp_accounting_epsilon(x, q, steps, delta, DEFAULT_RDP_ORDERS), eps, z)
    z_opacus = _their_sigma(lambda x: _opacus_epsilon(x, q, steps, delta), eps, z)
    assert z <= z_dpa * (1 + 1e-7)
    assert z <= z_opacus * (1 + 1e-7)


@pytest.mark.parametrize("eps, delta, q, steps", GRID)
def test_screened_calibration_equals_direct_over_all_orders(monkeypatch, eps, delta, q, steps):
    z = calibrate_noise(eps, delta, q, steps)
    monkeypatch.setattr(cal, "_calibrate_screened", lambda q_, z_full, b, u, o: cal._calibrate_subsampled(
        q_, z_full.min(axis=1), b, u, o))
    assert z == pytest.approx(calibrate_noise(eps, delta, q, steps), rel=1e-9)


def test_screened_calibration_on_a_grid_equals_direct(monkeypatch):
    e, q, t = (np.array(v) for v in zip(*[(g[0], g[2], g[3]) for g in GRID], strict=True))
    z = calibrate_noise(e, 1e-5, q, t)
    assert np.all(cal.epsilon(z, q, t, 1e-5) <= e * (1 + 1e-12))  # each point meets its target
    monkeypatch.setattr(cal, "_calibrate_screened", lambda q_, z_full, b, u, o: cal._calibrate_subsampled(
        q_, z_full.min(axis=1), b, u, o))
    np.testing.assert_allclose(z, calibrate_noise(e, 1e-5, q, t), rtol=1e-9)


def test_log_a_batched_equals_log_a():
    """The batched entry point gives log_a's values (same quadrature per element) on random triples that
    cover integer and fractional orders, q = 1, and the quadrature and series regimes."""
    from fedbound.accounting import _sgm

    rng = np.random.default_rng(0)
    n = 2000
    alpha = np.concatenate([1.0 + rng.uniform(0.001, 30.0, n // 2),
                            rng.integers(2, 100, n // 2).astype(float)])
    q = np.exp(rng.uniform(np.log(1e-6), 0.0, n))
    q[::50] = 1.0
    z = np.exp(rng.uniform(np.log(0.05), np.log(1e3), n))
    np.testing.assert_allclose(_sgm.log_a_batched(alpha, q, z), _sgm.log_a(alpha, q, z), rtol=1e-14, atol=0)


def _exhaustive(monkeypatch):
    """calibrate_noise without the screen: every order's root, z* = the smallest."""
    monkeypatch.setattr(cal, "_calibrate_screened", lambda q_, z_full, b, u, o: cal._calibrate_subsampled(
        q_, z_full.min(axis=1), b, u, o))


def _random_targets(seed: int, n: int, q_min: float = 1e-4, t_max: float = 1e5):
    rng = np.random.default_rng(seed)
    q = np.exp(rng.uniform(np.log(q_min), np.log(0.95), n))
    t = np.round(np.exp(rng.uniform(0.0, np.log(t_max), n))).astype(int)
    e = np.exp(rng.uniform(np.log(0.05), np.log(50.0), n))
    d = np.exp(rng.uniform(np.log(1e-10), np.log(0.3), n))
    return e, d, q, t


@settings(max_examples=2)
@given(seed=st.integers(0, 2**32 - 1))
def test_screened_equals_exhaustive_on_random_targets(seed):
    """125 random targets per example across the ranges (q log-uniform in [1e-4, 0.95], steps in [1, 1e5],
    eps in [0.05, 50], delta in [1e-10, 0.3]): the screened calibration equals the evaluation of every
    default order (to the roots' tolerance, 1e-11 in log z)."""
    e, d, q, t = _random_targets(seed, 125)
    z = calibrate_noise(e, d, q, t)
    with pytest.MonkeyPatch.context() as mp:
        _exhaustive(mp)
        z_all = calibrate_noise(e, d, q, t)
    np.testing.assert_allclose(z, z_all, rtol=1e-10)


@pytest.mark.parametrize("orders", [
    np.concatenate([np.arange(2.0, 65.0), [128.0, 256.0, 512.0, 1024.0]]),  # only large non-core orders
    1.0 + np.arange(1, 100) / 10.0,  # Opacus' fractional orders with their integers
    np.array([1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.25, 8.0, 100.0]),  # sparse, unevenly spaced
])
def test_screened_equals_exhaustive_on_other_order_sets(monkeypatch, orders):
    e, d, q, t = _random_targets(7, 40, q_min=1e-5)
    z = calibrate_noise(e, d, q, t, orders=orders)
    _exhaustive(monkeypatch)
    np.testing.assert_allclose(z, calibrate_noise(e, d, q, t, orders=orders), rtol=1e-10)


@settings(max_examples=4)
@given(seed=st.integers(0, 2**32 - 1))
def test_default_sigma_never_above_opacus_or_dp_accounting_on_random_targets(seed):
    """Never looser, on random targets: each library's own eps (Opacus' accountant on its orders,
    dp-accounting's on its DEFAULT_RDP_ORDERS) at our sigma * (1 - 1e-7) still misses the target, so
    their smallest sigma is above ours (their eps decreases in sigma)."""
    e, d, q, t = _random_targets(seed, 8, q_min=1e-3, t_max=1e4)
    z = calibrate_noise(e, d, q, t)
    for k in range(e.size):
        below = z[k] * (1 - 1e-7)
        assert _dp_accounting_epsilon(below, q[k], int(t[k]), d[k], DEFAULT_RDP_ORDERS) > e[k]
        assert _opacus_epsilon(below, q[k], int(t[k]), d[k]) > e[k]


def test_unsorted_or_repeated_orders_give_the_sorted_answer():
    """The chord bounds need the orders sorted: shuffled (and repeated) orders= give the same noise as the
    sorted set (before the fix a shuffled default set lost an order: sigma 2.8e-5 too high at eps = 3)."""
    e, q = np.array([0.5, 1.0, 3.0, 8.0, 20.0]), np.array([0.01, 0.3, 0.05, 0.5, 0.9])
    t = [1000, 50, 200, 20, 10]
    repeated = np.concatenate([CALIBRATION_ORDERS, CALIBRATION_ORDERS[:9]])
    shuffled = np.random.default_rng(1).permutation(repeated)
    np.testing.assert_allclose(calibrate_noise(e, 1e-5, q, t, orders=shuffled),
                               calibrate_noise(e, 1e-5, q, t), rtol=1e-10)


@settings(max_examples=40)
@given(q=st.floats(1e-5, 0.99), z=st.floats(0.2, 50.0), seed=st.integers(0, 2**32 - 1))
def test_chord_lower_bound_is_below_the_exact_log_a(q, z, seed):
    """_chord_lower never exceeds log A at the orders it bounds, whatever orders are known (a random subset
    of the default orders up to 64, the order 1 always), and names the nearest known order on the left."""
    from fedbound.accounting import _sgm

    rng = np.random.default_rng(seed)
    alpha = np.concatenate([[1.0], CALIBRATION_ORDERS[CALIBRATION_ORDERS <= 64]])
    ones = np.ones(alpha.size - 1)
    exact = np.concatenate([[0.0], _sgm.log_a(alpha[1:], q * ones, z * ones)])
    known = rng.random(alpha.size) < rng.uniform(0.05, 0.6)
    known[0] = True
    y = np.where(known, exact, np.nan)
    lower, left, right = cal._chord_lower(np.zeros(alpha.size, dtype=int), alpha, y)
    assert np.all(lower[~known] <= exact[~known])
    assert np.all(left[1:] >= 0) and np.all(alpha[left[1:]] < alpha[1:])


def test_chord_lower_bound_is_below_the_exact_rdp():
    """The screen's bounds from the integer orders alone (the start of every screen) stay below the exact
    RDP of the other default orders, and bound some of them away from 0."""
    from fedbound.accounting.rdp import rdp_subsampled_gaussian

    alpha = np.concatenate([[1.0], CALIBRATION_ORDERS])
    core = (alpha == np.round(alpha)) & (alpha <= 64)
    for q, z in [(0.01, 0.7), (0.4, 1.3), (0.9, 5.0), (1e-4, 0.3)]:
        exact = np.concatenate([[0.0], rdp_subsampled_gaussian(alpha[1:], q, z) * (alpha[1:] - 1.0)])
        lower = cal._chord_lower(np.zeros(alpha.size, dtype=int), alpha, np.where(core, exact, np.nan))[0]
        assert np.all(lower[~core] <= exact[~core] * (1 + 1e-12))
        assert np.any(lower[~core] > 0)
