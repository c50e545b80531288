"""PADPFL's certified recommendation (issue 23, items 4, 5, 8): the joint (T, mu) optimum of the bound under
the deployed noise against a closed form written here from Lemma 2 (eq. (23)), the privacy spent over the
whole run against dp-accounting's PLD, vacuous designs flagged, and ``plan --check`` on the examples and on
20 seeded random settings."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from fedbound import registry
from fedbound.scheduling import adaptive as sa
from fedbound.tests._certified import exact_gaussian_z

ROOT = Path(__file__).resolve().parents[1]


def _setting(name: str) -> dict:
    import tomllib

    paper = registry.get("adaptive")
    raw = tomllib.loads((ROOT / "examples" / name).read_text())["adaptive"]
    values = paper.config_section.validate(raw, name)
    return {**paper.defaults, **{k: v for k, v in values.items() if v is not None}}


def _plan(s: dict, check: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sa.plan(s, check=check)


def _closed_form_joint(s: dict, p: np.ndarray, m_min: float, T_max: int = 3000):
    """min over T of Theta + T min_mu g(mu; T), with g = beta^2 K x^2 - a x + e1 beta + rho e2 / 2 in
    x = 1/mu (Lemma 2, eq. (23) with rho_minus = 0): mu* = 2 beta^2 K / a, a = beta^2 (1 - A gamma) -
    e1 beta rho A (1 + gamma); for a <= 0 the searched domain's top mu = 1e6."""
    A, g, rho, beta, C = s["A"], s["gamma"], s["rho"], s["beta"], s["C"]
    z = exact_gaussian_z(s["eps"], s["delta"])
    Ts = np.arange(int(s["R"]), T_max + 1, dtype=float)
    sigma = np.maximum(np.sqrt(Ts) * z * 2 * C * p.max() / m_min,
                       math.sqrt(s["R"]) * z * 2 * C / m_min * math.sqrt(np.sum(p**2)))
    n = p.size
    e1, e2 = sigma * math.sqrt(2 * n / math.pi), sigma**2 * n
    K = rho * A * (1 + g) + rho * A * A * (1 + g) ** 2 / 2
    a = beta**2 * (1 - A * g) - e1 * beta * rho * A * (1 + g)
    top = 1e6
    inc = np.where(a > 0, e1 * beta + rho * e2 / 2 - a**2 / (4 * beta**2 * K),
                   e1 * beta + rho * e2 / 2 - a / top + beta**2 * K / top**2)
    f = s["Theta"] + Ts * inc
    i = int(np.argmin(f))
    return int(Ts[i]), 2 * beta**2 * K / a[i], float(f[i])


def _bound_at(s: dict, p: np.ndarray, m_min: float, T: int, mu: float) -> float:
    A, g, rho, beta, C = s["A"], s["gamma"], s["rho"], s["beta"], s["C"]
    z = exact_gaussian_z(s["eps"], s["delta"])
    sigma = max(math.sqrt(T) * z * 2 * C * p.max() / m_min,
                math.sqrt(s["R"]) * z * 2 * C / m_min * math.sqrt(np.sum(p**2)))
    e1, e2 = sigma * math.sqrt(2 * p.size / math.pi), sigma**2 * p.size
    lam2 = -1 / mu + A / mu * (g + rho * (1 + g) / mu) + rho * A * A * (1 + g) ** 2 / (2 * mu * mu)
    lam1 = 1 + rho * A * (1 + g) / mu
    return s["Theta"] + T * (lam2 * beta**2 + lam1 * e1 * beta + rho / 2 * e2)


