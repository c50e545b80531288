"""UDP's planner (seed 003, Theorems 1-3): the recommendation, the paper's answer beside it, optima against
brute force, the optimiser claims, the plots, and a fuzz of the planner's inputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound.bounds import udp
from fedbound.bounds import udp_moments as um
from fedbound.bounds.claims import check_all
from fedbound.errors import ParameterError
from fedbound.output import to_jsonable
from fedbound.registry import get
from fedbound.scheduling import udp as sched

QUESTION = {
    "N": 50,
    "K": 30,
    "eps": 8.0,
    "delta": 1e-3,
    "m": 80,
    "eta": 0.5,
    "C": 1.0,
    "L": 1.0,
    "mu": 0.1,
    "div": 0.5,
    "theta0": 1.0,
}
KEYS = (
    "sigma",
    "sigma_corrected",
    "sigma_numeric",
    "sigma_tight",
    "delta_achieved_by_paper_sigma",
    "T_opt",
    "T_opt_continuous",
    "T_convexity_limit",
    "bound_at_T_opt",
    "recommendation",
    "warnings",
)


def test_the_designers_question():
    """eps_i = 8, delta = 1e-3, q = 0.6, 50 clients: the paper's answer, the corrected one, the tight one."""
    plan = sched.plan(QUESTION)
    d = to_jsonable(plan.to_dict())
    json.dumps(d)
    assert set(KEYS) <= set(d)
    assert len(d["sigma"]) == 50 and d["T_opt"] == 78
    T = d["T"]
    sens = 2 * 0.5 * 1.0 / 80
    assert d["sigma"][0] == pytest.approx(udp.SIGMA(eps=8.0, delta=1e-3, q=0.6, T=T, sens=sens), rel=1e-12)
    assert d["sigma_corrected"][0] == pytest.approx(d["sigma"][0] * 1.234526824, rel=1e-9)
    assert d["delta_achieved_by_paper_sigma"]["approx"] == pytest.approx(
        0.0344748, rel=1e-5
    )  # depends on z only
    rec = d["recommendation"]
    assert rec["T"] == plan.optima["T_opt_tight"].x and rec["K"] == 30
    z = rec["sigma"]["uplink"][0] / sens
    # tight AT the rec's T, for every realised participation pattern (issue 36: what train deploys); the
    # selection-averaged mixture at q = 0.6 is shown beside it
    assert z == pytest.approx(um.sigma_tight(8.0, 1e-3, 1.0, rec["T"], 1.0), rel=1e-9)
    assert d["sigma_tight_selection_averaged"][0] == pytest.approx(um.sigma_tight(8.0, 1e-3, 0.6, T, sens),
                                                                   rel=1e-9)
    assert plan.optima["T_opt_tight"].success and plan.optima["T_opt"].success
    assert any("eq. (10)" in w and "UDP (Wei et al. 2021)" in w for w in d["warnings"])
    assert not any("spec" in w or " E5" in w for w in d["warnings"])
    assert d["differences"]


def test_recommended_T_is_the_exact_integer_optimum_of_the_tight_bound():
    co = sched.coeffs(QUESTION)
    opt, _ = sched.optimal_T_tight(QUESTION, co)
    Ts = np.arange(max(1, opt.x - 6), opt.x + 7)
    vals = [sched.bound_tight(QUESTION, co, int(T))[0] for T in Ts]
    assert int(Ts[int(np.argmin(vals))]) == opt.x


def test_optimal_T_certificate_matches_brute_force():
    co = sched.coeffs(QUESTION)
    opt = sched.optimal_T(co)
    grid = np.arange(1, 3000)
    assert opt.x == int(grid[np.argmin(udp.bound(grid, co))])
    assert opt.fun <= opt.fun_below and opt.fun <= opt.fun_above
    assert opt.x_continuous == pytest.approx(78.00988518, rel=1e-8)
    no_interior = sched.optimal_T({**co, "theta0": co["b"] / 2})
    assert no_interior.x == 1 and no_interior.at_lower_edge


