"""Issue 25's explorer speed-ups keep every value: WPFL's kept schedules equal fresh ones, the PLD
calibration started next to a kept one meets the same window as the search it replaces (one evaluation
instead of two), and the WPFL T0 curve draws the noise the plan deploys."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from fedbound import registry
from fedbound.accounting import pld as P
from fedbound.bounds import wpfl as wb
from fedbound.explorer import api
from fedbound.scheduling import wpfl as ws


def _wpfl_setting(**over):
    paper = registry.get("wpfl")
    s = paper.load_setting(None, api.overrides(paper, {**paper.example, **over})).values
    return {k: v for k, v in s.items() if v is not None}


def _dp_accounting_eps(z, q, t, delta, disc):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=disc)
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), t)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("policy", ["proposed", "round_robin"])
def test_kept_schedule_equals_a_fresh_one(policy, monkeypatch):
    """schedule_rounds twice: the same object, read-only, equal field by field to the uncached computation;
    another sigma_DP or T0 is another schedule."""
    monkeypatch.setattr(ws, "_SCHEDULES", type(ws._SCHEDULES)())
    s = {**_wpfl_setting(T=3, N=6, K=3), "eta_F": 0.01, "eta_P": 0.01, "lam": 0.5}
    radio = ws.radio_setting(s)
    first = ws.schedule_rounds(radio, s, 2.5, policy)
    assert ws.schedule_rounds(radio, dict(s), 2.5, policy) is first
    fresh = ws._schedule_rounds(radio, s, 2.5, policy, "paper", 0, None)
    for name, value in vars(fresh).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(first, name), value)
            assert not getattr(first, name).flags.writeable
    other = ws.schedule_rounds(radio, s, 2.5 * (1 + 1e-12), policy)
    assert other is not first and other.sigma_dp != first.sigma_dp
    assert ws.schedule_rounds(radio, {**s, "T": 4}, 2.5, policy).rounds > first.rounds


def test_calibration_next_to_a_kept_one_meets_the_window_in_one_evaluation(monkeypatch):
    """pld_calibrate_near from a calibration at a 2 % lower eps: one PLD evaluation, and its eps by
    dp-accounting's PLDAccountant (written here) lies in the (1 - rtol, 1] window of the target, as
    pld_calibrate's cold answer does; the two noises differ by less than the window's width in z."""
    monkeypatch.setattr(P, "_STARTS", {})
    q, t, delta, disc, upper = 0.02, 10, 1e-3, 1e-3, 2.0
    z0, eps0 = P.pld_calibrate(1.0, delta, q, t, disc, upper)
    calls = []

    def counted(*a, **k):
        calls.append(a)
        return P.pld_epsilon(*a, **k)

    z, eps = P.pld_calibrate_near(1.02, delta, q, t, disc, upper, (z0, eps0), evaluate=counted)
    assert len(calls) == 1
    ref = _dp_accounting_eps(z, q, t, delta, disc)
    assert ref == pytest.approx(eps, rel=1e-12) and 1.02 * (1 - 1e-3) <= ref <= 1.02
    monkeypatch.setattr(P, "_STARTS", {})
    z_cold, eps_cold = P.pld_calibrate(1.02, delta, q, t, disc, upper)
    assert 1.02 * (1 - 1e-3) <= eps_cold <= 1.02
    slope = math.log(eps0 / eps) / math.log(z0 / z)  # d log eps / d log z: the window's width in z
    assert abs(math.log(z / z_cold)) <= 1e-3 / abs(slope) * 1.01


def test_a_far_start_falls_back_to_the_search(monkeypatch):
    """A 'near' point far off misses the window: the answer is pld_calibrate's own, still in the window."""
    monkeypatch.setattr(P, "_STARTS", {})
    q, t, delta, disc, upper = 0.02, 10, 1e-3, 1e-3, 2.0
    z, eps = P.pld_calibrate_near(1.0, delta, q, t, disc, upper, (0.5, 30.0))
    assert 1.0 * (1 - 1e-3) <= _dp_accounting_eps(z, q, t, delta, disc) <= 1.0
    monkeypatch.setattr(P, "_STARTS", {})
    assert (z, eps) == P.pld_calibrate(1.0, delta, q, t, disc, upper)