def test_joint_T_mu_optimum_of_the_s3_example_matches_the_closed_form():  # issue 23 item 4
    s = _setting("adaptive_s3_plan.toml")
    plan = _plan(s)
    p = np.asarray(plan.data["p_planned"], dtype=float)
    T, mu, bound = _closed_form_joint(s, p, 50.0)
    rec = plan.recommendation
    assert rec.T == T and rec.extra["mu"] == pytest.approx(mu, rel=1e-6)
    assert rec.bound == pytest.approx(bound, rel=1e-10)
    assert bound == pytest.approx(2.6869, abs=1e-4)
    # Lemma 2's mu* = 2K/(1 - A gamma) = 4.98 minimises lambda_2 only: the bound there is higher
    at_lemma2_mu = _bound_at(s, p, 50.0, T, 4.98)
    assert at_lemma2_mu == pytest.approx(2.7033, abs=1e-4) and at_lemma2_mu > rec.bound
    assert plan.certificate.passed and plan.certificate.check.points > 10_000


def test_privacy_spent_over_the_whole_run_against_pld():  # issue 23 item 5
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    s = _setting("adaptive_s3_plan.toml")
    plan = _plan(s)
    d, T = plan.data, plan.recommendation.T
    p = np.asarray(d["p_planned"], dtype=float)
    m_min, C = 50.0, s["C"]
    z_up = d["sigma_client_tight"] * m_min / (2 * C)
    eff = math.hypot(d["sigma_server_tight"], d["sigma_client_tight"] * math.sqrt(np.sum(p**2)))
    z_down = eff / (2 * C * p.max() / m_min)

    def pld_eps(z: float, k: int) -> float:
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dp_accounting.GaussianDpEvent(z), k)
        return acc.get_epsilon(s["delta"])

    up, down = pld_eps(z_up, int(s["R"])), pld_eps(z_down, T)
    assert (up, down) == (pytest.approx(20.00, abs=0.01), pytest.approx(1.49, abs=0.01))
    spent = d["eps_spent_tight_sigma"]
    assert spent["uplink"] == pytest.approx(up, abs=2e-3)
    assert spent["downlink"] == pytest.approx(down, abs=2e-3)
    stages = {c.stage.split()[0]: c for c in plan.certificate.privacy}
    assert stages["uplink"].label == "tight" and stages["downlink"].label == "valid"
    assert stages["downlink"].eps_achieved == pytest.approx(down, abs=2e-3)


def test_vacuous_everywhere_is_said_first():  # issue 23 item 8
    from fedbound.commands.papers import build_plan
    from fedbound.planning import example_overrides

    plan = build_plan("adaptive", None, example_overrides(registry.get("adaptive")))
    s = {**registry.get("adaptive").defaults, **registry.get("adaptive").example}
    p = np.repeat([0.0, 1 / 60, 1 / 30], 20)
    _, _, least = _closed_form_joint(s, p, 150.0, 2000)
    assert least > s["Theta"]  # the closed form: no (T, mu) gives a bound below the initial gap
    d = plan.to_dict()
    assert d["certificate"]["vacuous"] is True and d["vacuous"] is True
    assert "vacuous" in plan.warnings[0] and plan.recommendation.why.startswith("VACUOUS")
    assert plan.recommendation.bound == pytest.approx(least, rel=1e-9)
    json.dumps(d)
    informative = _plan({**s, "ratios": "1,1,1", "eps": 20.0})  # a larger budget: the bound says something
    _, _, least = _closed_form_joint({**s, "eps": 20.0}, np.full(60, 1 / 60), 150.0)
    assert 0 < least < s["Theta"] and not informative.certificate.vacuous and informative.certificate.passed
    assert informative.recommendation.bound == pytest.approx(least, rel=1e-9)


@pytest.mark.parametrize("name", ["adaptive_s3_plan.toml", "adaptive_mnist.toml", "adaptive_logistic.toml"])
def test_plan_check_passes_on_the_examples(name):
    from typer.testing import CliRunner

    from fedbound.cli import app

    out = CliRunner().invoke(app, ["plan", "adaptive", str(ROOT / "examples" / name), "--check", "--json"])
    assert out.exit_code == 0, out.output
    cert = json.loads(out.stdout)["certificate"]
    assert cert["passed"] and cert["check"]["agrees"] and all(p["valid"] for p in cert["privacy"])


