"""Per-record sensitivity of a client's upload: measured through the engine, and proven for clipped GD.

Measured (:func:`client_uploads`, :func:`probe`): one client's data is replicated ``k`` times, each copy with
at most one record replaced (a *neighbour*), and the copies are trained together by the real engine
(``engine.run``) with the algorithm's own ``local_update`` and ``upload`` hooks, every copy starting from
the same model.  Copies are separate clients, so their noise streams are independent: with a noise plan
this is ``k`` independent trials of the client's noised upload (the audit, ``fedbound.validation.audit``);
without one (``plan=None``) it is the noise-free upload of every neighbour, whose distance to the unchanged
copy's upload is that record's measured sensitivity.

The audit's trials (:func:`federated_trials`; ``fedbound.training.trials``) replicate a round's whole
federation instead, one copy per trial with the target changed, and run every hook including
``server_update`` on each copy's aggregate, so the broadcast an adversary sees is the mechanism's own.
The canary search (:func:`probe` with ``crafted``)
adds records an adversary would craft (:func:`crafted_records`) to the natural flips and swaps.

Proven (the bound is ``fedbound.bounds.provable.local_sensitivity``; the step-size side is
:func:`smoothness_ceiling`): full-batch local gradient descent with every per-sample gradient clipped to
``C_g`` (``LocalSGD(per_sample_clip=C_g)``) and every input clipped to a declared norm ``X``
(``LocalSGD(feature_clip=X)``), ``tau`` steps of size ``eta`` from the received model, on a one-output linear
model (binary logistic regression, ridge regression), moves the model by at most ``2 tau eta C_g / m`` when
one of the client's ``m`` records is replaced, provided ``eta <= 2 / L`` with ``L = kappa (X^2 + 1) + mu +
lambda`` (:func:`smoothness_ceiling`), which bounds the smoothness of every client's objective whatever its
records.  ``L`` depends on no record: whether training starts (:func:`check_provable_step`) and the
sensitivity are the same on every pair of neighbouring datasets (an ``L`` computed from the data, the
adversary's record included, would let one large-norm record stop the run: a release of its own).
:func:`smoothness_bound` is the data's own (smaller) smoothness, for diagnostics only.

Proof (three lines).  (1) For a one-output linear model record j's loss is ``psi_j(x_j^T w)`` with
``psi_j`` convex and ``x_j`` the clipped input (``||x~_j||^2 <= X^2 + 1``); clipping its gradient clamps
``psi_j'``, which stays monotone and ``kappa ||x~_j||^2``-Lipschitz, so the clipped step is a gradient step
on a convex, L-smooth surrogate (plus the convex prox and weight-decay terms).  (2) Write ``F_D = F_shared
+ h_i / m`` and ``F_D' = F_shared + h_i' / m``: the shared map ``w -> w - eta grad F_shared(w)`` is
non-expansive for ``eta <= 2 / L`` (Hardt, Recht & Singer 2016, Lemma 3.7), and the two clipped record
gradients differ by at most ``2 C_g``, so the distance grows by at most ``2 eta C_g / m`` per step from 0.
(3) After ``tau`` steps it is at most ``2 tau eta C_g / m``; clipping the model to norm ``C`` is a
projection (non-expansive) and keeps both models in the C-ball, so the upload moves by at most
``min(2C, 2 tau eta C_g / m)``.  With ``tau = 1`` step (2) needs no convexity: both copies start from the
same model, so ``eta 2 C_g / m`` holds exactly for any model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.engine import Algorithm, RoundContext, RunOptions, run
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.models import Model
from fedbound.training.participation import all_clients
from fedbound.training.plan import NoisePlan
from fedbound.training.trials import TrialRuns

__all__ = ["Replacement", "Neighbour", "neighbours", "client_uploads", "ProbeResult", "probe", "shifts",
           "label_flips", "crafted_records", "loss_directions", "TrialRuns", "federated_trials",
           "record_release", "smoothness_bound", "smoothness_ceiling", "convex_one_output",
           "check_provable_step"]


@dataclass(frozen=True)
class Replacement:
    """Record ``index`` of the client replaced by features ``x`` and label ``y``."""

    index: int
    x: np.ndarray
    y: float | int


Neighbour = Replacement | Sequence[Replacement] | None
"""One copy's change: nothing (None), one record replaced, or several (a client-level neighbour)."""


