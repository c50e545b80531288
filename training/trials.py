"""Audit trials: independent runs of one round's federation through the algorithm's own hooks, streamed in
batches, with the noise those runs really draw.

A *trial* is one run of the federation ``participants`` (aggregation ``weights``) for ``len(starts)``
rounds, every round started from ``starts[t]`` (the global models of a real run; nothing of a trial carries
over into its next round), with the target's data changed by the trial's neighbour (None: D), under the
plan's sigma's times ``scale``, and with its own seed ``seeds[k]``.  Every draw a hook makes through the
context comes from ``Streams(seeds[k])`` as in a run with that seed (:class:`TrialStreams`): client ``j``'s
noise in round ``t`` is ``Streams(seed).normal((stage, t, *key), [j], shape)``, the server's is the run's
``[-1]`` row, mini-batch and Poisson keys are the run's rows of its population draw.  Nothing is drawn on
the side: a stream that ignores the round, or a sigma that is wrong for one client, shows in the trials.

Hooks see a batch of ``groups`` federation copies as clients ``g * width + position`` (copy ``g`` of
``participants[position]``); :class:`TrialContext` reads ``ctx.sigma`` at the original client ids, from
the original plan (the plan in force in each round, e.g. CRD's), so per-client noise is what the run adds.

Memory: :func:`run_trials` yields one :class:`TrialRuns` per batch of :func:`batch_size` trials, so the
working set does not depend on the trial count.  CPU: where local training draws nothing (counted by
:class:`TrialStreams`), each round's local models of D's participants and of the changed target are computed
once (:class:`LocalCache`) and every trial starts its upload from them; where drawing every participant's
noise per trial would cost more than ``OTHERS_DRAW_BUDGET`` normals, the other participants enter the
aggregate in law (``others_in_law``: their noise-free uploads plus one Gaussian vector per trial with the
per-coordinate std ``sqrt(sum_{j != target} p_j^2 sigma_j^2)``, the law of ``sum_j p_j sigma_j xi_j``).
:func:`verify` runs a few trials in full (every copy trained by ``local_update``, every upload noised by its
own stream) and compares them with the fast path bit for bit, and checks that each participant's upload is
its noise-free upload plus ``sigma_j xi_j`` from its stream (what ``others_in_law`` needs).

:func:`coupled_shifts` measures each noise stage's sensitivity as adaptive composition needs it: D and D'
run side by side with the same seed, every noise call records the target's input on both and hands D' the
same noised output as D, so a later stage (DP-PFL's outer step at the noised inner model) is measured
given equal earlier releases; with random local training, the shift's distribution over ``pairs`` seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.engine import Algorithm, RoundContext, RunOptions, RunState, auto_chunk_size
from fedbound.training.federation import ClientData
from fedbound.training.models import Model
from fedbound.training.noise import Streams, add_gaussian_noise, derive_seed
from fedbound.training.plan import NoisePlan
from fedbound.training.trial_streams import TrialContext, TrialStreams, _CoupledContext

__all__ = ["Change", "TrialSetup", "TrialRuns", "TrialStreams", "TrialContext", "LocalCache", "run_trials",
           "batch_size", "local_cache", "verify", "coupled_shifts", "replicate", "trial_seeds",
           "OTHERS_DRAW_BUDGET", "BATCH_MEMORY_MB"]

Change = Any
"""A copy's change of the target: None, a ``sensitivity.Replacement``, a tuple of them (client level), or a
``{client id: change}`` mapping (several participants changed, e.g. one canary each)."""

OTHERS_DRAW_BUDGET = 200_000_000
"""Normals the other participants' per-trial noise may cost in all before they enter the aggregate in law."""
BATCH_MEMORY_MB = 192.0
"""The working set one batch of trials aims at."""


