"""epsilon / delta_for_epsilon / calibrate_noise over T rounds: oracles, spec 003 regression values, grids."""

import math

import numpy as np
import pytest

from fedbound.accounting import analytic_gaussian_std, calibrate_noise, delta_for_epsilon, epsilon
from fedbound.errors import DomainError, InfeasibleError, ParameterError, UnsupportedError
from fedbound.tests._accounting_oracles import balle_wang_delta

INT_ORDERS = np.arange(2.0, 65.0)
SPEC003_ORDERS = np.arange(2.0, 258.0)  # integer lambda = 1 .. 256, alpha = lambda + 1


def test_rdp_epsilon_matches_dp_accounting():
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    for z, q, steps, delta in [(1.1, 0.01, 1000, 1e-5), (0.8, 0.2, 50, 1e-3), (3.0, 1.0, 10, 1e-6)]:
        acc = RdpAccountant(list(INT_ORDERS))
        event = dp_accounting.GaussianDpEvent(z) if q == 1 else \
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
        acc.compose(event, steps)
        ours_eps = epsilon(z, q, steps, delta, orders=INT_ORDERS)
        assert ours_eps == pytest.approx(acc.get_epsilon(delta), rel=1e-9)
        ours_delta = delta_for_epsilon(z, q, steps, 1.5, orders=INT_ORDERS)
        assert ours_delta == pytest.approx(acc.get_delta(1.5), rel=1e-9)