def neighbours(data: ClientData, client: int, replacements: Sequence[Neighbour]) -> ClientData:
    """One copy of ``client``'s data per entry of ``replacements`` (None: unchanged; a sequence: each of its
    records replaced), as a federation."""
    n = int(data.sizes[client])
    k = len(replacements)
    x = data.x[client, :n].unsqueeze(0).repeat(k, *([1] * (data.x.ndim - 1))).clone()
    y = data.y[client, :n].unsqueeze(0).repeat(k, 1).clone()
    rows: dict[int, tuple[Neighbour, list[int]]] = {}  # copies that share one neighbour change together
    for row, rep in enumerate(replacements):
        if rep is not None:
            rows.setdefault(id(rep), (rep, []))[1].append(row)
    for rep, where in rows.values():
        for one in [rep] if isinstance(rep, Replacement) else rep:
            if not 0 <= one.index < n:
                raise ParameterError("replaced record index", one.index, f"integer in [0, {n - 1}]")
            x[where, one.index] = torch.as_tensor(np.asarray(one.x), dtype=x.dtype, device=x.device)
            y[where, one.index] = torch.as_tensor(one.y, dtype=y.dtype, device=y.device)
    mask = torch.ones((k, n), dtype=torch.bool, device=data.x.device)
    return ClientData(x, y, mask, np.full(k, n, dtype=np.int64))


class _Recorder(Algorithm):
    """Every client starts each round from ``starts[round]``, trains and uploads by ``inner``'s hooks; the
    uploads are kept, the global model follows ``starts`` (nothing is aggregated)."""

    def __init__(self, inner: Algorithm, starts: torch.Tensor, num_clients: int) -> None:
        super().__init__(len(starts), inner.local)
        self.inner, self.starts = inner, starts
        self.name, self.weight_decay = inner.name, inner.weight_decay
        self.uploads = torch.zeros((len(starts), num_clients, starts.shape[1]), dtype=starts.dtype)

    def init_client_state(self, ctx: RoundContext) -> dict[str, torch.Tensor]:
        return self.inner.init_client_state(ctx)

    def participants(self, ctx: RoundContext) -> np.ndarray:
        return all_clients(ctx.num_clients)

    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        return np.zeros(len(participants))

    def start_models(self, ctx: RoundContext, clients: np.ndarray) -> torch.Tensor:
        return self.starts[ctx.round].to(ctx.device, ctx.dtype).unsqueeze(0).expand(len(clients), -1)

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        return self.inner.local_update(ctx, clients, start, batch)

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        out = self.inner.upload(ctx, clients, local)
        self.uploads[ctx.round, torch.as_tensor(clients)] = out.detach().to("cpu", self.uploads.dtype)
        return out

    def server_update(self, ctx: RoundContext, aggregate: torch.Tensor) -> torch.Tensor:
        return self.starts[min(ctx.round + 1, len(self.starts) - 1)].to(ctx.device, ctx.dtype)


def client_uploads(algorithm: Algorithm, model: Model, data: ClientData, starts: torch.Tensor, *,
                   plan: object = None, options: RunOptions | None = None) -> torch.Tensor:
    """The upload of every client of ``data`` in each round, ``(rounds, k, d)``, each round started from
    ``starts[round]`` (``(rounds, d)``), trained by the engine with ``algorithm``'s hooks (module docstring).

    ``plan``: the noise plan to train with (None: noise-free).  Its views are not counted here: a caller that
    reports epsilon accounts for the original plan.
    """
    starts = torch.as_tensor(starts)
    if starts.ndim != 2 or starts.shape[1] != model.n_params:
        raise ParameterError("starts shape", tuple(starts.shape), f"(rounds, {model.n_params})")
    base = options or RunOptions()
    opts = RunOptions(seed=base.seed, device=base.device, dtype=base.dtype, chunk_size=base.chunk_size,
                      memory_budget_mb=base.memory_budget_mb, eval_every=0, eval_clients=False)
    recorder = _Recorder(algorithm, starts.to(opts.dtype), data.num_clients)
    run(recorder, model, data, plan=plan, options=opts, init_params=starts[0], rounds=len(starts))
    return recorder.uploads


def record_release(ctx: RoundContext, name: str, clients: np.ndarray, values: torch.Tensor) -> None:
    """Hand ``values`` (``(k, d)``, one row per client of ``clients``) to an audit running this round as the
    release ``name``: what an adversary view sees that is neither the upload nor the broadcast (e.g. a model
    released inside local training).  Does nothing outside an audit (:func:`federated_trials`)."""
    recorder = getattr(ctx, "audit_recorder", None)
    if recorder is not None:
        recorder.release(ctx, name, clients, values)


