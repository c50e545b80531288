"""The engine: trains the clients of a round as one batch, adds the planned noise, counts the privacy.

How a round runs
================

For round ``t`` (0-based; reported as ``round = t + 1``) the engine calls the algorithm's hooks in this
order, with a :class:`RoundContext` ``ctx``::

    participants = algo.participants(ctx)                      # sorted client ids
    weights      = algo.aggregation_weights(ctx, participants) # numpy, one per participant
    -- the ledger computes the round's releases; PrivacyBudgetExceeded if they would exceed the budget --
    for each chunk of participants:                            # one chunk unless memory says otherwise
        start  = algo.start_models(ctx, chunk)                 # (k, d): the models the clients start from
        local  = algo.local_update(ctx, chunk, start, batch)   # (k, d): local training
        upload = algo.upload(ctx, chunk, local)                # (k, d): clipping, uplink noise, channel
        aggregate += weights[chunk] @ upload
    new_global = algo.server_update(ctx, aggregate)            # (d,): server noise, quantisation ...
    algo.after_round(ctx, new_global)                          # per-client state, e.g. downlinks
    -- the ledger commits the releases; metrics are evaluated and recorded --
    new_plan = algo.end_of_round(ctx, global_metrics)          # None, or a changed NoisePlan (CRD)

``d`` is ``model.n_params``; models are flat vectors, ``k`` clients' models a ``(k, d)`` tensor.
``batch`` is a :class:`~fedbound.training.federation.ClientBatch` of the chunk's data, padded, on the device.

What an algorithm file defines
==============================

A subclass of :class:`Algorithm` overriding only what differs from plain FedAvg (every hook has a
default: all clients, weights ``|D_i| / sum |D_j|``, start from the global model, ``LocalSGD``, upload as
is, plain average).  Hooks:

* ``participants(ctx)``: participation.  Use ``fedbound.training.participation``
  (``all_clients``, ``uniform_subset(ctx.rng("participation"), N, K)``, ``round_robin``, ``scheduled``).
* ``aggregation_weights(ctx, participants)``: the ``p_i``.  They need not sum to 1.
* ``start_models(ctx, clients)``: default ``ctx.global_params`` for everyone.  Per-client starting
  points (e.g. a different noisy downlink per client) come from ``ctx.client_state``.
* ``local_update(ctx, clients, start, batch)``: the local training.  Build it from
  ``fedbound.training.local`` (``LocalSGD`` with ``prox_mu``, ``per_sample_clip``, ``batch_size``,
  ``sample_rate``, ``step_hook``; ``batch_gradient``; ``select_minibatch``) and
  ``fedbound.training.clipping`` (``per_sample_clipped_grad``: DP-SGD per-sample clipping).
* ``upload(ctx, clients, local)``: what leaves the client: ``clip_rows`` (whole model vector), then
  ``ctx.add_noise("uplink", x, clients)``, then channel effects (quantisation, element errors).
* ``server_update(ctx, aggregate)``: e.g. ``ctx.add_noise("server", aggregate)``.
* ``after_round(ctx, new_global)`` and ``end_of_round(ctx, metrics)``: bookkeeping; ``end_of_round`` may
  return a new :class:`~fedbound.training.plan.NoisePlan` (and set ``ctx.state.rounds``) to change the
  remaining rounds' noise and their number (seed 003's CRD does).
* ``init_client_state(ctx) -> dict[str, Tensor (N, d)]`` and ``init_algo_state(ctx) -> dict``: extra state
  that is checkpointed (``ctx.client_state``, ``ctx.algo_state``; keep ``algo_state`` to plain Python and
  numpy values).
* ``eval_models(ctx) -> Tensor (1, d) or (N, d)``: the model(s) metrics are computed for (personalised
  algorithms return one model per client).
* attributes: ``name``, ``rounds`` (the T to run; the plan's when there is one), ``weight_decay``
  (reported in the loss).

Noise comes only through the context: ``ctx.sigma(stage, clients)`` is the plan's std for this round
(zero in a non-private run), ``ctx.noise(stage, clients, shape, *key)`` standard normal draws from the
per-client streams, and ``ctx.add_noise(stage, x, clients)`` = ``x + sigma * noise``.  Stage names are
the plan's (``"uplink"``, ``"server"``, ``"local"``, or new ones the algorithm and its noise plan agree
on).  Because the ledger reads the same plan, what is added is what is counted.

A minimal algorithm file
========================

::

    class ClippedFedAvg(Algorithm):            # "clip the model, noise the upload": NbAFL without prox/server
        name = "clipped_fedavg"

        def __init__(self, rounds, clip_norm, local):
            super().__init__(rounds, local)
            self.clip_norm = clip_norm

        def upload(self, ctx, clients, local):
            clipped, norms = clip_rows(local, self.clip_norm)
            ctx.log("clipped", float((norms > self.clip_norm).sum()))
            return ctx.add_noise("uplink", clipped, clients)

    plan = NoisePlan(rounds=T, num_clients=N, sigma={"uplink": np.full(T, s)},
                     sensitivity={"uplink": 2 * C / m}, eps=eps, delta=delta,
                     views=(View("uplink", "upload"),))
    result = run(ClippedFedAvg(T, C, LocalSGD(steps=5, lr=0.1)), model, data, plan=plan)

``nbafl.py`` and ``udp.py`` are the worked examples (whole-model clipping with uplink + server noise and
K-of-N scheduling; per-sample clipping with per-client sigma and a plan that changes mid-run).  A paper
whose own privacy accounting is none of ``privacy.PAPER_ACCOUNTANTS`` adds it there (one branch in
``PrivacyLedger._record`` and ``_paper``).

How plans come in
=================

A :class:`~fedbound.training.plan.NoisePlan` (sigma per stage per round, sensitivities, the budget, the
views an adversary has and the accountants) is built *outside* training/, by the
``fedbound.validation.recipes.<algo>`` recipes from a config through ``fedbound.bounds`` /
``fedbound.accounting``, or by hand.  ``run(..., plan=None)`` trains without noise and without
accounting.  Participation is decided each round by the algorithm (``participants``); a precomputed
schedule is passed to the algorithm's constructor and read with ``participation.scheduled``.

What the engine records
=======================

Every round: one global row (``client`` empty) and, with ``eval_clients``, one row per client, in a tidy
pandas table (``metrics.py``): ``round``, ``client``, ``loss`` (training loss ``sum_i p_i F_i`` of the
evaluated model, p_i by data size; per client: ``F_i``), ``accuracy``, ``test_loss``, ``test_accuracy``,
``sigma`` (global row: the std of the noise in the broadcast model; client rows: the uplink std the client
added, 0 when it sat out), ``sigma_<stage>``, ``participated``, ``epsilon_spent`` (tight accountant, the
maximum over clients and adversaries; the budget binds on it unless ``plan.paper_reproduction``),
``epsilon_spent_paper`` (the paper's accountant, the paper's claim),
``epsilon_<group>`` per adversary group, ``clipped_fraction`` and whatever the algorithm puts in
``ctx.log(name, value)``.  Checkpoints go to ``run_dir/checkpoint.pt`` after every round; a run started
again on the same ``run_dir`` with the same ``run_key`` resumes at its last round and gives identical
numbers (all randomness is keyed by (seed, round, stage, client), see ``noise.py``).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, FedboundWarning, TrainingDiverged
from fedbound.training import checkpoint as ckpt
from fedbound.training import metrics as metrics_mod
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.local import LocalSGD
from fedbound.training.models import Model
from fedbound.training.noise import Streams, add_gaussian_noise
from fedbound.training.participation import all_clients
from fedbound.training.plan import NoisePlan
from fedbound.training.privacy import PrivacyLedger

__all__ = ["Algorithm", "RoundContext", "RunState", "RunOptions", "RunResult", "Runner", "run", "drive"]


@dataclass
class RunState:
    """Everything a checkpoint holds: rounds done, the planned total, models, algorithm state, metrics."""

    round: int
    rounds: int
    global_params: torch.Tensor
    client_state: dict[str, torch.Tensor] = field(default_factory=dict)
    algo_state: dict[str, Any] = field(default_factory=dict)
    plan: NoisePlan | None = None
    rows: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)
    """Metrics of the initial model, before round 1 (``loss``, ``accuracy``, ...; empty without eval)."""


@dataclass(frozen=True)
class RunOptions:
    """Engine settings that do not change the algorithm's math (except ``seed``, ``device``, ``dtype``)."""

    seed: int = 0
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    chunk_size: int = 0
    memory_budget_mb: float = 1024.0
    eval_every: int = 1
    eval_clients: bool = True
    progress: bool = False
    checkpoint_every_s: float = 0.0
    """With a run directory: checkpoint after a round once this many seconds passed since the last
    checkpoint (and always after the last round); 0 = after every round.  Sweeps of many short runs use
    a few seconds: a killed run then redoes at most that much."""

    def evaluates(self, done: int, total: int) -> bool:
        """Evaluate after round ``done`` (1-based)?  Every ``eval_every`` rounds and after the last; never
        with ``eval_every = 0`` (benchmarks, sweeps that only need the final model)."""
        return self.eval_every > 0 and (done % self.eval_every == 0 or done >= total)


