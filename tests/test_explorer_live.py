"""The explorer's fast paths for UDP and WPFL (issue 25) equal the point-by-point computations they replace.

* UDP: :func:`fedbound.bounds.udp_moments.z_exact` (Illinois on precomputed Binomial terms) against the
  independent definition (the smallest z whose :func:`release_log_delta` meets delta: checked on both sides
  of the returned z) and a plain bisection written here; the vectorised T curve, the cached z's and the
  lockstep scans of the eps / K curves against ``bound_tight`` / ``optimal_T_tight`` one point at a time.
* WPFL: the batched tight calibrations are the records ``tight_calibration`` deploys, the shared radio run
  is the run ``schedule_run`` plays, and the T0 curve is drawn with the sigma each design deploys.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import registry
from fedbound.accounting import calibrate_noise
from fedbound.bounds import udp_moments as um
from fedbound.bounds import wpfl as wb
from fedbound.explorer import api
from fedbound.scheduling import udp as sched
from fedbound.scheduling import wpfl as ws


def _bisect_z(eps, delta, q, T):
    """The smallest z meeting delta by plain bisection in ln z to 1e-13 (the definition, slowly)."""
    lo, hi = math.log(1e-3), math.log(1e3)
    assert um.release_log_delta(eps, q, T, math.exp(hi)) <= math.log(delta)
    while hi - lo > 1e-13:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if um.release_log_delta(eps, q, T, math.exp(mid)) <= math.log(delta) else (mid, hi)
    return math.exp(hi)


@settings(max_examples=12, deadline=None)
@given(eps=st.floats(0.2, 30.0), log_delta=st.floats(-12.0, -3.5), q=st.sampled_from([0.05, 0.3, 0.6, 1.0]),
       T=st.integers(1, 150))
def test_z_exact_is_the_smallest_feasible_z(eps, log_delta, q, T):
    delta = math.exp(log_delta)  # below q, the chance of any upload: some noise is needed
    z = float(um.z_exact(eps, delta, q, T))
    assert um.release_log_delta(eps, q, T, z) <= math.log(delta)  # feasible
    assert um.release_log_delta(eps, q, T, z * math.exp(-2e-12)) > math.log(delta)  # and the smallest
    assert z == pytest.approx(_bisect_z(eps, delta, q, T), rel=1e-11)


def test_z_exact_vectorised_equals_one_at_a_time():
    T = np.array([1, 2, 7, 40, 41, 150])
    eps = np.array([0.5, 8.0, 8.0, 3.0, 20.0, 1.0])
    q = np.array([0.6, 0.6, 1.0, 0.02, 0.5, 0.3])
    grid = um.z_exact(eps, 1e-4, q, T)
    alone = [float(um.z_exact(e, 1e-4, qq, t)) for e, qq, t in zip(eps, q, T, strict=True)]
    np.testing.assert_allclose(grid, alone, rtol=1e-12)
    np.testing.assert_allclose(um.sigma_exact(8.0, 1e-4, 0.6, T, 0.25),
                               [um.sigma_exact(8.0, 1e-4, 0.6, int(t), 0.25) for t in T], rtol=1e-12)


def _setting(name, **changes):
    """The paper's example setting as the explorer loads it, with changes (None drops a key)."""
    paper = registry.get(name)
    body = {**paper.example, **changes}
    return dict(paper.load_setting(None, api.overrides(paper, body)).values)


def _udp(**changes):
    return _setting("udp", **changes)


def test_udp_tight_curve_and_cache_equal_point_by_point():
    s = _udp(eps=5.3, T=None)
    co = sched.coeffs(s)
    T = np.unique(np.linspace(1, 240, 25).round().astype(int))
    sched._Z_CACHE.clear()
    cold = sched.bound_tight_curve(s, co, T)
    warm = sched.bound_tight_curve(s, co, T)  # every z from the cache: the same numbers exactly
    np.testing.assert_array_equal(cold, warm)
    np.testing.assert_allclose(cold, [sched.bound_tight(s, co, int(t))[0] for t in T], rtol=1e-9)


def test_udp_recommended_is_the_plans():
    for s in (_udp(eps=4.1, T=None), _udp(eps=4.1, T=37)):
        rec = sched.plan(s).recommendation
        assert sched.recommended(s, sched.coeffs(s)) == (rec.T, rec.bound)


def test_udp_lockstep_scans_equal_one_scan_each():
    points = [_udp(eps=e, T=None) for e in (0.7, 2.0, 9.0)] + [_udp(eps=3.0, K=k, T=None) for k in (1, 20)]
    sched._Z_CACHE.clear()
    many = sched.optimal_T_tight_many(points)
    for s, (T, fun) in zip(points, many, strict=True):
        opt, _ = sched.optimal_T_tight(s, sched.coeffs(s))
        assert T == opt.x
        assert fun == pytest.approx(opt.fun, rel=1e-9)


def test_wpfl_batched_calibrations_are_the_deployed_records():
    eps, delta, q, ts = 1.37, 1e-3, 0.5, [3, 6, 9]
    batch = wb.tight_calibrations(eps, delta, q, ts)
    for t, record in zip(ts, batch, strict=True):
        assert record == wb.tight_calibration(eps, delta, q, t)  # what the plan at T0 = t deploys
        # calibrate_noise's roots are solved to 1e-11 in ln z, from brackets that differ between calls
        assert record["z_rdp"] == pytest.approx(float(calibrate_noise(eps, delta, q, t)), rel=1e-10)
        assert record["z"] <= record["z_rdp"] * (1 + 1e-12)