def federated_trials(algorithm: Algorithm, model: Model, data: ClientData, target: int,
                     participants: np.ndarray, weights: np.ndarray, changes: Sequence[Neighbour],
                     starts: torch.Tensor, *, plan: NoisePlan | None = None, scale: float = 1.0,
                     broadcast: bool = True, options: RunOptions | None = None) -> TrialRuns:
    """One trial per entry of ``changes``: the round's federation (``participants`` with aggregation
    ``weights``; only the target without ``broadcast``) with client ``target`` changed, run end to end by
    the engine's hooks (``local_update``, ``upload``, and ``server_update`` on each trial's own aggregate),
    each round from ``starts[round]``, under ``plan``'s sigma's times ``scale`` (None: noise-free), in one
    batch.  Trial ``k`` is a run of its own with the seed ``trials.trial_seeds(options.seed, "trials", k)``
    (``fedbound.training.trials``, which streams many trials in batches for the audit)."""
    from fedbound.training.trials import TrialSetup, run_trials, trial_seeds

    starts = torch.as_tensor(starts)
    if starts.ndim != 2 or starts.shape[1] != model.n_params:
        raise ParameterError("starts shape", tuple(starts.shape), f"(rounds, {model.n_params})")
    base = options or RunOptions()
    opts = RunOptions(seed=base.seed, device=base.device, dtype=base.dtype, chunk_size=base.chunk_size,
                      memory_budget_mb=base.memory_budget_mb, eval_every=0, eval_clients=False)
    setup = TrialSetup(algorithm, model, data, target, np.asarray(participants, np.int64),
                       np.asarray(weights, np.float64), starts.to(opts.dtype), plan, opts, broadcast,
                       broadcast)
    seeds = trial_seeds(opts.seed, "trials", 0, len(changes))
    return next(run_trials(setup, list(changes), seeds, scale=scale, batch=max(len(changes), 1)))[1]


def label_flips(y: int | float, n_classes: int) -> list[int | float]:
    """Every other label of a class index (classification), or ``-y`` and ``y +- 1`` (regression)."""
    if n_classes <= 1:
        return [-float(y), float(y) + 1.0, float(y) - 1.0]
    return [c for c in range(n_classes) if c != int(y)]


@dataclass(frozen=True)
class ProbeResult:
    """Largest measured upload shift over the probed replacements, at each probed model."""

    client: int
    shifts: np.ndarray
    """``(models, replacements)`` measured ``||upload(D') - upload(D)||``."""
    replacements: tuple[Replacement, ...]
    natural: int | None = None
    """How many of the replacements (the first ones) are natural records (flips, swaps); None: all."""

    @property
    def max_shift(self) -> float:
        return float(self.shifts.max()) if self.shifts.size else 0.0

    @property
    def natural_shift(self) -> float:
        """The largest shift among the natural replacements."""
        cut = self.shifts[:, :self.natural] if self.natural is not None else self.shifts
        return float(cut.max()) if cut.size else 0.0

    @property
    def worst(self) -> Replacement:
        """The replacement with the largest shift at any probed model."""
        return self.replacements[int(np.argmax(self.shifts.max(axis=0)))]


CRAFT_SCALES = (1.0, 10.0, 100.0)
"""Norms of the crafted outliers, in units of the client's largest record norm."""


def _labels(ys: np.ndarray, n_classes: int) -> list[float | int]:
    """The labels crafted records take: every class, or ``+-max|y|`` and ``+-10 max|y|`` (regression)."""
    if n_classes > 1:
        return list(range(n_classes))
    top = max(float(np.abs(ys).max()), 1.0)
    return [top, -top, 10 * top, -10 * top]


def loss_directions(model: Model, start: torch.Tensor, xs: np.ndarray, ys: np.ndarray, n_classes: int
                    ) -> list[np.ndarray]:
    """Per crafted label: the client's mean input gradient of the record loss at the model ``start``, the
    direction in which a record's loss, and so its gradient in local training, grows fastest."""
    x = torch.as_tensor(xs, dtype=start.dtype).unsqueeze(0).requires_grad_(True)
    out = []
    for label in _labels(ys, n_classes):
        y = torch.full((1, len(xs)), label, dtype=torch.long if n_classes > 1 else start.dtype)
        loss = model.per_sample_loss(model(start.detach().unsqueeze(0), x), y).sum()
        out.append(torch.autograd.grad(loss, x)[0][0].mean(dim=0).reshape(-1).double().numpy())
    return out


