"""``fedbound estimate``: every estimator against the exact constants of the synthetic convex tasks.

Oracles are independent of the estimators: :func:`fedbound.training.data.convex_constants` (closed-form
eigenvalues, Newton's method) and numpy gradients from :func:`fedbound.training.data.convex_objective` at
the same trajectory points.  Stated tolerances: ridge smoothness, strong convexity (both tasks), F*, Theta,
beta, B and xi-bar to 1e-6 relative (float64, power iteration / Lanczos to 1e-10); logistic smoothness to 1e-6
relative against the exact Hessian's top eigenvalue at the same points (numpy), and below the exact supremum.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedbound.cli import main
from fedbound.tests._validation_configs import TASKS
from fedbound.tests._validation_configs import write_config as config
from fedbound.training.data import convex_constants, convex_objective
from fedbound.validation import estimate as est
from fedbound.validation.estimate import constants as cn


@pytest.fixture(scope="module", params=TASKS)
def measured(request, tmp_path_factory):
    """A problem, its trajectory, the estimates and the exact constants (numpy oracle) of one task."""
    path = config(tmp_path_factory.mktemp(request.param), request.param)
    problem = est.load_problem("nbafl", path)
    points = est.trajectory(problem, 4)
    minimum, f0, quantities = est.measure(problem, points, cache=None)
    ds, parts = problem.setup.dataset, problem.setup.parts
    x = np.concatenate([ds.x_train[p] for p in parts])
    y = np.concatenate([ds.y_train[p] for p in parts])
    kind = ds.meta["kind"]
    exact = convex_constants(kind, x, y, problem.train["weight_decay"])
    clients = [(ds.x_train[p], ds.y_train[p]) for p in parts]
    return problem, points, minimum, f0, quantities, exact, kind, clients, (x, y)


def _numpy_grads(kind, clients, l2, w):
    return np.stack([convex_objective(kind, xc, yc, l2, w.numpy())[1] for xc, yc in clients])


def _logistic_hessian(x, y, l2, theta):
    """The exact Hessian of the 2-class softmax objective in the logreg layout (weight rows, then bias)."""
    n, d = x.shape
    xa = np.hstack([x.astype(np.float64), np.ones((n, 1))])
    z = xa @ np.hstack([theta[: 2 * d].reshape(2, d), theta[2 * d:].reshape(2, 1)]).T
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    s = np.einsum("jc,ce->jce", p, np.eye(2)) - np.einsum("jc,je->jce", p, p)
    blocks = np.einsum("jce,jk,jl->ckel", s, xa, xa).reshape(2 * (d + 1), 2 * (d + 1)) / n
    perm = np.concatenate([np.arange(d), [2 * d], d + np.arange(d), [2 * d + 1]])
    hess = np.empty_like(blocks)
    hess[np.ix_(perm, perm)] = blocks
    return hess + l2 * np.eye(len(theta))


def test_smoothness_and_strong_convexity_match_the_exact_constants(measured):
    problem, points, _, _, q, exact, kind, _, (x, y) = measured
    if kind == "ridge":  # constant Hessian: the estimate is the exact eigenvalue
        assert q["smoothness"].value == pytest.approx(exact.smoothness, rel=1e-6)
    else:  # the exact top eigenvalue at the same points (numpy), below the supremum (attained at w = 0)
        at = [points[i].numpy() for i in est._spaced(len(points), est.HESSIAN_POINTS)]
        l2 = problem.train["weight_decay"]
        top = max(np.linalg.eigvalsh(_logistic_hessian(x, y, l2, w))[-1] for w in at)
        assert q["smoothness"].value == pytest.approx(top, rel=1e-6)
        assert q["smoothness"].value <= exact.smoothness * (1 + 1e-9)
    assert q["pl"].value == pytest.approx(exact.strong_convexity, rel=1e-6)
    assert q["pl_ratio"].value >= exact.strong_convexity * (1 - 1e-9)  # PL holds with the modulus


def test_f_star_and_initial_gap_match_the_exact_optimum(measured):
    problem, points, minimum, f0, q, exact, kind, _, (x, y) = measured
    assert minimum.exact
    assert minimum.value == pytest.approx(exact.optimal_loss, rel=1e-9, abs=1e-12)
    f0_numpy = convex_objective(kind, x, y, problem.train["weight_decay"], points[0].numpy())[0]
    assert f0 == pytest.approx(f0_numpy, rel=1e-9)
    assert q["initial_gap"].value == pytest.approx(f0_numpy - exact.optimal_loss, rel=1e-6)


def test_gradient_bound_dissimilarity_and_divergence_match_numpy(measured):
    problem, points, _, _, q, _, kind, clients, _ = measured
    l2 = problem.train["weight_decay"]
    sizes = np.array([len(c[1]) for c in clients], dtype=float)
    p = sizes / sizes.sum()
    norms, bs, xis = [], [], []
    for w in points:
        g = _numpy_grads(kind, clients, l2, w)
        mean = p @ g
        norms.append(np.linalg.norm(mean))
        bs.append(np.sqrt(p @ (g**2).sum(1)) / np.linalg.norm(mean))
        xis.append(np.linalg.norm(g - mean, axis=1))
    assert q["gradient_bound"].value == pytest.approx(max(norms), rel=1e-6)
    assert q["dissimilarity"].value == pytest.approx(max(bs), rel=1e-6)
    assert q["gradient_divergence"].value == pytest.approx(np.max(xis, axis=0).mean(), rel=1e-6)
    assert q["gradient_bound"].low <= q["gradient_bound"].median <= q["gradient_bound"].high


def test_estimate_over_is_a_sup_or_an_inf_and_rejects_all_nan():
    e = cn.Estimate.over("x", [3.0, float("nan"), 1.0, 2.0], "max", "test")
    assert (e.value, e.low, e.median, e.high) == (3.0, 1.0, 2.0, 3.0)
    assert cn.Estimate.over("x", [3.0, 1.0], "min", "test").value == 1.0
    with pytest.raises(ValueError, match="x"):
        cn.Estimate.over("x", [float("nan")], "max", "test")


def test_pl_ratio_skips_points_at_the_optimum():
    e = cn.pl_constant([2.0, 1.0, 0.5], [2.0, 1.0, 0.0], f_star=0.5)
    assert e.value == pytest.approx(min(0.5 * 4 / 1.5, 0.5 * 1 / 0.5))


def test_write_puts_measured_constants_and_the_marker_that_plan_reads(tmp_path, capsys):
    path = config(tmp_path, "synthetic_ridge")
    out = tmp_path / "measured.toml"
    assert main(["estimate", "nbafl", str(path), "--rounds", "2", "--write", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["constants"]) == {"Theta", "l", "beta", "rho", "B"}
    assert data["written"] == str(out)
    text = out.read_text()
    assert text.startswith("# fedbound-measured: Theta l beta rho B\n")
    rho = float(f"{data['constants']['rho']:.6g}")
    assert f"rho = {rho!r}  # MEASURED" in text
    assert main(["plan", "nbafl", str(out), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["measured"] == ["Theta", "l", "beta", "rho", "B"]
    assert plan["assumed"] == ["mu"]
    assert main(["plan", "nbafl", str(out)]) == 0
    assert "measured (fedbound estimate" in capsys.readouterr().out


def test_plan_without_a_marker_reports_no_measured_constants(tmp_path, capsys):
    assert main(["plan", "nbafl", str(config(tmp_path, "synthetic_ridge")), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["measured"] == []


@pytest.mark.parametrize("args, needle", [
    (["--rounds", "0"], "--rounds"),
    (["--write", "{cfg}"], "--write"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, capsys, args, needle):
    path = config(tmp_path, "synthetic_ridge")
    args = [a.format(cfg=path) for a in args]
    assert main(["estimate", "nbafl", str(path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_paper_without_a_validation_entry_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    """Every trainable paper has an entry today: the error is tested on NbAFL with its entry removed."""
    import dataclasses

    from fedbound import registry

    registry._discover()
    without = dataclasses.replace(registry.get("nbafl"), validation=None)
    monkeypatch.setitem(registry._REGISTRY, "nbafl", without)
    assert main(["estimate", "nbafl", str(config(tmp_path, "synthetic_ridge"))]) == 2
    err = capsys.readouterr().err.strip()
    assert "no validation entry" in err and len(err.splitlines()) == 1