def test_plan_certificate_passes_on_20_random_settings():
    rng = np.random.default_rng(23)
    base = dict(registry.get("adaptive").defaults)
    for _ in range(20):
        k = int(rng.integers(1, 4))
        parts = rng.integers(1, 15, k)
        s = {**base, "N": int(parts.sum()), "R": int(rng.integers(1, 4)), "C": float(rng.uniform(5, 20)),
             "eps": float(np.exp(rng.uniform(0, math.log(30)))), "delta": float(10 ** rng.uniform(-5, -2)),
             "parts": ",".join(map(str, parts)), "ratios": ",".join(map(str, rng.integers(1, 5, k))),
             "m": int(rng.integers(20, 300)), "A": float(rng.uniform(1.0, 1.5)),
             "gamma": float(rng.uniform(0, 0.3)), "rho": float(rng.uniform(0.2, 2))}
        plan = _plan(s)
        cert = plan.certificate
        if plan.optima["T_recommended"].evidence["mu_at_edge"]:  # no (T, mu) optimum: never certified
            assert not cert.passed and cert.check.fun < plan.recommendation.bound, cert.line()
        else:
            assert cert.passed, cert.line()
        p = np.repeat(np.asarray(s["ratios"].split(","), float), parts)
        p = p / p.sum()
        T, _, least = _closed_form_joint(s, p, float(s["m"]), T_max=max(3000, 2 * plan.recommendation.T))
        assert plan.optima["T_recommended"].fun == pytest.approx(least, rel=1e-9, abs=1e-12)
        assert cert.vacuous == (plan.recommendation.bound >= s["Theta"])


def test_bounds_mu_with_nonconvex_losses_against_a_dense_grid():  # rho_minus > 0: no closed form
    s = {**registry.get("adaptive").defaults, "rho_minus": 0.5, "beta": 1.0}
    e1, e2 = np.array([0.01, 0.05, 0.2]), np.array([1e-4, 3e-3, 0.04])
    mu, g, edge = sa.best_mu_for_noise(s, e1, e2)
    A, gam, rho = s["A"], s["gamma"], s["rho"]
    grid = 0.5 + np.geomspace(1e-3, 1e6, 200_001)[:, None]
    mb = grid - 0.5
    lam2 = -1 / grid + A / grid * (gam + rho * (1 + gam) / mb) + rho * A * A * (1 + gam) ** 2 / (2 * mb * mb)
    lam1 = 1 + rho * A * (1 + gam) / mb
    vals = lam2 + lam1 * e1 + rho / 2 * e2
    assert np.all(g <= vals.min(axis=0) + 1e-12) and np.all(g >= vals.min(axis=0) - 1e-6)
    assert not edge.any()


def test_a_T_the_setting_gives_is_held_and_mu_optimised_there():
    s = {**_setting("adaptive_s3_plan.toml"), "T": 30}
    plan = _plan(s)
    p = np.asarray(plan.data["p_planned"], dtype=float)
    mus = np.geomspace(0.5, 500, 20001)
    best = min(_bound_at(s, p, 50.0, 30, mu) for mu in mus[::50])  # a coarse independent scan ...
    assert plan.recommendation.T == 30 and "held" in plan.certificate.domain["T"]
    assert plan.recommendation.bound <= best + 1e-12 and plan.certificate.passed  # ... never below it


# --- issue 23, remaining item 1: the impact factors p jointly with (T, mu) (helper h23e) ------------------
def _joint_setting(**over) -> dict:
    """Three groups (2, 3, 4 clients of 40, 60, 100 samples) whose bounds make the bound's argmin over p
    non-uniform: group 1 holds >= 0.5 of the weight, group 3 <= 0.3."""
    return {**registry.get("adaptive").defaults, "N": 9, "R": 1, "C": 5.0, "eps": 8.0, "delta": 1e-3,
            "parts": "2,3,4", "sizes": "40,60,100", "ratios": "1,1,1", "weights": "planned",
            "group_min": "0.5,0,0", "group_max": "1,1,0.3", **over}