def test_wpfl_curve_draws_the_noise_the_plan_deploys(monkeypatch, tmp_path):
    """After a plan at one eps, the T0 curve at a nearby eps: its deployed point (the plan's T0, marked) is
    the plan's recommendation at that eps, computed afresh in an empty process state (no kept
    calibration, schedule or plan), and every T0's exact calibration meets its window by dp-accounting."""
    monkeypatch.setenv("FEDBOUND_CACHE_DIR", str(tmp_path))
    paper = registry.get("wpfl")
    body = {**paper.example, "T": 4, "N": 6, "K": 3}
    api.plan_json("wpfl", body)
    near = {**body, "eps": body["eps"] * 1.03}
    curve = api.curve_json("wpfl", near, "T")
    rec = curve["recommended"]
    deployed = next(c for c in curve["curves"] if c["label"].startswith("deployed"))
    s = _wpfl_setting(**near)
    for t in deployed["x"]:
        r = wb.tight_calibration(s["eps"], s["delta"], s["q"], int(t))
        got = _dp_accounting_eps(r["z"], s["q"], int(t), s["delta"], r["discretization"])
        assert s["eps"] * (1 - 1e-3) <= got <= s["eps"]
    monkeypatch.setattr(wb, "_TIGHT", {})
    monkeypatch.setattr(P, "_STARTS", {})
    monkeypatch.setattr(ws, "_SCHEDULES", type(ws._SCHEDULES)())
    monkeypatch.setenv("FEDBOUND_CACHE_DIR", str(tmp_path / "fresh"))
    fresh = ws.plan(s)
    assert fresh.recommendation.T == rec["T"]
    assert fresh.recommendation.bound == pytest.approx(rec["bound"], rel=2e-3)
    assert deployed["y"][deployed["x"].index(4)] == pytest.approx(rec["bound"], rel=1e-12)


def test_kept_padpfl_plan_equals_a_fresh_one(monkeypatch):
    """PADPFL's plan twice (the explorer's plan and its T figure): the same Plan, with or without unset keys,
    equal to the uncached computation; another eps is another plan."""
    from fedbound.checks import to_jsonable
    from fedbound.scheduling import adaptive as sa

    monkeypatch.setattr(sa, "_PLANS", type(sa._PLANS)())
    paper = registry.get("adaptive")
    s = paper.load_setting(None, api.overrides(paper, dict(paper.example))).values
    first = sa.plan(s)
    assert sa.plan({k: v for k, v in s.items() if v is not None}) is first
    assert to_jsonable(first) == to_jsonable(sa._plan(s, "paper", False))
    other = sa.plan({**s, "eps": s["eps"] * 1.01})
    assert other is not first and other.recommendation.bound != first.recommendation.bound


def test_kept_analytic_gaussian_z_equals_a_fresh_one():
    """PADPFL's tight z, kept per process by the exact (eps, delta): the accountant's own value, exactly."""
    from fedbound.accounting import analytic_gaussian_std
    from fedbound.bounds import adaptive as ba

    for eps, delta in ((0.5, 1e-5), (3.7, 1e-3), (100.0, 0.2)):
        first = ba.tight_noise_multiplier(eps, delta)
        assert ba.tight_noise_multiplier(eps, delta) == first == float(analytic_gaussian_std(eps, delta, 1.0))
    assert ba.tight_noise_multiplier(3.7 * (1 + 1e-12), 1e-3) != ba.tight_noise_multiplier(3.7, 1e-3)


def test_kept_k_of_n_rows_equal_a_fresh_call(monkeypatch):
    """The joint (T, K) search's one-step RDP rows, kept by (orders, q, z): equal to one fresh wor_rdp_pairs
    call on the same pairs, exactly, whatever was kept before (a row depends on its own pair only)."""
    from fedbound.accounting.wor_rdp import wor_rdp_pairs
    from fedbound.scheduling import nbafl_design as nbd

    monkeypatch.setattr(nbd._KGrid, "_ROWS", {})
    orders = np.array([1.5, 2.0, 3.0, 8.0, 32.0])
    grid = nbd._KGrid.__new__(nbd._KGrid)
    grid.orders = orders
    q = np.array([0.1, 0.3, 0.1, 0.5])
    z = np.array([0.7, 1.3, 2.2, 0.7])
    first = grid.rdp(q[:2], z[:2])
    np.testing.assert_array_equal(first, wor_rdp_pairs(orders, q[:2], z[:2]))
    both = grid.rdp(q, z)  # two pairs kept, two new
    np.testing.assert_array_equal(both, wor_rdp_pairs(orders, q, z))
    np.testing.assert_array_equal(grid.rdp(q[::-1], z[::-1]), wor_rdp_pairs(orders, q[::-1], z[::-1]))


