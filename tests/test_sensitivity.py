"""The provable sensitivity (per-sample clipped local GD) against brute force, the probe, the planner."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from fedbound.bounds import nbafl as nb
from fedbound.bounds import provable
from fedbound.errors import ConfigError, FedboundWarning, ParameterError
from fedbound.training.federation import ClientData
from fedbound.training.local import LocalSGD
from fedbound.training.models import build_model
from fedbound.training.nbafl import NbAFL
from fedbound.training.sensitivity import (
    Replacement,
    check_provable_step,
    client_uploads,
    neighbours,
    probe,
    smoothness_bound,
    smoothness_ceiling,
)

M = 8


def _task(kind: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, 3)).astype(np.float32)
    if kind == "ridge":
        y = (x @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(M)).astype(np.float32)
        model = build_model("logreg", (3,), 1, loss="squared")
    else:
        y = (rng.random(M) < 0.5).astype(np.int64)
        model = build_model("logreg", (3,), 2)
    data = ClientData.from_partition(x, y, [np.arange(M)], dtype=torch.float64)
    return model, data, x, y


def _brute_force_shift(model, data, x, y, local, start):
    """Largest upload shift over every replacement of every record by every (record features, label) pair
    and by far-out canaries (ten times the largest norm), noise-free through the engine."""
    labels = [0.0, 1.0, -3.0, 3.0] if model.loss == "squared" else [0, 1]
    rng = np.random.default_rng(5)
    far = rng.standard_normal((4, 3)) * 10 * np.linalg.norm(x, axis=1).max()
    candidates = list(x) + list(far)
    reps = [Replacement(i, c, lab) for i, c, lab in itertools.product(range(M), candidates, labels)]
    algo = NbAFL(1, 1e6, local)  # no model clipping: the bound is on local training itself
    up = client_uploads(algo, model, neighbours(data, 0, [None, *reps]), start.unsqueeze(0),
                        options=_options())[0]
    return float(torch.linalg.vector_norm(up[1:] - up[0], dim=1).max())


def _options():
    from fedbound.training.engine import RunOptions

    return RunOptions(dtype=torch.float64)


@pytest.mark.parametrize("kind", ["logistic", "ridge"])
def test_provable_bound_holds_against_brute_force(kind):
    model, data, x, y = _task(kind)
    X = float(np.linalg.norm(x, axis=1).max())  # the declared feature bound: no record is clipped
    L = smoothness_ceiling(model, X, prox_mu=0.05)
    steps, lr, c_g = 6, 1.9 / L, 0.3
    local = LocalSGD(steps=steps, lr=lr, prox_mu=0.05, per_sample_clip=c_g, feature_clip=X)
    check_provable_step(model, local)
    bound = provable.local_sensitivity(1e6, c_g, M, steps, lr)
    for seed in range(3):
        start = torch.as_tensor(np.random.default_rng(seed).standard_normal(model.n_params))
        worst = _brute_force_shift(model, data, x, y, local, start)
        assert worst <= bound * (1 + 1e-9)
        assert worst > 0.3 * bound  # the bound is not vacuous here


def test_without_gradient_clipping_multistep_training_breaks_2C_over_m():
    # NbAFL's eq. (6): 2C/m with C the model clip; 10 weak-prox steps move a clipped model much further
    model, data, x, y = _task("logistic")
    C = 1.0
    algo = NbAFL(1, C, LocalSGD(steps=10, lr=1.0, prox_mu=0.01))
    start = torch.zeros(model.n_params, dtype=torch.float64)
    found = probe(algo, model, data, 0, start.unsqueeze(0), records=M, options=_options())
    assert found.max_shift > 2.5 * (2 * C / M)


@pytest.mark.parametrize("mu,weight_decay", [(0.0, 0.0), (1.5, 0.1)])
def test_growth_recursion_bounds_several_steps_of_a_non_convex_model(mu, weight_decay):
    """Hardt, Recht & Singer 2016, Lemma 2.5: 6 clipped full-batch steps of an MLP (no convexity, any
    records) move by at most 2 eta C_g (a^5/m + sum_{s<5} a^s), a = |1 - eta (mu + lambda)|: brute force over
    every single-record replacement (natural records with every label, far-out canaries) from three starts.
    Several steps really move further than one step's 2 eta C_g / m, which is why the recursion is needed."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((M, 3)).astype(np.float32)
    y = rng.integers(0, 3, M)
    model = build_model("mlp", (3,), 3, hidden=6)
    data = ClientData.from_partition(x, y, [np.arange(M)], dtype=torch.float64)
    steps, lr, c_g = 6, 0.4, 0.3
    local = LocalSGD(steps=steps, lr=lr, prox_mu=mu, weight_decay=weight_decay, per_sample_clip=c_g)
    check_provable_step(model, local)
    bound = provable.local_sensitivity(1e6, c_g, M, steps, lr, model_norm=True, decay=mu + weight_decay)
    far = list(rng.standard_normal((3, 3)) * 20)
    reps = [Replacement(i, c, lab) for i, c, lab in itertools.product(range(M), [*x, *far], range(3))]
    algo = NbAFL(1, 1e6, local)
    worst = 0.0
    for seed in range(3):
        start = model.init(torch.Generator().manual_seed(seed), torch.float64).unsqueeze(0)
        up = client_uploads(algo, model, neighbours(data, 0, [None, *reps]), start, options=_options())[0]
        worst = max(worst, float(torch.linalg.vector_norm(up[1:] - up[0], dim=1).max()))
    assert worst <= bound * (1 + 1e-9)
    assert worst > 2 * lr * c_g / M