@dataclass(frozen=True)
class TrialSetup:
    """What the trials of one audit share: the algorithm (as the audit prepares it), model, the original
    federation, the target, round 1's participants and weights, the starts ``(rounds, d)``, the plan whose
    sigma's the trials use (``plan.stage_sigma(stage, t)`` in round ``t``), options, whether the aggregate
    and the server update run (``broadcast``) and whether every participant trains."""

    algorithm: Algorithm
    model: Model
    data: ClientData
    target: int
    participants: np.ndarray
    weights: np.ndarray
    starts: torch.Tensor
    plan: NoisePlan | None
    options: RunOptions
    broadcast: bool = True
    everyone: bool = True
    """Train every participant (else the target alone; a broadcast needs everyone)."""

    def narrowed(self) -> TrialSetup:
        """The federation the trials run: all participants, or the target alone (``everyone`` false and no
        broadcast)."""
        if self.broadcast or self.everyone:
            return self
        keep = np.asarray(self.participants) == self.target
        return replace(self, participants=np.array([self.target]), weights=np.asarray(self.weights)[keep])

    @property
    def position(self) -> int:
        return int(np.flatnonzero(np.asarray(self.participants) == self.target)[0])

    @property
    def width(self) -> int:
        return len(self.participants)

    @property
    def rounds(self) -> int:
        return len(self.starts)