def test_wpfl_shared_radio_run_is_schedule_run():
    from fedbound.scheduling.wireless import schedule_run

    s = _setting("wpfl")
    radio = ws.radio_setting(s)
    shared = ws._schedule_run(radio, 4, "km", 0, None, True)
    fresh = schedule_run(radio, 4, "km", 0)
    assert [r.pairs for r in shared.rounds] == [r.pairs for r in fresh.rounds]
    np.testing.assert_array_equal(shared.downlink_ber, fresh.downlink_ber)
    a = ws.schedule_rounds(radio, {**s, "T": 4}, 0.3)
    b = ws.schedule_rounds(radio, {**s, "T": 4}, 0.7)  # another sigma, the same radio run
    assert a.wireless is b.wireless and not np.allclose(a.Phi, b.Phi)


def _line(fig, label):
    (curve,) = [c for c in fig["curves"] if c["label"].startswith(label)]
    return np.array(curve["x"]), np.array(curve["y"], dtype=float)


def test_udp_explorer_curves_are_the_point_by_point_ones():
    """/api/curve/udp's deployed-noise lines equal ``bound_tight`` at each T and ``optimal_T_tight`` at each
    eps and K, one point at a time, and its marked design is the plan's."""
    body = {**registry.get("udp").example, "eps": 6.7}
    s = _udp(eps=6.7)
    co = sched.coeffs(s)
    x, y = _line(api.curve_json("udp", body, "T"), "deployed noise")
    np.testing.assert_allclose(y, [sched.bound_tight(s, co, int(t))[0] for t in x], rtol=1e-9)
    rec = api.plan_json("udp", body)["recommendation"]
    assert api.curve_json("udp", body, "T")["recommended"] == {"T": rec["T"], "bound": rec["bound"]}
    for vs, key in (("eps", "eps"), ("K", "K")):
        x, y = _line(api.curve_json("udp", body, vs), "bound at T*, tight")
        want = []
        for v in x:
            p = {**s, key: int(v) if key == "K" else float(v)}
            want.append(sched.optimal_T_tight(p, sched.coeffs(p))[0].fun)
        np.testing.assert_allclose(y, want, rtol=1e-9)


def test_wpfl_explorer_T_curve_draws_the_deployed_sigma():
    """/api/curve/wpfl?vs=T: each tight point is Theorem 4's bound with the sigma the plan at that T0 deploys
    (``tight_calibration``) and that design's own schedule, recomputed here one T0 at a time."""
    body = {**registry.get("wpfl").example, "eps": 1.21, "T": 8}
    s = _setting("wpfl", eps=1.21, T=8)
    x, y = _line(api.curve_json("wpfl", body, "T"), "deployed noise")
    want = []
    for t in x.astype(int):
        p = {**s, "T": int(t)}
        sigma = wb.tight_calibration(p["eps"], p["delta"], p["q"], int(t))["z"] * 2.0 * float(p["C"])
        run = ws.schedule_rounds(ws.radio_setting(p), p, sigma, "proposed", "paper",
                                 int(p.get("channel_seed", 0)), p.get("max_rounds"))
        want.append(float(wb.geometric_bound(p["eps_P"], run.rounds, p["D0"], float(run.Phi.max()))))
    np.testing.assert_allclose(y, want, rtol=1e-12)
    plan = api.plan_json("wpfl", body)
    assert plan["recommendation"]["sigma"]["uplink"] == pytest.approx(
        wb.tight_calibration(s["eps"], s["delta"], s["q"], 8)["z"] * 2.0 * float(s["C"]), rel=1e-12)


def _max_concurrency(monkeypatch, module, attr, call):
    """Run ``call`` in two threads at once with ``module.attr`` slowed down; how many ran it at once."""
    import threading
    import time

    inner, state, guard = getattr(module, attr), {"now": 0, "max": 0, "calls": 0}, threading.Lock()

    def slow(*args, **kwargs):
        with guard:
            state["now"] += 1
            state["calls"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.2)  # long enough for the other thread to arrive
        try:
            return inner(*args, **kwargs)
        finally:
            with guard:
                state["now"] -= 1

    monkeypatch.setattr(module, attr, slow)
    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state


def test_concurrent_requests_plan_once(monkeypatch):
    """The page's plan and curve for one body build the plan once; WPFL's calibration is computed once."""
    import fedbound.commands.papers as papers

    body = {**registry.get("udp").example, "eps": 5.9}
    sets = api.overrides(registry.get("udp"), body)
    state = _max_concurrency(monkeypatch, papers, "build_plan", lambda: api._build_plan("udp", sets, "paper"))
    assert state["max"] == 1
    wb._TIGHT.pop((1.77, 1e-3, 0.5, 4), None)
    state = _max_concurrency(monkeypatch, wb, "_tight_record",
                             lambda: wb.tight_calibration(1.77, 1e-3, 0.5, 4))
    assert state == {"now": 0, "max": 1, "calls": 1}


def test_decreasing_root_nudge_closes_the_bracket_at_an_exact_root():
    """A linear f is solved exactly by the first secant step (f = 0 there): with the nudge the next point
    straddles the root and the bracket closes; without it the search bisects down to xtol.  Both keep
    f(hi) <= 0 < f(lo) and hi - lo <= xtol."""
    from fedbound.accounting._numerics import decreasing_root

    root = np.array([0.25, -1.5])
    counts = {}
    for nudge in (True, False):
        calls = []

        def f(x, rows, calls=calls):
            calls.append(len(rows))
            return root[rows] - x

        lo, hi = decreasing_root(f, root - 1.0, root + 2.0, np.full(2, 1.0), np.full(2, -2.0), 1e-12,
                                 nudge=nudge)
        assert np.all(hi - lo <= 1e-12) and np.all(root - hi <= 0) and np.all(root - lo > 0)
        counts[nudge] = len(calls)
    assert counts[True] <= 3 < 30 < counts[False]