def test_heterogeneous_budgets_and_sizes_and_grid_and_crd_preview():
    s = {
        **QUESTION,
        "eps_clients": "2*20, 4*20, 8*10",
        "sizes": "80,160",
        "T_grid": "10:300:10",
        "crd": True,
        "T": 120,
    }
    plan = sched.plan(s)
    d = plan.to_dict()
    sig = np.asarray(d["sigma"])
    assert sig[0] == pytest.approx(2 * sig[1], rel=1e-12)  # same eps, |D| 80 vs 160
    assert sig[0] == pytest.approx(8 * sig[45], rel=1e-12)  # eps 2 vs 8, |D| 80 vs 160
    assert d["optima"]["heuristic_search"]["evidence"] == {"runs": 30, "rounds": 4650}
    assert d["crd"]["rounds"] <= 120 and d["T"] == 120 and "bound_at_T" in d


def test_bad_settings_are_named():
    with pytest.raises(ParameterError, match="K"):
        sched.plan({**QUESTION, "K": 60})
    with pytest.raises(ParameterError, match="eta"):
        sched.plan({**QUESTION, "eta": 2.0})
    with pytest.raises(ParameterError, match="eps_clients"):
        sched.plan({**QUESTION, "eps_clients": "1,2,3"})
    with pytest.raises(ParameterError, match="T_grid"):
        sched.plan({**QUESTION, "T_grid": "a:b"})
    with pytest.raises(ParameterError, match="variant"):
        sched.plan(QUESTION, "nope")


def test_scheduling_claims_hold():
    reports = check_all(get("udp").all_claims(), n=10)
    assert not [(r.id, r.detail) for r in reports if r.status == "CONTRADICTED"]
    assert {"P8", "P8c", "P9", "P13c"} <= {r.id for r in reports}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 80),
    kf=st.floats(0.01, 1.0),
    eps=st.floats(0.05, 40.0),
    delta=st.floats(1e-10, 0.5),
    m=st.integers(1, 2000),
    eta=st.floats(1e-4, 1.0),
    C=st.floats(1e-3, 50.0),
    theta0=st.floats(1e-3, 100.0),
)
def test_planner_fuzz_no_nan_no_hang(n, kf, eps, delta, m, eta, C, theta0):
    s = {
        **QUESTION,
        "N": n,
        "K": max(1, round(kf * n)),
        "eps": eps,
        "delta": delta,
        "m": m,
        "eta": eta,
        "C": C,
        "theta0": theta0,
    }
    try:
        d = to_jsonable(sched.plan(s).to_dict())
    except ParameterError:
        return  # named, one line
    text = json.dumps(d)
    assert "NaN" not in text and "Infinity" not in text
    assert d["recommendation"]["T"] >= 1 and all(x > 0 for x in d["recommendation"]["sigma"]["uplink"])


@pytest.mark.parametrize("vs", ["T", "eps", "K", "q"])
def test_plots_draw_labelled_lines(vs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = get("udp").load("plots")
    fig, ax = plt.subplots()
    small = {**QUESTION, "N": 10, "K": 6}
    title = plots[vs](ax, small, "paper")
    lines = ax.get_lines()
    assert "UDP (Wei et al. 2021)" in title and len(lines) >= 2
    assert all(line.get_label() and not line.get_label().startswith("_") for line in lines)
    assert all(np.all(np.isfinite(line.get_ydata())) for line in lines)
    plt.close(fig)


def test_registry_entry():
    paper = get("udp")
    assert paper.supports == ("plan", "plot", "claims", "train", "audit")
    noise = paper.load("noise")
    setting = {"N": 50, "K": 50, "eps": 4.0, "delta": 1e-3, "m": 800, "eta": 0.002, "C": 20.0}
    assert noise(setting, 200)["uplink"][0] == pytest.approx(0.001314130442, rel=1e-9)
    assert paper.aliases == {"U": "N"}
    keys = {k["key"] for k in paper.keys()}
    assert {"N", "K", "T", "eps", "delta", "m", "eta", "C", "U"} <= keys
    assert math.isclose(paper.defaults["mu"], 0.1)
