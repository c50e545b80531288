"""Seed 004's quantization-assisted Gaussian mechanism (Prop. 1) and Theorem 1: spec 004 test vectors, the
exact level probabilities of the proof as an oracle, a Monte Carlo check of the mechanism, and the shape
claims S1-S5, S21."""

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import stats

from fedbound.accounting import (
    calibrate_sigma_dp,
    qa_gaussian_delta,
    qa_gaussian_epsilon,
    qa_gaussian_log_psi,
    qa_gaussian_mechanism,
    qa_gaussian_psi,
    qa_quantize,
    quantization_max_error,
)
from fedbound.errors import DomainError, InfeasibleError, ParameterError

# spec 004 Sec. 9.3, TV1 (R = 16, q = 0.01, T0 = 20, eps_Q = 1): E_L, psi, psi', delta_Q(1), target, sigma*
TV1 = [
    (3.0, 0.006, 4.6051728084e-05, 6.1239336792e-05, 1.3843080486e-05, 1.2247867358e-03, 1e-3, 0.00735867),
    (7.0, 0.016, 1.0754558633e-04, 5.3630197986e-05, 1.3799892871e-05, 1.0726039597e-03, 1e-3, 0.01717023),
    (20.0, 0.009, 3.0559243153e-04, 2.7086737638e-04, 1.5082803413e-05, 5.4173475276e-03, 5e-3, 0.00975260),
]


@pytest.mark.parametrize("C, sigma, e_l, psi, psi_p, delta, target, sigma_star", TV1)
def test_tv1_paper_settings(C, sigma, e_l, psi, psi_p, delta, target, sigma_star):
    assert quantization_max_error(C + 3 * sigma, 16) == pytest.approx(e_l, rel=1e-9)
    got = qa_gaussian_psi(C, sigma, 16, 0.01)
    assert got[0] == pytest.approx(psi, rel=1e-9) and got[2] == pytest.approx(psi_p, rel=1e-9)
    assert got[1] == 0.0 and got[3] == 0.0  # underflow, as the spec says
    log_psi1, log_psi1_p = qa_gaussian_log_psi(C, sigma, 16, 0.01)[1::2]
    assert -1e8 < log_psi1 <= log_psi1_p < -1e5  # finite in log space
    assert qa_gaussian_delta(1.0, C, sigma, 16, 0.01, 20) == pytest.approx(delta, rel=1e-9)
    assert calibrate_sigma_dp(1.0, target, C, 16, 0.01, 20) == pytest.approx(sigma_star, abs=1e-7)


def test_tv1_non_degenerate_case():
    """C = 0.2, sigma = 1, R = 2, q = 0.1, T0 = 4: eps matters (spec 004 TV1, second table)."""
    assert quantization_max_error(3.2, 2) == pytest.approx(1.0666666667, rel=1e-9)
    np.testing.assert_allclose(qa_gaussian_psi(0.2, 1.0, 2, 0.1),
                               [0.0802179822, 0.0098113562, 0.0114935532, 0.0098153286], rtol=0, atol=6e-11)
    np.testing.assert_allclose(qa_gaussian_delta([0.5, 1, 2, 4], 0.2, 1.0, 2, 0.1, 4),
                               [0.2764010361, 0.2704798056, 0.2561671618, 0.2141918032], rtol=1e-9)
    np.testing.assert_allclose(qa_gaussian_epsilon([0.0, 0.01], 0.2, 1.0, 2, 0.1, 4),
                               [8.4048287665, 8.2781845866], rtol=1e-9)


def test_s5_eps_has_no_effect_and_the_end_level_plateau():
    """spec 004 S5 and audit A1: at MLR defaults delta_Q(0.1) = delta_Q(10) exactly; at C = 3, sigma = 0.05
    the end-level branch wins (2.708329e-04, the interior branch alone would give 1.534e-04), and a target
    below the plateau T0 q Q(3) needs sigma > C."""
    low, high = qa_gaussian_delta([0.1, 10.0], 3.0, 0.006, 16, 0.01, 20)
    assert low == high == pytest.approx(1.2247867358e-03, rel=1e-10)
    assert qa_gaussian_delta(1.0, 3.0, 0.05, 16, 0.01, 20) == pytest.approx(2.708329e-04, rel=1e-6)
    plateau = 20 * 0.01 * stats.norm.sf(3.0)
    assert plateau == pytest.approx(2.70e-4, rel=0.01)
    assert calibrate_sigma_dp(1.0, 2e-4, 3.0, 16, 0.01, 20) == pytest.approx(6.992, abs=5e-4)


def test_s21_calibrated_sigma_grows_with_T0():
    """spec 004 S21 (MLR, eps 1, delta 1e-3): 0.00183, 0.00367, 0.00551, 0.00736, 0.00922, 0.01108."""
    got = calibrate_sigma_dp(1.0, 1e-3, 3.0, 16, 0.01, [5, 10, 15, 20, 25, 30])
    np.testing.assert_allclose(got, [0.00183, 0.00367, 0.00551, 0.00736, 0.00922, 0.01108], atol=6e-6)
    assert np.all(np.diff(got) > 0)


