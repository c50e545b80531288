"""Many runs, one batch: runs that share model and local optimiser train their clients in one engine call.

R runs of k clients each become R*k rows of one :class:`~fedbound.training.local.LocalSGD` call per round;
everything else stays per run: participation, aggregation weights, uploads and their noise (each run's own
:class:`~fedbound.training.noise.Streams`), the server update, the privacy ledger, metrics and checkpoints
(each run is an :class:`~fedbound.training.engine.Runner`).  Mini-batch randomness is drawn per run too
(:class:`SegmentStreams`), so every run's numbers equal running it alone (up to the float rounding of a
differently shaped matrix product).  Runs with fewer rounds drop out when they finish.

Which runs batch: those whose algorithm's ``plain_local_update`` is true (its local update is the default
``LocalSGD`` step), with equal model, equal ``LocalSGD``, device, dtype and per-sample feature shape.  Every
other run trains alone, one after another, in the same call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fedbound.training.engine import Algorithm, Runner, RunOptions, RunResult, auto_chunk_size, drive
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.models import Model
from fedbound.training.noise import Streams
from fedbound.training.plan import NoisePlan
from fedbound.training.privacy import check_budgets, releases_many

__all__ = ["BatchJob", "run_batch", "SegmentStreams", "concat_batches"]


@dataclass
class BatchJob:
    """One run of :func:`run_batch`: the arguments :func:`~fedbound.training.engine.run` takes."""

    algorithm: Algorithm
    model: Model
    data: ClientData
    plan: NoisePlan | None = None
    options: RunOptions | None = None
    test: tuple[np.ndarray, np.ndarray] | None = None
    run_dir: str | Path | None = None
    run_key: str = ""


@dataclass(frozen=True)
class Segment:
    """``rows`` consecutive rows of a batch that belong to one run (its streams, clients and data width)."""

    streams: Streams
    rows: int
    num_clients: int
    n_max: int


class SegmentStreams:
    """The draws :class:`~fedbound.training.local.LocalSGD` makes for a batch of several runs' rows: each
    run's rows come from that run's own streams with its own population size and data width, exactly what
    it draws alone (padding columns get 2.0, above every sampling threshold)."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self.segments = tuple(segments)
        self.device = self.segments[0].streams.device

    def _pieces(self, clients: Sequence[int] | np.ndarray):
        clients, lo = np.asarray(clients), 0
        for seg in self.segments:
            yield seg, clients[lo:lo + seg.rows]
            lo += seg.rows

    def uniform_population(self, key: tuple, num_clients: int, n: int, clients: Sequence[int] | np.ndarray,
                           dtype: torch.dtype = torch.float32) -> torch.Tensor:
        parts = [F.pad(seg.streams.uniform_population(key, seg.num_clients, seg.n_max, part, dtype=dtype),
                       (0, n - seg.n_max), value=2.0) for seg, part in self._pieces(clients)]
        return torch.cat(parts)

    def normal(self, key: tuple, clients: Sequence[int] | np.ndarray, shape: Sequence[int],
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.cat([seg.streams.normal(key, part, shape, dtype) for seg, part in self._pieces(clients)])


def concat_batches(batches: Sequence[ClientBatch]) -> ClientBatch:
    """One batch of several runs' client batches (padded with masked-out samples to the widest)."""
    n = max(b.x.shape[1] for b in batches)

    def pad(t: torch.Tensor) -> torch.Tensor:
        extra = n - t.shape[1]
        if not extra:
            return t
        return torch.cat([t, t.new_zeros((t.shape[0], extra, *t.shape[2:]))], dim=1)

    return ClientBatch(torch.cat([pad(b.x) for b in batches]), torch.cat([pad(b.y) for b in batches]),
                       torch.cat([pad(b.mask) for b in batches]), torch.cat([b.sizes for b in batches]))


def _signature(runner: Runner) -> tuple | None:
    """What runs must share to batch (module docstring); None when this one cannot batch."""
    if not runner.algorithm.plain_local_update:
        return None
    data, options = runner.data, runner.options
    return (runner.model, runner.algorithm.local, options.device, options.dtype, data.feature_shape,
            data.row_y.dtype)


def _classes(runners: dict[int, Runner], batch: bool) -> tuple[list[list[int]], list[int]]:
    """Indices of runners that batch together (classes of two or more) and those that run alone."""
    classes: list[tuple[tuple, list[int]]] = []
    alone = []
    for i, runner in runners.items():
        sig = _signature(runner) if batch else None
        if sig is None:
            alone.append(i)
            continue
        for other, members in classes:
            if other == sig:
                members.append(i)
                break
        else:
            classes.append((sig, [i]))
    alone += [m[0] for _, m in classes if len(m) == 1]
    return [m for _, m in classes if len(m) > 1], sorted(alone)


class _Lockstep:
    """Runners of one class, a round at a time (module docstring)."""

    def __init__(self, runners: list[Runner], fail: Callable[[Runner, Exception], None],
                 tick: Callable[[int], None] | None = None) -> None:
        self.runners, self._fail, self.failed, self.tick = runners, fail, set(), tick
        first = runners[0]
        self.model, self.local = first.model, first.algorithm.local
        self.chunk = min(auto_chunk_size(r.model, r.data, r.options) for r in runners)

    def fail(self, runner: Runner, exc: Exception) -> None:
        self.failed.add(id(runner))
        self._fail(runner, exc)

    def ok(self, runner: Runner) -> bool:
        return id(runner) not in self.failed

    def run(self) -> None:
        while True:
            live = [r for r in self.runners if self.ok(r) and r.active]
            if not live:
                return
            begun: dict[int, list[tuple[Runner, np.ndarray]]] = {}
            for runner in live:
                try:
                    begun.setdefault(runner.state.round, []).append((runner, runner.begin_round(False)))
                except Exception as exc:  # noqa: BLE001 - this run stops, the others go on
                    self.fail(runner, exc)
            self._check_budgets([r for members in begun.values() for r, _ in members])
            for round_, members in begun.items():
                self._local_round(round_, members)
            updated = []
            for members in begun.values():
                for runner, _ in members:
                    if self.ok(runner):
                        try:
                            runner.update_global()
                            updated.append(runner)
                        except Exception as exc:  # noqa: BLE001
                            self.fail(runner, exc)
            evaluated = _evaluate_together([r for r in updated if r.evaluates])
            for runner in updated:
                try:
                    runner.record(evaluated.get(id(runner)))
                except Exception as exc:  # noqa: BLE001
                    self.fail(runner, exc)
            if self.tick is not None:
                self.tick(len(updated))

    def _check_budgets(self, runners: list[Runner]) -> None:
        """Every begun run's releases (``privacy.releases_many``) against its budget, the runs accounted
        together (``privacy.check_budgets``); a run over its budget stops as it would alone."""
        runners = self._releases([r for r in runners if r.ledger is not None])
        items = [(r, (r.ledger, r.releases, r.state.round)) for r in runners]
        try:
            errors = check_budgets([item for _, item in items])
        except Exception as exc:  # noqa: BLE001 - checked one by one, so only the failing run stops
            errors = []
            for _, (ledger, releases, round_) in items:
                try:
                    ledger.check_budget(releases, round_)
                    errors.append(None)
                except Exception as one:  # noqa: BLE001
                    errors.append(one)
            del exc
        for (runner, _), error in zip(items, errors, strict=True):
            if error is not None:
                self.fail(runner, error)

    def _releases(self, runners: list[Runner]) -> list[Runner]:
        """Set every run's ``releases`` for its begun round, all at once; the runs that have them (a run whose
        releases cannot be computed stops, as it would alone)."""
        asks = [(r.ledger, r.ctx.round, r.ctx.participants, r.ctx.weights) for r in runners]
        try:
            for runner, releases in zip(runners, releases_many(asks), strict=True):
                runner.releases = releases
            return runners
        except Exception:  # noqa: BLE001 - one by one, so only the failing run stops
            ready = []
            for runner, (ledger, round_, part, weights) in zip(runners, asks, strict=True):
                try:
                    runner.releases = ledger.releases(round_, part, weights)
                    ready.append(runner)
                except Exception as exc:  # noqa: BLE001
                    self.fail(runner, exc)
            return ready

    def _local_round(self, round_: int, members: list[tuple[Runner, np.ndarray]]) -> None:
        """Every member's local update of round ``round_``, in chunks of ``self.chunk`` rows."""
        rows = [(runner, lo, part[lo:lo + 1]) for runner, part in members for lo in range(len(part))]
        for start in range(0, len(rows), self.chunk):
            window = rows[start:start + self.chunk]
            pieces: list[tuple[Runner, int, np.ndarray]] = []
            for runner, lo, client in window:  # contiguous rows of one run form one piece
                if pieces and pieces[-1][0] is runner:
                    r, first, clients = pieces[-1]
                    pieces[-1] = (r, first, np.concatenate([clients, client]))
                else:
                    pieces.append((runner, lo, client))
            self._local_chunk(round_, pieces)

    def _local_chunk(self, round_: int, pieces: list[tuple[Runner, int, np.ndarray]]) -> None:
        starts, kept = [], []
        for runner, lo, clients in pieces:
            if not self.ok(runner):
                continue
            try:
                starts.append(runner.algorithm.start_models(runner.ctx, clients))
            except Exception as exc:  # noqa: BLE001
                self.fail(runner, exc)
                continue
            kept.append((runner, lo, clients))
        if not kept:
            return
        try:
            batch = concat_batches([r.data.gather(c) for r, _, c in kept])
            streams = SegmentStreams([Segment(r.streams, len(c), r.data.num_clients, r.data.n_max)
                                      for r, _, c in kept])
            clients_all = np.concatenate([c for _, _, c in kept])
            population = max(r.data.num_clients for r, _, _ in kept)  # each segment uses its own
            local = self.local.run(self.model, torch.cat(starts), batch, streams=streams, round_=round_,
                                   clients=clients_all, num_clients=population)
        except Exception as exc:  # noqa: BLE001 - the shared step failed: every run in it stops
            for runner, _, _ in kept:
                self.fail(runner, exc)
            return
        offset = 0
        for runner, lo, clients in kept:
            try:
                runner.add_upload(lo, clients, local[offset:offset + len(clients)])
            except Exception as exc:  # noqa: BLE001
                self.fail(runner, exc)
            offset += len(clients)


EVAL_SAMPLES = 65536
"""Samples (runs x clients x padded local size) one forward pass of the joint evaluation takes at most."""


def _evaluate_together(runners: list[Runner]) -> dict[int, tuple]:
    """``metrics.evaluate_models`` of every runner that evaluates its global model (the default
    ``eval_models``), several runs per forward pass when their data and test sets have the same shapes;
    ``{id(runner): result}``.  Others are evaluated by the runner itself."""
    groups: dict[tuple, list[Runner]] = {}
    for r in runners:
        # runs larger than one pass evaluate alone, a chunk of clients at a time (never all padded at once)
        small = r.data.num_clients * r.data.n_max * 2 <= EVAL_SAMPLES
        if small and type(r.algorithm).eval_models is Algorithm.eval_models:
            test = None if r.test is None else tuple(r.test[0].shape)
            groups.setdefault((r.data.padded_shape, test), []).append(r)
    out: dict[int, tuple] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        per_pass = max(1, EVAL_SAMPLES // (members[0].data.num_clients * members[0].data.n_max))
        for lo in range(0, len(members), per_pass):
            out.update(_evaluate_pass(members[lo:lo + per_pass]))
    return out


@torch.no_grad()
def _evaluate_pass(runners: list[Runner]) -> dict[int, tuple]:
    from fedbound.training.metrics import evaluation

    model, first = runners[0].model, runners[0].data
    params = torch.stack([r.state.global_params for r in runners])
    n_clients, n_max = first.num_clients, first.n_max
    padded = [r.data.padded() for r in runners]
    x = torch.stack([p[0].reshape(n_clients * n_max, *p[0].shape[2:]) for p in padded])
    out = model(params, x).view(len(runners) * n_clients, n_max, -1)
    y = torch.cat([p[1] for p in padded])
    mask = torch.cat([p[2] for p in padded]).to(params.dtype)
    sizes = torch.as_tensor(np.concatenate([r.data.sizes for r in runners]), dtype=params.dtype)

    def per_run(values: torch.Tensor) -> np.ndarray:  # (runs, clients): per-client means, as evaluate_clients
        return ((values * mask).sum(1) / sizes).view(len(runners), -1).double().cpu().numpy()

    loss = per_run(model.per_sample_loss(out, y))
    hit = model.correct(out, y)
    acc = None if hit is None else per_run(hit)
    tests: list = [None] * len(runners)
    if runners[0].test is not None:
        tx = torch.stack([r.test[0] for r in runners])
        ty = torch.stack([r.test[1] for r in runners])
        t_out = model(params, tx)
        t_loss = model.per_sample_loss(t_out, ty).sum(1) / ty.shape[1]
        t_hit = model.correct(t_out, ty)
        t_acc = None if t_hit is None else t_hit.sum(1) / ty.shape[1]
        tests = [(float(t_loss[i]), None if t_acc is None else float(t_acc[i])) for i in range(len(runners))]
    return {id(r): evaluation(r.data.sizes, r.algorithm.weight_decay, r.state.global_params[None], loss[i],
                              None if acc is None else acc[i], tests[i]) for i, r in enumerate(runners)}


def run_batch(jobs: Sequence[BatchJob], *, batch: bool = True,
              on_rounds: Callable[[int, int], None] | None = None) -> list[RunResult | Exception]:
    """Run every job (module docstring); each one's :class:`RunResult`, or the exception that stopped it
    (the others go on).  ``batch=False``: every run alone, one after another.  ``on_rounds(done, total)``:
    called after each round of the batched runs (and after each run trained alone) with the rounds done so
    far, summed over the runs, and the rounds they have to do (a sweep's duration estimate)."""
    results: list[RunResult | Exception | None] = [None] * len(jobs)
    runners: dict[int, Runner] = {}
    for i, job in enumerate(jobs):
        try:
            runners[i] = Runner(job.algorithm, job.model, job.data, plan=job.plan, options=job.options,
                                test=job.test, run_dir=job.run_dir, run_key=job.run_key)
        except Exception as exc:  # noqa: BLE001
            results[i] = exc
    classes, alone = _classes(runners, batch)
    index = {id(r): i for i, r in runners.items()}

    def fail(runner: Runner, exc: Exception) -> None:
        runner.bar.close()
        results[index[id(runner)]] = exc

    total, done = sum(r.state.rounds - r.state.round for r in runners.values()), 0

    def tick(rounds: int) -> None:
        nonlocal done
        done += rounds
        if on_rounds is not None:
            on_rounds(done, total)

    for members in classes:
        _Lockstep([runners[i] for i in members], fail, tick).run()
        for i in members:
            if results[i] is None:
                results[i] = runners[i].result()
    for i in alone:
        start = runners[i].state.round
        try:
            results[i] = drive(runners[i])
        except Exception as exc:  # noqa: BLE001
            results[i] = exc
        tick(runners[i].state.round - start)
    return results
