"""Seed 001's noise formulas (fedbound.bounds.adaptive): spec 001 Sec. 8 test vectors and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from fedbound.bounds import adaptive as ba
from fedbound.errors import ParameterError

C001 = 3.10751146009  # spec 001 Sec. 8: c = gaussian_c(0.01)


# --- spec 001 Sec. 8 test vectors (regression values, rel. tol. 1e-9) -----------------------------------

TV = {  # scenario, ratios, m per part, eps, R -> c, sigma_C, Delta f, sigma_AC, sigma_A, T_th, sigma_S
    "TV1": ((0, 1, 2), (150, 150, 150), 5.0, 1,
            (0.165733944538, 0.00888888888889, 0.0276223240897, 0.165733944538, 5.0, 0.163415873109)),
    "TV2": ((1, 1, 1), (150, 150, 150), 20.0, 5,
            (0.207167430673, 0.00444444444444, 0.0267452002957, 0.0207167430673, 38.7298334621, 0.0)),
    "TV3": ((1, 3, 5), (50, 120, 271), 20.0, 2,
            (0.248600916807, 0.0222222222222, 0.0365409000875, 0.103583715336, 10.5830052443,
             0.0969244484312)),
}


@pytest.mark.parametrize("name", sorted(TV))
def test_spec_001_test_vectors(name):
    ratios, sizes, eps, R, expected = TV[name]
    p = ba.impact_factors_from_ratios(ratios, [20, 20, 20])
    m = np.repeat(sizes, 20)
    sigma_c = ba.client_noise_sigma(eps, 0.01, 20.0, R, m)
    got = (sigma_c, ba.server_sensitivity(20.0, p, m), ba.aggregated_client_noise_sigma(p, sigma_c),
           ba.total_noise_sigma(eps, 0.01, 30, 20.0, p, m), ba.server_noise_threshold(R, p),
           ba.server_noise_sigma(eps, 0.01, 30, R, p, 20.0, m))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-15)
    assert ba.gaussian_constant(0.01) == pytest.approx(C001, rel=1e-11)
    sigma_a, sigma_ac, sigma_s = got[3], got[2], got[5]
    assert ba.effective_noise_sigma(eps, 0.01, 30, R, p, 20.0, m) == pytest.approx(max(sigma_a, sigma_ac),
                                                                                  rel=1e-12)
    if sigma_s > 0:  # F18: sigma_S^2 = sigma_A^2 - sigma_AC^2
        assert sigma_s**2 + sigma_ac**2 == pytest.approx(sigma_a**2, rel=1e-12)


def test_spec_001_extra_vectors():
    assert ba.server_noise_sigma(1, 0.01, 2, 1, [1.0], 1, [1], c=1) == pytest.approx(3.46410161514, rel=1e-11)
    assert ba.client_noise_sigma(1, 0.01, 1, 1, [1], c=1) == 2.0
    boundary = ba.server_noise_sigma(1, 0.01, 9, 1, np.full(81, 1 / 81), 1, np.ones(81), c=1)
    assert boundary == 0.0  # F19 tolerance: a naive max(r, 0) clamp gives ~2.6e-9
    uniform = ba.impact_factors_from_ratios([1, 1, 1], [20, 20, 20])
    assert ba.server_noise_sigma(5, 0.01, 30, 1, uniform, 20, np.full(60, 150)) == \
        pytest.approx(0.0800571009979, rel=1e-9)  # NbAFL cross-check
    tv4 = ba.impact_schedule([20, 20, 20], [[0, 1, 2], [2, 1, 0]], [10], 30)
    np.testing.assert_array_equal(tv4[:10], np.tile(np.repeat([0, 1 / 60, 1 / 30], 20), (10, 1)))
    np.testing.assert_array_equal(tv4[10:], np.tile(np.repeat([1 / 30, 1 / 60, 0], 20), (20, 1)))
    np.testing.assert_allclose(ba.server_noise_sigma(5, 0.01, 30, 1, tv4, 20, np.full(60, 150)),
                               0.163415873109, rtol=1e-9)  # TV4: the same before and after the switch
    np.testing.assert_allclose(ba.impact_factors_from_ratios([0, 2, 1], [20, 35, 5])[[0, 20, 59]],
                               [0, 2 / 75, 1 / 75], rtol=1e-15)  # F55 check of scenario 2
    assert ba.server_noise_threshold(2, [0, 1, 0]) == 2.0  # one-hot p: T_th = R


def test_formula_inputs_are_checked():
    with pytest.raises(ParameterError, match="R = 31"):
        ba.server_noise_sigma(5, 0.01, 30, 31, [1.0], 1, [1])
    with pytest.raises(ParameterError, match="eps"):
        ba.client_noise_sigma(0.0, 0.01, 1, 1, [1])
    with pytest.raises(ParameterError, match="ratios"):
        ba.impact_factors_from_ratios([0, 0], [2, 2])
    with pytest.raises(ParameterError, match="sum_i p_i = 0.9"):
        ba.server_noise_sigma(5, 0.01, 30, 1, [0.5, 0.4], 1, [1])