def test_tv0_quantizer():
    """spec 004 TV0: C = 1, sigma = 0.1, R = 3; local range 1.3, global range 1 (saturation included)."""
    x = np.array([0.05, -1.5, 0.9, 1.29, -0.2])
    assert quantization_max_error(1.3, 3) == pytest.approx(0.18571428571428572, rel=1e-12)
    assert quantization_max_error(1.0, 3) == pytest.approx(0.14285714285714285, rel=1e-12)
    np.testing.assert_allclose(qa_quantize(x, 1.3, 3), -1.3 + 0.37142857142857144 * np.array([4, 0, 6, 7, 3]),
                               rtol=1e-12)
    np.testing.assert_allclose(qa_quantize(x, 1.0, 3), -1.0 + 0.2857142857142857 * np.array([4, 0, 7, 7, 3]),
                               rtol=1e-12)


def _level_probabilities(u: float, C: float, sigma: float, R: int) -> np.ndarray:
    """P[M_Q = chi_i] for one coordinate u (seed 004 eqs. (42)-(43)), written from the quantizer's cells."""
    a = C + 3 * sigma
    step = 2 * a / (2**R - 1)
    edges = -a + step * (np.arange(2**R + 1) - 0.5)
    edges[0], edges[-1] = -np.inf, np.inf
    return np.diff(stats.norm.cdf(edges, loc=u, scale=sigma))


@pytest.mark.parametrize("C, sigma, R, q", [(0.2, 1.0, 2, 0.1), (1.0, 0.5, 3, 0.3), (0.5, 0.4, 2, 0.05)])
def test_theorem1_bounds_the_exact_pointwise_delta(C, sigma, R, q):
    """Independent oracle: for every pair u0, u1 in [-C, C] (grid) and every level, the per-outcome delta of
    one subsampled release, p - e^eps p1 with p = (1-q) P1 + q P0 (eq. (41)), never exceeds F15 / T0."""
    eps_round = 0.25
    grid = np.linspace(-C, C, 21)
    probs = np.array([_level_probabilities(u, C, sigma, R) for u in grid])
    mix = (1 - q) * probs[None, :, :] + q * probs[:, None, :]  # [u0, u1, level]
    exact = float(np.max(mix - math.exp(eps_round) * probs[None, :, :]))
    bound = float(qa_gaussian_delta(eps_round, C, sigma, R, q, 1, clamp=False))
    assert exact <= bound + 1e-12  # valid, and loose (spec E17: psi pairs the max level with psi1's min)


def test_mechanism_matches_the_level_probabilities():
    """Monte Carlo of qa_gaussian_mechanism (one call, 200,000 coordinates at u = 0; chi-square, false alarm
    1e-4) against the exact level probabilities of eqs. (42)-(43); every output is a quantization level."""
    C, sigma, R = 1.0, 0.4, 3
    u = np.zeros(200_001)
    u[0] = 0.3
    out = qa_gaussian_mechanism(u, C, sigma, R, np.random.default_rng(7))[1:]
    a = C + 3 * sigma
    levels = -a + 2 * a / (2**R - 1) * np.arange(2**R)
    index = np.rint((out + a) / (2 * a / (2**R - 1))).astype(int)
    np.testing.assert_allclose(out, levels[index], atol=1e-12)
    counts = np.bincount(index, minlength=2**R)
    expected = _level_probabilities(0.0, C, sigma, R) * len(out)
    keep = expected > 5
    chi2 = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_mechanism_clips_before_noise():
    rng = np.random.default_rng(0)
    out = qa_gaussian_mechanism(np.full(4, 100.0), 1.0, 1e-9, 16, rng)
    np.testing.assert_allclose(out, np.full(4, 0.5), atol=1e-4)  # clip to norm 1, tiny noise, fine levels


def test_clamp_and_raw_value():
    """F15 can be negative (psi < psi1 e^(eps/T0) when C << sigma); clamp gives 0 (spec 004 Sec. 3.5)."""
    raw = qa_gaussian_delta(20.0, 0.01, 1.0, 2, 0.5, 1, clamp=False)
    assert raw < 0
    assert qa_gaussian_delta(20.0, 0.01, 1.0, 2, 0.5, 1) == 0.0
    with pytest.raises(DomainError):
        qa_gaussian_delta(1e6, 0.2, 1.0, 2, 0.1, 1, clamp=False)


def test_epsilon_is_finite_where_psi1_underflows():
    """F17 at MLR defaults: finite in log space, roughly T0 (2C/sigma)^2 / 2."""
    eps = qa_gaussian_epsilon(0.0, 3.0, 0.006, 16, 0.01, 20)
    assert math.isfinite(eps)
    assert eps == pytest.approx(20 * (6.0 / 0.006) ** 2 / 2, rel=0.02)
    assert qa_gaussian_epsilon(1e-3, 3.0, 0.00735867, 16, 0.01, 20) == 0.0  # delta_Q met at eps = 0 (S5)


