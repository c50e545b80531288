"""DP-PFL's audit entry (issue 21): what it records is each stage's noised sum, its ledger is the replace-one
epsilon (an independent Gaussian-DP composition), the correct mechanism is consistent and a halved stage
noise is caught by that stage's noise check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import optimize

from fedbound.tests._accounting_oracles import balle_wang_delta
from fedbound.tests._audit import scaled_noise, small_config
from fedbound.training.clipping import per_sample_clipped_grad_vmap
from fedbound.training.dppfl import DPPFL
from fedbound.training.engine import RunOptions
from fedbound.training.federation import ClientData
from fedbound.training.models import build_model
from fedbound.training.sensitivity import federated_trials
from fedbound.validation.audit import audit_from_config
from fedbound.validation.audit.dppfl import AUDIT


def _gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon at delta of the Gaussian mechanism with sensitivity / std = mu (Balle & Wang 2018's exact
    delta(eps), the tests' oracle), solved by brentq."""
    return optimize.brentq(lambda eps: balle_wang_delta(eps, 1.0 / mu) - delta, 0.0, 50.0)


def test_the_releases_are_the_stages_noised_sums_with_every_record_in_both_sets():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 2)), rng.integers(0, 2, 6)
    data = ClientData.from_partition(x, y, [np.arange(6)], dtype=torch.float64)
    model = build_model("logreg", (2,), 2)
    C, eta = 0.5, 0.5
    algo = AUDIT.prepare(DPPFL(1, inner_lr=eta, outer_lr=0.5, clip_norm=C))
    start = torch.as_tensor(rng.standard_normal(model.n_params)).reshape(1, -1)
    runs = federated_trials(algo, model, data, 0, np.array([0]), np.array([1.0]), [None], start,
                            broadcast=False, options=RunOptions(dtype=torch.float64))
    xs, ys, ones = data.x[:1], data.y[:1], torch.ones((1, 6), dtype=torch.float64)
    inner = per_sample_clipped_grad_vmap(model, start, xs, ys, ones, C).grad  # every record in the query set
    theta = start - eta * inner / (0.5 * 6)  # q_in = 1, expected query size 50 % of 6
    root = math.sqrt(C)
    outer = min(1.0, root) * per_sample_clipped_grad_vmap(model, theta, xs, ys, ones, root).grad
    torch.testing.assert_close(runs.releases["inner"][0, 0], inner[0])
    torch.testing.assert_close(runs.releases["outer"][0, 0], outer[0])
    torch.testing.assert_close(runs.releases["local"][0, 0], torch.cat([inner[0], outer[0]]))


def test_correct_mechanism_is_consistent_and_a_halved_stage_noise_is_caught_by_its_check(tmp_path):
    cfg = small_config(tmp_path, "dppfl")
    correct = audit_from_config("dppfl", cfg, seed=0)
    assert correct.verdict == "consistent", correct.verdict
    small = AUDIT.small["dppfl"]
    # the ledger's replace-one epsilon: two Gaussian releases of sensitivity 2C at std C sigma (q = 1)
    from fedbound.bounds.dppfl import noise

    sigma = noise({**small, "sigma_ratio": 1.0}, 1, "paper")
    mu = math.hypot(*(2 * small["C"] / sigma[s] for s in ("inner", "outer")))
    for v in correct.views:
        assert v.epsilon_reported_tight == pytest.approx(_gdp_epsilon(mu, small["delta"]), rel=1e-3)
        assert v.epsilon_lower <= v.epsilon_reported_tight < (v.control_epsilon_lower or 0.0)
        assert v.shift_measured <= v.sensitivity_assumed == pytest.approx(math.sqrt(2) * 2 * small["C"])
    assert {c.stage for c in correct.noise_checks} == {"inner", "outer"}
    assert all(c.ratio_low < 1 < c.ratio_high for c in correct.noise_checks)
    with scaled_noise("outer", 0.5):
        halved = audit_from_config("dppfl", cfg, seed=0, control=False)
    assert halved.verdict.startswith("LEAK") and "outer noise" in halved.verdict
    low = {c.stage: c for c in halved.noise_checks}
    # the outer residual also holds the inner noise's effect through theta: a little above 0.5, never below
    assert low["outer"].below and 0.5 - 0.02 < low["outer"].ratio_low < 0.55 and not low["inner"].below
