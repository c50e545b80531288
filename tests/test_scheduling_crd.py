"""CRD (seed 003, Alg. 2, Theorem 4): spec 003 section 8.6 vectors with the deterministic loss oracle,
the policy's rules, Lei's baseline, the heuristic search and its cost, and ``fedbound crd replay``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds import udp
from fedbound.bounds import udp_moments as um
from fedbound.cli import main
from fedbound.errors import ParameterError
from fedbound.scheduling.crd import CRDPolicy, heuristic_search_T, lei_run, lei_schedule, run_crd


def oracle(t: int) -> float:
    return 0.5 + 1.8 * math.exp(-t / 20)


def test_crd1_vectors():
    phi = um.budget_phi(4.0, 1e-3, 1.0, 1e-4)
    trace = run_crd(CRDPolicy(0.9, 0.001), oracle, 200, phi)
    assert (trace.rounds, trace.T_final, len(trace.discounts)) == (111, 110, 21)
    assert trace.discounts[0][:2] == (90, 200)
    assert trace.T_in_force[:91] == (200,) * 91
    assert trace.T_in_force[91:] == (
        189,
        179,
        170,
        162,
        155,
        149,
        143,
        138,
        134,
        130,
        127,
        124,
        121,
        119,
        117,
        115,
        114,
        113,
        112,
        111,
    )
    s = trace.sigmas
    np.testing.assert_allclose(s[:91], 0.001314130442, rtol=1e-9)
    assert s[91] == pytest.approx(0.00124605802, rel=1e-9)
    assert s[92] == pytest.approx(0.00118008156, rel=1e-9)
    assert s[110] == pytest.approx(0.0002528641051, rel=1e-9)
    assert np.sum(s**-2.0) == pytest.approx(115811861.8, rel=1e-9)
    assert trace.eps_spent(1e-3, 1.0, 1e-4) == pytest.approx(4.0, rel=1e-12)
    for acc in um.ACCOUNTANTS:
        assert um.delta_from_sigmas(4.0, 1.0, s, 1e-4, acc) == pytest.approx(0.00640108, rel=1e-5)


def test_crd2_vectors():
    phi = um.budget_phi(8.0, 1e-3, 0.6, 1e-4)
    trace = run_crd(CRDPolicy(0.8, 0.001), oracle, 200, phi)
    assert (trace.rounds, trace.T_final, len(trace.discounts)) == (103, 102, 13)
    assert trace.discounts[0][0] == 90
    assert trace.T_in_force[91:] == (178, 160, 146, 135, 126, 119, 114, 110, 107, 105, 104, 103)
    s = trace.sigmas
    np.testing.assert_allclose(s[:91], 0.0005089605318, rtol=1e-9)
    assert s[91] == pytest.approx(0.0004547057885, rel=1e-9)
    assert s[92] == pytest.approx(0.0004043297652, rel=1e-9)
    assert s[102] == pytest.approx(8.270364763e-05, rel=1e-9)
    assert np.sum(s**-2.0) == pytest.approx(772079078.9, rel=1e-9)
    assert trace.eps_spent(1e-3, 0.6, 1e-4) == pytest.approx(8.0, rel=1e-12)
    assert um.delta_from_sigmas(8.0, 0.6, s, 1e-4, "approx") == pytest.approx(0.0344748, rel=1e-5)
    assert um.delta_from_sigmas(8.0, 0.6, s, 1e-4, "exact") == pytest.approx(0.0045833, rel=1e-4)
    assert um.delta_from_sigmas(8.0, 0.6, s, 1e-4, "release") == pytest.approx(0.0498441, rel=1e-5)
    # the last round breaks eq. (15)'s premise (x = 0.90 at the optimal order)
    assert um.validity_x(8.0, 0.6, s, 1e-4) == pytest.approx(0.90, abs=0.01)


def test_policy_rules_and_exact_floor():
    p = CRDPolicy(0.57, 0.01)
    assert p.discount(100, 0) == 57  # 0.57 * 100 = 56.99999999999999 in floating point
    assert p.should_discount(1.0, 0.995) and not p.should_discount(1.0, 0.98)
    assert p.should_discount(1.0, 1.5)  # worse loss
    assert p.next_T(50, 10, 1.0, 0.5) == 50
    for bad in (dict(beta=1.0), dict(beta=0.0), dict(zeta=0.0), dict(zeta=math.inf)):
        with pytest.raises(ParameterError):
            CRDPolicy(**{"beta": 0.9, "zeta": 0.001, **bad})


def test_no_trigger_runs_T_init_rounds_at_constant_sigma():
    phi = um.budget_phi(4.0, 1e-3, 1.0, 1e-4)
    trace = run_crd(CRDPolicy(0.9, 1e-12), [1.0 - 0.01 * t for t in range(60)], 50, phi)
    assert trace.rounds == 50 and not trace.discounts
    np.testing.assert_allclose(trace.sigmas, trace.sigmas[0], rtol=1e-12)


def test_recorded_curve_that_ends_early():
    trace = run_crd(CRDPolicy(), [1.0, 0.9, 0.8], 50, 1e6)
    assert trace.rounds == 2 and trace.stopped == "losses ran out"


@settings(max_examples=30, deadline=None)
@given(beta=st.floats(0.05, 0.95), T=st.integers(1, 300), seed=st.integers(0, 10**6))
def test_schedule_property(beta, T, seed):
    rng = np.random.default_rng(seed)
    curve = np.concatenate(
        [[1.0], 1.0 - np.cumsum(np.abs(rng.normal(0, 0.01, 400)) * (rng.random(400) < 0.6))]
    )
    phi = um.budget_phi(2.0, 1e-3, 0.5, 1e-3)
    trace = run_crd(CRDPolicy(beta, 0.003), curve, T, phi)
    Ts = trace.T_in_force
    assert all(b <= a for a, b in zip(Ts, Ts[1:], strict=False)) and trace.rounds <= T
    assert np.sum(trace.sigmas**-2.0) <= phi * (1 + 1e-9)  # (D14)
    assert np.all(np.isfinite(trace.sigmas)) and np.all(trace.sigmas > 0)


def test_heuristic_search_vectors_on_the_bound_surrogate():
    co = udp.bound_coeffs(50, 30, 2.0, 1e-3, 1.0, 0.1, 0.1, 0.0078125, 0.5, 1.0)
    res = heuristic_search_T(lambda T: udp.bound(T, co), range(10, 301, 10))
    assert (res.x, res.evidence["runs"], res.evidence["rounds"]) == (170, 30, 4650)
    assert res.fun == pytest.approx(0.1580909275, rel=1e-9)
    coarse = heuristic_search_T(lambda T: udp.bound(T, co), range(10, 261, 50))
    assert (coarse.x, coarse.evidence["runs"], coarse.evidence["rounds"]) == (160, 6, 810)
    assert coarse.fun == pytest.approx(0.1591597151, rel=1e-9)
    for name, grid_T, grid_h in (("B2", 100, 0.006217091668), ("B3", 210, 0.1013598351)):
        b = {
            "B2": (50, 50, 4.0, 1e-3, 2.0, 0.2, 0.25, 0.0025, 0.5, 2.0),
            "B3": (
                50,
                30,
                np.array([2.0] * 20 + [4.0] * 20 + [8.0] * 10),
                1e-3,
                1.0,
                0.1,
                0.1,
                0.0078125,
                0.5,
                1.0,
            ),
        }[name]
        c = udp.bound_coeffs(*b)
        r = heuristic_search_T(lambda T, c=c: udp.bound(T, c), range(10, 301, 10))
        assert r.x == grid_T and r.fun == pytest.approx(grid_h, rel=1e-9)


def test_lei_baseline_spends_at_most_eps():
    s0 = udp.SIGMA(eps=4.0, delta=1e-3, q=1.0, T=200, sens=1e-4)
    assert lei_schedule(s0, 0.002, 100) == pytest.approx(0.8 * s0)
    assert lei_schedule(s0, 0.01, 500, s0 / 10) == pytest.approx(s0 / 10)
    sig = lei_run(s0, 0.002, 4.0, 1e-3, 1.0, 1e-4, 400)
    assert 0 < len(sig) < 200  # decaying noise spends the budget before T_init
    assert um.eps_spent(sig, 1e-3, 1.0, 1e-4) <= 4.0 * (1 + 1e-12)
    assert um.eps_spent(lei_run(s0, 0.0, 4.0, 1e-3, 1.0, 1e-4, 200), 1e-3, 1.0, 1e-4) == pytest.approx(4.0)


CONFIG = """
[udp]
N = 50
K = 30
T = 200
eps = 8.0
delta = 0.001
m = 800
eta = 0.002
C = 20.0
crd = true
beta = 0.8
"""


def test_crd_replay_cli(tmp_path, capsys):
    losses = tmp_path / "losses.csv"
    losses.write_text("round,loss\n" + "".join(f"{t},{oracle(t)!r}\n" for t in range(201)))
    cfg = tmp_path / "udp.toml"
    cfg.write_text(CONFIG)
    assert main(["crd", "replay", str(losses), str(cfg), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["rounds"], out["T_final"]) == (103, 102)
    assert out["rounds_detail"][102]["sigma"] == pytest.approx(8.270364763e-05, rel=1e-9)
    assert out["delta_at_eps_release"] == pytest.approx(0.0498441, rel=1e-5)
    assert main(["crd", "replay", str(losses), str(cfg)]) == 0
    text = capsys.readouterr().out
    assert "final T = 102" in text and "0.75" in text
    assert main(["crd", "replay", str(losses), str(cfg), "--column", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["crd", "replay", str(losses), str(cfg), "--json", "--set", 'calibration="corrected"']) == 0
    corrected = json.loads(capsys.readouterr().out)
    assert corrected["budget"] == "corrected"
    first = corrected["rounds_detail"][0]["sigma"]
    want = udp.SIGMA_CORRECTED(eps=8.0, delta=1e-3, q=0.6, T=200, sens=1e-4)
    assert first == pytest.approx(want, rel=1e-12)
    bad = tmp_path / "bad.csv"
    bad.write_text("loss\n1.0\nabc\n")
    assert main(["crd", "replay", str(bad), str(cfg)]) == 2
    assert "line 3" in capsys.readouterr().err