def _p_grid(n: np.ndarray, low: np.ndarray, high: np.ndarray, steps: int) -> np.ndarray:
    """Per-client group weights q (rows) on a grid of group totals of the simplex, inside the boxes."""
    if n.size == 2:
        g1 = np.linspace(0.0, 1.0, steps + 1)
        g = np.stack([g1, 1 - g1], axis=1)
    else:
        g = np.array([(a, b, steps - a - b) for a in range(steps + 1) for b in range(steps + 1 - a)]) / steps
    q = g / n
    return q[np.all((q >= low - 1e-12) & (q <= high + 1e-12), axis=1)]


def _bounds_over(s: dict, q: np.ndarray, n: np.ndarray, m_min: float, T: np.ndarray, mu: np.ndarray):
    """Theta + T (lambda_2 beta^2 + lambda_1 E||n|| beta + lambda_0 E||n||^2) (seed 001 Lemma 2 eq. (23),
    eq. (48)) with the deployed broadcast std max(sqrt(T) z 2C max p/min m, sqrt(R) z 2C ||p||/min m),
    written here from the paper; broadcasts over the rows of q, T and mu."""
    A, g, rho, beta, C = s["A"], s["gamma"], s["rho"], s["beta"], s["C"]
    z = exact_gaussian_z(s["eps"], s["delta"])
    pmax, norm2 = q.max(axis=-1), np.sqrt((n * q**2).sum(axis=-1))
    sigma = np.maximum(np.sqrt(T) * z * 2 * C * pmax / m_min, math.sqrt(s["R"]) * z * 2 * C / m_min * norm2)
    N = int(n.sum())
    e1, e2 = sigma * math.sqrt(2 * N / math.pi), sigma**2 * N
    lam2 = -1 / mu + A / mu * (g + rho * (1 + g) / mu) + rho * A * A * (1 + g) ** 2 / (2 * mu * mu)
    lam1 = 1 + rho * A * (1 + g) / mu
    return s["Theta"] + T * (lam2 * beta**2 + lam1 * e1 * beta + rho / 2 * e2)


@pytest.mark.parametrize("over", [{}, {"group_min": "0,0,0", "group_max": "0.2,1,1", "floor": 0.6},
                                  {"parts": "3,6", "sizes": "50,80", "ratios": "1,1", "group_min": "0.6,0",
                                   "group_max": "1,1", "eps": 3.0}])
