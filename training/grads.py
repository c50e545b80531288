"""Gradients of ``k`` clients' models at once, assembled layer by layer from the layer outputs' gradients.

Every parametrised layer is affine over tokens (``models.py``): ``z = a W^T + bias``.  One forward pass
records ``(a, z)`` per layer (the *tape*); one backward pass gives ``G = dloss/dz`` for every layer (the
parameters need no gradient of their own, so autograd never allocates parameter-sized tensors); then
``sum_b c_b grad_W loss_b = (c * G)^T A`` is one batched product per layer, written straight into the flat
``(k, n_params)`` gradient buffer.  With ``c_b`` = the sample weights this is the ordinary gradient of
``sum_b weight_b loss_b``; with ``c_b = weight_b * min(1, C / ||g_b||)`` it is the DP-SGD clipped sum
(``clipping.py``).  The per-sample norms ``||g_b||`` come from the tape too.
"""

from __future__ import annotations

import torch

from fedbound.training.models import Model

__all__ = ["Tape", "record", "assemble", "batch_gradient", "per_sample_sq_norms"]



class Tape:
    """Layer inputs ``a`` ``(k, b, L, in)`` and output gradients ``g`` ``(k, b, L, out)`` of one pass."""

    def __init__(self, entries: list, grads: list[torch.Tensor], k: int, b: int, loss: torch.Tensor) -> None:
        self.a = [e.a.detach() for e in entries]
        self.g = [gz.view(k, b, e.tokens, -1) for gz, e in zip(grads, entries, strict=True)]
        self.k, self.b = k, b
        self.loss = loss


def record(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> Tape:
    """Forward ``k`` models on ``x`` and backpropagate ``sum_b loss_b`` to every layer output."""
    tape: list = []
    with torch.enable_grad():
        out = model.forward(model.split(flat.detach()), x, tape)
        per_sample = model.per_sample_loss(out, y)
        grads = torch.autograd.grad(per_sample.sum(), [entry.z for entry in tape])
    k, b = y.shape
    return Tape(tape, list(grads), k, b, per_sample.detach())


def per_sample_sq_norms(tape: Tape) -> torch.Tensor:
    """Squared norms ``(k, b)`` of every sample's full gradient (all layers, weights and biases).

    Dense layer: ``(||a_b||^2 + 1) ||g_b||^2``.  Token layers: ``<A A^T, G G^T>`` (ghost norm) or
    ``||G^T A||^2``, whichever is cheaper, plus the bias part ``||sum_l g_l||^2``.
    """
    total = None
    for a, g in zip(tape.a, tape.g, strict=True):
        k, b, tokens, n_in = a.shape
        n_out = g.shape[-1]
        if tokens == 1:
            sq = (a.squeeze(2).square().sum(-1) + 1.0) * g.squeeze(2).square().sum(-1)
        else:
            bias = g.sum(2).square().sum(-1)
            a_ = a.reshape(k * b, tokens, n_in)
            g_ = g.reshape(k * b, tokens, n_out)
            if tokens * (n_in + n_out) < n_in * n_out:
                weight = (torch.bmm(a_, a_.transpose(1, 2)) * torch.bmm(g_, g_.transpose(1, 2))).sum((1, 2))
            else:
                weight = torch.bmm(g_.transpose(1, 2), a_).square().sum((1, 2))
            sq = weight.view(k, b) + bias
        total = sq if total is None else total + sq
    return total


def assemble(model: Model, tape: Tape, coef: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_b coef[:, b] * grad(loss_b)`` as a flat ``(k, n_params)`` tensor (into ``out`` if given)."""
    k = tape.k
    if out is None:
        out = torch.empty((k, model.n_params), dtype=coef.dtype, device=coef.device)
    views = model.split(out)
    for i, (a, g) in enumerate(zip(tape.a, tape.g, strict=True)):
        cg = (coef[:, :, None, None] * g).reshape(k, -1, g.shape[-1])
        weight_view = views[2 * i].view(k, g.shape[-1], -1)
        lhs, rhs = cg.transpose(1, 2), a.reshape(k, -1, a.shape[-1])
        if weight_view.is_contiguous():  # one client: write in place, no temporary
            torch.bmm(lhs, rhs, out=weight_view)
        else:  # bmm into a view strided by n_params falls off the fast path: 5-10x slower than a product
            weight_view.copy_(torch.bmm(lhs, rhs))  # into a temporary and a copy (torch 2.13, 2-core CPU)
        torch.sum(cg, dim=1, out=views[2 * i + 1])
    return out


def batch_gradient(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """Gradient ``(k, n_params)`` of ``sum_b weight[:, b] * loss_b`` for each of ``k`` models."""
    return assemble(model, record(model, flat, x, y), weight.to(flat.dtype), out)
