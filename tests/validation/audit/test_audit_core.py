"""The audit's trial core (``fedbound.training.sensitivity.federated_trials``) against independent runs of
the engine: a trial federation's broadcast is the real round's global model, its server noise is drawn per
trial with the plan's std, ``record_release`` hands a release to the audit, and the crafted canaries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbound.tests._audit import toy_federation
from fedbound.training.engine import Algorithm, RunOptions, run
from fedbound.training.local import LocalSGD
from fedbound.training.plan import NoisePlan, View
from fedbound.training.sensitivity import (
    Replacement,
    crafted_records,
    federated_trials,
    record_release,
)

N, M = 4, 6


class _Served(Algorithm):
    """FedAvg with server noise and a second release (twice the upload) handed to an audit."""

    name = "served"

    def upload(self, ctx, clients, local):
        record_release(ctx, "twice", clients, 2 * local)
        return local

    def server_update(self, ctx, aggregate):
        return ctx.add_noise("server", aggregate)


def _setup():
    data, model, start = toy_federation(N, M)
    return data, model, start, _Served(1, LocalSGD(steps=2, lr=0.3))


def _plan(server: float) -> NoisePlan:
    return NoisePlan(rounds=1, num_clients=N, sigma={"server": np.array([server])},
                     sensitivity={"server": 1.0}, eps=float("inf"), delta=1e-5,
                     views=(View("down", "broadcast", stage="server"),), budget_accountant="tight",
                     paper_accountant="none", source="test")


def test_a_trial_federation_is_the_real_round():
    data, model, start, algo = _setup()
    opts = RunOptions(dtype=torch.float64)
    real = run(algo, model, data, options=opts, init_params=start, rounds=1).params
    weights = data.sizes / data.sizes.sum()
    canary = Replacement(2, np.array([5.0, -5.0, 5.0]), 1)
    out = federated_trials(algo, model, data, 1, np.arange(N), weights, [None, canary, None],
                           start.unsqueeze(0), options=opts)
    assert torch.allclose(out.broadcasts[0, 0], real) and torch.allclose(out.broadcasts[0, 2], real)
    assert not torch.allclose(out.broadcasts[0, 1], real)  # the canary moved the target's trial
    assert torch.allclose(out.releases["twice"], 2 * out.uploads)  # the target's rows only
    # the changed trial differs from the real round by p_target x the target's upload shift, nothing else
    shift = out.uploads[0, 1] - out.uploads[0, 0]
    assert torch.allclose(out.broadcasts[0, 1] - real, weights[1] * shift)


def test_server_noise_is_drawn_per_trial_with_the_plans_std():
    data, model, start, algo = _setup()
    weights = np.full(N, 1.0 / N)
    out = federated_trials(algo, model, data, 0, np.arange(N), weights, [None] * 3000, start.unsqueeze(0),
                           plan=_plan(0.2), options=RunOptions(dtype=torch.float64, seed=3))
    noise = (out.broadcasts - out.aggregates)[0].numpy()
    assert noise.std() == pytest.approx(0.2, rel=0.03)
    # independent across trials: the trials' noise vectors are uncorrelated
    assert abs(np.corrcoef(noise[:-1, 0], noise[1:, 0])[0, 1]) < 0.06
    assert np.allclose(out.aggregates[0], out.aggregates[0, 0])  # no uplink noise: one aggregate


def test_crafted_records_cover_every_label_and_reach_far_out():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((10, 3)).astype(np.float32)
    ys = rng.integers(0, 3, 10)
    made = crafted_records(xs, ys, 3, np.random.default_rng(1))
    radius = np.linalg.norm(xs, axis=1).max()
    norms = np.array([np.linalg.norm(x) for x, _ in made])
    assert {y for _, y in made} == {0, 1, 2}
    assert norms.max() == pytest.approx(100 * radius, rel=1e-4) and norms.min() >= 0.99 * radius
    assert all(x.shape == (3,) and x.dtype == np.float32 for x, _ in made)
    ridge = crafted_records(xs, rng.standard_normal(10) * 2, 1, np.random.default_rng(1))
    assert len({y for _, y in ridge}) == 4


def test_a_view_seen_through_record_release_audits_like_the_upload(tmp_path, monkeypatch):
    """The interface an entry uses for views that see neither the upload nor the broadcast: NbAFL's uplink
    handed to the audit by ``record_release`` and named in ``AuditViews.releases`` gives the upload view's
    numbers, and with ``release_std`` declared a halved release noise is a noise-check LEAK."""
    from dataclasses import replace

    from fedbound.tests._audit import scaled_noise, small_config
    from fedbound.training.nbafl import NbAFL
    from fedbound.validation.audit import audit_from_config
    from fedbound.validation.audit import nbafl as audit_nbafl

    cfg = small_config(tmp_path, "nbafl")
    plain = audit_from_config("nbafl", cfg, trials=200, control=False)
    upload = NbAFL.upload

    def releasing(self, ctx, clients, local):
        out = upload(self, ctx, clients, local)
        record_release(ctx, "up", clients, out)
        return out

    monkeypatch.setattr(NbAFL, "upload", releasing)
    std = {"uplink": lambda plan, target, rounds: plan.stage_matrix("uplink")[:rounds, target]}
    monkeypatch.setattr(audit_nbafl, "AUDIT", replace(audit_nbafl.AUDIT, releases={"uplink": "up"},
                                                      release_std=std))
    seen = audit_from_config("nbafl", cfg, trials=200, control=False)
    assert seen.views[0].scores_out == pytest.approx(plain.views[0].scores_out)
    assert seen.views[0].epsilon_lower == plain.views[0].epsilon_lower
    assert "uplink (release)" in {c.stage for c in seen.noise_checks} and not seen.verdict.startswith("LEAK")
    with scaled_noise("uplink", 0.5):
        halved = audit_from_config("nbafl", cfg, trials=200, control=False)
    assert any(r.startswith("uplink (release) noise") for r in halved.reasons)


def test_loss_directions_raise_the_loss_fastest():
    # binary logistic regression: the input gradient of record j's loss with label c is (p_j - onehot(c))
    # through the weights; moving every record a little along the direction found raises the label's loss
    from fedbound.training.sensitivity import loss_directions

    data, model, start, _ = _setup()
    xs, ys = data.x[0, :M].numpy(), data.y[0, :M].numpy()
    dirs = loss_directions(model, start, xs, ys, 2)
    assert len(dirs) == 2 and all(d.shape == (3,) for d in dirs)
    for label, d in enumerate(dirs):
        def loss(x, label=label):
            y = torch.full((1, M), label, dtype=torch.long)
            return float(model.per_sample_loss(model(start.unsqueeze(0), torch.as_tensor(x)[None]), y).sum())
        step = 1e-3 * d / np.linalg.norm(d)
        assert loss(xs + step) > loss(xs) > loss(xs - step)
    made = crafted_records(xs, ys, 2, np.random.default_rng(0), directions=dirs)
    unit = dirs[0] / np.linalg.norm(dirs[0])
    radius = np.linalg.norm(xs, axis=1).max()
    assert any(np.allclose(x, 10 * radius * unit) for x, _ in made)
