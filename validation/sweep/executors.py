"""Where a sweep's groups of runs train: ``"local"`` (this process, or a process pool with ``workers > 1``)
or ``"ray"`` (a Ray cluster at ``address``, or a local Ray runtime; the optional ``ray`` extra).

Every executor calls :func:`fedbound.validation.sweep.worker.train_group` on groups of specs, and every
worker writes into the sweep folder itself (for Ray on several machines that folder must be on storage
every node sees).  The progress bar counts the sweep's rounds (done out of planned, read from each running
run's heartbeat file every :data:`POLL_SECONDS`), so its rate and ETA follow the training itself, with the
runs done / running / failed beside it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

from fedbound.errors import ConfigError
from fedbound.validation.sweep.store import SweepStore
from fedbound.validation.sweep.worker import group_specs, rounds_done, train_group

__all__ = ["EXECUTORS", "execute", "POLL_SECONDS"]

EXECUTORS = ("local", "ray")
POLL_SECONDS = 2.0


class _Progress:
    """Rounds done out of the sweep's planned rounds (tqdm on stderr: rate and ETA), with the runs done,
    running and failed; or nothing.  ``planned``: the rounds of each run to train (a run that changes its
    plan, e.g. CRD stopping early, reports its new total in its heartbeat)."""

    def __init__(self, total: int, done: int, enabled: bool, out: Path | None = None,
                 planned: dict[str, int] | None = None) -> None:
        self.done, self.failed, self.running = done, 0, set()
        self.bar, self.lock, self.stop = None, threading.Lock(), threading.Event()
        self.store, self.planned = (SweepStore(out) if out is not None else None), dict(planned or {})
        if enabled:
            import sys

            from tqdm.auto import tqdm

            from fedbound.training.eta import timed_bar

            initial = self._rounds()
            self.bar = timed_bar(tqdm(total=sum(self.planned.values()), initial=initial, desc="sweep",
                                      unit="round", file=sys.stderr, dynamic_ncols=True),
                                 "sweep", "round", initial)
            self._show()
            self.thread = threading.Thread(target=self._poll, daemon=True)
            self.thread.start()

    def _rounds(self) -> int:
        """Rounds done so far over the planned runs (finished runs count in full)."""
        total = 0
        for key in self.planned:
            if self.store.is_finished(key):
                total += self.planned[key]
                continue
            beat = rounds_done(self.store.work_dir(key))
            if beat is not None:
                self.planned[key] = max(beat[1], beat[0])
                total += beat[0]
        return total

    def _poll(self) -> None:
        while not self.stop.wait(POLL_SECONDS):
            self.refresh()

    def refresh(self) -> None:
        if self.bar is None:
            return
        with self.lock:
            n = self._rounds()
            self.bar.total = sum(self.planned.values())
            self.bar.update(n - self.bar.n)

    def __call__(self, event: str, key: str) -> None:
        with self.lock:
            if event == "running":
                self.running.add(key)
            else:
                self.running.discard(key)
                if event in ("done", "failed"):
                    self.done += event == "done"
                    self.failed += event == "failed"
            self._show()
        if event in ("done", "failed"):
            self.refresh()

    def rounds(self, done: int, total: int, runs: int) -> None:
        """``done`` of the ``total`` rounds of a group of ``runs`` runs trained here: the sweep's duration
        at their pace, said once, before the first group ends (a sweep of one batched group has no other)."""
        if self.bar is not None and total > 0:
            label = (f"the first {runs:,} runs: {done:,} of {total:,} rounds" if runs > 1 else
                     f"{done:,} of {total:,} rounds of the first run")
            with self.lock:
                self.bar.eta.step(done, label=label)

    def _show(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"runs done={self.done} running={len(self.running)} "
                                     f"failed={self.failed}")

    def close(self) -> None:
        if self.bar is not None:
            self.stop.set()
            self.thread.join()
            self.refresh()
            self.bar.close()


def _split(groups: list[list], parts: int) -> list[list]:
    """At least ``parts`` groups (when there are that many runs): the largest groups are halved."""
    groups = [g for g in groups if g]
    while len(groups) < parts and max(map(len, groups), default=0) > 1:
        groups.sort(key=len)
        big = groups.pop()
        groups += [big[: len(big) // 2], big[len(big) // 2:]]
    return groups


def _pool_worker(out: str, specs: list, batch: bool, threads: int, every: float) -> dict[str, str]:
    import torch

    torch.set_num_threads(threads)
    return train_group(out, specs, batch, checkpoint_every_s=every)


def _local(groups: list[list], out: Path, workers: int, batch: bool, progress: _Progress, every: float
           ) -> None:
    if workers <= 1:
        for group in groups:
            train_group(out, group, batch, progress, every)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    threads = max(1, (os.cpu_count() or 1) // workers)
    context = multiprocessing.get_context("spawn")  # torch's thread pools do not survive fork
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = {}
        for group in groups:
            futures[pool.submit(_pool_worker, str(out), group, batch, threads, every)] = group
            for spec in group:
                progress("running", spec.key)
        for future in as_completed(futures):
            try:
                status = future.result()
            except Exception:  # noqa: BLE001 - a killed pool process: its runs stay unfinished
                status = {spec.key: "busy" for spec in futures[future]}
            for key, event in status.items():
                progress(event, key)


def _ray_module():
    """The ``ray`` module, or a one-line ConfigError naming the extra to install."""
    try:
        import ray
    except ModuleNotFoundError:
        from fedbound.extras import install_command

        raise ConfigError(f"executor = 'ray' needs Ray: install the ray extra: {install_command('ray')}"
                          ) from None
    return ray


def _ray(groups: list[list], out: Path, workers: int | None, address: str | None, batch: bool,
         progress: _Progress, every: float) -> None:
    ray = _ray_module()
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(_pool_worker)
        pending = {}
        for group in groups:
            pending[remote.remote(str(out.resolve()), group, batch, 1, every)] = group
            for spec in group:
                progress("running", spec.key)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            group = pending.pop(ready[0])
            try:
                status = ray.get(ready[0])
            except Exception:  # noqa: BLE001 - a lost worker: its runs stay unfinished
                status = {spec.key: "busy" for spec in group}
            for key, event in status.items():
                progress(event, key)
    finally:
        if started:
            ray.shutdown()


def execute(specs: Sequence, out: Path, *, executor: str, workers: int | None, address: str | None,
            batch: bool, progress: bool, total: int, checkpoint_every_s: float = 5.0) -> None:
    """Train ``specs`` (all unfinished) into ``out`` with the chosen executor (module docstring)."""
    if executor not in EXECUTORS:
        raise ConfigError(f"executor = {executor!r} is outside its valid range: one of "
                          f"{', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise ConfigError(f"address = {address!r} needs executor = 'ray'")
    if executor == "ray":
        _ray_module()  # a missing extra is said before the progress bar is drawn
    planned = {s.key: s.prepare().rounds for s in specs} if progress else {}
    bar = _Progress(total, total - len(specs), progress, out, planned)
    try:
        groups = group_specs(specs, batch)
        if executor == "local":
            n = workers or 1
            _local(_split(groups, n) if n > 1 else groups, out, n, batch, bar, checkpoint_every_s)
        else:
            _ray(_split(groups, workers or os.cpu_count() or 1), out, workers, address, batch, bar,
                 checkpoint_every_s)
    finally:
        bar.close()
