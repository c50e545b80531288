"""Optimal T, K and (T, K) for NbAFL against spec 002's vectors and against exhaustive integer search."""

import warnings

import numpy as np
import pytest

from fedbound.bounds import nbafl as nb
from fedbound.errors import DomainError, InfeasibleError
from fedbound.scheduling import nbafl as sched
from fedbound.scheduling.integer_search import exhaustive_integer_min, unimodal_integer_min

TV1 = dict(nb.TV1)
TV2 = {**TV1, "eps": 6.0, "m": 512}
TV3 = {**TV1, "eps": 6.0, "K": 20}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("tv, t_cont, t_int, h_int, t_lin", [
    (TV1, 34.42253481, 34, 1.125557213, 36.87722629),
    (TV2, 20.39111668, 20, 1.427901849, 22.30544122),
    (TV3, 4.569131789, 5, 1.856281572, 5.126864664),
])
def test_optimal_T_test_vectors(tv, t_cont, t_int, h_int, t_lin):
    res = sched.optimal_T(tv)
    assert res.x == t_int and res.success
    assert res.x_continuous == pytest.approx(t_cont, rel=1e-9)
    assert res.fun == pytest.approx(h_int, rel=1e-9)
    assert res.fun <= res.fun_below and res.fun <= res.fun_above
    assert res.bracket[1] == pytest.approx(nb.T_THETA(tv), rel=1e-12)
    assert res.evidence["derivative_at_lo"] < 0 < res.evidence["derivative_at_hi"]
    assert sched.optimal_T_linear(tv) == pytest.approx(t_lin, rel=1e-9)


def test_optimal_T_fig7_table_in_one_vectorised_call():
    res = sched.optimal_T({**TV1, "eps": np.array([50.0, 60, 80, 100])})
    np.testing.assert_allclose(res.x_continuous, [30.08465279, 34.42253481, 41.99631473, 48.41155815],
        rtol=1e-9)
    assert res.x.tolist() == [30, 34, 42, 48]
    np.testing.assert_allclose(res.fun, [1.212421424, 1.125557213, 0.9860448291, 0.8792368115], rtol=1e-9)
    res_n = sched.optimal_T({**TV1, "N": np.array([50, 60, 80, 100])})
    np.testing.assert_allclose(res_n.x_continuous, [34.42253481, 36.72974551, 40.54699002, 43.64728501],
                               rtol=1e-9)


def test_heat_map_of_T_star_matches_pointwise_calls():
    eps = np.array([5.0, 20.0, 80.0])[:, None]
    N = np.array([10, 50, 200])[None, :]
    grid = sched.optimal_T({**TV1, "eps": eps, "N": N})
    assert grid.x.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            single = sched.optimal_T({**TV1, "eps": float(eps[i, 0]), "N": int(N[0, j])})
            assert grid.x[i, j] == single.x


def test_nonconvex_example_still_has_a_unique_optimum():
    res = sched.optimal_T({**TV1, "beta": 10.0})
    assert res.x_continuous == pytest.approx(5.119851872, rel=1e-9) and res.x == 5


def test_optimal_T_against_exhaustive_search_on_random_settings():
    rng = np.random.default_rng(2024)
    checked = 0
    while checked < 40:
        s = {"eps": float(np.exp(rng.uniform(np.log(0.5), np.log(200)))),
            "delta": float(10 ** rng.uniform(-6, -0.5)),
             "C": float(rng.uniform(1, 50)), "m": int(rng.integers(10, 1000)), "N": int(rng.integers(2, 200)),
             "Theta": float(rng.uniform(0.1, 10)), "l": float(rng.uniform(0.01, 0.5)),
             "beta": float(rng.uniform(0.1, 10)), "rho": float(rng.uniform(0.05,
                 2)), "B": float(rng.uniform(1, 2)),
             "mu": float(rng.uniform(1, 40))}
        if not nb.CONTRACTION_P.evaluate(s).admissible:
            continue
        t_max = int(np.ceil(nb.T_THETA(s))) + 2
        if t_max > 200_000:
            continue
        fast, oracle = sched.optimal_T(s), sched.exhaustive_T(s, t_max)
        assert fast.x == oracle.x or fast.fun == pytest.approx(oracle.fun, rel=1e-12), s
        checked += 1


def test_variant_optima():
    assert sched.optimal_T(TV1, "regime_aware").x == sched.optimal_T(TV1).x
    res = sched.optimal_T(TV1, "thm1_noise")
    assert res.success and res.x == sched.exhaustive_T(TV1, 400, "thm1_noise").x


def test_optimal_T_reports_inadmissible_settings():
    with pytest.raises(DomainError, match="P"):
        sched.optimal_T({**TV1, "mu": 1.0})


