"""Local training of ``k`` clients at once: gradients, mini-batches, and (proximal, clipped) SGD steps.

:class:`LocalSGD` covers the local updates of the seed papers that are plain gradient steps:

* NbAFL (Alg. 1, spec 002 Sec. 5.1): ``steps`` full-batch steps on
  ``F_i(w) + mu/2 ||w - w_anchor||^2`` (FedProx proximal term, ``prox_mu``; anchor = the received model).
* UDP (Alg. 1, spec 003 Sec. 5.1): one full-batch step with every per-sample gradient clipped to
  ``C`` (``per_sample_clip``); ``w - eta * mean_b clip_C(g_b)``.
* adaptive DP (PADPFL Sec. 5): the NbAFL step with its own ``prox_mu``; WPFL (eq. (20a)): one
  mini-batch step (``sample_rate`` = the paper's q).

Mini-batches (``batch_size`` B: B samples per client uniformly without replacement; ``sample_rate`` q:
Poisson sampling, each sample independently, normalised by the expected size ``q n_i`` as in DP-SGD) are
drawn from population streams keyed by (round, step), so a client gets the same batches whatever chunk
it is trained in.  ``weight_decay`` adds ``lambda/2 ||w||^2`` (data-independent, so never clipped).
``feature_clip`` X scales every input with ``||x|| > X`` to norm X before the model sees it (a per-record
map: the provable sensitivity's data-independent smoothness, ``fedbound.training.sensitivity``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fedbound.training.clipping import per_sample_clipped_grad
from fedbound.training.federation import ClientBatch
from fedbound.training.grads import batch_gradient
from fedbound.training.models import Model
from fedbound.training.noise import Streams

__all__ = ["batch_loss", "select_minibatch", "LocalSGD"]


@torch.no_grad()
def batch_loss(model: Model, flat: torch.Tensor, batch: ClientBatch) -> torch.Tensor:
    """Mean loss of each client's model on its own data, ``(k,)``."""
    return (model.per_sample_loss(model(flat, batch.x), batch.y) * batch.weight).sum(1)


def select_minibatch(streams: Streams, key: tuple, num_clients: int, clients: Sequence[int] | np.ndarray,
                     batch: ClientBatch, batch_size: int | None = None, sample_rate: float | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, y, weight)`` of this step's mini-batch for each client (full batch when neither is given).

    ``batch_size``: ``min(B, n_i)`` samples uniformly without replacement, weight ``1 / min(B, n_i)``.
    ``sample_rate``: Poisson sampling with rate q, weight ``1 / (q n_i)`` (empty batches allowed).
    """
    if not batch_size and sample_rate is None:
        return batch.x, batch.y, batch.weight
    keys = streams.uniform_population(key, num_clients, batch.mask.shape[1], clients, dtype=batch.x.dtype)
    keys = torch.where(batch.mask > 0, keys, torch.full_like(keys, 2.0))
    if sample_rate is not None:
        chosen = keys < sample_rate
        width = max(int(chosen.sum(1).max().item()), 1)
        denom = sample_rate * batch.sizes
    else:
        width = min(int(batch_size), keys.shape[1])
        chosen = None
        denom = torch.clamp(batch.sizes, max=width)
    order = torch.topk(keys, width, dim=1, largest=False).indices
    picked = torch.gather(keys, 1, order)
    valid = picked < (sample_rate if sample_rate is not None else 1.5)
    rows = torch.arange(len(order), device=order.device).unsqueeze(1)
    weight = valid.to(batch.x.dtype) / denom.unsqueeze(1)
    return batch.x[rows, order], batch.y[rows, order], weight


@dataclass(frozen=True)
class LocalSGD:
    """``steps`` (proximal, optionally per-sample-clipped) gradient steps with learning rate ``lr``."""

    steps: int = 1
    lr: float = 0.01
    batch_size: int | None = None
    sample_rate: float | None = None
    prox_mu: float = 0.0
    weight_decay: float = 0.0
    per_sample_clip: float | None = None
    feature_clip: float | None = None

    def run(self, model: Model, start: torch.Tensor, batch: ClientBatch, *, streams: Streams, round_: int,
            clients: Sequence[int] | np.ndarray, num_clients: int, anchor: torch.Tensor | None = None,
            step_hook: Callable[[int, torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """The clients' models after the local steps, ``(k, n_params)``.

        ``anchor`` (default ``start``) is the centre of the proximal term; ``step_hook(step, grad)`` may
        change each step's gradient (e.g. add DP-SGD noise) before it is applied.
        """
        w = start.detach().clone()
        anchor = start.detach() if anchor is None else anchor
        buffer = torch.empty_like(w)
        for step in range(self.steps):
            x, y, weight = select_minibatch(streams, ("batch", round_, step), num_clients, clients, batch,
                                            self.batch_size, self.sample_rate)
            if self.feature_clip is not None:
                norms = torch.linalg.vector_norm(x.flatten(2), dim=2).clamp(min=self.feature_clip)
                x = x * (self.feature_clip / norms).reshape(*norms.shape, *([1] * (x.ndim - 2)))
            if self.per_sample_clip is not None:
                g = per_sample_clipped_grad(model, w, x, y, weight, self.per_sample_clip, out=buffer).grad
            else:
                g = batch_gradient(model, w, x, y, weight, out=buffer)
            if self.prox_mu:  # in place: parameter-sized temporaries cost more than the arithmetic
                g.add_(w, alpha=self.prox_mu).sub_(anchor, alpha=self.prox_mu)
            if self.weight_decay:
                g.add_(w, alpha=self.weight_decay)
            if step_hook is not None:
                g = step_hook(step, g)
            w.sub_(g, alpha=self.lr)
        return w