def test_calibration_matches_opacus_get_noise_multiplier():
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    alphas = list(INT_ORDERS)
    for eps, q, steps in [(1.0, 0.01, 1000), (8.0, 0.1, 100), (3.0, 0.5, 20)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = get_noise_multiplier(target_epsilon=eps, target_delta=1e-5, sample_rate=q, steps=steps,
                                          epsilon_tolerance=1e-6, alphas=alphas)
        assert calibrate_noise(eps, 1e-5, q, steps, orders=INT_ORDERS) == pytest.approx(theirs, rel=1e-4)


@pytest.mark.parametrize("method, kwargs, slack", [
    ("rdp", {}, 1e-4), ("rdp", {"orders": INT_ORDERS, "conversion": "classic"}, 1e-4),
    ("pld", {"pld_discretization": 1e-3}, 1e-4), ("rdp", {"sampling": "without_replacement"}, 1e-4),
])
def test_calibrated_noise_is_the_smallest_that_meets_the_target(method, kwargs, slack):
    eps, delta, q, steps = 6.0, 0.01, 0.4, 25  # NbAFL TV3 setting
    z = calibrate_noise(eps, delta, q, steps, method, **kwargs)
    assert epsilon(z, q, steps, delta, method, **kwargs) <= eps
    assert epsilon(z * (1 - slack), q, steps, delta, method, **kwargs) > eps


def test_a_thousand_targets_in_one_call():
    rng = np.random.default_rng(0)
    eps = np.exp(rng.uniform(math.log(0.3), math.log(30.0), 1000))
    q = np.exp(rng.uniform(math.log(1e-4), 0.0, 1000))
    q[:50] = 1.0
    steps = np.round(np.exp(rng.uniform(0.0, math.log(1e5), 1000))).astype(int)
    z = calibrate_noise(eps, 1e-5, q, steps, orders=INT_ORDERS)
    assert z.shape == (1000,) and np.all(np.isfinite(z)) and np.all(z > 0)
    assert np.all(epsilon(z, q, steps, 1e-5, orders=INT_ORDERS) <= eps)
    assert np.all(epsilon(z * (1 - 1e-4), q, steps, 1e-5, orders=INT_ORDERS) > eps)
    for i in (0, 60, 999):  # the grid answer is the point answer
        point = calibrate_noise(eps[i], 1e-5, q[i], steps[i], orders=INT_ORDERS)
        assert point == pytest.approx(z[i], rel=1e-9)


def test_default_orders_grid_and_broadcast_shape():
    z = calibrate_noise(np.array([1.0, 4.0, 16.0])[:, None], 1e-5, np.array([0.001, 0.1, 1.0]), 500)
    assert z.shape == (3, 3)
    assert np.all(np.diff(z, axis=0) < 0) and np.all(np.diff(z, axis=1) > 0)
    assert np.all(epsilon(z, np.array([0.001, 0.1, 1.0]), 500, 1e-5) <= np.array([1.0, 4.0, 16.0])[:, None])
    assert isinstance(calibrate_noise(1.0, 1e-5, 0.01, 100), float)


class TestFullParticipation:
    """q = 1 exactly: T Gaussian releases compose to one Gaussian with std z / sqrt(T)."""

    def test_analytic_is_exact(self):
        z, steps, delta = 20.0, 100, 1e-5
        eps = epsilon(z, 1.0, steps, delta, "analytic")
        assert balle_wang_delta(eps, z / math.sqrt(steps)) == pytest.approx(delta, rel=1e-9)
        assert calibrate_noise(eps, delta, 1.0, steps, "analytic") == pytest.approx(z, rel=1e-9)
        assert calibrate_noise(2.0, 1e-5, 1.0, 100, "analytic") == pytest.approx(
            10 * analytic_gaussian_std(2.0, 1e-5), rel=1e-12)

    def test_methods_agree_and_order(self):
        eps, delta, steps = 2.0, 1e-5, 100
        exact = calibrate_noise(eps, delta, 1.0, steps, "analytic")
        pld = calibrate_noise(eps, delta, 1.0, steps, "pld")
        rdp = calibrate_noise(eps, delta, 1.0, steps, "rdp")
        assert pld == pytest.approx(exact, rel=1e-3) and pld >= exact * (1 - 1e-6)
        assert exact < rdp < 1.2 * exact  # RDP is an upper bound, within 20 % here
        assert epsilon(exact, 1.0, steps, delta, "pld") == pytest.approx(eps, rel=1e-3)

    def test_without_replacement_at_q_one_is_the_gaussian(self):
        a = calibrate_noise(3.0, 1e-5, 1.0, 50, sampling="without_replacement", orders=INT_ORDERS)
        b = calibrate_noise(3.0, 1e-5, 1.0, 50, orders=INT_ORDERS)
        assert a == pytest.approx(b, rel=1e-8)


class TestSpec003Regression:
    """spec 003 Sec. 8.2: the exact hidden-selection accountant (D2) = Poisson-subsampled Gaussian RDP at
    integer lambda <= 256 with the moments-accountant tail bound (our conversion="classic")."""

    @pytest.mark.parametrize("z_paper, q, eps, T, delta_ach", [
        (13.14130442, 1.0, 4.0, 200, 0.006401081685), (5.089605318, 0.6, 8.0, 200, 0.0005646967846),
        (14.39557774, 0.6, 2.0, 100, 3.096643334e-05)])
    def test_delta_delivered_by_the_paper_sigma(self, z_paper, q, eps, T, delta_ach):
        got = delta_for_epsilon(z_paper, q, T, eps, orders=SPEC003_ORDERS, conversion="classic")
        assert got == pytest.approx(delta_ach, rel=1e-6)

    @pytest.mark.parametrize("q, eps, T, z_numeric", [
        (1.0, 4.0, 200, 14.83130751), (0.6, 8.0, 200, 4.930559355), (0.6, 2.0, 100, 11.99505697),
        (1.0, 12.0, 200, 5.924832), (0.6, 4.0, 200, 8.956781), (0.6, 20.0, 200, 2.409784)])
    def test_numeric_sigma(self, q, eps, T, z_numeric):
        z = calibrate_noise(eps, 1e-3, q, T, orders=SPEC003_ORDERS, conversion="classic")
        assert z == pytest.approx(z_numeric, rel=1e-6)


def test_unreachable_targets_raise_clear_errors():
    with pytest.raises(InfeasibleError, match="orders"):
        calibrate_noise(0.01, 1e-300, 0.5, 10)
    with pytest.raises(DomainError, match="delta"):
        epsilon(1.0, 0.5, 10, 1e-300, "pld")
    with pytest.raises(UnsupportedError) as info:
        calibrate_noise(1.0, 1e-5, 0.5, 10, "pld", sampling="without_replacement")
    assert info.value.name == "sampling" and isinstance(info.value, NotImplementedError)


@pytest.mark.parametrize("kwargs, name", [
    (dict(target_eps=-1.0), "target_eps"), (dict(target_eps=0.0), "target_eps"), (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"), (dict(sample_rate=0.0), "sample_rate"),
    (dict(sample_rate=1.5), "sample_rate"),
    (dict(steps=0), "steps"), (dict(steps=2.5), "steps"), (dict(method="moments"), "method"),
    (dict(sampling="shuffle"), "sampling"), (dict(conversion="tight"), "conversion"),
    (dict(method="analytic"), "sample_rate"), (dict(orders=[1.0, 2.0]), "orders"),
    (dict(target_eps=[1.0, math.nan]), "target_eps"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    args = dict(target_eps=1.0, delta=1e-5, sample_rate=0.1, steps=10) | kwargs
    with pytest.raises(ParameterError) as info:
        calibrate_noise(**args)
    assert info.value.name == name


def test_epsilon_bad_input():
    with pytest.raises(ParameterError, match="noise_multiplier"):
        epsilon(0.0, 0.1, 10, 1e-5)
    with pytest.raises(ParameterError, match="eps"):
        delta_for_epsilon(1.0, 0.1, 10, -0.5)
