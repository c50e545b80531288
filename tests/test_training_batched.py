"""Many runs, one batch: every run of a batched call equals the same run trained alone (rtol 1e-5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fedbound.registry import names
from fedbound.training.engine import Algorithm, run
from fedbound.training.federation import ClientData
from fedbound.training.local import LocalSGD
from fedbound.training.models import build_model
from fedbound.training.multirun import BatchJob, _classes, concat_batches, run_batch
from fedbound.training.noise import Streams
from fedbound.validation.recipes.runner import build_run, prepare_run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RTOL = 1e-5


def _example(paper: str) -> Path:
    return EXAMPLES / f"{paper}_mnist.toml"


def _jobs(paper: str, variants: list[tuple[str, ...]]) -> list[BatchJob]:
    jobs = []
    for overrides in variants:
        built = build_run(prepare_run(paper, _example(paper), overrides))
        jobs.append(BatchJob(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                             options=built.options, test=built.setup.test))
    return jobs


def _solo(job: BatchJob):
    return run(job.algorithm, job.model, job.data, plan=job.plan, options=job.options, test=job.test)


def _assert_same_run(batched, alone) -> None:
    assert not isinstance(batched, BaseException), batched
    left, right = (r.metrics.drop(columns="wall_time") for r in (batched, alone))
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=RTOL, atol=1e-7)
    np.testing.assert_allclose(batched.params.numpy(), alone.params.numpy(), rtol=RTOL, atol=1e-6)
    assert batched.summary["rounds_done"] == alone.summary["rounds_done"]


@pytest.mark.parametrize("paper", names("train"))
def test_batched_runs_equal_solo_runs(paper: str) -> None:
    """Seeds and rounds vary (runs with fewer rounds finish early); a linear model keeps it quick."""
    base = ("train.model=logreg", "train.eval_clients=true")
    variants = [(*base, f"T={T}", f"train.seed={seed}") for T, seed in ((1, 0), (2, 1))]
    jobs = _jobs(paper, variants)
    runners_plain = jobs[0].algorithm.plain_local_update
    results = run_batch(jobs)
    for job, batched in zip(_jobs(paper, variants), results, strict=True):
        _assert_same_run(batched, _solo(job))
    assert [r.summary["rounds_done"] for r in results] == [r.summary["rounds_planned"] for r in results]
    if runners_plain:  # the runs really shared one local step
        from fedbound.training.engine import Runner

        runners = {i: Runner(j.algorithm, j.model, j.data, plan=j.plan, options=j.options)
                   for i, j in enumerate(jobs)}
        assert _classes(runners, True) == ([[0, 1]], [])


def test_batched_nbafl_with_k_scheduling_and_minibatches_equals_solo() -> None:
    base = ("train.model=logreg", "K=10", "train.batch_size=16", "train.chunk_size=7", 'train.noise="tight"')
    variants = [(*base, f"T={T}", f"train.seed={seed}", f"eps={eps}")
                for T, seed, eps in ((2, 0, 6.0), (1, 1, 8.0))]
    for batched, job in zip(run_batch(_jobs("nbafl", variants)), _jobs("nbafl", variants), strict=True):
        _assert_same_run(batched, _solo(job))


def test_batched_udp_with_crd_equals_solo() -> None:
    variants = [("train.model=logreg", "T=3", f"train.seed={seed}") for seed in (0, 1)]
    path = EXAMPLES / "udp_crd_mnist.toml"
    crd = [build_run(prepare_run("udp", path, v)) for v in variants]
    jobs = [BatchJob(b.algorithm, b.setup.model, b.setup.data, plan=b.plan, options=b.options,
                     test=b.setup.test) for b in crd]
    again = [BatchJob(b.algorithm, b.setup.model, b.setup.data, plan=b.plan, options=b.options,
                      test=b.setup.test) for b in (build_run(prepare_run("udp", path, v)) for v in variants)]
    for batched, job in zip(run_batch(jobs), again, strict=True):
        _assert_same_run(batched, _solo(job))


class _Exploding(Algorithm):
    """FedAvg whose upload raises in round 2 (a failure inside a batched round)."""

    def upload(self, ctx, clients, local):
        if ctx.round == 1:
            raise RuntimeError("upload failed on purpose")
        return local


def _toy_data(seed: int) -> ClientData:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, 4))
    y = (x[:, 0] > 0).astype(np.int64)
    return ClientData.from_partition(x, y, np.array_split(np.arange(60), 6))


def test_a_failing_run_stops_alone_and_the_others_match_solo() -> None:
    model = build_model("logreg", (4,), 2)
    local = LocalSGD(steps=2, lr=0.5)
    jobs = [BatchJob(Algorithm(3, local), model, _toy_data(0)),
            BatchJob(_Exploding(3, local), model, _toy_data(1)),
            BatchJob(Algorithm(4, local), model, _toy_data(2))]
    results = run_batch(jobs)
    assert isinstance(results[1], RuntimeError) and "on purpose" in str(results[1])
    for i in (0, 2):
        job = jobs[i]
        _assert_same_run(results[i], run(Algorithm(job.algorithm.rounds, local), model, job.data))


def test_runs_with_different_models_train_alone_in_the_same_call() -> None:
    local = LocalSGD(steps=1, lr=0.5)
    wide = build_model("mlp", (4,), 2, hidden=3)
    jobs = [BatchJob(Algorithm(2, local), build_model("logreg", (4,), 2), _toy_data(0)),
            BatchJob(Algorithm(2, local), wide, _toy_data(1))]
    for batched, job in zip(run_batch(jobs), jobs, strict=True):
        _assert_same_run(batched, run(Algorithm(2, local), job.model, job.data))


def test_concat_batches_pads_with_masked_samples() -> None:
    a = _toy_data(0).gather([0, 1])
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4))
    b = ClientData.from_partition(x, np.zeros(30, np.int64), [np.arange(15), np.arange(15, 30)]).gather([1])
    both = concat_batches([a, b])
    assert both.x.shape == (3, 15, 4)
    assert both.mask[:2, 10:].sum() == 0 and both.mask[2].sum() == 15
    torch.testing.assert_close(both.weight[:2, :10], a.weight)


def test_segment_streams_draw_what_each_run_draws_alone() -> None:
    from fedbound.training.multirun import Segment, SegmentStreams

    s0, s1 = Streams(0), Streams(1)
    seg = SegmentStreams([Segment(s0, 2, 6, 10), Segment(s1, 1, 4, 12)])
    draw = seg.uniform_population(("batch", 0, 0), 6, 12, [3, 4, 2])
    torch.testing.assert_close(draw[:2, :10], s0.uniform_population(("batch", 0, 0), 6, 10, [3, 4]))
    assert (draw[:2, 10:] == 2.0).all()
    torch.testing.assert_close(draw[2:], s1.uniform_population(("batch", 0, 0), 4, 12, [2]))
    normal = seg.normal(("uplink", 0), [3, 4, 2], (5,))
    torch.testing.assert_close(normal[2:], s1.normal(("uplink", 0), [2], (5,)))
