"""DP-PFL's vectorised sigma*(T) (issue 25 item 1): the tabulated sampled-Gaussian RDP against the exact
series, the whole-grid calibration against the point-by-point one (rtol 1e-9, several q, T, delta, orders,
ratios), the tables kept on disk, and the exhaustive T scan at q < 1 against point-by-point calibrations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.accounting import rdp_table
from fedbound.accounting.rdp import rdp_subsampled_gaussian
from fedbound.bounds import dppfl as dp
from fedbound.scheduling import dppfl as sd
from fedbound.scheduling import dppfl_sigma
from fedbound.tests._certified import setting

ORDERS = np.array([1.25, 2.0, 3.7, 12.0, 64.0, 256.0])
QS = (0.01, 0.1, 0.5, 1.0)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(QS), st.floats(-1.5, 4.0), st.integers(0, ORDERS.size - 1))
def test_table_is_the_exact_rdp_to_1e_10(q, log_z, j):
    tab = rdp_table.table(q, ORDERS)
    got = float(tab.log_rdp(np.array([log_z]), np.array([j]))[0])
    want = float(np.log(rdp_subsampled_gaussian(ORDERS[j], q, np.exp(log_z))))
    assert abs(got - want) <= 1e-9, (q, log_z, ORDERS[j])
    _, der = tab.log_rdp(np.array([log_z]), np.array([j]), derivative=True)  # d ln R / d ln z by differences
    h = 1e-5
    fd = (np.log(rdp_subsampled_gaussian(ORDERS[j], q, np.exp(log_z + h)))
          - np.log(rdp_subsampled_gaussian(ORDERS[j], q, np.exp(log_z - h)))) / (2 * h)
    assert float(der[0]) == pytest.approx(float(fd), rel=1e-5, abs=1e-6)


CASES = [  # eps, delta, tau0, q_in, q_out, ratio, orders, T
    (6.0, 1e-3, 1, 0.5, 0.5, 1.0, dp.OPACUS_ORDERS, [1, 7, 400, 1283]),
    (2.0, 1e-5, 2, 0.1, 0.1, 1.0, dp.TIGHT_ORDERS, [1, 41, 2000]),
    (6.0, 1e-3, 1, 0.1, 0.3, 2.5, dp.OPACUS_ORDERS, [1, 100, 1000]),
    (0.5, 1e-6, 3, 0.02, 1.0, 0.7, dp.TIGHT_ORDERS, [1, 5, 60]),
]


@pytest.mark.parametrize("case", CASES)
def test_vectorised_sigma_curve_is_the_point_by_point_one(case):
    eps, delta, tau0, q_in, q_out, ratio, orders, T = case
    got = dppfl_sigma.sigma_curve(eps, delta, np.array(T), tau0, q_in, q_out, ratio, orders)
    want = dp.noise_multiplier_curve(eps, delta, np.array(T), tau0, q_in, q_out, ratio, orders, 1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    for t, z in zip(T, got, strict=True):  # the feasible side of the exact RDP, as the point-by-point one
        assert dp.rdp_pfl_epsilon(t, tau0, q_in, z, q_out, ratio * z, delta, orders)[0] <= eps
    last = (T[-1], tau0, q_in, got[-1], q_out, ratio * got[-1], delta, orders)
    e, alpha, e_in, e_out = dppfl_sigma.epsilon(*last)
    e_exact, alpha_exact = dp.rdp_pfl_epsilon(*last)
    assert e == pytest.approx(e_exact, rel=1e-9) and alpha == alpha_exact
    _, r_in, r_out = dp.rdp_pfl_rdp(np.array([alpha]), T[-1], tau0, q_in, got[-1], q_out, ratio * got[-1])
    assert (e_in, e_out) == pytest.approx((float(r_in[0]), float(r_out[0])), rel=1e-9)


def test_scheduling_sigma_curve_uses_it_and_keeps_its_contract():
    s = setting("dppfl", None, q_in=0.3, q_out=0.3, eps=4.0, tau0=2)
    T = np.array([[1, 5], [30, 300]])
    got = sd.sigma_curve(s, T, "paper")
    assert got.shape == (2, 2)
    np.testing.assert_allclose(got, dp.noise_multiplier_curve(4.0, s["delta"], T, 2, 0.3, 0.3), rtol=1e-9)
    assert sd.sigma_curve(s, np.array([5.7]), "paper")[0] == got[0, 1]  # a real T reads as its integer part
    with pytest.raises(ValueError, match="T = 0"):
        sd.sigma_curve(s, np.array([0]), "paper")


def test_tables_are_kept_on_disk(tmp_path):
    first = rdp_table.RdpTable(0.2, ORDERS[:3], tmp_path)
    u = np.array([-0.3, 0.1, 1.9])
    cols = np.array([0, 1, 2])
    a = first.log_rdp(u, cols)
    assert first.built >= 2 and list(tmp_path.glob("rdp-*.npy"))
    again = rdp_table.RdpTable(0.2, ORDERS[:3], tmp_path)
    assert np.array_equal(again.log_rdp(u, cols), a) and again.built == 0
    other = rdp_table.RdpTable(0.21, ORDERS[:3], tmp_path)  # another q: its own segments
    other.log_rdp(u, cols)
    assert other.built >= 2


def test_outside_the_tables_the_point_by_point_calibration_answers():
    with pytest.raises(rdp_table.OutsideTable):
        rdp_table.table(0.1, ORDERS).coefficients(rdp_table.K_RANGE[1])
    s = setting("dppfl", None, q_in=0.5, q_out=0.5, eps=1e-12, delta=1e-10)
    with pytest.raises(Exception, match="noise multiplier above"):  # InfeasibleError, as before
        sd.sigma_curve(s, np.array([10**6]), "paper")


def test_T_scan_at_q_below_one_is_exhaustive_and_exact():  # issue 23: no unimodality premise
    s = setting("dppfl", None, q_in=0.2, q_out=0.2, eps=3.0, S=3000, Delta0=10.0, tau0=1)
    s.pop("T", None), s.pop("T_max", None)
    res = sd.optimal_T(s, "paper", "tight", joint_C=True)
    top = int(res.evidence["T_max"])
    assert res.evidence["searched"].startswith("every integer T in 1..")
    T_star = int(res.x)
    # point-by-point sigma*(T) around T* and on a geometric grid of the searched window: none beats T*
    Ts = np.unique(np.concatenate([np.arange(max(1, T_star - 15), T_star + 16),
                                   np.round(np.geomspace(1, top, 25))])).astype(int)
    sig = dp.noise_multiplier_curve(s["eps"], s["delta"], Ts, 1, 0.2, 0.2, 1.0, dp.TIGHT_ORDERS, 1e-12)
    at = {**s, "C": sd.clip_profile(s, sig, "paper")}
    vals = np.asarray(sd.bound_curve(at, Ts, sig, "paper").value, dtype=float)
    assert int(Ts[np.argmin(vals)]) == T_star
    assert float(res.fun) == pytest.approx(float(vals.min()), rel=1e-9)
    # beyond the window the noise term alone (Delta0 = 0) is above the best bound: nothing there can win
    z_top = dp.noise_multiplier_curve(s["eps"], s["delta"], [top], 1, 0.2, 0.2, 1.0, dp.TIGHT_ORDERS, 1e-12)
    floor = sd.bound_curve({**s, "Delta0": 0.0, "C": sd.clip_profile(s, z_top, "paper")}, top, z_top, "paper")
    assert float(np.ravel(floor.value)[0]) >= float(res.fun)


@settings(max_examples=200, deadline=None)
@given(st.floats(-50.0, 1e6, allow_nan=False))
def test_gammaln_without_scipy_is_scipys(x):
    from scipy.special import gammaln as reference

    from fedbound.accounting._numerics import gammaln

    want = float(reference(x))
    assert float(gammaln(np.array(x))) == pytest.approx(want, rel=1e-13, abs=1e-13) or want == np.inf
    grid = np.linspace(0.5, 1e5, 5000)  # large arrays: scipy's ufunc, same values
    np.testing.assert_allclose(gammaln(grid), np.concatenate([gammaln(c) for c in np.array_split(grid, 5)]),
                               rtol=1e-13)
