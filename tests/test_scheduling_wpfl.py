"""Seed 004's min-max schedule (fedbound.scheduling.wpfl): spec 004 TV2/TV3 regression values for P7 (both
variants), P7 against scipy's bounded Brent and a fine grid, the assignment against brute force and the
cvxpy LP relaxation (brute force: tests/test_scheduling_wireless.py), the T-round schedule and the plan."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds import wpfl as wb
from fedbound.errors import DomainError, ParameterError
from fedbound.scheduling import wpfl as ws
from fedbound.scheduling.wireless import WirelessSetting, assign_channels
from fedbound.tests.test_scheduling_wireless import TV2_RHO

GAMMA_TV3 = np.array([4.5029632576e+02, 3.0627237835e+05, 7.6587231967e+06, 4.5029287347e+02,
                      3.8748014915e+07, 1.0660994511e+03])
PHI_TV3 = np.array([1.6612344346e-01, 3.5374922850e+01, 8.8185063937e+02, 1.6612304600e-01, 4.4611102813e+03,
                    2.3701985673e-01])
EXACT_ETA = {0: 0.0077962382386, 4: 0.0077962398534}  # 40-digit minimisers (spec TV3 supplement)
EXACT_LAM = {0: 0.0064847344116, 4: 0.0064847077248}
EPS_F_STAR = 0.9812073277447267
BASE = {"C": 3.0, "sigma_dp": 0.006, "R": 16, "n_params": 7850, "phi1": 0.1, "phi2": 0.001, "vphi1": 0.001,
        "vphi2": 1.0}
SETTING = {"N": 6, "K": 3, "T": 2, "C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3, "n_params": 7850,
           "tau_max": 0.05, "mu": 0.13, "L": 0.43, "G0": 2.0, "M": 1.0, "phi1": 0.1, "phi2": 0.001,
           "vphi1": 0.001, "vphi2": 1.0, "eps_P": 0.999, "D0": 10.0, "eta_F": 0.01, "eta_P": 0.01, "lam": 0.5,
           "channel_seed": 3}


def p7(gamma, variant="paper", method="golden"):
    return ws.solve_P7(0.999, 0.13, gamma, EPS_F_STAR, 2.0, 1.0, variant, method)


def test_tv3_p7_paper_variant():
    sol = p7(GAMMA_TV3)
    np.testing.assert_allclose(sol.Phi, PHI_TV3, rtol=1e-9)
    assert np.all(sol.interval == 0) and not sol.edge.any()
    for client in (0, 4):
        assert sol.eta_P[client] == pytest.approx(EXACT_ETA[client], rel=1e-7)
        assert sol.lam[client] == pytest.approx(EXACT_LAM[client], rel=1e-6)
    eps_p = wb.EPS_P(eta_P=sol.eta_P, lam=sol.lam, mu=0.13)
    np.testing.assert_allclose(eps_p, 0.999, rtol=1e-12)  # C1 holds to 12 digits
    assert float(sol.Phi.max()) == pytest.approx(4.4611102813e+03, rel=1e-9)  # min-max value, client 4
    cert = sol.certificate()
    assert cert.success and cert.evidence["worst_client"] == 4 and cert.evidence["min_curvature"] > 0


def test_tv3_p7_corrected_variant():
    sol = p7(GAMMA_TV3[[0, 4]], "corrected")
    assert sol.eta_P[0] == pytest.approx(0.0077962365939, rel=1e-7)
    assert sol.lam[0] == pytest.approx(0.0064847615931, rel=1e-6)
    assert sol.Phi[0] == pytest.approx(8.2435907153e-02, rel=1e-9)
    assert sol.Phi[1] == pytest.approx(4.4610265938e+03, rel=1e-9)


def test_p7_matches_scipy_bounded_brent():
    gold, brent = p7(GAMMA_TV3), p7(GAMMA_TV3, method="scipy")
    np.testing.assert_allclose(gold.Phi, brent.Phi, rtol=1e-12)
    np.testing.assert_allclose(gold.eta_P, brent.eta_P, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.02, 1.9), frac=st.floats(0.0, 0.99), gamma=st.floats(-4, 5), g0=st.floats(-2, 2),
       m=st.floats(-2, 2), efm=st.floats(0.01, 0.99))
def test_p7_beats_a_fine_grid(mu, frac, gamma, g0, m, efm):
    eps_P = min(1 - mu**2 / 4 * (1 - frac), 1 - 1e-5)
    sol = ws.solve_P7(eps_P, mu, 10.0**gamma, efm, 10.0**g0, 10.0**m)
    _, intervals = wb.feasible_intervals(eps_P, mu)
    grid = np.concatenate([np.linspace(lo, hi, 40003)[1:-1] for lo, hi in intervals])
    values = wb.PHI_P7.evaluate(eta_P=grid, eps_P=eps_P, Gamma_n=10.0**gamma, eps_F_mean=efm, G0=10.0**g0,
                                mu=mu, M=10.0**m).value
    assert float(sol.Phi) <= float(np.nanmin(values)) * (1 + 1e-9)
    lam = float(sol.lam)
    assert 0 <= lam <= 2 and float(wb.EPS_P(eta_P=float(sol.eta_P), lam=max(lam, 1e-300), mu=mu)) == \
        pytest.approx(eps_P, rel=1e-9)


def test_p7_domain_errors():
    with pytest.raises(DomainError, match="eps_P"):
        ws.solve_P7(0.99, 0.13, GAMMA_TV3, EPS_F_STAR, 2.0, 1.0)
    with pytest.raises(ParameterError, match="Gamma_n"):
        ws.solve_P7(0.999, 0.13, [-1.0], EPS_F_STAR, 2.0, 1.0)
    with pytest.raises(ParameterError, match="method"):
        ws.solve_P7(0.999, 0.13, GAMMA_TV3, EPS_F_STAR, 2.0, 1.0, method="cvxpy")


# --- the assignment (P3): brute force is in test_scheduling_wireless (S18); here the LP relaxation ----
instances = st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(0, 2**31 - 1), st.floats(0.0, 0.7))


@settings(max_examples=25, deadline=None)
@given(instances)
def test_assignment_equals_the_lp_relaxation(inst):
    """P3's LP relaxation is totally unimodular: its optimum at the maximum feasible cardinality equals the
    Kuhn-Munkres total (spec 004 Sec. 4.4)."""
    n, k, seed, p_bad = inst
    rng = np.random.default_rng(seed)
    rho = rng.uniform(0.0, 1.0, (n, k))
    ok = rng.random((n, k)) >= p_bad
    pairs = assign_channels(rho, ok)
    c = cp.Variable((n, k), nonneg=True)
    cons = [cp.sum(c, axis=1) <= 1, cp.sum(c, axis=0) <= 1, cp.sum(c) == len(pairs), c <= ok.astype(float)]
    problem = cp.Problem(cp.Minimize(cp.sum(cp.multiply(rho, c))), cons)
    problem.solve(solver=cp.HIGHS)
    assert problem.status == cp.OPTIMAL
    assert problem.value == pytest.approx(sum(rho[i, j] for i, j in pairs), abs=1e-7)


def test_tv2_theta_after_km_and_exhausted_client():
    rho = TV2_RHO
    ok = np.ones_like(rho, dtype=bool)
    ok[4, [0, 3]] = False
    pairs = assign_channels(rho, ok)
    theta = wb.theta_L(3.0, 0.006, 16, 7850, [rho[i, c] for i, c in pairs])
    assert theta == pytest.approx(1.6229940589e-01, rel=1e-6)
    allowed = np.array([True, True, True, False, True, True])
    pairs_b = assign_channels(rho, ok, allowed)
    assert pairs_b == [(0, 0), (1, 1), (4, 2), (5, 3)]
    assert wb.theta_L(3.0, 0.006, 16, 7850, [rho[i, c] for i, c in pairs_b]) == pytest.approx(
        3.9539360125e+02, rel=1e-6)


# --- the T-round schedule -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def radio():
    return WirelessSetting(num_clients=6, num_subchannels=3, n_params=7850, tau_max=0.05)


def test_schedule_rounds_proposed(radio):
    sched = ws.schedule_rounds(radio, SETTING, 0.006, "proposed", seed=3)
    t = sched.rounds
    assert sched.assignment.shape == (t, 6) and t >= 4
    assert np.all((sched.assignment >= 0).sum(0) == 2)  # every client uploads T = 2 times (C7)
    assert np.all((sched.assignment >= 0).sum(1) <= 3)
    for row in sched.assignment:  # at most one client per subchannel (C3)
        used = row[row >= 0]
        assert len(used) == len(set(used.tolist()))
    np.testing.assert_allclose(sched.eta_F, 0.3195830670141109, rtol=1e-12)
    np.testing.assert_allclose(sched.eps_P, 0.999, rtol=1e-12)  # C1 for every client, every round
    np.testing.assert_allclose(sched.max_bound, sched.Phi.max(1))
    assert np.all((sched.power > 0) == (sched.assignment >= 0))  # P_th for the selected only (S6)
    # one round recomputed by hand: Theta_L,min (F19) and P7 from Gamma (F22)
    sel = sched.assignment[0] >= 0
    theta = wb.theta_L(3.0, 0.006, 16, 7850, sched.rho_L[0][sel])
    assert sched.theta_L_min[0] == pytest.approx(theta, rel=1e-12)
    gamma = wb.gamma_next(theta, sched.rho_G[0], 3.0, 0.006, 16, 7850, 0.1, 0.001, 0.001, 1.0)
    np.testing.assert_allclose(sched.Phi[0], ws.solve_P7(0.999, 0.13, gamma, EPS_F_STAR, 2.0, 1.0).Phi,
                               rtol=1e-12)
    assert 1 / 6 <= sched.jain_index.min() and sched.jain_index.max() <= 1


def test_schedule_baselines_and_error_free(radio):
    fixed = ws.schedule_rounds(radio, SETTING, 0.006, "non_adjustment", seed=3)
    proposed = ws.schedule_rounds(radio, SETTING, 0.006, "proposed", seed=3)
    np.testing.assert_array_equal(fixed.assignment, proposed.assignment)  # same KM selection
    assert np.all(fixed.eta_P == 0.01) and np.all(fixed.lam == 0.5)
    assert np.all(proposed.max_bound <= fixed.max_bound)  # the min-max optimum beats fixed rates
    assert any("C11" in w for w in fixed.warnings)  # eta_F = 0.01 gives eps_F > 1 here (TV3)
    free = ws.schedule_rounds(radio, SETTING, 0.006, "error_free", seed=3)
    assert np.all(free.rho_L == 0) and np.all(free.rho_G == 0)
    rr = ws.schedule_rounds(radio, SETTING, 0.006, "round_robin", seed=3)
    assert [sorted(np.flatnonzero(r >= 0).tolist()) for r in rr.assignment[:2]] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ParameterError, match="policy"):
        ws.schedule_rounds(radio, SETTING, 0.006, "best")


def test_plan_recommendation_first():
    plan = ws.plan({**SETTING, "T": 20, "N": 20, "K": 10, "tau_max": 0.01, "channel_seed": 0})
    rec = plan.recommendation
    from fedbound.accounting import pld_epsilon

    assert pld_epsilon(rec.sigma["uplink"] / 6.0, 0.01, 20, 1e-3) <= 1.0  # proven (PLD: an upper bound)
    assert rec.T == plan.data["rounds"] and rec.extra["uploads_per_client"] == 20  # rounds the run does
    assert rec.K == 10 and rec.bound > 0
    data = plan.to_dict()
    assert data["sigma_dp_paper"] == pytest.approx(0.00735867, abs=1e-7)
    assert data["eps_theorem1"] == 0.0  # psi1 underflows: Theorem 1 certifies eps = 0 (S5)
    assert any("Theorem 1" in w and "per-outcome" in w for w in plan.warnings)
    assert all("spec" not in w for w in plan.warnings)
    assert data["eta_F_star"] == pytest.approx(0.3195830670, rel=1e-9)
    assert set(plan.optima) == {"P7", "eta_F"}


# --- registry, claims, plots, CLI ----------------------------------------------------------------------
def test_every_declared_claim_through_the_shared_checker():
    import time

    from fedbound.bounds.claims import check_all
    from fedbound.registry import get

    claims = get("wpfl").all_claims()
    ids = {c.id for c in claims}
    for expected in ("S1", "S4", "S5", "S6a", "S12b", "S14b", "S16", "S17", "S18", "S21", "S22", "F32", "P1"):
        assert expected in ids
    start = time.process_time()  # CPU s, never wall time
    reports = check_all(claims, n=10)
    assert time.process_time() - start < 60
    bad = [(r.id, r.detail) for r in reports if r.status == "CONTRADICTED"]
    assert not bad
    status = {r.id: r.status for r in reports}
    assert status["S12b"] == "fails in region"  # the paper's "Psi rises then falls in lambda" (E8)
    assert status["S4"] == "fails in region" and status["S16"] == "fails in region"


def test_plots_draw_labelled_lines():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedbound.validation.reproduce.plots_wpfl import PLOTS

    s = {**SETTING, "N": 6, "K": 3, "T": 2}
    for vs, draw in PLOTS.items():
        fig, ax = plt.subplots()
        title = draw(ax, s, "paper")
        assert title and ax.lines and all(line.get_label() for line in ax.lines), vs
        plt.close(fig)


def test_cli_schedule_json(capsys):
    import json
    from pathlib import Path

    from fedbound.accounting import calibrate_sigma_dp
    from fedbound.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "wpfl_mnist.toml"
    assert main(["schedule", "wpfl", str(example), "--set", "T=2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("per_round", "max_bound", "warnings", "sigma_dp", "policy"):
        assert key in out
    first = out["per_round"][0]
    for key in ("assignment", "power", "eta_fl", "eta_pl", "lambda", "theta_L_min", "max_bound",
                "jain_index"):
        assert key in first
    assert len(first["assignment"]) == 20 and sum(c is not None for c in first["assignment"]) <= 10
    assert out["sigma_dp"] == pytest.approx(calibrate_sigma_dp(1.0, 1e-3, 3.0, 16, 0.01, 2), rel=1e-12)
    assert main(["schedule", "wpfl", str(example), "--set", "T=2", "--rounds", "1"]) == 0
    assert "min-max bound" in capsys.readouterr().out
    assert main(["schedule", "nbafl", str(example)]) != 0


def test_bad_settings_name_the_parameter(radio):
    with pytest.raises(DomainError, match="eps_P"):
        ws.schedule_rounds(radio, {**SETTING, "eps_P": 0.9}, 0.006)  # below 1 - mu^2/4 (E23)
    with pytest.raises(DomainError, match="phi2"):
        ws.schedule_rounds(radio, {**SETTING, "phi2": 0.5}, 0.006)  # eps_F* >= 1 (C11)
    with pytest.raises(ParameterError, match="sigma_dp"):
        ws.schedule_rounds(radio, SETTING, -1.0)
    with pytest.raises(ParameterError, match="variant"):
        ws.solve_P7(0.999, 0.13, GAMMA_TV3, EPS_F_STAR, 2.0, 1.0, variant="printed")
    with pytest.raises(ParameterError, match="d_max"):
        ws.radio_setting({**SETTING, "d_min": 50.0, "d_max": 20.0})


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 12), k=st.integers(1, 6), seed=st.integers(0, 2**31 - 1), t0=st.integers(1, 3))
def test_one_round_composition_shapes_and_constraints(n, k, seed, t0):
    radio = WirelessSetting(num_clients=n, num_subchannels=k, n_params=7850, tau_max=0.05)
    rng = np.random.default_rng(seed)
    up, down = 10 ** rng.uniform(-12, -8, (n, k)), 10 ** rng.uniform(-12, -8, n)
    uploads = rng.integers(0, t0 + 1, n)
    out = ws.schedule_round_minmax(up, down, uploads, radio, {**SETTING, "T": t0}, 0.006)
    clients = [i for i, _ in out["pairs"]]
    assert len(clients) == len(set(clients)) <= min(k, int((uploads < t0).sum()))
    assert all(uploads[i] < t0 for i in clients)  # C7
    assert np.count_nonzero(out["power"]) == len(clients)
    assert out["Phi"].shape == (n,) and np.all(np.isfinite(out["Phi"]))
    assert out["max_bound"] == out["Phi"].max() and out["worst_client"] == int(np.argmax(out["Phi"]))
    np.testing.assert_allclose(wb.EPS_P(eta_P=out["eta_P"], lam=out["lam"], mu=0.13), 0.999, rtol=1e-12)
