"""Provable mode must not start or stop training because of one record (issue 21, finding 6).

Whether a run trains is itself a release: with the smoothness L read from the client's data, a lr that trains
D was refused on D' where one record is 30 e_1.  The step-size condition now uses the declared feature bound
(inputs clipped to it), so the decision and the sensitivity are the same on every pair of neighbours, and
the bound 2 tau eta C_g / m still holds against brute force when the outliers sit among the shared records.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from fedbound.bounds import provable
from fedbound.errors import ConfigError
from fedbound.training.engine import RunOptions, run
from fedbound.training.federation import ClientData
from fedbound.training.models import build_model
from fedbound.training.nbafl import NbAFL
from fedbound.training.sensitivity import Replacement, client_uploads, neighbours

M, DIM, MU, C_G, X = 8, 3, 0.01, 0.2, 2.0
SETTING = {"C": 1.0, "mu": MU, "K": None, "sensitivity": "provable", "C_g": C_G, "feature_norm": X}
TRAIN = {"local_steps": 10, "lr": 0.39, "batch_size": 0, "weight_decay": 0.0}
"""lr 0.39 <= 2 / (kappa (X^2 + 1) + mu) = 2 / 2.51 = 0.797: provable for ANY records clipped to X = 2."""
F64 = RunOptions(dtype=torch.float64, eval_every=0, eval_clients=False)


def _data(x: np.ndarray, y: np.ndarray) -> ClientData:
    return ClientData.from_partition(x, y, [np.arange(len(y))], dtype=torch.float64)


def _natural(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, DIM)) / np.sqrt(DIM)  # norms about 1, all below X
    return x, (rng.random(M) < 0.5).astype(np.int64)


def _canaries(n: int = 12, seed: int = 1) -> list[np.ndarray]:
    """30 e_1 and random directions of norm 21.5 to 100 (the issue's refused canaries had norm >= 21.5)."""
    rng = np.random.default_rng(seed)
    out = [30.0 * np.eye(DIM)[0]]
    for _ in range(n - 1):
        u = rng.standard_normal(DIM)
        out.append(rng.uniform(21.5, 100.0) * u / np.linalg.norm(u))
    return out


def _trains(x: np.ndarray, y: np.ndarray) -> bool:
    """Does one round of NbAFL in provable mode start on this client's data?"""
    model = build_model("logreg", (DIM,), 2)
    algo = NbAFL.from_config(SETTING, TRAIN, 1)
    try:
        run(algo, model, _data(x, y), options=F64)
    except ConfigError:
        return False
    return True


def test_the_decision_to_train_is_the_same_on_neighbouring_datasets():
    x, y = _natural()
    assert _trains(x, y)
    canaries = _canaries(6)
    for canary, label in [(canaries[0], 0), (canaries[0], 1), *((c, 1) for c in canaries[1:])]:
        x2 = x.copy()
        x2[0] = canary
        assert _trains(x2, np.r_[label, y[1:]]), f"refused with record 0 = {canary.round(2)}"


def test_the_sensitivity_does_not_read_the_records():
    from fedbound.validation.recipes.nbafl import nbafl_plan

    setting = {"N": 1, "m": M, "C": 1.0, "eps": 3.0, "delta": 0.01, "L": 1, "T": 1, "mu": MU, "K": None,
               "sensitivity": "provable", "C_g": C_G, "tau": 10, "eta": 0.39, "feature_norm": X,
               "model_norm_bound": False}
    plan = nbafl_plan(setting, np.array([M]), 1)
    # min(2C, 2 tau eta C_g / m), by hand: the plan sees client sizes only, never a record
    assert plan.stage_sensitivity("uplink")[0] == pytest.approx(min(2.0, 2 * 10 * 0.39 * C_G / M))


def test_inputs_are_clipped_to_the_declared_norm():
    model = build_model("logreg", (DIM,), 2)
    x, y = _natural()
    big = x.copy()
    big[2] = 50.0 * x[2] / np.linalg.norm(x[2])
    at_x = x.copy()
    at_x[2] = X * x[2] / np.linalg.norm(x[2])
    start = torch.zeros((1, model.n_params), dtype=torch.float64)
    algo = NbAFL.from_config({**SETTING, "C": 1e6}, TRAIN, 1)
    up = [client_uploads(algo, model, _data(a, y), start, options=F64)[0, 0] for a in (big, at_x)]
    torch.testing.assert_close(up[0], up[1])  # 50 x/|x| trains exactly as X x/|x|


def test_bound_holds_with_outliers_among_the_shared_records():
    """Brute force: outliers (30 e_1, ...) at records 1-2 stay in both D and D'; record 0 is replaced by every
    natural record and every canary with both labels; the shift of the unclipped-model upload is within
    2 tau eta C_g / m at three starting models (and not far below it)."""
    model = build_model("logreg", (DIM,), 2)
    x, y = _natural(2)
    canaries = _canaries(6, seed=3)
    x[1], x[2] = canaries[0], canaries[1]
    data = _data(x, y)
    reps = [Replacement(0, c, lab) for c, lab in itertools.product([*x, *canaries], (0, 1))]
    algo = NbAFL.from_config({**SETTING, "C": 1e6}, TRAIN, 1)  # no model clip: the bound is on training
    bound = provable.local_sensitivity(1e6, C_G, M, 10, 0.39)
    worst = 0.0
    for seed in range(3):
        start = torch.as_tensor(np.random.default_rng(seed).standard_normal(model.n_params)).unsqueeze(0)
        up = client_uploads(algo, model, neighbours(data, 0, [None, *reps]), start, options=F64)[0]
        worst = max(worst, float(torch.linalg.vector_norm(up[1:] - up[0], dim=1).max()))
    assert 0.3 * bound < worst <= bound * (1 + 1e-9)


def test_without_feature_norm_several_steps_read_the_general_bound():
    from fedbound.training.config import TRAIN_SECTION
    from fedbound.validation.audit.provable import provable_setting

    raw = {"local_steps": 10, "lr": 0.39, "dataset": "synthetic_logistic", "synthetic_samples": 200,
           "synthetic_dim": DIM, "model": "logreg"}
    train = TRAIN_SECTION.validate(raw, "test")
    setting = {k: v for k, v in SETTING.items() if k != "feature_norm"}
    several = provable_setting(setting, train, 0.002, "nbafl")
    assert several["model_norm_bound"]  # the convex bound needs feature_norm: the growth recursion instead
    assert several["decay"] == pytest.approx(MU)
    one_step = provable_setting(setting, {**train, "local_steps": 1}, 0.002, "nbafl")
    assert one_step["tau"] == 1 and not one_step["model_norm_bound"]  # one step: exact for any model