@pytest.mark.parametrize("T, rtol", [(7, 1e-6), (40, 0.05)])
def test_speculative_bisection_visits_the_same_noise_multipliers(T, rtol, monkeypatch):
    """KofNCalibration.calibrate with its bisection's next levels evaluated in one call: the same z, the same
    evaluated z's (what brackets read) and the same one-step RDP rows as one z at a time through
    rdp_sampled_without_replacement (the search without the prefetch, in an empty cache)."""
    from fedbound.accounting.rdp import DEFAULT_ORDERS, rdp_sampled_without_replacement
    from fedbound.scheduling import nbafl_design as nbd

    orders = DEFAULT_ORDERS[DEFAULT_ORDERS <= nbd.ORDER_CAP]
    monkeypatch.setattr(nbd.KofNCalibration, "_SHARED", {})
    fast = nbd.KofNCalibration(1.3, 1e-5, 20 / 50, orders)
    z = fast.calibrate(T, rtol)
    assert len(nbd.KofNCalibration._SHARED) > len(fast._rdp)  # some z's were evaluated ahead, not visited
    monkeypatch.setattr(nbd.KofNCalibration, "_SHARED", {})
    monkeypatch.setattr(nbd.KofNCalibration, "_prefetch", lambda self, zs: None)
    slow = nbd.KofNCalibration(1.3, 1e-5, 20 / 50, orders)
    assert slow.calibrate(T, rtol) == z
    assert list(fast._rdp) == list(slow._rdp)
    for v in fast._rdp:
        np.testing.assert_array_equal(fast._rdp[v], rdp_sampled_without_replacement(orders, 20 / 50, v))


def test_vectorised_brackets_equal_the_loop_over_z(monkeypatch):
    """KofNCalibration.brackets (every evaluated z at every T in one conversion) against the loop over z of
    epsilon(z, T) <= eps it replaces, exactly."""
    from fedbound.scheduling import nbafl_design as nbd

    monkeypatch.setattr(nbd.KofNCalibration, "_SHARED", {})
    cal = nbd.KofNCalibration(0.9, 1e-4, 10 / 40, np.array([2.0, 4.0, 16.0, 64.0]))
    T = np.arange(1, 200, 7)
    assert [a.tolist() for a in cal.brackets(T)] == [[0.0] * T.size, [np.inf] * T.size]
    cal.calibrate(30, 0.01)
    lo, hi = np.zeros(T.shape), np.full(T.shape, np.inf)
    for z in cal._rdp:
        ok = cal.epsilon(z, T) <= cal.eps
        hi = np.where(ok, np.minimum(hi, z), hi)
        lo = np.where(~ok, np.maximum(lo, z), lo)
    got = cal.brackets(T)
    np.testing.assert_array_equal(got[0], lo)
    np.testing.assert_array_equal(got[1], hi)
    assert np.any(lo > 0) and np.any(np.isfinite(hi)) and np.any(lo == 0)


def test_jain_indices_equal_the_row_by_row_index():
    """Jain's index of every round at once: exactly jain_index row by row (random, tiny, huge and
    equal rows); a refused row is refused alike."""
    rng = np.random.default_rng(3)
    rows = np.vstack([rng.random((30, 17)), rng.random((5, 17)) * 1e-300, rng.random((5, 17)) * 1e300,
                      np.ones((2, 17)), np.eye(17)[:3]])
    np.testing.assert_array_equal(wb.jain_indices(rows), [wb.jain_index(r) for r in rows])
    with pytest.raises(Exception, match="x"):
        wb.jain_indices(np.vstack([rows[:2], np.zeros((1, 17))]))
