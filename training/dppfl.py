"""DP-PFL / RDP-PFL: meta-learning personalised FL with Renyi DP (DP-PFL, Algorithm 1; spec 000 Sec. 5).

What differs from FedAvg:

* data: each client's samples are split once, at random, into a query set ``D_i^Q`` and a support set
  ``D_i^S`` (DP-PFL Sec. V-A: 50 % each): every record joins the query set on its own, with probability
  ``query_fraction``, by a uniform keyed to that record (client, position) alone
  (:func:`split_query_support`), so adding, removing or replacing one record never changes another
  record's role and each stage's noised sum moves by at most ``C`` (the sensitivity Theorem 1's
  sampled-Gaussian RDP assumes; a fixed-size split would let one added record push another from query to
  support: up to ``2C``);
* local update: ``tau0`` MAML epochs from the global model, each an inner DP step on a Poisson sample of
  ``D_i^Q`` (rate ``q_in``) and an outer DP step on a Poisson sample of ``D_i^S`` (rate ``q_out``)::

      theta <- v - eta  (g_Q + n^Q)                                  eqs. (6)-(7)
      v     <- v - beta (clip_sqrtC(g1) clip_sqrtC(g2) + n^S)        eqs. (8)-(11)

  with ``g2`` the support gradient at ``theta`` and ``g1 = I - eta grad^2 F(v, B_Q)`` (``g1="hessian"``,
  spec option (a), eq. (10)) or ``g1 = I`` (``g1="first_order"``, option (c), first-order MAML);
* noise: stage ``"inner"`` and stage ``"outer"``, every local step (``ctx.add_noise(stage, x, clients,
  step)``), std ``C sigma`` from the plan (sensitivity ``C``, noise multiplier ``sigma``: Theorem 1,
  eq. (12));
* aggregation: ``p_i = |D_i^S| / sum_j |D_j^S|`` over all clients (eq. (3)) with the expected support size
  ``(1 - query_fraction) |D_i|`` (the realised one is a Binomial draw that would reveal the roles);
  everyone participates;
* evaluation: the engine's rows are the meta-model's loss/accuracy on the source clients' data; with
  ``targets`` (held-out target clients) every evaluated round also logs ``personalized_test_loss`` /
  ``personalized_test_accuracy``: each target adapts on its query share by one gradient step
  ``theta_j = w - eta grad F_j(w)`` (eq. (4)) and is tested on the rest (``target_test_*``: the same without
  the adaptation step).

Variants (spec 000 Sec. 5):

* ``"v2"`` (default): DP-SGD as Opacus does it, the setting Theorem 1's sampled-Gaussian analysis covers
  (spec 000 E9).  Every example's gradient is clipped on its own (``clipping.per_sample_clipped_grad``):
  ``g_Q = (sum_{x in B_Q} clip_C(grad l(v, x)) + n^Q) / (q_in E|D_i^Q|)`` and
  ``(c1 g1 sum_{x in B_S} clip_sqrtC(grad l(theta, x)) + n^S) / (q_out E|D_i^S|)`` (the expected batch sizes,
  ``E|D_i^Q| = query_fraction |D_i|``, as Opacus normalises): each example's term has norm <= C, so each
  noised sum has sensitivity C.  It is the default because it is the only variant whose
  recorded epsilon is a proven guarantee, and with ``g1="first_order"`` (the default) the outer step
  touches the query records only through the already-noised ``theta``.  With ``g1="hessian"`` query records
  also enter the outer step through ``g1``, which Theorem 1 does not cover (spec 000 E8); the recipe says so.
* ``"v1"``: the paper's equations literally: the mini-batch mean gradient clipped as a whole (eq. (6)),
  ``N(0, C^2 sigma^2 I)`` added to it (no ``1/(q |D|)``), ``g1`` and ``g2`` clipped to ``sqrt(C)`` each.
  Its privacy claim is not covered by the sampled-Gaussian analysis (E9): the ledger records what the paper
  claims.

``clip_sqrtC(g1)`` needs the spectral norm of ``g1 = I - eta H_Q``.  It is bounded by ``1 + eta ||H_Q||_2``
(spec 000 Sec. 5, PyTorch notes; the A2 bound with ``||H_Q||_2`` in place of ``L``), and ``||H_Q||_2`` is
estimated by ``power_iterations`` steps of the power method on Hessian-vector products (double backward
through the batched model, all clients of a chunk at once).  The clip factor is
``c1 = min(1, sqrt(C) / (1 + eta ||H_Q||_2))``; with ``g1 = I`` it is ``min(1, sqrt(C))``.  ``H_Q`` is the
Hessian of the mean loss over the realised query batch ``B_Q`` (zero for an empty batch).

The fraction of clipped gradients (per example in V2, per batch in V1; inner and outer stages together) is
logged as ``clipped_fraction``.  The first local epoch's two noised sums (what the ``inner`` and ``outer``
stages release, before the V2 normalisation) are handed to a running audit as releases ``"inner"``,
``"outer"`` and both together, ``"local"`` (``fedbound.training.sensitivity.record_release``; nothing
happens outside an audit).  ``audit_both_sets`` (False in training) puts every record in both sets: the
record Theorem 1's ledger pays for (it charges every record both stages), so an audit of it meets the
ledger's epsilon exactly, where a record in one set leaks less.

The global metrics row's ``sigma`` (noise in the broadcast model) is 0: the noise here is inside the local
steps, reported as ``sigma_inner`` / ``sigma_outer``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.clipping import clip_rows, per_sample_clipped_grad
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.grads import batch_gradient
from fedbound.training.local import select_minibatch
from fedbound.training.models import Model
from fedbound.training.noise import Streams
from fedbound.training.sensitivity import record_release

__all__ = ["DPPFL", "VARIANTS", "G1_MODES", "expected_query_sizes", "record_uniforms", "split_query_support",
           "MiniBatch", "QueryHessian", "hessian_norm_estimate", "personalize"]

VARIANTS = ("v2", "v1")
G1_MODES = ("first_order", "hessian")


def expected_query_sizes(sizes: np.ndarray | torch.Tensor, fraction: float) -> np.ndarray | torch.Tensor:
    """``E|D_i^Q| = fraction |D_i|`` (the per-record split of :func:`split_query_support`)."""
    return fraction * sizes


def record_uniforms(streams: Streams, key: tuple, clients: np.ndarray, width: int, device: torch.device
                    ) -> torch.Tensor:
    """``(k, width)`` U[0, 1) keys: client ``c``'s record ``j`` gets the ``j``-th draw of a stream keyed
    ``(key, c)`` alone, whatever the batch width, the chunk or the other clients' sizes."""
    rows = [streams.numpy(*key, "client", int(c)).random(width) for c in np.asarray(clients).tolist()]
    return torch.as_tensor(np.stack(rows) if rows else np.zeros((0, width)), dtype=torch.float64,
                           device=device)