def test_impact_factors_are_jointly_optimal_with_T_and_mu(over):
    """The bound depends on p only through the broadcast std, and the plan's p (water-filling) minimises it
    at every (T, mu): brute force over a dense grid of p on the feasible set at several (T, mu), then over
    p x every integer T x (mu in closed form, checked on a log grid), finds nothing below the plan's
    (T, mu, p)."""
    s = _joint_setting(**over)
    plan = _plan(s)
    rec = plan.recommendation
    n = np.array([int(x) for x in s["parts"].split(",")])
    sizes = np.array([float(x) for x in s["sizes"].split(",")])
    m_min = float(sizes.min())
    gmin = np.array([float(x) for x in s["group_min"].split(",")])
    gmax = np.array([float(x) for x in s["group_max"].split(",")])
    low = np.maximum(gmin / n, float(s.get("floor", 0.0)) / n.sum())
    high = np.minimum(gmax / n, 1.0)
    starts = np.cumsum([0, *n[:-1]])
    q_plan = np.asarray(rec.extra["p"], dtype=float)[starts]
    assert np.all(q_plan >= low - 1e-12) and np.all(q_plan <= high + 1e-12)
    assert float(n @ q_plan) == pytest.approx(1.0, abs=1e-12)
    assert not np.allclose(q_plan, 1 / n.sum())  # the constraints bind: a real test of the p search
    grid = _p_grid(n, low, high, 600 if n.size == 3 else 4000)
    assert grid.shape[0] > 200
    # (a) at fixed (T, mu): no grid p beats the plan's p; the grid's best is within its resolution
    for T in (1, 7, rec.T, 5 * rec.T):
        for mu in (2.0, rec.extra["mu"], 60.0):
            at_plan = float(_bounds_over(s, q_plan, n, m_min, T, mu))
            vals = _bounds_over(s, grid, n, m_min, T, mu)
            assert vals.min() >= at_plan - 1e-12 * abs(at_plan), (T, mu)
            assert vals.min() - at_plan <= 2e-2 * abs(at_plan - s["Theta"]) + 1e-12, (T, mu)
    # (b) jointly: every grid p x every integer T in 1..4 T_rec x the bound's mu at (p, T)
    Ts = np.arange(1, 4 * rec.T + 40, dtype=float)
    A, g, rho, beta = s["A"], s["gamma"], s["rho"], s["beta"]
    K = rho * A * (1 + g) + rho * A * A * (1 + g) ** 2 / 2
    z = exact_gaussian_z(s["eps"], s["delta"])
    sigma = np.maximum(np.sqrt(Ts)[None, :] * z * 2 * s["C"] * grid.max(axis=1)[:, None] / m_min,
                       z * 2 * s["C"] / m_min * np.sqrt((n * grid**2).sum(axis=1))[:, None]
                       * math.sqrt(s["R"]))
    a = beta**2 * (1 - A * g) - sigma * math.sqrt(2 * n.sum() / math.pi) * beta * rho * A * (1 + g)
    mu_best = np.clip(2 * beta**2 * K / np.where(a > 0, a, 1e-300), 1e-3, 1e6)  # x = 1/mu: a quadratic
    joint = _bounds_over(s, grid[:, None, :], n, m_min, Ts[None, :], mu_best)
    mus = np.geomspace(1e-3, 1e6, 400)  # the closed form for mu is right: a log grid never beats it
    i, j = np.unravel_index(np.argmin(joint), joint.shape)
    on_grid = _bounds_over(s, grid[i], n, m_min, Ts[j], mus)
    assert on_grid.min() >= joint[i, j] - 1e-12 * abs(joint[i, j])
    assert joint.min() >= rec.bound - 1e-9 * abs(rec.bound)
    assert joint.min() - rec.bound <= 2e-2 * abs(rec.bound - s["Theta"]) + 1e-12
    assert rec.bound == pytest.approx(float(_bounds_over(s, q_plan, n, m_min, rec.T, rec.extra["mu"])),
                                      rel=1e-10)
    assert j + 1 < Ts.size - 1  # the T range reaches past where the bound turned
    # the certificate says how p was chosen
    assert "water-filling" in plan.certificate.domain["p"] and "water-filling" in plan.certificate.search


def test_water_filling_matches_the_cvxpy_program_without_quality():
    """Without quality scores the program minimises the same noise; its optimum value equals the water-filling
    point's at every T (the argmin of the bound is the same at every T), and with quality it differs."""
    s = _joint_setting()
    for T in (1.0, 30.0, 3000.0):
        prob = sa.WeightProblem((2, 3, 4), (40, 60, 100), T=T, R=1, group_min=(0.5, 0, 0),
                                group_max=(1, 1, 0.3))
        wf, cv = sa.bound_optimal_impact_factors(prob), sa.optimal_impact_factors(prob)
        assert wf.success and wf.fun <= cv.fun + 1e-7
        assert cv.fun <= wf.fun + 1e-6
    q = sa.planned_impact_factors(s).evidence["per_group"]
    np.testing.assert_allclose(q, [0.25, 0.5 / 7, 0.5 / 7], rtol=1e-12)  # 2 x 0.25, then 7 clients share 0.5
    prio = sa.plan({**s, "weights": "priority", "scores": "0,1,2", "quality_weight": 0.5})
    assert "priority" in prio.certificate.domain["p"] and "held" in prio.certificate.domain["p"]
    assert prio.recommendation.bound > _plan(s).recommendation.bound  # quality costs bound
