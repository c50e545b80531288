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
    return (runner.model, runner.algorithm.local, options.device, options.dtype, tuple(data.x.shape[2:]),
            data.y.dtype)


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

    def __init__(self, runners: list[Runner], fail: Callable[[Runner, Exception], None]) -> None:
        self.runners, self._fail, self.failed = runners, fail, set()
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
                    begun.setdefault(runner.state.round, []).append((runner, runner.begin_round()))
                except Exception as exc:  # noqa: BLE001 - this run stops, the others go on
                    self.fail(runner, exc)
            for round_, members in begun.items():
                self._local_round(round_, members)
            for members in begun.values():
                for runner, _ in members:
                    if self.ok(runner):
                        try:
                            runner.end_round()
                        except Exception as exc:  # noqa: BLE001
                            self.fail(runner, exc)

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


def run_batch(jobs: Sequence[BatchJob], *, batch: bool = True) -> list[RunResult | Exception]:
    """Run every job (module docstring); each one's :class:`RunResult`, or the exception that stopped it
    (the others go on).  ``batch=False``: every run alone, one after another."""
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

    for members in classes:
        _Lockstep([runners[i] for i in members], fail).run()
        for i in members:
            if results[i] is None:
                results[i] = runners[i].result()
    for i in alone:
        try:
            results[i] = drive(runners[i])
        except Exception as exc:  # noqa: BLE001
            results[i] = exc
    return results