def crafted_records(xs: np.ndarray, ys: np.ndarray, n_classes: int, rng: np.random.Generator,
                    random_directions: int = 4, directions: Sequence[np.ndarray] = ()
                    ) -> list[tuple[np.ndarray, float | int]]:
    """Records an adversary would craft to move the upload: outliers ``s R u`` (``R`` the largest record
    norm, ``s`` in :data:`CRAFT_SCALES`) along ``+-u`` for ``u`` the client's top two principal directions,
    its mean direction, ``directions`` (e.g. :func:`loss_directions`: gradient-aligned records) and
    ``random_directions`` random unit vectors (``rng``), and amplified records (the two largest-norm records
    times each scale), each with every label (classification) or with labels ``+-max|y|`` and
    ``+-10 max|y|`` (regression)."""
    flat = xs.reshape(len(xs), -1).astype(np.float64)
    radius = max(float(np.linalg.norm(flat, axis=1).max()), 1e-12)
    dirs = [flat.mean(axis=0), *(np.asarray(d, np.float64).reshape(-1) for d in directions)]
    if len(flat) > 1:
        dirs += list(np.linalg.svd(flat - flat.mean(axis=0), full_matrices=False)[2][:2])
    dirs += list(rng.standard_normal((random_directions, flat.shape[1])))
    units = [u / np.linalg.norm(u) for u in dirs if np.linalg.norm(u) > 1e-12]
    points = [sign * scale * radius * u for u in units for sign in (1.0, -1.0) for scale in CRAFT_SCALES]
    big = np.argsort(-np.linalg.norm(flat, axis=1))[:2]
    points += [scale * flat[i] for i in big for scale in CRAFT_SCALES[1:]]
    return [(p.reshape(xs.shape[1:]).astype(xs.dtype), y) for p in points for y in _labels(ys, n_classes)]


def probe(algorithm: Algorithm, model: Model, data: ClientData, client: int, models: torch.Tensor, *,
          records: int = 8, options: RunOptions | None = None, crafted: bool = False, seed: int = 0,
          extra: Sequence[Replacement] = ()) -> ProbeResult:
    """Measured per-record sensitivity of ``client``'s (noise-free) upload at each of ``models`` (``(r, d)``).

    Replacements: every label flip (:func:`label_flips`) of ``records`` evenly spaced records, and each of
    those records' features with the label of another record of the client (ordinary records); with
    ``crafted`` also record 0 replaced by each of :func:`crafted_records` (random directions from ``seed``,
    gradient-aligned ones from :func:`loss_directions` at the first of ``models``), and ``extra`` (e.g.
    another client's crafted records).  All replacements of one model train as one engine batch.
    """
    n = int(data.sizes[client])
    if records < 1:
        raise ParameterError("probe records", records, "integer in [1, inf)")
    picked = np.unique(np.linspace(0, n - 1, min(records, n)).round().astype(int))
    xs = data.x[client, :n].cpu().numpy()
    ys = data.y[client, :n].cpu().numpy()
    n_classes = model.n_outputs if model.loss != "squared" else 1
    reps: list[Replacement] = []
    for i in picked:
        reps += [Replacement(int(i), xs[i], y) for y in label_flips(ys[i], n_classes)]
        other = int(picked[(np.searchsorted(picked, i) + 1) % len(picked)])
        reps.append(Replacement(int(i), xs[other], ys[i]))
    natural = len(reps)
    if crafted:
        aligned = loss_directions(model, torch.as_tensor(models)[0], xs, ys, n_classes)
        made = crafted_records(xs, ys, n_classes, np.random.default_rng(seed), directions=aligned)
        reps += [Replacement(0, x, y) for x, y in made]
    reps += list(extra)
    return ProbeResult(client, shifts(algorithm, model, data, client, reps, models, options=options),
                       tuple(reps), natural)


def shifts(algorithm: Algorithm, model: Model, data: ClientData, client: int, changes: Sequence[Neighbour],
           models: torch.Tensor, *, options: RunOptions | None = None) -> np.ndarray:
    """``(models, changes)``: ``||upload(D') - upload(D)||`` of ``client``'s noise-free upload for each
    neighbour ``D'`` (:func:`neighbours`) at each of ``models`` (``(r, d)``); one engine batch per model."""
    batch = neighbours(data, client, [None, *changes])
    models = torch.as_tensor(models)
    out = np.zeros((len(models), len(changes)))
    for row, start in enumerate(models):
        up = client_uploads(algorithm, model, batch, start.unsqueeze(0), options=options)[0]
        out[row] = torch.linalg.vector_norm(up[1:] - up[0], dim=1).double().numpy()
    return out


