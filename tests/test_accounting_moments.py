"""Closed-form moments-accountant noise formulas: Abadi et al. 2016 Thm 1, seed 003 Theorem 1 (eq. (10))."""

import math
import warnings

import numpy as np
import pytest

from fedbound.accounting import (
    calibrate_noise,
    moments_accountant_epsilon,
    moments_accountant_std,
    udp_theorem1_epsilon,
    udp_theorem1_std,
)
from fedbound.errors import AssumptionWarning, ParameterError

SPEC003_ORDERS = np.arange(2.0, 258.0)


@pytest.mark.parametrize("eps, q, T, sens, sigma", [
    (4.0, 1.0, 200, 1e-4, 0.001314130442), (8.0, 0.6, 200, 1e-4, 0.0005089605318),
    (2.0, 0.6, 100, 1.5625e-4, 0.002249309021)])
def test_spec003_theorem1_sigma(eps, q, T, sens, sigma):
    """spec 003 Sec. 8.2, TV1-TV3 (delta = 1e-3)."""
    assert udp_theorem1_std(eps, 1e-3, q, T, sens) == pytest.approx(sigma, rel=1e-9)
    assert udp_theorem1_epsilon(sigma, 1e-3, q, T, sens) == pytest.approx(eps, rel=1e-9)


def test_spec003_eps_sweep_paper_z():
    eps = np.array([4.0, 8.0, 12.0, 16.0, 20.0])
    np.testing.assert_allclose(udp_theorem1_std(eps, 1e-3, 1.0, 200),
                               [13.141304, 6.570652, 4.380435, 3.285326, 2.628261], rtol=1e-7)
    np.testing.assert_allclose(udp_theorem1_std(eps, 1e-3, 0.6, 200),
                               [10.179211, 5.089605, 3.393070, 2.544803, 2.035842], rtol=1e-6)


def test_spec003_e10_table_paper_vs_exact_hidden_selection():
    """spec 003 E10: the paper's z vs the numeric z of the exact accountant (D2), integer lambda <= 256."""
    assert udp_theorem1_std(1.0, 1e-5, 0.01, 10**4) == pytest.approx(47.99, abs=0.005)
    assert udp_theorem1_std(2.0, 1e-5, 0.1, 10**3) == pytest.approx(23.99, abs=0.005)
    exact = calibrate_noise([1.0, 2.0], 1e-5, [0.01, 0.1], [10**4, 10**3], orders=SPEC003_ORDERS,
                            conversion="classic")
    np.testing.assert_allclose(exact, [4.974, 7.997], atol=5e-4)


def test_effective_constant_of_seed003_is_sqrt_2_over_q():
    """spec 003 E10: z_paper = sqrt(2/q) * q sqrt(T ln(1/delta)) / eps, i.e. c2_eff = sqrt(2/q)."""
    for q in [1.0, 0.6, 0.1, 0.01]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AssumptionWarning)
            abadi_c1 = moments_accountant_std(3.0, 1e-5, q, 500, c2=1.0)
        assert udp_theorem1_std(3.0, 1e-5, q, 500) / abadi_c1 == pytest.approx(math.sqrt(2 / q), rel=1e-12)


def test_abadi_form_and_inverse():
    eps, delta, q, T = 0.5, 1e-5, 0.001, 10**5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # z = 4.29 >= 1 and q < 1/(16 z): Lemma 3's conditions hold
        sigma = moments_accountant_std(eps, delta, q, T, sensitivity=2.0)
    assert sigma == pytest.approx(2 * 2.0 * q * math.sqrt(T * math.log(1 / delta)) / eps, rel=1e-12)
    assert moments_accountant_epsilon(sigma, delta, q, T, sensitivity=2.0) == pytest.approx(eps, rel=1e-12)


def test_abadi_form_warns_outside_lemma3():
    with pytest.warns(AssumptionWarning, match=r"q >= 1/\(16 sigma\)"):
        moments_accountant_std(6.0, 0.01, 0.4, 25)
    with pytest.warns(AssumptionWarning, match="< 1"):
        moments_accountant_std(50.0, 0.01, 0.001, 25)


@pytest.mark.parametrize("kwargs, name", [
    (dict(eps=0.0), "eps"), (dict(delta=1.0), "delta"), (dict(q=0.0), "q"), (dict(steps=0), "steps"),
    (dict(sensitivity=0.0), "sensitivity"),
])
def test_bad_input(kwargs, name):
    args = dict(eps=1.0, delta=1e-5, q=0.1, steps=10) | kwargs
    with pytest.raises(ParameterError) as info:
        udp_theorem1_std(**args)
    assert info.value.name == name