def split_query_support(streams: Streams, key: tuple, batch: ClientBatch, clients: np.ndarray,
                        num_clients: int, fraction: float) -> tuple[ClientBatch, ClientBatch]:
    """Each client's fixed random split into query and support sets, as two masked views of ``batch``.

    Record ``j`` of client ``c`` is a query record iff its key (:func:`record_uniforms`, keyed ``key``: no
    round, the split never changes) is below ``fraction``: a Poisson split, each record's role independent
    of every other record (module docstring).  Either set may be empty.  The views' ``sizes`` are the
    realised counts, at least 1 (so ``weight`` is the mean over the set, 0 on an empty one).
    ``num_clients`` is unused (kept for the call sites' symmetry with the mini-batch samplers).
    """
    del num_clients
    keys = record_uniforms(streams, key, clients, batch.mask.shape[1], batch.mask.device)
    query = ((keys < fraction) & (batch.mask > 0)).to(batch.mask.dtype)
    support = batch.mask - query
    one = torch.ones((), dtype=batch.sizes.dtype, device=batch.sizes.device)
    return (ClientBatch(batch.x, batch.y, query, torch.maximum(query.sum(1).to(batch.sizes.dtype), one)),
            ClientBatch(batch.x, batch.y, support, torch.maximum(support.sum(1).to(batch.sizes.dtype), one)))


@dataclass(frozen=True)
class MiniBatch:
    """A Poisson sample of a query or support set: ``chosen`` (1 on sampled examples), ``count`` (k,) the
    realised batch sizes, ``denominator`` (k,) ``q E|D|`` (the V2 normalisation: the expected batch size)."""

    x: torch.Tensor
    y: torch.Tensor
    chosen: torch.Tensor
    count: torch.Tensor
    denominator: torch.Tensor

    @property
    def mean_weight(self) -> torch.Tensor:
        """``1/|B|`` on the sampled examples: the weights of the mean over the realised batch."""
        return self.chosen / torch.clamp(self.count, min=1.0).unsqueeze(1)