def test_optimal_K_tv3_both_variants():
    res = sched.optimal_K(TV3)
    assert res.x == 11 and res.fun == pytest.approx(2.116850657, rel=1e-9)
    assert res.at_lower_edge and not res.at_upper_edge and res.evidence["first_feasible"] == 11
    two = sched.optimal_K(TV3, "two_sided")
    assert two.x == 50 and two.at_upper_edge and two.fun == pytest.approx(2.634997417, rel=1e-9)
    aware = sched.optimal_K(TV3, "regime_aware")
    assert aware.x == 13 and aware.fun == pytest.approx(2.390913949, rel=1e-9)


@pytest.mark.parametrize("eps, T, paper, two", [(6, 25, 11, 50), (6, 60, 32, 50), (10, 40, 12, 50),
                                                 (60, 25, 46, 50), (60, 150, 17, 50), (100, 300, 15, 50),
                                                 (60, 500, 50, 50)])
def test_optimal_K_robustness_table_F36(eps, T, paper, two):
    s = {**TV3, "eps": float(eps), "T": float(T)}
    assert sched.optimal_K(s).x == paper
    assert sched.optimal_K(s, "two_sided").x == two


def test_optimal_K_vectorised_and_exhaustive_agree():
    eps = np.array([6.0, 10.0, 60.0])
    T = np.array([25.0, 40.0, 150.0])
    res = sched.optimal_K({**TV3, "eps": eps, "T": T})
    assert res.x.tolist() == [11, 12, 17]
    for e, t, k in zip(eps, T, res.x, strict=True):
        values = [nb.K_BOUND.evaluate({**TV3, "eps": e, "T": t, "K": K}) for K in range(1, 51)]
        feasible = [(v.value, K) for K, v in zip(range(1, 51), values, strict=True) if v.admissible]
        assert min(feasible)[1] == k


def test_optimal_T_under_scheduling_F37():
    res = sched.optimal_T_k({**TV1, "K": 40}, T_max=200)
    assert res.x == 38 and res.at_lower_edge and res.fun == pytest.approx(1.071065193, rel=1e-9)


def test_joint_optimum_is_the_grid_minimum():
    joint = sched.optimal_TK(TV3, T_max=120)
    T = np.arange(1, 121, dtype=float)[:, None]
    K = np.arange(1, 51, dtype=float)[None, :]
    ev = nb.K_BOUND.evaluate(TV3, T=T, K=K)
    values = np.where(ev.admissible, ev.value, np.inf)
    i, j = np.unravel_index(np.argmin(values), values.shape)
    assert (joint.x["T"], joint.x["K"]) == (i + 1, j + 1) and joint.fun == values[i, j]
    assert joint.success and not joint.evidence["at_T_edge"] and not joint.at_upper_edge
    assert joint.to_dict()["T"] == joint.x["T"] and joint.to_dict()["K"] == joint.x["K"]


def test_joint_optimum_vectorises_over_settings():
    grid = sched.optimal_TK({**TV1, "eps": np.array([6.0, 60.0])}, T_max=200)
    for i, eps in enumerate((6.0, 60.0)):
        single = sched.optimal_TK({**TV1, "eps": eps}, T_max=200)
        assert (grid.x["T"][i], grid.x["K"][i]) == (single.x["T"], single.x["K"])
        assert grid.fun[i] == single.fun


def test_integer_search_primitives():
    def f(x):
        return (x - 3.4) ** 2

    def df(x):
        return 2 * (x - 3.4)

    res = unimodal_integer_min(f, df, 0.0, 1.0)  # bracket too small: expanded
    assert res.x == 3 and res.x_continuous == pytest.approx(3.4) and res.success
    grid = unimodal_integer_min(lambda x: (x - np.array([0.2, 7.6])) ** 2, lambda x: 2 * (x - np.array([0.2,
        7.6])),
                                0.0, 20.0)
    assert grid.x.tolist() == [1, 8] and grid.at_lower_edge.tolist() == [True, False]
    ex = exhaustive_integer_min(lambda x: ((x - 5.0) ** 2, x != 5), 1, 9)
    assert ex.x in (4, 6) and ex.x == 4
    with pytest.raises(InfeasibleError):
        exhaustive_integer_min(lambda x: (x, np.zeros_like(x, dtype=bool)), 1, 5)


def test_plan_answers_the_designer_question():
    p = sched.plan({**TV1, "eps": 6.0, "K": 20, "T": None}).data
    assert p["T_opt"] == 5 and p["T"] == 5.0 and p["T_source"] == "T_opt"
    assert p["sigma_uplink"] == pytest.approx(0.2071674307, rel=1e-9)
    assert p["K_opt"] == 35 and p["K_opt_at_domain_edge"] and not p["K_opt_is_N"]
    assert any("classic Gaussian" in w for w in p["warnings"]) and any("(60)" in w for w in p["warnings"])
    with_T = sched.plan({**TV1, "eps": 6.0, "K": 20, "T": 25}).data
    assert with_T["T_source"] == "config" and with_T["bound_k_at_T"] == pytest.approx(2.542425237, rel=1e-9)
    assert with_T["K_opt"] == 11