@dataclass
class TrialRuns:
    """What the trials of one batch released, ``(rounds, trials, d)``: the target's upload, the aggregate
    ``sum_j p_j upload_j`` and the server's output (None without a broadcast), the target's rows of every
    ``sensitivity.record_release``; with ``clients`` kept, every participant's upload and releases
    ``(rounds, trials, width, d)``."""

    uploads: torch.Tensor
    aggregates: torch.Tensor | None = None
    broadcasts: torch.Tensor | None = None
    releases: dict[str, torch.Tensor] = field(default_factory=dict)
    client_uploads: torch.Tensor | None = None
    client_releases: dict[str, torch.Tensor] = field(default_factory=dict)

    def __getitem__(self, rows: slice) -> TrialRuns:
        """The trials ``rows`` (a slice over the second axis)."""
        def cut(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[:, rows]
        return TrialRuns(cut(self.uploads), cut(self.aggregates), cut(self.broadcasts),
                         {k: cut(v) for k, v in self.releases.items()}, cut(self.client_uploads),
                         {k: cut(v) for k, v in self.client_releases.items()})

    def first_rounds(self, rounds: int) -> TrialRuns:
        def cut(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[:rounds]
        return TrialRuns(cut(self.uploads), cut(self.aggregates), cut(self.broadcasts),
                         {k: cut(v) for k, v in self.releases.items()}, cut(self.client_uploads),
                         {k: cut(v) for k, v in self.client_releases.items()})


def trial_seeds(seed: int, side: str, first: int, count: int) -> list[int]:
    """The seeds of trials ``first .. first + count - 1`` of one side (``"out"``, ``"in"``, ...): each a seed
    of its own, derived from ``seed`` (``noise.derive_seed``), so trials never share a stream."""
    return [derive_seed(int(seed), "audit trial", side, k) & 0x7FFFFFFF for k in range(first, first + count)]


def replicate(data: ClientData, clients: np.ndarray, target: int, changes: Sequence[Change]) -> ClientData:
    """``len(changes)`` copies of the federation ``clients`` (in this order, ``target`` among them), copy
    ``g``'s ``target`` changed by ``changes[g]`` (a mapping: each named client changed): client
    ``g * len(clients) + j`` is copy ``g`` of ``clients[j]``."""
    from fedbound.training.sensitivity import neighbours

    clients = np.asarray(clients, dtype=np.int64)
    groups, width = len(changes), len(clients)
    idx = torch.as_tensor(np.tile(clients, groups), device=data.x.device)
    x, y, mask = data.x[idx].clone(), data.y[idx].clone(), data.mask[idx].clone()
    per_client: dict[int, list[tuple[int, Any]]] = {}
    for g, change in enumerate(changes):
        items = change.items() if isinstance(change, Mapping) else [(target, change)]
        for client, one in items:
            per_client.setdefault(int(client), []).append((g, one))
    for client, pairs in per_client.items():
        pos = np.flatnonzero(clients == client)
        if not len(pos):
            raise ParameterError("changed client", client, "one of the trial federation's participants")
        own = neighbours(data, client, [one for _, one in pairs])
        n = int(data.sizes[client])
        rows = torch.as_tensor([g * width + int(pos[0]) for g, _ in pairs], device=data.x.device)
        x[rows, :n], y[rows, :n] = own.x, own.y
    return ClientData(x, y, mask, np.tile(data.sizes[clients], groups).astype(np.int64))


def _scaled(plan: NoisePlan | None, scale: float) -> NoisePlan | None:
    """The mechanism the trials run: the plan's sigma's times ``scale`` (a test hook).  The trials' plan
    only says what noise to draw (the audited ledger keeps the original); a scale of 0 (the dropped-noise
    bug) promises nothing, so its budget is inf, which NoisePlan needs to accept zero noise."""
    if plan is None or scale == 1.0:
        return plan
    budget = plan.eps if scale > 0 else math.inf
    return replace(plan, sigma={k: np.asarray(v) * scale for k, v in plan.sigma.items()}, eps=budget)


class _Recorder:
    """Collects a batch's releases (``record_release``), the target's rows and, with ``keep``, every row."""

    def __init__(self, rounds: int, groups: int, width: int, position: int, dim: int, keep: bool) -> None:
        self.rounds, self.groups, self.width, self.position, self.keep = rounds, groups, width, position, keep
        self.dim = dim
        self.releases: dict[str, torch.Tensor] = {}
        self.client_releases: dict[str, torch.Tensor] = {}
        self.shifts: dict[str, list[tuple[int, float]]] = {}

    def release(self, ctx: RoundContext, name: str, clients: np.ndarray, values: torch.Tensor) -> None:
        rows = values.detach().to("cpu", torch.float64 if values.dtype == torch.float64 else values.dtype)
        group, pos = np.divmod(np.asarray(clients, dtype=np.int64), self.width)
        mine = pos == self.position
        buf = self.releases.setdefault(name, torch.zeros((self.rounds, self.groups, rows.shape[-1]),
                                                         dtype=rows.dtype))
        buf[ctx.round, torch.as_tensor(group[mine])] = rows[torch.as_tensor(mine)]
        if self.keep:
            every = self.client_releases.setdefault(
                name, torch.zeros((self.rounds, self.groups, self.width, rows.shape[-1]), dtype=rows.dtype))
            every[ctx.round, torch.as_tensor(group), torch.as_tensor(pos)] = rows


@dataclass
class LocalCache:
    """Each round's local models (``(rounds, width, d)``) of D's participants and of the changed target
    (``(rounds, d)`` per change key), computed once (module docstring)."""

    plain: torch.Tensor
    changed: dict[int, torch.Tensor]
    participants: np.ndarray
    clean_uploads: torch.Tensor | None = None
    """``(rounds, width, d)`` noise-free uploads of D's participants (for ``others_in_law``)."""


def _state(setup: TrialSetup, plan: NoisePlan | None) -> RunState:
    return RunState(round=0, rounds=setup.rounds, global_params=setup.starts[0].clone(), plan=plan)


def _contexts(setup: TrialSetup, fed: ClientData, seeds: Sequence[int], salt: int, plan: NoisePlan | None,
              recorder: _Recorder, coupled: bool = False) -> tuple[TrialStreams, Any]:
    streams = TrialStreams(seeds, setup.participants, salt, setup.options.device, setup.data.num_clients,
                           setup.data.n_max)
    state = _state(setup, plan)
    cls = _CoupledContext if coupled else TrialContext

    def make(round_: int) -> TrialContext:
        state.round = round_
        return cls(round_, state, setup.model, fed, streams, setup.options, recorder)
    return streams, make


def _local_rounds(setup: TrialSetup, fed: ClientData, make: Any, copies: np.ndarray, t: int) -> torch.Tensor:
    """``local_update`` of ``copies`` in round ``t``, in the engine's chunks."""
    ctx = make(t)
    start = setup.starts[t].to(ctx.device, ctx.dtype)
    chunk = auto_chunk_size(setup.model, fed, setup.options)
    parts = []
    for lo in range(0, len(copies), chunk):
        part = copies[lo:lo + chunk]
        parts.append(setup.algorithm.local_update(ctx, part, start.unsqueeze(0).expand(len(part), -1),
                                                  fed.gather(part)))
    return torch.cat(parts)


def _aggregate(uploads: torch.Tensor, weights: torch.Tensor, groups: int) -> torch.Tensor:
    """``(groups, d)``: ``sum_j p_j upload_j`` per copy (uploads in copy order)."""
    return (uploads.reshape(groups, len(weights), -1) * weights[None, :, None]).sum(dim=1)


def _drive(setup: TrialSetup, changes: Sequence[Change], seeds: Sequence[int], salt: int,
           plan: NoisePlan | None, keep: bool, cache: LocalCache | None = None,
           change_keys: Sequence[int] | None = None, others_in_law: str | None = None,
           coupled: bool = False) -> tuple[TrialRuns, _Recorder, int]:
    """One batch: the federation copies of ``changes`` (one seed each) through the hooks (module docstring).
    Returns the runs, the recorder (releases, coupled shifts) and the draws made in local training."""
    setup = setup.narrowed()
    groups, width, pos, rounds = len(changes), setup.width, setup.position, setup.rounds
    dim = setup.model.n_params
    dtype = setup.options.dtype
    recorder = _Recorder(rounds, groups, width, pos, dim, keep)
    if cache is None:
        fed = replicate(setup.data, setup.participants, setup.target, changes)
    else:  # uploads start from cached local models: the hooks read no training data (:func:`verify`)
        fed = ClientData(torch.zeros((groups * width, 1, *setup.data.feature_shape), dtype=dtype),
                         torch.zeros((groups * width, 1), dtype=setup.data.y.dtype),
                         torch.ones((groups * width, 1), dtype=torch.bool),
                         np.tile(setup.data.sizes[setup.participants], groups).astype(np.int64))
    fed = fed.to(setup.options.device, dtype)
    streams, make = _contexts(setup, fed, seeds, salt, plan, recorder, coupled)
    weights = torch.as_tensor(np.asarray(setup.weights, np.float64), dtype=dtype, device=streams.device)
    all_copies = np.arange(groups * width, dtype=np.int64)
    target_copies = all_copies[pos::width]
    uploads = torch.zeros((rounds, groups, dim), dtype=dtype)
    every = torch.zeros((rounds, groups, width, dim), dtype=dtype) if keep else None
    aggregates = torch.zeros((rounds, groups, dim), dtype=dtype) if setup.broadcast else None
    broadcasts = torch.zeros((rounds, groups, dim), dtype=dtype) if setup.broadcast else None
    ctx0 = make(0)
    ctx0.state.client_state = setup.algorithm.init_client_state(ctx0)
    ctx0.state.algo_state = setup.algorithm.init_algo_state(ctx0)
    local_draws = 0
    for t in range(rounds):
        if cache is None:
            before = streams.draws
            local = _local_rounds(setup, fed, make, all_copies, t)
            local_draws += streams.draws - before
        elif others_in_law is not None:  # the target's rows only
            plain = cache.plain[t][_cache_row(cache, setup.target)].to(streams.device, dtype)
            local = plain.unsqueeze(0).repeat(groups, 1)
            for g, key in enumerate(change_keys or [None] * groups):
                if key is not None:
                    local[g] = cache.changed[key][t].to(streams.device, dtype)
        else:
            rows = [_cache_row(cache, c) for c in setup.participants]
            local = cache.plain[t][rows].to(streams.device, dtype).repeat(groups, 1)
            for g, key in enumerate(change_keys or [None] * groups):
                if key is not None:
                    local[g * width + pos] = cache.changed[key][t].to(streams.device, dtype)
        ctx = make(t)
        ctx.participants, ctx.weights = all_copies, np.tile(np.asarray(setup.weights, np.float64), groups)
        if others_in_law is None:
            up = setup.algorithm.upload(ctx, all_copies, local)
            rows = up.detach().to("cpu", dtype)
            uploads[t] = rows[pos::width]
            if every is not None:
                every[t] = rows.reshape(groups, width, dim)
            agg = _aggregate(up, weights, groups) if setup.broadcast else None
        else:
            up = setup.algorithm.upload(ctx, target_copies, local)
            uploads[t] = up.detach().to("cpu", dtype)
            agg = _in_law(setup, cache, ctx, up, weights, t, others_in_law, streams)
        if setup.broadcast:
            aggregates[t] = agg.detach().to("cpu", dtype)
            out = setup.algorithm.server_update(ctx, agg)
            if tuple(out.shape) != (groups, dim):
                raise ConfigError(f"audit: {setup.algorithm.name}'s server_update returned shape "
                                  f"{tuple(out.shape)} for the trial aggregates {(groups, dim)}: it must "
                                  "act row by row")
            broadcasts[t] = out.detach().to("cpu", dtype)
    runs = TrialRuns(uploads, aggregates, broadcasts, recorder.releases, every, recorder.client_releases)
    return runs, recorder, local_draws


def _cache_row(cache: LocalCache, client: int) -> int:
    return int(np.flatnonzero(cache.participants == client)[0])


def _in_law(setup: TrialSetup, cache: LocalCache, ctx: TrialContext, target_up: torch.Tensor,
            weights: torch.Tensor, t: int, stage: str, streams: TrialStreams) -> torch.Tensor:
    """The aggregate of each copy with the other participants in law (module docstring): their noise-free
    uploads, plus one Gaussian vector per copy drawn from the copy's run (key ``"audit others"``) with the
    std their noise has in the aggregate (``ctx.sigma`` of every other participant)."""
    width, pos = setup.width, setup.position
    others = np.array([j for j in range(width) if j != pos], dtype=np.int64)
    clean = cache.clean_uploads[t].to(streams.device, target_up.dtype)
    base = (weights[others, None] * clean[others]).sum(dim=0) if len(others) else torch.zeros_like(clean[0])
    sig = ctx.sigma(stage, others).to(target_up.dtype)
    std = torch.sqrt(torch.sum(weights[others] ** 2 * sig**2)) if len(others) else torch.zeros(())
    draws = streams.per_run(("audit others", stage, t), -2, (target_up.shape[1],), target_up.dtype)
    return base.unsqueeze(0) + weights[pos] * target_up + std * draws


def batch_size(setup: TrialSetup, keep: bool, in_law: bool, cached: bool, memory_mb: float = BATCH_MEMORY_MB
               ) -> int:
    """Trials per batch: the working set (about 8 parameter vectors per trained copy, the kept rows and,
    without ``cached`` local models, the replicated data) near ``memory_mb`` (module docstring), even, at
    least 2."""
    item = torch.empty(0, dtype=setup.options.dtype).element_size()
    narrow = setup.narrowed()
    copies = 1 if in_law else narrow.width
    kept = 4 * setup.rounds * (1 + (narrow.width if keep else 0))
    per_trial = item * setup.model.n_params * (8 * copies + kept)
    if not cached:
        per_trial += item * narrow.width * setup.data.n_max * math.prod(setup.data.feature_shape)
    size = int(memory_mb * 2**20 // max(per_trial, 1))
    return max(2, size - size % 2)


def local_cache(setup: TrialSetup, changes: Mapping[int, Change], seed: int, plan: NoisePlan | None
                ) -> LocalCache | None:
    """Each round's local models of D's participants and of the target under each of ``changes`` (key ->
    change) when local training draws nothing (else None); also the noise-free uploads of D."""
    setup = setup.narrowed()
    keys = list(changes)
    runs = [None, *(changes[k] for k in keys)]
    fed = replicate(setup.data, setup.participants, setup.target, runs).to(setup.options.device,
                                                                           setup.options.dtype)
    recorder = _Recorder(setup.rounds, len(runs), setup.width, setup.position, setup.model.n_params, False)
    streams, make = _contexts(setup, fed, [seed] * len(runs), seed, plan, recorder)
    ctx0 = make(0)
    ctx0.state.client_state = setup.algorithm.init_client_state(ctx0)
    ctx0.state.algo_state = setup.algorithm.init_algo_state(ctx0)
    width, pos = setup.width, setup.position
    plain, changed = [], {k: [] for k in keys}
    for t in range(setup.rounds):
        local = _local_rounds(setup, fed, make, np.arange(len(runs) * width, dtype=np.int64), t)
        plain.append(local[:width].detach().cpu())
        for g, key in enumerate(keys, start=1):
            changed[key].append(local[g * width + pos].detach().cpu())
    if streams.draws:
        return None
    cache = LocalCache(torch.stack(plain), {k: torch.stack(v) for k, v in changed.items()},
                       np.asarray(setup.participants, dtype=np.int64))
    cache.clean_uploads = _every_clean(setup, cache, seed)
    return cache


def _every_clean(setup: TrialSetup, cache: LocalCache, seed: int) -> torch.Tensor:
    """``(rounds, width, d)``: every participant's noise-free upload from the cached local models."""
    runs, _, _ = _drive(setup.narrowed(), [None], [seed], seed, None, True, cache=cache, change_keys=[None])
    return runs.client_uploads[:, 0]


def run_trials(setup: TrialSetup, changes: Sequence[Change], seeds: Sequence[int], *, scale: float = 1.0,
               keep_clients: bool = False, cache: LocalCache | None = None,
               change_keys: Sequence[int | None] | None = None, others_in_law: str | None = None,
               batch: int | None = None, salt: int = 0) -> Iterator[tuple[int, TrialRuns]]:
    """``(first trial, TrialRuns)`` per batch of the trials ``changes[k]`` with seeds ``seeds[k]`` under the
    plan's sigma's times ``scale`` (module docstring); ``cache`` with ``change_keys`` (the cache key of each
    trial's change, None: D) starts uploads from cached local models; ``others_in_law``: the stage of the
    other participants' noise in the aggregate, drawn in law."""
    if len(changes) != len(seeds):
        raise ParameterError("trial seeds", len(seeds), f"one per trial ({len(changes)})")
    plan = _scaled(setup.plan, scale)
    size = batch or batch_size(setup, keep_clients, others_in_law is not None, cache is not None)
    keys = list(change_keys) if change_keys is not None else [None] * len(changes)
    for lo in range(0, len(changes), size):
        hi = min(lo + size, len(changes))
        runs, _, _ = _drive(setup, changes[lo:hi], seeds[lo:hi], derive_seed(salt, "batch", lo) & 0x7FFFFFFF,
                            plan, keep_clients, cache=cache, change_keys=keys[lo:hi],
                            others_in_law=others_in_law)
        yield lo, runs


def verify(setup: TrialSetup, changes: Sequence[Change], seeds: Sequence[int], cache: LocalCache,
           change_keys: Sequence[int | None], others_in_law: str | None, scale: float = 1.0
           ) -> tuple[TrialRuns, str | None]:
    """The trials in full (every copy trained, every participant's upload noised by its own stream), and
    why the fast path differs from them (None: bit for bit the same; with ``others_in_law``, every
    participant's upload is its noise-free upload plus ``sigma_j xi_j`` of its stream)."""
    plan = _scaled(setup.plan, scale)
    full, _, _ = _drive(setup, changes, seeds, 0, plan, True)
    fast, _, _ = _drive(setup, changes, seeds, 0, plan, False, cache=cache, change_keys=change_keys,
                        others_in_law=others_in_law)
    if not torch.equal(full.uploads, fast.uploads):
        return full, "the target's uploads differ from the full trials (local training is not deterministic)"
    for name, values in full.releases.items():
        if name not in fast.releases or not torch.equal(values, fast.releases[name]):
            return full, f"the release {name!r} differs from the full trials"
    if others_in_law is None:
        if setup.broadcast and not (torch.equal(full.aggregates, fast.aggregates)
                                    and torch.equal(full.broadcasts, fast.broadcasts)):
            return full, "the broadcasts differ from the full trials"
        return full, None
    return full, _linear(setup, cache, full, seeds, plan, others_in_law)


def _linear(setup: TrialSetup, cache: LocalCache, full: TrialRuns, seeds: Sequence[int],
            plan: NoisePlan | None, stage: str) -> str | None:
    """None when every participant's upload in ``full`` is its noise-free upload plus ``sigma xi`` of its
    stream (the premise of ``others_in_law``), else why not."""
    setup = setup.narrowed()
    width = setup.width
    state = _state(setup, plan)
    for g, seed in enumerate(seeds):
        run = Streams(seed, setup.options.device)
        for t in range(setup.rounds):
            ctx = RoundContext(t, state, setup.model, setup.data, run, setup.options, None)
            sigma = ctx.sigma(stage, setup.participants)
            xi = run.normal((stage, t), setup.participants, (setup.model.n_params,), setup.options.dtype)
            clean = cache.clean_uploads[t].to(xi.device, xi.dtype)
            expected = add_gaussian_noise(clean, sigma, xi).cpu()
            for j in range(width):
                if j != setup.position and not torch.equal(full.client_uploads[t, g, j], expected[j]):
                    return (f"client {int(setup.participants[j])}'s upload is not its noise-free upload plus "
                            f"its {stage} noise")
    return None


def coupled_shifts(setup: TrialSetup, change: Change, seeds: Sequence[int], scale: float = 1.0
                   ) -> dict[str, np.ndarray]:
    """Per noise stage, ``(calls,)`` the shift of the target's input to each noise call between D and D'
    run side by side with one seed per pair, D' handed D's noised output (module docstring); one entry per
    call, round and pair.  The target alone (its noise stages do not read the other participants)."""
    alone = replace(setup, broadcast=False, everyone=False)
    pairs: list[Change] = []
    both: list[int] = []
    for seed in seeds:
        pairs += [None, change]
        both += [seed, seed]
    plan = _scaled(setup.plan, scale)
    _, recorder, _ = _drive(alone, pairs, both, 0, plan, False, coupled=True)
    return {stage: np.array([s for _, s in values]) for stage, values in recorder.shifts.items()}
