"""Seed 004's channel model and scheduling: spec 004 TV2 (SNR, BER, rho, C5, KM assignment), brute force for
the assignment (S18), the whole-run schedule (C7, determinism) and the shape claims of S6."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbound.errors import InfeasibleError, ParameterError
from fedbound.scheduling.wireless import (
    WirelessSetting,
    assign_channels,
    ber_mqam,
    dbm_to_watt,
    element_error_prob,
    min_rate,
    path_loss_gain,
    schedule_round,
    schedule_run,
    snr,
    uplink_rate,
)

# spec 004 Sec. 9.3, TV2: 6 clients x 4 subchannels, gains in dB
TV2_GAIN_DB = np.array([[-110, -114, -118, -106], [-116, -112, -108, -120], [-121, -119, -117, -115],
                        [-105, -109, -113, -117], [-126, -124, -111, -128], [-113, -107, -119, -110]])
TV2_BER = np.array([[2.633610e-05, 3.472096e-03, 2.909842e-02, 2.176917e-10],
                    [1.239980e-02, 5.053069e-04, 2.720401e-07, 5.202151e-02],
                    [6.477342e-02, 3.997821e-02, 1.980334e-02, 6.999569e-03],
                    [1.525087e-12, 3.440134e-06, 1.465448e-03, 1.980334e-02],
                    [1.266702e-01, 1.033447e-01, 1.352374e-04, 1.469084e-01],
                    [1.465448e-03, 1.144497e-08, 3.997821e-02, 2.633610e-05]])
TV2_RHO = np.array([[4.212944e-04, 5.413006e-02, 3.765475e-01, 3.483067e-09],
                    [1.809721e-01, 8.054343e-03, 4.352632e-06, 5.746213e-01],
                    [6.574930e-01, 4.794081e-01, 2.738748e-01, 1.063016e-01],
                    [2.440140e-11, 5.504072e-05, 2.319121e-02, 2.738748e-01],
                    [8.854875e-01, 8.254143e-01, 2.161606e-03, 9.213079e-01],
                    [2.319121e-02, 1.831195e-07, 4.794081e-01, 4.212944e-04]])
TV2_SETTING = WirelessSetting(6, 4, 7850, R=16, tau_max=0.05, total_bandwidth_hz=4e6)  # B = 1 MHz


def tv2_links():
    return TV2_SETTING.links(10 ** (TV2_GAIN_DB / 10), 23.0)


def test_tv2_units_snr_and_minimum_rate():
    assert dbm_to_watt(23.0) == pytest.approx(0.199526, rel=1e-5)
    assert TV2_SETTING.noise_w == pytest.approx(1.258925e-14, rel=1e-6)
    assert min_rate(7850, 16, 0.05) == pytest.approx(2_512_000.0)
    gamma = snr(dbm_to_watt(23.0), 10 ** (TV2_GAIN_DB / 10), TV2_SETTING.noise_w)
    np.testing.assert_allclose(10 * np.log10(gamma), TV2_GAIN_DB + 132, atol=1e-9)


def test_tv2_ber_rho_and_feasibility():
    ber, rho, feasible = tv2_links()
    np.testing.assert_allclose(ber, TV2_BER, rtol=5e-7)
    np.testing.assert_allclose(rho, TV2_RHO, rtol=5e-7)
    expected = np.ones((6, 4), dtype=bool)
    expected[4, [0, 3]] = False  # SNR 6 dB and 4 dB are below the 6.72 dB that r_min needs
    np.testing.assert_array_equal(feasible, expected)


def test_tv2_assignment_and_exhausted_client():
    _, rho, feasible = tv2_links()
    pairs = assign_channels(rho, feasible)
    assert pairs == [(0, 3), (1, 2), (3, 0), (5, 1)]
    assert sum(rho[n, k] for n, k in pairs) == pytest.approx(4.5392593161e-06, rel=1e-7)
    allowed = np.ones(6, dtype=bool)
    allowed[3] = False  # TV2b: client 3 has used its T0 uploads
    pairs = assign_channels(rho, feasible, allowed)
    assert pairs == [(0, 0), (1, 1), (4, 2), (5, 3)]
    assert sum(rho[n, k] for n, k in pairs) == pytest.approx(1.1058537634e-02, rel=1e-9)


def test_tv3_downlink_rho():
    """spec 004 TV3: BS at 30 dBm, downlink gains -> rho_G."""
    gains = 10 ** (np.array([-112, -118, -121, -108, -124, -115]) / 10)
    _, rho_g, _ = TV2_SETTING.links(gains, 30.0)
    np.testing.assert_allclose(rho_g, [2.440140e-11, 2.161606e-03, 5.413006e-02, 5.086259e-27, 2.738748e-01,
                                       4.352632e-06], rtol=5e-7)


def test_ber_formula_against_scipy_and_its_256qam_constants():
    gamma = np.array([0.5, 10.0, 100.0])
    q256 = 0.46875 * stats.norm.sf(np.sqrt(24 * gamma / 255))
    q16 = 0.75 * stats.norm.sf(np.sqrt(12 * gamma / 15))
    np.testing.assert_allclose(ber_mqam(gamma), q256, rtol=1e-12)
    np.testing.assert_allclose(ber_mqam(gamma, 16), q16, rtol=1e-12)
    with pytest.raises(ParameterError, match="perfect square"):
        ber_mqam(1.0, 32)


def test_element_error_probability_has_no_cancellation():
    assert element_error_prob(1e-15, 16) == pytest.approx(1.6e-14, rel=1e-9)
    assert element_error_prob(1.0, 16) == 1.0 and element_error_prob(0.0, 16) == 0.0


@given(st.floats(0.0, 1e4), st.floats(1.01, 3.0))
def test_s6_monotonicity(gamma, factor):
    """S6: BER decreasing in gamma; rho increasing in BER and in R; rate increasing in power."""
    assert ber_mqam(gamma * factor) <= ber_mqam(gamma)
    e = float(ber_mqam(gamma))
    assert element_error_prob(e, 17) >= element_error_prob(e, 16)
    assert element_error_prob(min(1.0, e * factor), 16) >= element_error_prob(e, 16)
    assert uplink_rate(1e6, gamma * factor) >= uplink_rate(1e6, gamma)


def test_path_loss_table_i():
    assert 10 * np.log10(path_loss_gain(1.0)) == pytest.approx(-30.0)
    assert 10 * np.log10(path_loss_gain(100.0)) == pytest.approx(-30.0 - 56.0)


def brute_force(rho: np.ndarray, feasible: np.ndarray, allowed: np.ndarray) -> tuple[int, float]:
    """Maximum cardinality, then minimum sum rho, over every injective map of allowed clients to
    subchannels (including leaving clients out)."""
    n, k = rho.shape
    best = (0, 0.0)
    clients = [i for i in range(n) if allowed[i]]
    for m in range(1, min(len(clients), k) + 1):
        for subset in itertools.combinations(clients, m):
            for channels in itertools.permutations(range(k), m):
                if all(feasible[c, j] for c, j in zip(subset, channels, strict=True)):
                    total = sum(rho[c, j] for c, j in zip(subset, channels, strict=True))
                    if m > best[0] or (m == best[0] and total < best[1]):
                        best = (m, total)
    return best


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.floats(0.0, 0.6), st.integers(0, 2**32 - 1))
def test_s18_assignment_equals_brute_force(n, k, p_infeasible, seed):
    rng = np.random.default_rng(seed)
    rho = 10 ** rng.uniform(-13, 0, size=(n, k))
    feasible = rng.uniform(size=(n, k)) >= p_infeasible
    allowed = rng.uniform(size=n) < 0.85
    pairs = assign_channels(rho, feasible, allowed)
    m, total = brute_force(rho, feasible, allowed)
    assert len(pairs) == m
    assert sum(rho[c, j] for c, j in pairs) == pytest.approx(total, rel=1e-9, abs=1e-15)
    assert len({c for c, _ in pairs}) == len(pairs) == len({j for _, j in pairs})
    assert all(allowed[c] and feasible[c, j] for c, j in pairs)


def test_assignment_prefers_cardinality_over_weight():
    """spec 004 Sec. 4.4 / E13: with (1, 1) infeasible a max-weight matching picks {(0, 0)}; the spec's
    reading picks both clients."""
    rho = np.array([[0.0, 0.8], [0.8, 0.5]])
    feasible = np.array([[True, True], [True, False]])
    assert assign_channels(rho, feasible) == [(0, 1), (1, 0)]


def test_big_is_small_enough_to_resolve_tiny_rho():
    """audit A4: cost [[2e-12, BIG], [1e-12, BIG]] -> the optimal client 1 (a huge BIG picks client 0)."""
    rho = np.array([[2e-12, 0.0], [1e-12, 0.0]])
    feasible = np.array([[True, False], [True, False]])
    assert assign_channels(rho, feasible) == [(1, 0)]


def test_schedule_run_respects_t0_and_is_deterministic():
    setting = WirelessSetting(20, 10, 7850)
    for scheduler in ("km", "round_robin", "random"):
        run = schedule_run(setting, 5, scheduler, seed=3)
        counts = np.zeros(20, dtype=int)
        for rnd in run.rounds:
            assert 1 <= len(rnd.pairs) <= 10
            assert len({j for _, j in rnd.pairs}) == len(rnd.pairs)
            assert np.all(counts[rnd.clients] < 5)  # C7: only clients with uploads left
            counts[rnd.clients] += 1
        np.testing.assert_array_equal(counts, np.full(20, 5))
        again = schedule_run(setting, 5, scheduler, seed=3)
        assert [r.pairs for r in again.rounds] == [r.pairs for r in run.rounds]
        np.testing.assert_array_equal(again.downlink_ber, run.downlink_ber)
        assert run.downlink_ber.shape == (len(run.rounds) + 1, 20)
    rr = schedule_run(setting, 5, "round_robin", seed=3)
    assert len(rr.rounds) == 10 and rr.rounds[0].clients.tolist() == list(range(10))


def test_km_rounds_use_only_feasible_pairs_and_minimal_rho():
    setting = WirelessSetting(8, 3, 7850, tau_max=0.01)
    rng = np.random.default_rng(0)
    loss = path_loss_gain(rng.uniform(10, 100, 8))
    gains = loss[:, None] * rng.exponential(size=(8, 3))
    rnd, _ = schedule_round(gains, loss * rng.exponential(size=8), np.zeros(8, int), 4, setting)
    ber, rho, feasible = setting.links(gains, setting.P_th_dbm)
    m, total = brute_force(rho, feasible, np.ones(8, bool))
    assert len(rnd.pairs) == m and rnd.uplink_rho.sum() == pytest.approx(total, rel=1e-9, abs=1e-300)
    assert all(feasible[c, j] for c, j in rnd.pairs)
    np.testing.assert_array_equal(rnd.power_w > 0, np.isin(np.arange(8), rnd.clients))


def test_error_free_reference_and_channel_draws_shared_by_schedulers():
    setting = WirelessSetting(10, 4, 7850)
    free = schedule_run(setting, 3, "km", seed=1, channel_errors=False)
    noisy = schedule_run(setting, 3, "km", seed=1)
    assert [r.pairs for r in free.rounds] == [r.pairs for r in noisy.rounds]
    assert not free.downlink_ber.any() and noisy.downlink_ber.any()
    rr = schedule_run(setting, 3, "round_robin", seed=1)
    np.testing.assert_array_equal(rr.distances, noisy.distances)
    np.testing.assert_array_equal(rr.initial_downlink_ber, noisy.initial_downlink_ber)


def test_unreachable_rate_is_infeasible():
    setting = WirelessSetting(4, 2, 7850, tau_max=1e-5)  # r_min = 12.6 Gbit/s on 5 MHz
    with pytest.raises(InfeasibleError, match="tau_max"):
        schedule_run(setting, 2, "km", max_rounds=20)
    with pytest.raises(ParameterError, match="scheduler"):
        schedule_run(setting, 2, "fifo")