def test_growth_recursion_holds_with_fixed_size_minibatches():
    """B = 3 of m = 8 records a step (drawn the same way on both datasets): the replaced record weighs 1/3 in
    the steps it is drawn in, so the bound reads min(B, m) for m; brute force as above."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((M, 3)).astype(np.float32)
    y = rng.integers(0, 3, M)
    model = build_model("mlp", (3,), 3, hidden=6)
    data = ClientData.from_partition(x, y, [np.arange(M)], dtype=torch.float64)
    local = LocalSGD(steps=4, lr=0.5, batch_size=3, prox_mu=0.5, per_sample_clip=0.2)
    check_provable_step(model, local)
    bound = provable.local_sensitivity(1e6, 0.2, M, 4, 0.5, model_norm=True, decay=0.5, batch=3)
    assert bound > provable.local_sensitivity(1e6, 0.2, M, 4, 0.5, model_norm=True, decay=0.5)
    reps = [Replacement(i, c, lab) for i, c, lab in itertools.product(range(M), [*x, x[0] * 30], range(3))]
    start = model.init(torch.Generator().manual_seed(1), torch.float64).unsqueeze(0)
    up = client_uploads(NbAFL(1, 1e6, local), model, neighbours(data, 0, [None, *reps]), start,
                        options=_options())[0]
    worst = float(torch.linalg.vector_norm(up[1:] - up[0], dim=1).max())
    assert 0 < worst <= bound * (1 + 1e-9)


def test_one_clipped_step_is_exact_for_any_model():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, 5)).astype(np.float32)
    y = rng.integers(0, 3, M)
    model = build_model("mlp", (5,), 3, hidden=7)
    data = ClientData.from_partition(x, y, [np.arange(M)], dtype=torch.float64)
    lr, c_g = 0.7, 0.05
    algo = NbAFL(1, 1e6, LocalSGD(steps=1, lr=lr, per_sample_clip=c_g))
    start = model.init(torch.Generator().manual_seed(0), torch.float64)
    found = probe(algo, model, data, 0, start.unsqueeze(0), records=M, options=_options())
    assert found.max_shift <= provable.local_sensitivity(1e6, c_g, M, 1, lr) * (1 + 1e-9)


def test_probe_finds_none_in_provable_mode():
    model, data, x, y = _task("logistic")
    L = smoothness_ceiling(model, 3.0, prox_mu=0.01)
    local = LocalSGD(steps=10, lr=1.0 / L, prox_mu=0.01, per_sample_clip=0.2, feature_clip=3.0)
    algo = NbAFL(1, 1.0, local, provable=True)
    bound = provable.local_sensitivity(1.0, 0.2, M, 10, 1.0 / L)
    start = torch.zeros(model.n_params, dtype=torch.float64)
    found = probe(algo, model, data, 0, start.unsqueeze(0), records=M, options=_options())
    assert 0 < found.max_shift <= bound


def test_provable_step_premises_are_checked():
    model, data, _, _ = _task("logistic")
    L = smoothness_bound(model, data.x[0])
    ceiling = smoothness_ceiling(model, 2.0)
    with pytest.raises(ConfigError, match="lr = .* outside its valid range"):
        check_provable_step(model, LocalSGD(steps=3, lr=2.5 / ceiling, per_sample_clip=1.0, feature_clip=2.0))
    # several steps of a linear model without a declared feature norm: the general bound (growth recursion)
    # covers it, so training may start (the plan then uses that bound, not the convex one)
    check_provable_step(model, LocalSGD(steps=3, lr=0.1, per_sample_clip=1.0))
    check_provable_step(model, LocalSGD(steps=3, lr=0.1, batch_size=4, per_sample_clip=1.0))  # B of m
    with pytest.raises(ConfigError, match="not Poisson-sampled"):
        check_provable_step(model, LocalSGD(steps=3, lr=0.1, sample_rate=0.5, per_sample_clip=1.0))
    with pytest.raises(ConfigError, match="per-sample gradient clipping"):
        check_provable_step(model, LocalSGD(steps=3, lr=0.1))
    assert ceiling == pytest.approx(0.5 * (2.0**2 + 1))  # kappa (X^2 + 1), 2-class logistic
    mlp = build_model("mlp", (3,), 2, hidden=4)
    with pytest.raises(ParameterError, match="logreg"):
        smoothness_bound(mlp, data.x[0])
    # 2-class logistic: L = lambda_max(mean x~ x~^T) / 2 by hand
    xt = np.c_[data.x[0].numpy(), np.ones(M)]
    assert L == pytest.approx(np.linalg.eigvalsh(xt.T @ xt / M)[-1] / 2)


def test_local_sensitivity_values_and_domain():
    assert provable.local_sensitivity(20.0, 1.0, 100, 10, 0.2) == pytest.approx(0.04)
    assert provable.local_sensitivity(0.01, 1.0, 100, 10, 0.2) == pytest.approx(0.02)  # capped at 2C
    # no convex bound: the growth recursion 2 eta C_g (a^(tau-1)/m + sum_{s<tau-1} a^s), a = |1 - eta d|,
    # summed term by term here (the module uses the closed form)
    for decay in (0.0, 4.0, 12.0):
        a = abs(1 - 0.2 * decay)
        by_hand = 2 * 0.2 * 1.0 * (a**9 / 100 + sum(a**s for s in range(9)))
        assert provable.local_sensitivity(20.0, 1.0, 100, 10, 0.2, model_norm=True, decay=decay) == \
            pytest.approx(min(40.0, by_hand), rel=1e-12)
    assert provable.local_sensitivity(20.0, 1.0, 100, 10, 0.2, model_norm=True) == pytest.approx(3.604)
    assert provable.local_sensitivity(1.0, 1.0, 100, 10, 0.2, model_norm=True) == 2.0  # capped at 2C
    assert provable.growth_recursion(1.0, 100, 1, 0.2, 7.0) == pytest.approx(2 * 0.2 / 100)  # one step: exact
    assert provable.growth_recursion(1.0, 100, 10**5, 0.2, 1e3) == float("inf")  # a^(tau-1) overflows
    for bad in ({"C_g": 0.0}, {"eta": float("nan")}, {"tau": 0}, {"decay": -1.0}):
        args = {"C": 1.0, "C_g": 1.0, "m": 10, "tau": 2, "eta": 0.1, **bad}
        with pytest.raises(ParameterError):
            provable.local_sensitivity(**args)


def test_noise_scales_with_the_provable_sensitivity_and_says_so():
    base = {"N": 50, "m": 100, "C": 20.0, "eps": 6.0, "delta": 0.01, "L": 1}
    prov = {**base, "sensitivity": "provable", "C_g": 1.0, "tau": 10, "eta": 0.2}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FedboundWarning)
        for method in ("paper", "tight"):
            p, q = nb.noise(base, 25, method), nb.noise(prov, 25, method)
            # 2 tau eta C_g / m = 0.04 against 2C/m = 0.4: a tenth of the noise on every stage
            assert q["uplink"] == pytest.approx(0.1 * p["uplink"])
            assert q["server"] == pytest.approx(0.1 * p["server"])
    assert any("0.1x the paper's" in str(w.message) and "eq. (6)" in str(w.message) for w in caught)
    # the default (unset, or provable without C_g): one step at C_g = C / eta, whose sensitivity is 2C/m
    for default in (base, {**base, "sensitivity": "provable"}):
        assert nb.noise(default, 25) == nb.noise({**base, "sensitivity": "paper"}, 25)
    with pytest.raises(ConfigError, match="needs eta"):
        nb.noise({**base, "sensitivity": "provable", "C_g": 1.0}, 25)


def test_planner_states_the_cost():
    from fedbound.scheduling.nbafl import plan

    base = {"N": 50, "m": 100, "C": 20.0, "eps": 6.0, "delta": 0.01, "L": 1, "Theta": 2.0, "l": 0.1,
            "beta": 1.0, "rho": 1.0, "B": 1.0, "mu": 4.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = plan({**base, "sensitivity": "provable", "C_g": 2.0, "tau": 10, "eta": 0.5})
        same = plan({**base, "sensitivity": "provable", "C_g": 4.0, "tau": 10, "eta": 0.5})
        default = plan(base)
    assert result.warnings[0].startswith("provable sensitivity") and "0.5x the paper's" in result.warnings[0]
    # 2 tau eta C_g / m = 0.4 = 2C/m: no cost to state; the premise names what is deployed
    assert not any(w.startswith("provable sensitivity") for w in same.warnings)
    assert not any(w.startswith("provable sensitivity") for w in default.warnings)  # the default one step
    assert same.recommendation.premises[0].startswith("the provable sensitivity 0.4 ")
    assert "10 local steps" in same.recommendation.premises[0]
    assert default.recommendation.premises[0].startswith("the provable sensitivity 0.4 ")  # the default
    assert "one local step" in default.recommendation.premises[0]
    paper = plan({**base, "sensitivity": "paper"}).recommendation.premises[0]
    assert "sensitivity = \"paper\"" in paper and "LEAK" in paper


def _small_nbafl(tmp_path, **nbafl):
    from fedbound.registry import get
    from fedbound.training.config import dump_toml

    small = get("nbafl").load("audit").small
    sections = {"nbafl": {**small["nbafl"], "feature_norm": 2.0, **nbafl},
                "train": {**small["train"], "local_steps": 10, "probe_records": 4}}
    path = tmp_path / "small.toml"
    path.write_text(dump_toml(sections))
    return path


def test_train_probes_and_warns_in_paper_mode_not_in_provable_mode(tmp_path):
    from fedbound.validation.recipes.runner import train_from_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paper = train_from_config("nbafl", _small_nbafl(tmp_path, sensitivity="paper"), out=tmp_path / "a")
        prov = train_from_config("nbafl", _small_nbafl(tmp_path), out=tmp_path / "b")
    flagged = [w for w in paper.summary["warnings"] if "replacing one record" in w]
    assert len(flagged) == 2 and "NbAFL (Wei et al. 2020)" in flagged[0]
    assert all(p["ratio"] > 1 for p in paper.summary["sensitivity_probe"])
    assert not any("replacing one record" in w for w in prov.summary["warnings"])
    assert all(p["ratio"] <= 1 for p in prov.summary["sensitivity_probe"])
    # the plan's sensitivity is the provable min(2C, 2 tau eta C_g / m) = 2 * 10 * 0.5 * 0.2 / 50
    assert prov.plan.stage_sensitivity("uplink")[0] == pytest.approx(0.04)
    assert prov.plan.info["sensitivity_mode"] == "provable" and prov.plan.info["C_g"] == 0.2
    assert prov.plan.info["local_steps_covered"] == 10


def test_provable_tau_eta_must_describe_the_run(tmp_path):
    from fedbound.validation.recipes.runner import train_from_config

    with pytest.raises(ConfigError, match=r"\[nbafl\] tau = 3 differs from the run's \[train\] local_steps"):
        train_from_config("nbafl", _small_nbafl(tmp_path, tau=3), out=tmp_path / "c")


def test_adaptive_planner_and_noise_read_the_provable_sensitivity():
    from fedbound.bounds import adaptive as ba
    from fedbound.registry import get

    example = {**get("adaptive").defaults, **get("adaptive").example}
    prov = {**example, "sensitivity": "provable", "C_g": 1.0, "tau": 10, "eta": 0.3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = get("adaptive").load("planner")(prov)
        m = min(float(v) for v in str(example.get("sizes", example.get("m"))).split(","))
        p, q = ba.noise(example, 10, "tight"), ba.noise(prov, 10, "tight")
    ratio = min(2 * example["C"], 2 * 10 * 0.3 * 1.0 / m) / (2 * example["C"] / m)
    # the plan says which sensitivity it used (after any warning that its bound is vacuous or negative)
    assert any(w.startswith("provable sensitivity") and "PADPFL" in w for w in result.warnings)
    assert q["uplink"] == pytest.approx(ratio * p["uplink"])
