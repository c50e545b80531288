"""σ calibration's default Renyi orders (issue 25 item 4): never looser than Opacus' or dp-accounting's
defaults, and the screened calibration equals the direct one over all orders."""

import math

import numpy as np
import pytest
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


def test_convex_lower_bound_is_below_the_exact_rdp():
    """The screening's bound (chords of log A at the integer orders) never exceeds the exact RDP."""
    from fedbound.accounting.rdp import rdp_subsampled_gaussian

    core = np.arange(2.0, 65.0)
    rest = np.setdiff1d(CALIBRATION_ORDERS, core)
    for q, z in [(0.01, 0.7), (0.4, 1.3), (0.9, 5.0), (1e-4, 0.3)]:
        lower = cal._convex_lower_rdp(core, rdp_subsampled_gaussian(core, q, z)[None, :], rest)[0]
        assert np.all(lower <= rdp_subsampled_gaussian(rest, q, z) * (1 + 1e-12))
        assert np.any(lower > 0)