def test_errors_name_the_parameter():
    with pytest.raises(ParameterError, match="sigma_dp"):
        qa_gaussian_delta(1.0, 3.0, 0.0, 16, 0.01, 20)
    with pytest.raises(ParameterError, match="R"):
        qa_gaussian_psi(3.0, 0.01, 0, 0.01)
    with pytest.raises(ParameterError, match="q"):
        qa_gaussian_psi(3.0, 0.01, 16, 1.5)
    with pytest.raises(ParameterError, match="T0"):
        qa_gaussian_delta(1.0, 3.0, 0.01, 16, 0.01, 0)
    with pytest.raises(ParameterError, match="delta_Q"):
        calibrate_sigma_dp(1.0, 0.5, 3.0, 16, 0.01, 20)  # Theorem 1 gives delta <= T0 q = 0.2 at any sigma
    with pytest.raises(InfeasibleError, match="not reached"):
        calibrate_sigma_dp(1.0, 1e-9, 3.0, 16, 0.01, 20)


SETTINGS = dict(C=st.floats(0.05, 30.0), sigma=st.floats(1e-3, 5.0), R=st.integers(2, 20),
                q=st.floats(1e-3, 1.0), T0=st.integers(1, 40), eps=st.floats(0.01, 20.0))


@given(**SETTINGS)
def test_s1_s2_s3_monotone(C, sigma, R, q, T0, eps):
    """S1: non-increasing in sigma; S2: non-increasing in eps; S3: non-decreasing in T0 where positive."""
    d = qa_gaussian_delta(eps, C, sigma, R, q, T0)
    assert qa_gaussian_delta(eps, C, sigma * 1.01, R, q, T0) <= d * (1 + 1e-9) + 1e-300
    assert qa_gaussian_delta(eps * 1.5, C, sigma, R, q, T0) <= d * (1 + 1e-9) + 1e-300
    if d > 0:
        assert qa_gaussian_delta(eps, C, sigma, R, q, T0 + 1) >= d * (1 - 1e-9)


@given(**SETTINGS)
def test_s4_finer_quantization_lowers_delta_in_its_region(C, sigma, R, q, T0, eps):
    """S4 holds for C >= 3 sigma and eps/T0 <= 20 (audit A2)."""
    assume(C >= 3 * sigma and eps / T0 <= 20)
    assert qa_gaussian_delta(eps, C, sigma, R + 1, q, T0) <= qa_gaussian_delta(eps, C, sigma, R, q, T0) * (
        1 + 1e-9) + 1e-300


@given(sigma=st.floats(0.05, 5.0), ratio=st.floats(0.02, 2.0), R=st.integers(1, 8), q=st.floats(0.01, 1.0),
       T0=st.integers(1, 20), eps=st.floats(0.01, 5.0))
def test_epsilon_inverts_delta(sigma, ratio, R, q, T0, eps):
    """eps(delta) is the smallest eps with delta(eps) <= delta: delta(eps(delta)) <= delta, and a smaller eps
    misses, wherever the inverse is not 0.  Only where eps matters numerically (psi1 e^(eps/T0) is not
    below psi's rounding; elsewhere delta is flat in eps, spec S5): C / sigma up to 2, few bits."""
    C = ratio * sigma
    delta = qa_gaussian_delta(eps, C, sigma, R, q, T0)
    log_psi, log_psi1, log_psi_p, log_psi1_p = qa_gaussian_log_psi(C, sigma, R, q)
    interior = math.exp(log_psi) - math.exp(log_psi1 + eps / T0)
    end = math.exp(log_psi_p) - math.exp(log_psi1_p + eps / T0)
    top, bottom = (log_psi, log_psi1) if interior >= end else (log_psi_p, log_psi1_p)  # the binding branch
    assume(delta > 1e-12 and bottom - top + eps / T0 > math.log(1e-6))
    back = qa_gaussian_epsilon(delta, C, sigma, R, q, T0)
    assert back <= eps * (1 + 1e-6) + 1e-9
    assert qa_gaussian_delta(back, C, sigma, R, q, T0) <= delta * (1 + 1e-6)
    if back > 1e-6:
        assert qa_gaussian_delta(back * (1 - 1e-3), C, sigma, R, q, T0) > delta


@given(C=st.floats(0.5, 20.0), R=st.integers(8, 20), T0=st.integers(1, 30), target=st.floats(1e-4, 2e-3))
def test_calibration_is_on_the_private_side(C, R, T0, target):
    q = 0.01
    assume(target < 0.9 * T0 * q)
    try:
        sigma = calibrate_sigma_dp(1.0, target, C, R, q, T0)
    except InfeasibleError:
        return
    assert qa_gaussian_delta(1.0, C, sigma, R, q, T0) <= target
    assert qa_gaussian_delta(1.0, C, sigma * (1 - 1e-6), R, q, T0) > target


def test_broadcasting_returns_arrays():
    out = qa_gaussian_delta(np.array([[0.5], [1.0]]), 0.2, 1.0, 2, 0.1, np.array([4, 8]))
    assert out.shape == (2, 2)
    assert isinstance(qa_gaussian_delta(1.0, 0.2, 1.0, 2, 0.1, 4), float)
