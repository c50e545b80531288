"""The audit's trial engine (``fedbound.training.trials``, issue 33 items 4-5): every trial draws what a run
with its own seed draws from the production streams, batches do not change a single number, local models
computed once equal the full trials bit for bit, and randomness in local training is noticed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbound.tests._audit import toy_federation
from fedbound.training.engine import Algorithm, RoundContext, RunOptions, RunState
from fedbound.training.local import LocalSGD
from fedbound.training.noise import Streams
from fedbound.training.plan import NoisePlan, View
from fedbound.training.sensitivity import Replacement
from fedbound.training.trials import (
    TrialContext,
    TrialSetup,
    TrialStreams,
    local_cache,
    run_trials,
    trial_seeds,
    verify,
)

N, M, T = 4, 6, 2


class _Noisy(Algorithm):
    """FedAvg with per-client uplink noise and server noise (NbAFL's shape)."""

    name = "noisy"

    def upload(self, ctx, clients, local):
        return ctx.add_noise("uplink", local, clients)

    def server_update(self, ctx, aggregate):
        return ctx.add_noise("server", aggregate)


class _Sampled(_Noisy):
    """The same with Poisson-sampled local steps (random local training)."""


def _setup(algo=None, local=None):
    data, model, start = toy_federation(N, M)
    starts = torch.stack([start, 0.5 * start])
    plan = NoisePlan(rounds=T, num_clients=N, sigma={"uplink": np.array([[0.1, 0.2, 0.3, 0.4], [0.5] * 4]),
                                                     "server": np.array([0.05, 0.07])},
                     sensitivity={"uplink": 1.0}, eps=float("inf"), delta=1e-5,
                     views=(View("down", "broadcast", stage="uplink"),), budget_accountant="tight",
                     paper_accountant="none", source="test")
    algo = algo or _Noisy(T, local or LocalSGD(steps=2, lr=0.3))
    weights = np.full(N, 1.0 / N)
    return TrialSetup(algo, model, data, 1, np.arange(N), weights, starts, plan,
                      RunOptions(dtype=torch.float64)), Replacement(2, np.array([5.0, -5.0, 5.0]), 1)


def test_each_copy_draws_what_the_run_with_its_seed_draws():
    seeds = [11, 22, 33]
    streams = TrialStreams(seeds, np.array([4, 7]), salt=0, device="cpu", population=9, n_max=5)
    copies = np.array([0, 1, 2, 3, 5])  # (run, client): (0, 4), (0, 7), (1, 4), (1, 7), (2, 7)
    got = streams.normal(("uplink", 3), copies, (6,), torch.float64)
    for row, (run, client) in enumerate([(0, 4), (0, 7), (1, 4), (1, 7), (2, 7)]):
        expected = Streams(seeds[run]).normal(("uplink", 3), [client], (6,), torch.float64)[0]
        assert torch.equal(got[row], expected)
    server = streams.normal(("server", 3), np.array([-1]), (6,), torch.float64)
    assert all(torch.equal(server[g], Streams(s).normal(("server", 3), [-1], (6,), torch.float64)[0])
               for g, s in enumerate(seeds))
    masks = streams.uniform_population(("batch", 3, 0), 99, 4, copies, torch.float64)
    for row, (run, client) in enumerate([(0, 4), (0, 7), (1, 4), (1, 7), (2, 7)]):
        full = Streams(seeds[run]).uniform_population(("batch", 3, 0), 9, 5, [client], torch.float64)
        assert torch.equal(masks[row], full[0, :4])  # the run's row of its population draw, its records


def test_a_changed_streams_is_used_as_it_is(monkeypatch):
    # a bug injected into the production streams (here: every draw ignores its key) reaches the trials
    original = Streams.normal
    monkeypatch.setattr(Streams, "normal", lambda self, key, clients, shape, dtype=torch.float32:
                        original(self, ("fixed",), clients, shape, dtype))
    streams = TrialStreams([1, 2], np.array([0]), salt=0, device="cpu", population=1, n_max=1)
    a = streams.normal(("uplink", 0), np.array([0, 1]), (4,))
    b = streams.normal(("uplink", 1), np.array([0, 1]), (4,))
    assert torch.equal(a, b)


def test_sigma_is_read_at_the_original_clients():
    setup, _ = _setup()
    streams = TrialStreams([1, 2], setup.participants, 0, "cpu", N, M)
    state = RunState(round=0, rounds=T, global_params=setup.starts[0], plan=setup.plan)
    ctx = TrialContext(0, state, setup.model, setup.data, streams, setup.options)
    copies = np.array([0, 3, 4, 7])  # copy 0 and 1 of clients 0 and 3
    assert ctx.sigma("uplink", copies).tolist() == pytest.approx([0.1, 0.4, 0.1, 0.4])
    assert RoundContext.sigma(ctx, "uplink", np.array([3])).tolist() == pytest.approx([0.4])


def test_batches_change_nothing_and_trials_are_independent():
    setup, change = _setup()
    changes = [None] * 6 + [change] * 6
    seeds = trial_seeds(5, "out", 0, 6) + trial_seeds(5, "in", 0, 6)
    assert len(set(seeds)) == 12
    whole = next(run_trials(setup, changes, seeds, batch=12))[1]
    parts = list(run_trials(setup, changes, seeds, batch=4))
    assert [lo for lo, _ in parts] == [0, 4, 8] and all(r.uploads.shape[1] == 4 for _, r in parts)
    assert torch.equal(torch.cat([r.broadcasts for _, r in parts], dim=1), whole.broadcasts)
    assert torch.equal(torch.cat([r.uploads for _, r in parts], dim=1), whole.uploads)
    # trial k is the run with seed k: its target's uplink noise is that run's draw for client 1
    k = 7
    clean = next(run_trials(setup, changes[k:k + 1], seeds[k:k + 1], scale=0.0))[1]
    noise = whole.uploads[:, k] - clean.uploads[:, 0]
    for t in range(T):
        xi = Streams(seeds[k]).normal(("uplink", t), [1], (setup.model.n_params,), torch.float64)[0]
        assert torch.allclose(noise[t], setup.plan.stage_sigma("uplink", t)[1] * xi)


def test_local_models_computed_once_are_the_full_trials_bit_for_bit():
    setup, change = _setup()
    cache = local_cache(setup, {1: change}, 3, setup.plan)
    assert cache is not None  # full-batch local steps draw nothing
    seeds = trial_seeds(1, "out", 0, 3) + trial_seeds(1, "in", 0, 3)
    changes, keys = [None] * 3 + [change] * 3, [None] * 3 + [1] * 3
    full, why = verify(setup, changes, seeds, cache, keys, None)
    assert why is None
    fast = next(run_trials(setup, changes, seeds, cache=cache, change_keys=keys))[1]
    assert torch.equal(fast.broadcasts, full.broadcasts) and torch.equal(fast.uploads, full.uploads)
    # the others in law: each participant's upload is its noise-free upload plus sigma xi of its stream
    assert verify(setup, changes, seeds, cache, keys, "uplink")[1] is None


def test_random_local_training_is_noticed_and_runs_in_full():
    setup, change = _setup(local=LocalSGD(steps=2, lr=0.3, sample_rate=0.5))
    assert local_cache(setup, {1: change}, 3, setup.plan) is None
    # a local update that differs from what its first call computed is caught bit for bit
    setup, change = _setup()
    cache = local_cache(setup, {1: change}, 3, setup.plan)
    cache.plain[:, 1] += 1e-12
    seeds = trial_seeds(1, "out", 0, 2)
    assert "differ" in verify(setup, [None, None], seeds, cache, [None, None], None)[1]


def test_a_quantized_upload_is_not_taken_in_law():
    class _Rounded(_Noisy):
        def upload(self, ctx, clients, local):
            return torch.round(super().upload(ctx, clients, local) * 100) / 100

    setup, change = _setup(algo=_Rounded(T, LocalSGD(steps=2, lr=0.3)))
    cache = local_cache(setup, {1: change}, 3, setup.plan)
    seeds = trial_seeds(1, "out", 0, 2)
    why = verify(setup, [None, None], seeds, cache, [None, None], "uplink")[1]
    assert why is not None and "is not its noise-free upload plus its uplink noise" in why
