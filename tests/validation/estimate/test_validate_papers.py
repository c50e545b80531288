"""The validation entries of PADPFL, DP-PFL and WPFL: their new estimators against exact constants, their
bounds against a direct evaluation of the papers' theorems, and ``fedbound validate`` end to end.

Oracles are independent of the estimators: on ``synthetic_ridge`` every client's Hessian is
``Xa_i^T Xa_i / n_i`` and every sample's ``xa xa^T`` (numpy, ``eigvalsh``), the optima are least-squares
solutions (``numpy.linalg.lstsq``) and the gradients come from
:func:`fedbound.training.data.convex_objective`;
on ``synthetic_logistic`` the Hessians are the closed form of ``tests/validation/estimate/test_estimate.py``.
Stated tolerances: 1e-6 relative (float64, dense Hessians below ``DENSE_MAX`` parameters), 1e-5 for the meta
objective's gap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fedbound.cli import main
from fedbound.registry import papers
from fedbound.tests._validation_configs import write_config
from fedbound.tests.validation.estimate.test_estimate import _logistic_hessian
from fedbound.training.data import convex_objective
from fedbound.validation import estimate as est
from fedbound.validation.estimate import constants as cn
from fedbound.validation.estimate import entry

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RTOL = 1e-6


def _clients(problem):
    ds, parts = problem.setup.dataset, problem.setup.parts
    return [(ds.x_train[p].astype(np.float64), ds.y_train[p].astype(np.float64)) for p in parts]


def _xa(x):
    return np.hstack([x, np.ones((len(x), 1))])


@pytest.fixture(scope="module")
def ridge():
    """DP-PFL's ridge example: its problem, a 3-round trajectory, every quantity, the clients' data."""
    problem = est.load_problem("dppfl", EXAMPLES / "dppfl_ridge.toml")
    points = est.trajectory(problem, 3)
    _, _, quantities = est.measure(problem, points, cache=None, needed=est.COSTLY)
    return problem, points, quantities, _clients(problem)


def _spaced(points):
    return [points[i] for i in est._spaced(len(points), est.HESSIAN_POINTS)]


def test_client_curvature_matches_the_exact_ridge_hessians(ridge):
    problem, _, q, clients = ridge
    hess = [_xa(x).T @ _xa(x) / len(x) for x, _ in clients]
    eig = [np.linalg.eigvalsh(h) for h in hess]
    assert q["client_smoothness"].value == pytest.approx(max(e[-1] for e in eig), rel=RTOL)
    assert q["client_strong_convexity"].value == pytest.approx(min(e[0] for e in eig), rel=RTOL)
    assert q["lower_curvature"].value == 0.0
    assert q["hessian_lipschitz"].value == pytest.approx(0.0, abs=1e-9)  # constant Hessians
    p = np.array([len(x) for x, _ in clients], dtype=float)
    p /= p.sum()
    mean = sum(w * h for w, h in zip(p, hess, strict=True))
    gamma = p @ np.array([np.abs(np.linalg.eigvalsh(h - mean)).max() for h in hess])
    assert q["hessian_dissimilarity"].value == pytest.approx(gamma, rel=RTOL)


def test_per_sample_spreads_match_numpy(ridge):
    problem, points, q, clients = ridge
    sigma_h = 0.0
    for x, _ in clients:
        outer = np.einsum("si,sj->sij", _xa(x), _xa(x))
        dev = np.abs(np.linalg.eigvalsh(outer - outer.mean(0))).max(1)
        sigma_h = max(sigma_h, math.sqrt(np.mean(dev ** 2)))
    assert q["sample_hessian_std"].value == pytest.approx(sigma_h, rel=RTOL)
    sigma_g = 0.0
    for w in points:
        for x, y in clients:
            g = np.stack([convex_objective("ridge", x[s:s + 1], y[s:s + 1], 0.0, w.numpy())[1]
                          for s in range(len(x))])
            sigma_g = max(sigma_g, math.sqrt(((g - g.mean(0)) ** 2).sum(1).mean()))
    assert q["sample_gradient_std"].value == pytest.approx(sigma_g, rel=RTOL)


def test_gradient_constants_match_numpy(ridge):
    problem, points, q, clients = ridge
    p = np.array([len(x) for x, _ in clients], dtype=float)
    p /= p.sum()
    grads = [np.stack([convex_objective("ridge", x, y, 0.0, w.numpy())[1] for x, y in clients])
             for w in points]
    norms = [np.linalg.norm(g, axis=1) for g in grads]
    assert q["client_gradient_bound"].value == pytest.approx(max(n.max() for n in norms), rel=RTOL)
    a = max(p @ n / np.linalg.norm(p @ g) for n, g in zip(norms, grads, strict=True))
    assert q["mean_dissimilarity"].value == pytest.approx(a, rel=RTOL) and a >= 1
    eps_i = np.max([np.linalg.norm(g - p @ g, axis=1) for g in grads], axis=0)
    assert q["weighted_divergence"].value == pytest.approx(p @ eps_i, rel=RTOL)


def test_optima_distances_match_least_squares(ridge):
    problem, points, q, clients = ridge
    x = np.concatenate([c[0] for c in clients])
    y = np.concatenate([c[1] for c in clients])
    star = np.linalg.lstsq(_xa(x), y, rcond=None)[0]
    own = [np.linalg.lstsq(_xa(xc), yc, rcond=None)[0] for xc, yc in clients]
    assert q["initial_distance"].value == pytest.approx(float(((points[0].numpy() - star) ** 2).sum()),
                                                        rel=RTOL)
    assert q["optimum_spread"].value == pytest.approx(max(np.linalg.norm(o - star) for o in own), rel=RTOL)


def test_meta_gap_matches_a_direct_minimisation(ridge):
    """Delta0 = G(w0) - G* with G(w) = sum_i p_i F_i(w - eta grad F_i(w)) (DP-PFL eq. (5)), G minimised
    here by scipy BFGS on numpy values (numerical gradients)."""
    from scipy.optimize import minimize

    problem, points, q, clients = ridge
    eta = float(problem.setting["eta"])
    p = np.array([len(x) for x, _ in clients], dtype=float)
    p /= p.sum()

    def meta(w):
        def own(x, y, v):
            return convex_objective("ridge", x, y, 0.0, v)

        return sum(pi * own(x, y, w - eta * own(x, y, w)[1])[0]
                   for pi, (x, y) in zip(p, clients, strict=True))

    w0 = points[0].numpy()
    best = minimize(meta, w0, method="BFGS", options={"gtol": 1e-12}).fun
    assert q["meta_initial_gap"].value == pytest.approx(meta(w0) - best, rel=1e-5)


def test_hessian_lipschitz_and_client_smoothness_on_logistic(tmp_path):
    """Non-constant Hessians: the finite-difference rho and the client smoothness against the closed-form
    logistic Hessians at the same points; the power-iteration path (forced) agrees with the dense one."""
    problem = est.load_problem("nbafl", write_config(tmp_path, "synthetic_logistic"))
    points = est.trajectory(problem, 2)
    obj = problem.objective
    ds, parts = problem.setup.dataset, problem.setup.parts
    l2 = problem.train["weight_decay"]
    hess = [[_logistic_hessian(ds.x_train[p], ds.y_train[p], l2, w.numpy()) for p in parts] for w in points]
    rho = max(np.abs(np.linalg.eigvalsh(ha - hb)).max() / float(np.linalg.norm(a - b))
              for a, b, hs_a, hs_b in zip(points[:-1], points[1:], hess[:-1], hess[1:], strict=True)
              for ha, hb in zip(hs_a, hs_b, strict=True))
    assert cn.hessian_lipschitz(obj, points).value == pytest.approx(rho, rel=RTOL)
    top = max(np.linalg.eigvalsh(h)[-1] for hs in hess for h in hs)
    assert cn.client_smoothness(obj, points).value == pytest.approx(top, rel=RTOL)
    apply = lambda v: cn.client_hvp(obj, points[-1], v)  # noqa: E731
    dense = cn.dense_operators(apply, len(parts), points[0].numel(), obj.dtype)
    power = cn.batched_top_eigenvalue(apply, len(parts), points[0].numel(), obj.dtype, iters=1000, tol=1e-13)
    assert np.abs(power) == pytest.approx(np.abs(np.linalg.eigvalsh(dense)).max(1), rel=1e-6)


# ---------------------------------------------------------------------------------------------------------
# Each entry's terms against the paper's theorem evaluated directly
# ---------------------------------------------------------------------------------------------------------
T_POINTS = np.array([2.0, 5.0, 10.0])


def test_padpfl_terms_are_theorem2(tmp_path):
    from fedbound.bounds import adaptive as ba
    from fedbound.validation.estimate.validate_adaptive import VALIDATION

    s = {"N": 4, "R": 1, "C": 5.0, "eps": 20.0, "delta": 0.01, "mu": 4.0, "sizes": "60,60", "parts": "2,2",
         "ratios": "1,1", "Theta": 0.3, "A": 1.3, "gamma": 0.1, "rho": 0.6, "beta": 0.2, "rho_minus": 0.0}
    terms = VALIDATION.terms(s, "T", T_POINTS, "paper")
    values = {"eps": 20.0, "R": 1, "Theta": 0.3, "A": 1.3, "gamma": 0.1, "rho": 0.6, "beta": 0.2, "B": 5.0,
              "c": math.sqrt(2 * math.log(1.25 / 0.01)), "mu": 4.0, "rho_minus": 0.0, "p_max": 0.25,
              "S2": 0.25, "m_min": 60, "m_max": 60, "N": 4}
    direct = np.array([float(ba.BOUND.evaluate({**values, "T": t}).value) for t in T_POINTS])
    assert terms["optimisation"] + terms["noise"] == pytest.approx(direct, rel=1e-12)
    assert terms["optimisation"] == pytest.approx(0.3 + T_POINTS * float(ba.K2(values)), rel=1e-12)
    assert VALIDATION.check(s) == []
    bad = VALIDATION.check({**s, "ratios": "1,3"})
    assert len(bad) == 1 and "impact factors" in bad[0] and "eq. (1)" in bad[0]
    assert "mu_bar" in VALIDATION.check({**s, "rho_minus": 5.0})[0]


def test_dppfl_terms_are_theorem2():
    from fedbound.bounds import dppfl as dp
    from fedbound.validation.estimate.validate_dppfl import VALIDATION

    s = {"N": 4, "T": 10, "tau0": 1, "eta": 0.1, "beta": 0.5, "C": 1.0, "eps": 50.0, "delta": 1e-3,
         "q_in": 1.0, "q_out": 1.0, "S": 5, "m": 30, "bound": "convex", "L": 1.0, "rho": 0.0, "B": 1.6,
         "lam": 1.6,
         "l": 0.12, "eps_het": 0.27, "gamma_het": 0.14, "sigma_G": 3.6, "sigma_H": 1.7, "Delta0": 2.3}
    terms = VALIDATION.terms(s, "T", T_POINTS, "paper")
    analysis = {k: s[k] for k in ("tau0", "eta", "beta", "C", "S", "m", "L", "rho", "B", "lam", "l",
                                  "eps_het", "gamma_het", "sigma_G", "sigma_H", "Delta0")}
    for t, opt, err in zip(T_POINTS, terms["optimisation"], terms["error"], strict=True):
        sigma = dp.noise(s, int(t), "paper")["inner"] / s["C"]
        total = float(dp.CONVEX_BOUND.evaluate({**analysis, "T": t, "sigma": sigma}).value)
        zeta = float(dp.CONTRACTION.evaluate({**analysis, "sigma": sigma}).value)
        assert opt + err == pytest.approx(total, rel=1e-9)
        assert opt == pytest.approx(zeta ** t * s["Delta0"], rel=1e-9)
    assert VALIDATION.check(s) == []
    assert "Theorem 3" in VALIDATION.check({**s, "bound": "nonconvex"})[0]
    assert "eta" in " ".join(VALIDATION.check({**s, "eta": 2.0}))


def test_wpfl_terms_are_theorem2_times_half_L():
    from fedbound.bounds import wpfl as wb
    from fedbound.validation.estimate.validate_wpfl import VALIDATION
    from fedbound.validation.recipes.wpfl import full_setting, sigma_for, wpfl_schedule

    s = {**papers()["wpfl"].load_setting(EXAMPLES / "wpfl_ridge.toml").values,
         "mu": 0.12, "L": 1.04, "G0": 1.6, "M": 0.5, "D_global": 2.0}
    terms = VALIDATION.terms(s, "T", T_POINTS, "paper")
    eps_f = float(wb.EPS_F(eta_F=0.05, mu=0.12, L=1.04, phi1=0.1, phi2=5e-4, vphi1=5e-4))
    assert 0 < eps_f < 1
    for t, opt, noise in zip(T_POINTS, terms["optimisation"], terms["noise"], strict=True):
        full = full_setting({**s, "T": int(t)})
        sched = wpfl_schedule(full, sigma_for(full, "paper"))
        r = sched.rounds
        gamma = float(np.max(sched.Gamma))
        assert opt == pytest.approx(0.52 * eps_f ** r * 2.0, rel=1e-9)
        assert noise == pytest.approx(0.52 * (1 - eps_f ** r) / (1 - eps_f) * gamma, rel=1e-9)
    assert VALIDATION.check(s) == []
    assert "eps_F" in VALIDATION.check({**s, "eta_F": 1.0})[0]


# ---------------------------------------------------------------------------------------------------------
# fedbound validate end to end, for every paper with an entry and a synthetic example
# ---------------------------------------------------------------------------------------------------------
def _synthetic_example(name: str) -> Path | None:
    for path in sorted(EXAMPLES.glob(f"{name}_*.toml")):
        if 'dataset = "synthetic_' in path.read_text():
            return path
    return None


@pytest.mark.parametrize("name", [n for n, p in papers().items() if p.validation is not None])
def test_validate_writes_the_verdicts_for_every_entry(name, tmp_path, capsys):
    example = _synthetic_example(name)
    assert example is not None, f"add an examples/{name}_*.toml on a synthetic task (seconds to validate)"
    out = tmp_path / "out"
    assert main(["validate", name, str(example), "--vs", "T", "--values", "1,2,3", "--seeds", "2", "--rounds",
                 "2", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "holds:" in text and "rank:" in text
    for suffix in ("csv", "json", "png"):
        assert (out / f"validation.{suffix}").stat().st_size > 0
    data = json.loads((out / "validation.json").read_text())
    assert set(data["verdicts"]) == {"holds", "optimum", "rank", "calibrated"}
    spec = entry(papers()[name])
    assert set(data["constants"]["constants"]) == set(spec.constants)
    assert data["verdicts"]["holds"]["status"] in ("holds", "violated", "not applicable")


def test_write_leaves_out_the_internal_constants_and_plan_reads_the_rest(tmp_path, capsys):
    """WPFL's ||w0 - w*||^2 has no config key: --write writes mu, L, G0, M and a config that still loads."""
    out = tmp_path / "measured.toml"
    args = ["estimate", "wpfl", str(EXAMPLES / "wpfl_ridge.toml"), "--rounds", "2", "--write", str(out)]
    assert main(args) == 0
    text = out.read_text()
    assert "D_global" not in text and text.startswith("# fedbound-measured: mu L G0 M\n")
    setting = papers()["wpfl"].load_setting(out)
    assert set(setting.measured) == {"mu", "L", "G0", "M"}