class QueryHessian:
    """``v -> H_i v`` with ``H_i = grad^2 sum_b weight[i, b] l_b(w_i)``, for ``k`` models at once.

    One forward and one backward with ``create_graph=True`` at construction; each product is then one
    further backward through the same graph (double backward; the clients' losses are independent, so the
    gradient of their sum with respect to the ``(k, d)`` parameters is every client's own).
    """

    def __init__(self, model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                 weight: torch.Tensor) -> None:
        with torch.enable_grad():
            self.params = flat.detach().requires_grad_(True)
            loss = (model.per_sample_loss(model(self.params, x), y) * weight).sum()
            (self.grad,) = torch.autograd.grad(loss, self.params, create_graph=True)

    def __call__(self, vectors: torch.Tensor) -> torch.Tensor:
        if not self.grad.requires_grad:  # the loss is affine in the parameters: H = 0
            return torch.zeros_like(vectors)
        with torch.enable_grad():
            (hv,) = torch.autograd.grad(self.grad, self.params, grad_outputs=vectors, retain_graph=True,
                                        allow_unused=True)
        return torch.zeros_like(vectors) if hv is None else hv


def hessian_norm_estimate(hessian: QueryHessian, start: torch.Tensor, iterations: int) -> torch.Tensor:
    """``||H_i||_2`` per client by the power method: ``u <- H u / ||H u||`` from ``start``, returning the
    last ``||H u||`` (a lower estimate that converges to the spectral radius)."""
    tiny = torch.finfo(start.dtype).tiny
    u = start / torch.clamp(torch.linalg.vector_norm(start, dim=1, keepdim=True), min=tiny)
    norm = torch.zeros(start.shape[0], dtype=start.dtype, device=start.device)
    for _ in range(iterations):
        hu = hessian(u)
        norm = torch.linalg.vector_norm(hu, dim=1)
        u = hu / torch.clamp(norm, min=tiny).unsqueeze(1)
    return norm


@torch.no_grad()
def _loss_and_hits(model: Model, params: torch.Tensor, batch: ClientBatch) -> tuple[float, float | None]:
    out = model(params, batch.x)
    loss = float((model.per_sample_loss(out, batch.y) * batch.mask).sum())
    hit = model.correct(out, batch.y)
    return loss, None if hit is None else float((hit * batch.mask).sum())


def personalize(model: Model, params: torch.Tensor, targets: ClientData, streams: Streams, eta: float,
                fraction: float) -> dict[str, float]:
    """Fast adaptation on target clients (DP-PFL eq. (4)): ``theta_j = w - eta grad F_j(w, D_j^Q)`` on
    each target's query share, tested on the rest; also the meta-model ``w`` on the same test shares.

    Returns ``personalized_test_loss``/``_accuracy`` and ``target_test_loss``/``_accuracy`` (means over all
    target test examples; accuracies absent for regression; nothing when the split left no test example).
    """
    k = targets.num_clients
    who = np.arange(k)
    adapt, test = split_query_support(streams, ("target_split",), targets.gather(who), who, k, fraction)
    start = params.reshape(1, -1).expand(k, -1)
    theta = start - eta * batch_gradient(model, start, adapt.x, adapt.y, adapt.weight)
    n = float(test.mask.sum())
    out: dict[str, float] = {}
    if n == 0:  # the per-record split left no target a test record (tiny targets): nothing to report
        return out
    for name, models in (("personalized", theta), ("target", start)):
        loss, hits = _loss_and_hits(model, models, test)
        out[f"{name}_test_loss"] = loss / n
        if hits is not None:
            out[f"{name}_test_accuracy"] = hits / n
    return out