class RoundContext:
    """What the hooks of one round see (module docstring)."""

    def __init__(self, round_: int, state: RunState, model: Model, data: ClientData, streams: Streams,
                 options: RunOptions, test: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        self.round = round_
        self.state = state
        self.model = model
        self.data = data
        self.streams = streams
        self.options = options
        self.test = test
        self.participants = np.zeros(0, dtype=np.int64)
        self.weights = np.zeros(0)
        self.logs: dict[str, float] = {}
        self.noise_std: dict[str, list[float]] = {}

    @property
    def plan(self) -> NoisePlan | None:
        return self.state.plan

    @property
    def num_clients(self) -> int:
        return self.data.num_clients

    @property
    def device(self) -> torch.device:
        return self.streams.device

    @property
    def dtype(self) -> torch.dtype:
        return self.options.dtype

    @property
    def global_params(self) -> torch.Tensor:
        return self.state.global_params

    @property
    def client_state(self) -> dict[str, torch.Tensor]:
        return self.state.client_state

    @property
    def algo_state(self) -> dict[str, Any]:
        return self.state.algo_state

    def rng(self, *key: object) -> np.random.Generator:
        """A numpy Generator for this round's host-side decisions, keyed by ``key``."""
        return self.streams.numpy(*key, self.round)

    def sigma(self, stage: str, clients: np.ndarray | None = None) -> torch.Tensor:
        """This round's noise std of ``stage`` per client, ``(k,)`` (one value for ``clients=None``); zeros
        without a plan."""
        n = 1 if clients is None else len(clients)
        if self.plan is None:
            return torch.zeros(n, dtype=self.dtype, device=self.device)
        who = np.zeros(1, np.int64) if clients is None else clients
        values = self.plan.stage_sigma(stage, self.round, who)
        return torch.as_tensor(values, dtype=self.dtype, device=self.device)

    def noise(self, stage: str, clients: np.ndarray | None, shape: tuple[int, ...], *key: object
              ) -> torch.Tensor:
        """Standard normal draws ``(k, *shape)`` from the per-client streams keyed (stage, round, key)."""
        clients = np.array([-1]) if clients is None else clients
        return self.streams.normal((stage, self.round, *key), clients, shape, self.dtype)

    def add_noise(self, stage: str, x: torch.Tensor, clients: np.ndarray | None = None, *key: object
                  ) -> torch.Tensor:
        """``x + sigma N(0, I)`` with the plan's std for ``stage``; ``x``: ``(k, d)`` or ``(d,)`` (server).

        ``key`` (e.g. the local step) separates several draws of one stage in one round (DP-SGD steps)."""
        sigma = self.sigma(stage, clients)
        self.noise_std.setdefault(stage, []).extend(sigma.tolist())
        if not bool((sigma > 0).any()):
            return x
        rows = x if x.ndim == 2 else x.unsqueeze(0)
        noisy = add_gaussian_noise(rows, sigma, self.noise(stage, clients, rows.shape[1:], *key))
        return noisy if x.ndim == 2 else noisy[0]

    def log(self, name: str, value: float) -> None:
        """An extra per-round number for the global metrics row (summed over chunks if logged again)."""
        self.logs[name] = self.logs.get(name, 0.0) + float(value)


class Algorithm:
    """Plain FedAvg with full participation; algorithm files override the hooks (module docstring)."""

    name = "fedavg"
    weight_decay = 0.0

    def __init__(self, rounds: int = 1, local: LocalSGD | None = None) -> None:
        self.rounds = rounds
        self.local = local or LocalSGD()

    @property
    def plain_local_update(self) -> bool:
        """Is ``local_update`` exactly ``self.local.run(model, start, batch, ...)`` with ``anchor = start``
        (the default)?  Then ``multirun.run_batch`` may train this run's clients in one ``LocalSGD`` call
        with other runs' clients.  A class that overrides ``local_update`` with that same computation says
        so in its body with ``local_update_is_plain = True`` (a subclass overriding it again is not plain
        unless it says so too)."""
        owner = next(c for c in type(self).__mro__ if "local_update" in vars(c))
        return owner is Algorithm or bool(vars(owner).get("local_update_is_plain", False))

    def init_client_state(self, ctx: RoundContext) -> dict[str, torch.Tensor]:
        return {}

    def init_algo_state(self, ctx: RoundContext) -> dict[str, Any]:
        return {}

    def participants(self, ctx: RoundContext) -> np.ndarray:
        return all_clients(ctx.num_clients)

    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        sizes = ctx.data.sizes[participants].astype(np.float64)
        return sizes / sizes.sum()

    def start_models(self, ctx: RoundContext, clients: np.ndarray) -> torch.Tensor:
        return ctx.global_params.unsqueeze(0).expand(len(clients), -1)

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        return self.local.run(ctx.model, start, batch, streams=ctx.streams, round_=ctx.round, clients=clients,
                              num_clients=ctx.num_clients)

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        return local

    def server_update(self, ctx: RoundContext, aggregate: torch.Tensor) -> torch.Tensor:
        return aggregate

    def after_round(self, ctx: RoundContext, new_global: torch.Tensor) -> None:
        return None

    def end_of_round(self, ctx: RoundContext, metrics: Mapping[str, Any]) -> NoisePlan | None:
        return None

    def eval_models(self, ctx: RoundContext) -> torch.Tensor:
        return ctx.global_params.unsqueeze(0)


@dataclass
class RunResult:
    """A finished (or stopped) run: the final global model, the state, the summary, and :attr:`metrics`,
    the tidy pandas table of ``state.rows`` (built, and pandas imported, on first use)."""

    params: torch.Tensor
    state: RunState
    summary: dict
    run_dir: Path | None

    @cached_property
    def metrics(self) -> Any:
        return metrics_mod.to_frame(self.state.rows)


def _chunks(participants: np.ndarray, size: int) -> list[np.ndarray]:
    return [participants[i:i + size] for i in range(0, len(participants), size)] if len(participants) else []


PARAMS_PER_CHUNK_BYTES = 16 * 2**20
"""Parameter bytes of one chunk's models (k x n_params x itemsize) the automatic chunking aims at.

Measured by ``bench/training.py`` (chunk sweep of the NbAFL round, 50 clients x 203,530 parameters on this
2-core CPU): chunks of 10 and 25 clients ran 1.4x and 1.15x faster than one chunk of 50, whose
parameter-sized temporaries no longer stay in cache; many small models (1,000 x 650) still form one chunk."""


def auto_chunk_size(model: Model, data: ClientData, options: RunOptions) -> int:
    """Clients per chunk: ``options.chunk_size`` if set, else the smaller of what keeps one chunk's models
    near :data:`PARAMS_PER_CHUNK_BYTES` and what keeps its working set under ``memory_budget_mb``.

    The working-set estimate counts the chunk's data, ~6 parameter-sized tensors (models, gradients,
    noise) and the activations of the widest layer, forward and backward.
    """
    if options.chunk_size > 0:
        return options.chunk_size
    itemsize = torch.empty(0, dtype=options.dtype).element_size()
    feats = math.prod(data.feature_shape)
    widest, shape = feats, model.input_shape
    for layer in model.layers:
        shape = layer.out_shape(shape)
        widest = max(widest, math.prod(shape) * (getattr(layer, "kernel", 1) ** 2))
    per_client = itemsize * (data.n_max * (feats + 4 * widest) + 6 * model.n_params)
    by_memory = int(options.memory_budget_mb * 2**20 // per_client)
    by_cache = int(PARAMS_PER_CHUNK_BYTES // (itemsize * max(model.n_params, 1)))
    return max(1, min(by_memory, by_cache))


def _check_diverged(values: torch.Tensor, round_: int, run_dir: Path | None, why: str) -> None:
    """TrainingDiverged when ``values`` hold NaN/inf: the run stops before round ``round_`` is checkpointed,
    so the run directory keeps the last good round."""
    if bool(torch.isfinite(values).all()):
        return
    kept = f"; the checkpoint of round {round_ - 1} is kept in {run_dir}" if run_dir is not None else ""
    raise TrainingDiverged(f"training diverged at round {round_}: {why}{kept}; lower the learning rate "
                           "(lr, eta) or the proximal/regularisation weights, or check the plan's noise std")


class Runner:
    """One run's way through the rounds: set up (or resumed from ``run_dir``), then per round
    :meth:`begin_round`, :meth:`add_upload` for each chunk of participants, :meth:`end_round`; finally
    :meth:`result`.  :func:`run` drives one runner; ``multirun.run_batch`` drives several in lockstep."""

    def __init__(self, algorithm: Algorithm, model: Model, data: ClientData, *, plan: NoisePlan | None = None,
                 options: RunOptions | None = None, test: tuple[np.ndarray, np.ndarray] | None = None,
                 init_params: torch.Tensor | None = None, run_dir: str | Path | None = None,
                 run_key: str = "", stop_after: int | None = None, rounds: int | None = None) -> None:
        options = options or RunOptions()
        device = torch.device(options.device)
        if plan is not None and plan.num_clients != data.num_clients:
            raise ConfigError(f"the noise plan is for {plan.num_clients} clients, the data has "
                              f"{data.num_clients}")
        data = data.to(device, options.dtype)
        streams = Streams(options.seed, device)
        test_t = None
        if test is not None and len(test[1]):
            ydtype = options.dtype if np.issubdtype(np.asarray(test[1]).dtype, np.floating) else torch.long
            test_t = (torch.as_tensor(test[0], dtype=options.dtype, device=device),
                      torch.as_tensor(test[1], dtype=ydtype, device=device))
        run_dir = Path(run_dir) if run_dir is not None else None
        state = ckpt.load(run_dir, run_key, device) if run_dir is not None else None
        if state is None:
            if init_params is None:
                init_params = model.init(streams.generator("init"), options.dtype)
            total = rounds or (plan.rounds if plan is not None else algorithm.rounds)
            state = RunState(round=0, rounds=total,
                             global_params=init_params.to(device=device, dtype=options.dtype), plan=plan)
            ctx0 = RoundContext(0, state, model, data, streams, options, test_t)
            state.client_state = algorithm.init_client_state(ctx0)
            state.algo_state = algorithm.init_algo_state(ctx0)
            if options.eval_every > 0:
                state.initial = metrics_mod.evaluate_models(ctx0, algorithm)[0]
        self.algorithm, self.model, self.data, self.options = algorithm, model, data, options
        self.device, self.streams, self.test, self.state = device, streams, test_t, state
        self.run_dir, self.run_key, self.stop_after = run_dir, run_key, stop_after
        self.resumed_from = state.round
        self.ledger = PrivacyLedger(state.plan) if state.plan is not None else None
        if self.ledger is not None and state.ledger:
            self.ledger.load_state_dict(state.ledger)
        self.bar = metrics_mod.progress_bar(state.rounds, state.round, options.progress, algorithm.name)
        self.ctx: RoundContext | None = None
        self._saved = time.monotonic()

    @property
    def active(self) -> bool:
        """More rounds to train?"""
        state = self.state
        return state.round < state.rounds and (self.stop_after is None or state.round < self.stop_after)

    def begin_round(self, check_budget: bool = True) -> np.ndarray:
        """Participants and weights of the next round, its releases checked against the budget; returns
        the participants (the rows to train).  ``check_budget=False``: the caller computes ``self.releases``
        and checks them itself (``multirun`` does both for every run at once, ``privacy.releases_many`` and
        ``privacy.check_budgets``)."""
        self._t0 = time.perf_counter()
        state, algorithm = self.state, self.algorithm
        ctx = self.ctx = RoundContext(state.round, state, self.model, self.data, self.streams, self.options,
                                      self.test)
        participants = np.asarray(algorithm.participants(ctx), dtype=np.int64)
        weights = np.asarray(algorithm.aggregation_weights(ctx, participants), dtype=np.float64)
        ctx.participants, ctx.weights = participants, weights
        self.releases = []
        if self.ledger is not None:
            self.ledger.plan = state.plan
            if check_budget:
                self.releases = self.ledger.releases(ctx.round, participants, weights)
                self.ledger.check_budget(self.releases, ctx.round)
        self.aggregate = torch.zeros_like(state.global_params)
        self.w_t = torch.as_tensor(weights, dtype=self.options.dtype, device=self.device)
        return participants

    def add_upload(self, lo: int, clients: np.ndarray, local: torch.Tensor) -> None:
        """Upload (``algorithm.upload``) the local models of participants ``lo, lo + 1, ...`` (``clients``)
        and add them to the round's weighted aggregate."""
        upload = self.algorithm.upload(self.ctx, clients, local)
        self.aggregate = self.aggregate + self.w_t[lo:lo + len(clients)] @ upload

    def end_round(self) -> None:
        """Server update, ledger, metrics, checkpoint of the round begun by :meth:`begin_round`."""
        self.update_global()
        self.record()

    def update_global(self) -> None:
        """The first half of :meth:`end_round`: server update, per-client bookkeeping, ledger, round done."""
        state, algorithm, ctx, ledger = self.state, self.algorithm, self.ctx, self.ledger
        new_global = algorithm.server_update(ctx, self.aggregate)
        _check_diverged(new_global, state.round + 1, self.run_dir, "the global model has NaN/inf parameters")
        state.global_params = new_global.detach()
        algorithm.after_round(ctx, state.global_params)
        if ledger is not None:
            ledger.commit(self.releases)
            state.ledger = ledger.state_dict()
        state.round += 1
        self._wall = time.perf_counter() - self._t0

    @property
    def evaluates(self) -> bool:
        """Does the round just updated (:meth:`update_global`) get evaluated?"""
        return self.options.evaluates(self.state.round, self.state.rounds)

    def record(self, evaluated: tuple | None = None) -> None:
        """The second half of :meth:`end_round`: metrics (``evaluated``: ``metrics.evaluate_models``'s
        result when already computed), the algorithm's end of round, checkpoint, progress bar."""
        state, algorithm, ctx = self.state, self.algorithm, self.ctx
        global_row = metrics_mod.round_rows(ctx, algorithm, self.ledger, self.releases, self.evaluates,
                                            self._wall, evaluated)
        if global_row.get("loss") is not None:
            _check_diverged(torch.tensor(global_row["loss"]), state.round, self.run_dir,
                            f"the training loss is {global_row['loss']}")
        was_evaluated = self.evaluates
        new_plan = algorithm.end_of_round(ctx, global_row)
        if new_plan is not None:
            state.plan = new_plan
        if not was_evaluated and self.evaluates:
            # the algorithm cut the run short at a round that was not due for evaluation (CRD): the run's last
            # row must still carry its final model's metrics
            global_row.update(metrics_mod.evaluate_models(ctx, algorithm)[0])
        if self.run_dir is not None and (not self.active or time.monotonic() - self._saved
                                         >= self.options.checkpoint_every_s):
            ckpt.save(self.run_dir, self.run_key, state)
            self._saved = time.monotonic()
        self.bar.update(1)
        self.bar.total = state.rounds
        metrics_mod.set_postfix(self.bar, global_row, state.plan)
        self.ctx = None

    def result(self) -> RunResult:
        """The finished (or stopped) run; its summary's warnings are issued as FedboundWarning."""
        self.bar.close()
        state = self.state
        summary = metrics_mod.summary(self.algorithm, state, self.ledger)
        summary["resumed_from_round"] = self.resumed_from
        for w in summary["warnings"]:
            if w not in state.warnings:
                state.warnings.append(w)
                warnings.warn(w, FedboundWarning, stacklevel=3)
        return RunResult(state.global_params, state, summary, self.run_dir)


def run(algorithm: Algorithm, model: Model, data: ClientData, *, plan: NoisePlan | None = None,
        options: RunOptions | None = None, test: tuple[np.ndarray, np.ndarray] | None = None,
        init_params: torch.Tensor | None = None, run_dir: str | Path | None = None, run_key: str = "",
        stop_after: int | None = None, rounds: int | None = None) -> RunResult:
    """Train ``algorithm`` on ``data`` for ``plan.rounds`` rounds (``algorithm.rounds`` without a plan).

    ``test``: held-out ``(x, y)`` arrays for test metrics.  ``run_dir``: checkpoint every round there and
    resume from its checkpoint when ``run_key`` matches (a mismatch is a ConfigError).  ``stop_after``:
    stop once that many rounds are done (the checkpoint stays; a later call resumes).  ``rounds``: run this
    many rounds instead of the plan's (a longer run keeps the plan's last sigma's and is stopped by
    PrivacyBudgetExceeded when the budget accountant would exceed ``plan.eps``).
    """
    runner = Runner(algorithm, model, data, plan=plan, options=options, test=test, init_params=init_params,
                    run_dir=run_dir, run_key=run_key, stop_after=stop_after, rounds=rounds)
    return drive(runner)


def drive(runner: Runner) -> RunResult:
    """Train ``runner``'s run to its end (chunks of participants through the algorithm's hooks)."""
    algorithm = runner.algorithm
    chunk = auto_chunk_size(runner.model, runner.data, runner.options)
    try:
        while runner.active:
            participants = runner.begin_round()
            ctx = runner.ctx
            for lo in range(0, len(participants), chunk):
                clients = participants[lo:lo + chunk]
                batch = runner.data.gather(clients)
                start = algorithm.start_models(ctx, clients)
                local = algorithm.local_update(ctx, clients, start, batch)
                runner.add_upload(lo, clients, local)
            runner.end_round()
    finally:
        runner.bar.close()
    return runner.result()