def convex_one_output(model: Model) -> float | None:
    """``kappa`` of a one-output linear model (record loss ``psi(x^T w)`` with ``psi'' <= kappa`` per unit
    ``||x~||^2``): 1 for ridge (squared loss ``(f - y)^2 / 2``), 1/2 for 2-class logistic regression (two
    logits, one direction ``(-x~, x~)``: ``p (1 - p) <= 1/4`` times ``2 ||x~||^2``); None otherwise."""
    if model.name != "logreg":
        return None
    if model.loss == "squared" and model.n_outputs == 1:
        return 1.0
    if model.loss == "cross_entropy" and model.n_outputs == 2:
        return 0.5
    return None


def smoothness_bound(model: Model, x: torch.Tensor, prox_mu: float = 0.0, weight_decay: float = 0.0) -> float:
    """``L = kappa lambda_max((1/m) sum_j x~_j x~_j^T) + mu + lambda`` for a one-output linear model on the
    client's records ``x`` (``(m, features)``; ``x~ = (x, 1)``): the smoothness of the local objective's
    shared part (module docstring, step (1)).  ParameterError for any other model."""
    kappa = convex_one_output(model)
    if kappa is None:
        raise ParameterError("model for the provable multi-step sensitivity", model.name,
                             "logreg with one output (ridge) or two classes (binary logistic)")
    xt = torch.cat([x.reshape(len(x), -1).double(), torch.ones(len(x), 1, dtype=torch.float64,
                                                                device=x.device)], dim=1)
    gram = xt.T @ xt / len(x)
    return float(kappa * torch.linalg.eigvalsh(gram)[-1]) + float(prox_mu) + float(weight_decay)


def smoothness_ceiling(model: Model, feature_norm: float, prox_mu: float = 0.0, weight_decay: float = 0.0
                       ) -> float:
    """``L = kappa (X^2 + 1) + mu + lambda``: a smoothness bound of a one-output linear model's local
    objective on ANY records with inputs clipped to norm ``X = feature_norm`` (``x~ = (x, 1)``, so
    ``lambda_max(mean x~ x~^T) <= max ||x~||^2 <= X^2 + 1``; module docstring).  ParameterError for any
    other model or a feature norm outside (0, inf)."""
    kappa = convex_one_output(model)
    if kappa is None:
        raise ParameterError("model for the provable multi-step sensitivity", model.name,
                             "logreg with one output (ridge) or two classes (binary logistic)")
    if not (np.isfinite(feature_norm) and feature_norm > 0):
        raise ParameterError("feature_norm", feature_norm, "(0, inf)")
    return kappa * (float(feature_norm) ** 2 + 1.0) + float(prox_mu) + float(weight_decay)


def check_provable_step(model: Model, local: object) -> None:
    """ConfigError unless ``local`` (a LocalSGD) meets the provable bound's premises: full or fixed-size
    mini-batches (not Poisson-sampled ones, whose weights need not sum to 1), per-sample clipping, and for
    more than one step of a one-output linear model inputs clipped to a declared norm X and ``eta <= 2/L``
    with L the data-independent :func:`smoothness_ceiling` (module docstring).  No record is read, so the
    decision is the same on neighbouring datasets.  More than one step of any other model, or of a linear
    one without a declared norm, is covered by the general bound ``min(2C, growth recursion)`` of
    ``fedbound.bounds.provable`` only, which the plan then uses."""
    if getattr(local, "per_sample_clip", None) is None:
        raise ConfigError("sensitivity = \"provable\" needs per-sample gradient clipping in local training "
                          "(C_g)")
    if getattr(local, "sample_rate", None) is not None:
        raise ConfigError("sensitivity = \"provable\" is proven for full-batch or fixed-size mini-batch "
                          "local steps, not Poisson-sampled ones: set [train] batch_size instead")
    if local.steps <= 1 or convex_one_output(model) is None or getattr(local, "feature_clip", None) is None:
        return
    ceiling = smoothness_ceiling(model, local.feature_clip, local.prox_mu, local.weight_decay)
    if local.lr > 2.0 / ceiling:
        raise ConfigError(f"[train] lr = {local.lr:g} is outside its valid range (0, 2/L = "
                          f"{2.0 / ceiling:.4g}] for sensitivity = \"provable\" with {local.steps} local "
                          "steps: gradient descent is non-expansive only for eta <= 2/L (Hardt, Recht "
                          f"& Singer 2016, Lemma 3.7); L = kappa (X^2 + 1) + mu + lambda with the declared "
                          f"feature_norm X = {local.feature_clip:g}")