class DPPFL(Algorithm):
    """DP-PFL Algorithm 1 (RDP-PFL), variants V1/V2 and g1 options (module docstring).

    ``local_epochs`` is tau0, ``inner_lr`` eta, ``outer_lr`` beta, ``clip_norm`` C, ``q_in``/``q_out`` the
    Poisson sampling rates of the query and support sets.  ``targets``: held-out target clients for the
    personalised metrics (None: none).
    """

    name = "dppfl"

    def __init__(self, rounds: int, *, local_epochs: int = 1, inner_lr: float = 0.01, outer_lr: float = 0.01,
                 clip_norm: float = 2.4, q_in: float = 1.0, q_out: float = 1.0, variant: str = "v2",
                 g1: str = "first_order", query_fraction: float = 0.5, power_iterations: int = 10,
                 targets: ClientData | None = None) -> None:
        super().__init__(rounds)
        for name, value in (("q_in", q_in), ("q_out", q_out), ("query_fraction", query_fraction)):
            if not 0.0 < value <= 1.0:
                raise ParameterError(name, value, "(0, 1]")
        for name, value in (("inner_lr", inner_lr), ("outer_lr", outer_lr), ("clip_norm", clip_norm)):
            if not value > 0:
                raise ParameterError(name, value, "(0, inf)")
        if local_epochs < 1:
            raise ParameterError("local_epochs", local_epochs, "integer in [1, inf)")
        if power_iterations < 1:
            raise ParameterError("power_iterations", power_iterations, "integer in [1, inf)")
        if variant not in VARIANTS:
            raise ParameterError("variant", variant, "one of " + ", ".join(VARIANTS))
        if g1 not in G1_MODES:
            raise ParameterError("g1", g1, "one of " + ", ".join(G1_MODES))
        self.local_epochs, self.inner_lr, self.outer_lr = local_epochs, inner_lr, outer_lr
        self.clip_norm, self.q_in, self.q_out = float(clip_norm), q_in, q_out
        self.variant, self.g1, self.query_fraction = variant, g1, query_fraction
        self.power_iterations = power_iterations
        self.targets = targets
        self.audit_both_sets = False
        self._inner_release: torch.Tensor | None = None  # step 0's inner release, for the "local" one
        self._targets_cache: dict[tuple, ClientData] = {}

    @classmethod
    def from_config(cls, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int,
                    targets: ClientData | None = None) -> DPPFL:
        """From the [dppfl] setting (tau0, eta, beta, C, q_in, q_out, variant, g1, query_fraction,
        power_iterations); [train] must leave lr, local_steps, batch_size and weight_decay alone."""
        clashes = {"lr": (train["lr"], None, "the learning rates are [dppfl] eta (inner) and beta (outer)"),
                   "local_steps": (train["local_steps"], 1, "local epochs are [dppfl] tau0"),
                   "batch_size": (train["batch_size"], 0, "mini-batches are Poisson samples at rates [dppfl] "
                                  "q_in, q_out (what Theorem 1 accounts for)"),
                   "weight_decay": (train["weight_decay"], 0.0, "DP-PFL's local objective has no L2 term")}
        for key, (value, default, why) in clashes.items():
            if value != default:
                raise ConfigError(f"[train] {key} = {value!r}: DP-PFL does not use it ({why}); drop it")
        return cls(rounds, local_epochs=setting["tau0"], inner_lr=setting["eta"], outer_lr=setting["beta"],
                   clip_norm=setting["C"], q_in=setting["q_in"], q_out=setting["q_out"],
                   variant=setting["variant"], g1=setting["g1"], query_fraction=setting["query_fraction"],
                   power_iterations=setting["power_iterations"], targets=targets)

    # --- hooks ------------------------------------------------------------------------------------------
    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        """``p_i = E|D_i^S| / sum_j E|D_j^S|`` (eq. (3) with the expected support sizes ``(1 - query_fraction)
        |D_i|``, module docstring): proportional to ``|D_i|``."""
        support = ctx.data.sizes[participants].astype(np.float64)
        return support / support.sum()

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        """``tau0`` epochs of (inner step on a query sample, outer step on a support sample)."""
        query, support = split_query_support(ctx.streams, ("query_split",), batch, clients, ctx.num_clients,
                                             self.query_fraction)
        if self.audit_both_sets:
            query = support = batch
        expected_q = expected_query_sizes(batch.sizes, self.query_fraction)
        expected = {"query": expected_q, "support": batch.sizes - expected_q}
        v = start.detach().clone()
        clipped = torch.zeros(len(clients), dtype=v.dtype, device=v.device)
        counted = torch.zeros_like(clipped)
        for step in range(self.local_epochs):
            b_q = self.sample(ctx, clients, query, "query", self.q_in, step, expected["query"])
            theta, c_in = self.inner_step(ctx, clients, v, b_q, step)
            b_s = self.sample(ctx, clients, support, "support", self.q_out, step, expected["support"])
            v, c_out = self.outer_step(ctx, clients, v, theta, b_q, b_s, step)
            clipped += c_in[0] + c_out[0]
            counted += c_in[1] + c_out[1]
        ctx.log("clipped", float((clipped / torch.clamp(counted, min=1.0)).sum()))
        return v

    def after_round(self, ctx: RoundContext, new_global: torch.Tensor) -> None:
        if self.targets is None or not ctx.options.evaluates(ctx.round + 1, ctx.state.rounds):
            return
        for name, value in personalize(ctx.model, new_global, self._targets_on(ctx), ctx.streams,
                                       self.inner_lr, self.query_fraction).items():
            ctx.log(name, value)

    # --- the two DP stages ------------------------------------------------------------------------------
    def sample(self, ctx: RoundContext, clients: np.ndarray, subset: ClientBatch, name: str, rate: float,
               step: int, expected_size: torch.Tensor) -> MiniBatch:
        """A Poisson sample at ``rate`` of each client's query or support set (all of it at rate 1);
        ``expected_size``: the set's expected size (the V2 denominator is ``rate`` times it)."""
        x, y, weight = select_minibatch(ctx.streams, (name, ctx.round, step), ctx.num_clients, clients,
                                        subset, sample_rate=rate if rate < 1.0 else None)
        chosen = (weight > 0).to(weight.dtype)
        return MiniBatch(x, y, chosen, chosen.sum(1), rate * expected_size.to(weight.dtype))

    def inner_step(self, ctx: RoundContext, clients: np.ndarray, v: torch.Tensor, b_q: MiniBatch, step: int
                   ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``theta = v - eta (g_Q + n^Q)`` (eqs. (6)-(7)); also (clipped, clip decisions) per client."""
        if self.variant == "v2":
            res = per_sample_clipped_grad(ctx.model, v, b_q.x, b_q.y, b_q.chosen, self.clip_norm)
            noisy = ctx.add_noise("inner", res.grad, clients, step)
            stats = (((res.norms > self.clip_norm) * b_q.chosen).sum(1), b_q.count)
        else:
            g, norms = clip_rows(batch_gradient(ctx.model, v, b_q.x, b_q.y, b_q.mean_weight), self.clip_norm)
            noisy = ctx.add_noise("inner", g, clients, step)
            stats = ((norms > self.clip_norm).to(v.dtype), torch.ones_like(norms))
        if step == 0:
            record_release(ctx, "inner", clients, noisy)
            self._inner_release = noisy
        if self.variant == "v2":
            noisy = noisy / b_q.denominator.unsqueeze(1)
        return v - self.inner_lr * noisy, stats

    def outer_step(self, ctx: RoundContext, clients: np.ndarray, v: torch.Tensor, theta: torch.Tensor,
                   b_q: MiniBatch, b_s: MiniBatch, step: int
                   ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``v - beta (clip_sqrtC(g1) clip_sqrtC(g2) + n^S)`` (eqs. (8)-(11)), V1 or V2 (module docstring)."""
        root = math.sqrt(self.clip_norm)
        if self.variant == "v2":
            res = per_sample_clipped_grad(ctx.model, theta, b_s.x, b_s.y, b_s.chosen, root)
            g2 = res.grad
            stats = (((res.norms > root) * b_s.chosen).sum(1), b_s.count)
        else:
            g2, norms = clip_rows(batch_gradient(ctx.model, theta, b_s.x, b_s.y, b_s.mean_weight), root)
            stats = ((norms > root).to(v.dtype), torch.ones_like(norms))
        meta = ctx.add_noise("outer", self.apply_g1(ctx, clients, v, b_q, g2, step), clients, step)
        if step == 0:
            record_release(ctx, "outer", clients, meta)
            if self._inner_release is not None and len(self._inner_release) == len(meta):
                record_release(ctx, "local", clients, torch.cat([self._inner_release, meta], dim=1))
        if self.variant == "v2":
            meta = meta / b_s.denominator.unsqueeze(1)
        return v - self.outer_lr * meta, stats

    def apply_g1(self, ctx: RoundContext, clients: np.ndarray, v: torch.Tensor, b_q: MiniBatch,
                 g2: torch.Tensor, step: int) -> torch.Tensor:
        """``clip_sqrtC(g1) g2``: ``min(1, sqrt C) g2`` for ``g1 = I``; ``c1 (g2 - eta H_Q g2)`` with
        ``c1 = min(1, sqrt(C) / (1 + eta ||H_Q||_2))`` for the query Hessian (eq. (10))."""
        root = math.sqrt(self.clip_norm)
        if self.g1 == "first_order":
            return min(1.0, root) * g2
        hessian = QueryHessian(ctx.model, v, b_q.x, b_q.y, b_q.mean_weight)
        start = ctx.streams.normal(("power_iteration", ctx.round, step), clients, (v.shape[1],), v.dtype)
        norm = hessian_norm_estimate(hessian, start, self.power_iterations)
        c1 = torch.clamp(root / (1.0 + self.inner_lr * norm), max=1.0)
        return c1.unsqueeze(1) * (g2 - self.inner_lr * hessian(g2))

    def _targets_on(self, ctx: RoundContext) -> ClientData:
        key = (str(ctx.device), ctx.dtype)
        if key not in self._targets_cache:
            self._targets_cache[key] = self.targets.to(ctx.device, ctx.dtype)
        return self._targets_cache[key]
