"""Clipping: whole model vectors (NbAFL, adaptive DP, WPFL) and per-sample gradients (UDP, DP-PFL).

``clip_rows``: ``x / max(1, ||x||_2 / C)`` row by row (NbAFL Alg. 1 line 7, spec 002 Sec. 5.1; UDP
Alg. 1 uses the same rule for each per-sample gradient, eq. before (13)).

Per-sample clipping (DP-SGD, Abadi et al. 2016, Alg. 1) computes ``sum_b w_b * clip_C(g_b)`` for every
client of a batch, ``g_b`` being sample ``b``'s gradient.  :func:`per_sample_clipped_grad` never forms the
``(k, b, n_params)`` tensor of per-sample gradients.  For an affine layer ``z = a W^T + bias`` over ``L``
tokens per sample, sample ``b``'s weight gradient is ``G_b^T A_b`` (``G_b = dloss_b/dz``, ``(L, out)``;
``A_b`` the inputs, ``(L, in)``), so its squared norm is

* ``||a_b||^2 ||g_b||^2`` for a dense layer (``L = 1``; Goodfellow 2015, "efficient per-example gradient
  norms"), and
* ``<A_b A_b^T, G_b G_b^T>`` for a convolution (the "ghost norm" of Li et al. 2022), or ``||G_b^T A_b||^2``
  when that is cheaper (``L`` large compared with ``in*out/(in+out)``).

One forward pass, one backward pass to the layer outputs, the norms, then one reweighted matrix product per
layer gives the clipped sum: about the cost of one ordinary step.  :func:`per_sample_clipped_grad_vmap`
does the same with ``torch.func.vmap(grad)`` over samples (and clients); it works for any model and is the
fallback and the test oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.func import functional_call, grad, vmap

from fedbound.training.grads import assemble, per_sample_sq_norms, record
from fedbound.training.models import Model

__all__ = ["clip_rows", "clip_factors", "ClippedGradient", "per_sample_clipped_grad",
           "per_sample_grads_vmap", "per_sample_clipped_grad_vmap"]


def clip_factors(norms: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """``min(1, C / norm)`` written as ``C / max(norm, C)`` (exact at norm 0, never above 1)."""
    return clip_norm / torch.clamp(norms, min=clip_norm)


def clip_rows(x: torch.Tensor, clip_norm: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``x`` (one model per client) scaled to L2 norm <= ``clip_norm``; also the norms before."""
    norms = torch.linalg.vector_norm(x, dim=1)
    return x * clip_factors(norms, clip_norm).unsqueeze(1), norms


@dataclass(frozen=True)
class ClippedGradient:
    """``grad``: ``(k, n_params)``, ``sum_b weight_b clip_C(g_b)``; ``norms``: ``(k, b)`` per-sample norms."""

    grad: torch.Tensor
    norms: torch.Tensor


def per_sample_clipped_grad(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                            weight: torch.Tensor, clip_norm: float, out: torch.Tensor | None = None
                            ) -> ClippedGradient:
    """``sum_b weight[:, b] * clip_C(grad of loss_b)`` for ``k`` models at once, without per-sample gradients.

    ``flat``: ``(k, n_params)``; ``x``: ``(k, b, *input_shape)``; ``y``: ``(k, b)``; ``weight``: ``(k, b)``
    (``1/n`` for a mean over a full batch, 0 on padding).  Per-sample norms by the per-layer trick (module
    docstring, ``grads.per_sample_sq_norms``); a sample's gradient is scaled by ``C / max(||g_b||, C)``.
    """
    tape = record(model, flat, x, y)
    norms = per_sample_sq_norms(tape).sqrt()
    coef = (weight * clip_factors(norms, clip_norm)).to(flat.dtype)
    return ClippedGradient(grad=assemble(model, tape, coef, out), norms=norms)


def _vmapped_sample_grads(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor
                          ) -> list[torch.Tensor]:
    """Per-sample gradients, one ``(k, b, *shape)`` tensor per parameter tensor (vmap: clients, samples)."""
    module = model.to_module().to(device=flat.device, dtype=flat.dtype)
    names = [name for name, _ in module.named_parameters()]

    def sample_loss(params: dict, x_one: torch.Tensor, y_one: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, params, (x_one.unsqueeze(0),))
        return model.per_sample_loss(out.unsqueeze(0), y_one.reshape(1, 1))[0, 0]

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
    params = dict(zip(names, model.split(flat.detach()), strict=True))
    grads = vmap(per_sample, in_dims=(0, 0, 0))(params, x, y)
    return [grads[name] for name in names]


def per_sample_grads_vmap(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All per-sample gradients ``(k, b, n_params)`` by ``vmap(vmap(grad))`` (clients, then samples)."""
    k, b = y.shape
    return torch.cat([g.reshape(k, b, -1) for g in _vmapped_sample_grads(model, flat, x, y)], dim=2)


def per_sample_clipped_grad_vmap(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                                 weight: torch.Tensor, clip_norm: float) -> ClippedGradient:
    """Same result as :func:`per_sample_clipped_grad`, by materialising per-sample gradients (fallback,
    test oracle)."""
    k, b = y.shape
    grads = [g.reshape(k, b, -1) for g in _vmapped_sample_grads(model, flat, x, y)]
    norms = torch.sqrt(sum(g.square().sum(2) for g in grads))
    coef = (weight * clip_factors(norms, clip_norm)).to(flat.dtype)
    return ClippedGradient(grad=torch.cat([torch.einsum("kb,kbd->kd", coef, g) for g in grads], dim=1),
                           norms=norms)
