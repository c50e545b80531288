"""Personalization rules of the WPFL simulator: WPFL's own (eq. (20b)) and the four PFL baselines of
WPFL Figs. 5-7 (pFedMe, APPLE, FedAMP, FedALA), chosen by ``[wpfl] personalization``.

As the paper runs them (spec 004 Sec. 6.4), every baseline uses WPFL's DP mechanism (clip to ``C``, Gaussian
noise, ``R``-bit quantization, bit errors) and WPFL's client selection and channel allocation, but fixed rates
(``eta_F``, ``eta_P`` of the ``[wpfl]`` section), not the per-round configuration of Alg. 2.  A rule says
what a selected client uploads, what the server sends each client (one model through the client's downlink
bit errors, or for APPLE every core model), and how every client updates its personalized (PL) model after
the downlink.  Each PL step draws its own Poisson mini-batch (rate ``q``).

Simplifications common to the four baselines: one gradient step of each inner problem per PL step
(``local_steps`` PL steps per round; pFedMe's uploaded local model moves once per round), fixed
hyper-parameters (below, from the original papers where they state one), and the server keeps the last
upload it received from each client (a client not selected this round is represented by its previous
upload).  They train their runs one at a time (not batched with other runs, ``plain = False``).

* :class:`PFedMe` -- Dinh, Tran & Nguyen, "Personalized Federated Learning with Moreau Envelopes", NeurIPS
  2020, Alg. 1: the PL model theta solves the Moreau envelope ``min F_n(theta) + lam/2 ||theta - w||^2``
  (one gradient step, :func:`pfedme_personal_step`); the uploaded local model is
  ``w - eta_F lam (w - theta)`` (:func:`pfedme_local_model`); server mixing beta = 1 (the plain mean);
  ``lam = 15`` (the paper's MNIST setting).
* :class:`Apple` -- Luo & Wu, "Adapt to Adaptation: Learning Personalization for Cross-Silo Federated
  Learning", IJCAI 2022: each client trains a core model and a directed relationship vector ``p_n``; its
  PL model is ``sum_j p_nj core_j`` over every client's downloaded core (:func:`apple_step`); the proximal
  pull of ``p_n`` to the uniform ``1/N`` has weight ``mu_t = mu0 (1 + cos(pi t / L)) / 2`` for ``t < L``
  (the paper's cosine schedule), 0 after; ``mu0 = 1``, ``L`` = 20 % of the rounds (our choice), the
  rate of ``p`` is ``eta_P``.  Each client downloads all ``N`` cores through its own bit errors every round.
* :class:`FedAMP` -- Huang et al., "Personalized Cross-Silo Federated Learning on Non-IID Data", AAAI 2021
  (attention message passing): the server sends client ``n`` its cloud model ``u_n = sum_j xi_nj w_j``
  with attention weights ``xi_nj = alpha A'(||w_n - w_j||^2)``, ``A(x) = 1 - exp(-x / sigma)``
  (:func:`fedamp_weights`; ``xi_nn = 1 - sum_{j != n} xi_nj``, the off-diagonal row rescaled to sum to 1
  when it exceeds 1); the client takes a step on ``F_n(w) + lam / (2 alpha) ||w - u_n||^2`` and uploads
  its PL model; ``alpha = 1``, ``sigma = 0.1``, ``lam = 1`` (fixed, our choice; the paper tunes them per
  data set).
* :class:`FedALA` -- Zhang et al., "FedALA: Adaptive Local Aggregation for Personalized Federated
  Learning", AAAI 2023 (the ALA module): the client initializes its model as ``w + (g - w) * W`` with
  element-wise weights ``W`` in [0, 1] (start 1), learned by one clipped gradient step per round with rate
  ``eta_ALA = 1`` (:func:`fedala_weight_step`, :func:`fedala_init`) on every layer (the paper: the top
  ``p`` layers, ``s`` % of the data; here the PL mini-batch), then one SGD step with ``eta_P``; a selected
  client uploads an ``eta_F`` SGD step from its PL model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch

from fedbound.errors import ParameterError
from fedbound.training.engine import RoundContext, auto_chunk_size
from fedbound.training.federation import ClientBatch
from fedbound.training.grads import batch_gradient
from fedbound.training.local import select_minibatch
from fedbound.training.quantization import transmit

if TYPE_CHECKING:
    from fedbound.training.wpfl import WPFL

__all__ = ["PERSONALIZATIONS", "rule", "Rule", "PFedMe", "Apple", "FedAMP", "FedALA",
           "pfedme_personal_step", "pfedme_local_model", "apple_step", "apple_mu", "fedamp_weights",
           "fedala_init", "fedala_weight_step"]


# --- the update rules, on plain tensors ------------------------------------------------------------------
def pfedme_personal_step(theta: torch.Tensor, w: torch.Tensor, grad: torch.Tensor, lr: float | torch.Tensor,
                         lam: float) -> torch.Tensor:
    """One gradient step on pFedMe's inner problem ``F(theta) + lam/2 ||theta - w||^2`` (Dinh et al. 2020,
    Alg. 1, the inner personalized update): ``theta - lr (grad + lam (theta - w))``."""
    return theta - lr * (grad + lam * (theta - w))


def pfedme_local_model(w: torch.Tensor, theta: torch.Tensor, lr: float | torch.Tensor, lam: float
                       ) -> torch.Tensor:
    """pFedMe's local update along the Moreau envelope's gradient ``lam (w - theta)`` (Dinh et al. 2020,
    Alg. 1 line 8): ``w - lr lam (w - theta)``."""
    return w - lr * lam * (w - theta)


def apple_mu(round_: int, rounds: int, mu0: float = 1.0, share: float = 0.2) -> float:
    """APPLE's proximal weight at round ``round_`` (Luo & Wu 2022, the cosine loss scheduler):
    ``mu0 (1 + cos(pi t / L)) / 2`` for ``t < L = ceil(share rounds)``, 0 after."""
    horizon = max(1, math.ceil(share * rounds))
    return 0.0 if round_ >= horizon else mu0 * (1.0 + math.cos(math.pi * round_ / horizon)) / 2.0


def apple_step(p: torch.Tensor, cores: torch.Tensor, own: int, grad: torch.Tensor, lr: float, lr_p: float,
               mu: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One APPLE step of a client (Luo & Wu 2022, Sec. 3): PL model ``p @ cores``, ``grad`` its loss
    gradient there; returns ``(p', core_own')`` with ``core_own' = core_own - lr p_own grad`` and
    ``p' = p - lr_p (cores grad + mu (p - 1/N))``.  ``p`` ``(N,)``, ``cores`` ``(N, d)``."""
    n = len(p)
    core = cores[own] - lr * p[own] * grad
    p_new = p - lr_p * (cores @ grad + mu * (p - 1.0 / n))
    return p_new, core


def fedamp_weights(models: torch.Tensor, alpha: float = 1.0, sigma: float = 0.1) -> torch.Tensor:
    """FedAMP's attention weights ``(N, N)`` (Huang et al. 2021, attention message passing with the
    attention-inducing function ``A(x) = 1 - e^{-x / sigma}``): ``xi_nj = alpha e^{-||w_n - w_j||^2 /
    sigma} / sigma`` for ``j != n`` (rows whose off-diagonal sum exceeds 1 rescaled to sum 1), ``xi_nn = 1 -
    sum_{j != n} xi_nj``."""
    dist = torch.cdist(models.to(torch.float64), models.to(torch.float64)) ** 2
    xi = alpha * torch.exp(-dist / sigma) / sigma
    xi.fill_diagonal_(0.0)
    total = xi.sum(1, keepdim=True)
    xi = torch.where(total > 1.0, xi / total, xi)
    xi += torch.diag(1.0 - xi.sum(1))
    return xi.to(models.dtype)


def fedala_init(local: torch.Tensor, received: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """FedALA's adaptive local aggregation (Zhang et al. 2023, the ALA module's
    initialization): ``local + (received - local) * weights``."""
    return local + (received - local) * weights


def fedala_weight_step(weights: torch.Tensor, grad: torch.Tensor, local: torch.Tensor, received: torch.Tensor,
                       lr: float = 1.0) -> torch.Tensor:
    """One step of FedALA's weight learning (Zhang et al. 2023, the ALA module's weight
    update): ``clip(W - lr grad * (received - local), 0, 1)``, ``grad`` the loss gradient at
    :func:`fedala_init`'s model."""
    return torch.clamp(weights - lr * grad * (received - local), 0.0, 1.0)


# --- plumbing shared by the rules -----------------------------------------------------------------------
def chunks(ctx: RoundContext, learners: np.ndarray) -> Iterator[tuple[np.ndarray, torch.Tensor, ClientBatch]]:
    """``(clients, index tensor, data batch)`` per chunk of ``learners``, sized as the engine does."""
    size = auto_chunk_size(ctx.model, ctx.data, ctx.options)
    for lo in range(0, len(learners), size):
        clients = learners[lo:lo + size]
        yield clients, torch.as_tensor(clients, device=ctx.device), ctx.data.gather(clients)


def pl_gradient(alg: WPFL, ctx: RoundContext, clients: np.ndarray, batch: ClientBatch, w: torch.Tensor,
                step: int, tag: str = "pl_batch") -> torch.Tensor:
    """Loss gradient of each client's model ``w`` ``(k, d)`` on its Poisson mini-batch (rate ``q``) keyed
    ``(tag, round, step)``, plus weight decay."""
    local = alg.local
    x, y, weight = select_minibatch(ctx.streams, (tag, ctx.round, step), ctx.num_clients, clients, batch,
                                    local.batch_size, local.sample_rate)
    g = batch_gradient(ctx.model, w, x, y, weight)
    return g + local.weight_decay * w if local.weight_decay else g


# --- the rules ------------------------------------------------------------------------------------------
class Rule:
    """WPFL's personalization (WPFL eq. (20b)): a selected client uploads an SGD step from the global
    model it received; the server broadcasts one global model; every client steps its PL model on
    ``(1 - lambda/2) grad F_n + lambda (pl - received)`` (``WPFL._personalize``)."""

    name = "wpfl"
    plain = True

    def state(self, alg: WPFL, ctx: RoundContext) -> dict[str, torch.Tensor]:
        """Extra per-run state (checkpointed with the run)."""
        return {}

    def start_models(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray) -> torch.Tensor:
        return ctx.client_state["received"][torch.as_tensor(clients, device=ctx.device)]

    def local_update(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor
                     ) -> torch.Tensor | None:
        """The model a selected client uploads; None: ``local_steps`` SGD steps from ``start``."""
        return None

    def uploaded(self, ctx: RoundContext, clients: np.ndarray, received: torch.Tensor) -> None:
        """The server's copy of the uploads as it received them (for per-client cloud models)."""

    def downlink(self, alg: WPFL, ctx: RoundContext, new_global: torch.Tensor) -> None:
        """Every client receives the quantized global model through its bit errors (eqs. (18)-(19))."""
        everyone = np.arange(ctx.num_clients)
        rows = new_global.unsqueeze(0).expand(ctx.num_clients, -1)
        ctx.client_state["received"] = alg._downlink(ctx, rows, everyone, row=ctx.round + 1, key=ctx.round)

    def personalize(self, alg: WPFL, ctx: RoundContext, learners: np.ndarray) -> None:
        alg._personalize(ctx, learners)

    def eval_models(self, ctx: RoundContext) -> torch.Tensor:
        return ctx.client_state["pl"]


class _Cloud(Rule):
    """A baseline whose server keeps every client's last received upload (``cloud``, ``(N, d)``)."""

    plain = False

    def state(self, alg: WPFL, ctx: RoundContext) -> dict[str, torch.Tensor]:
        return {"cloud": ctx.global_params.repeat(ctx.num_clients, 1)}

    def uploaded(self, ctx: RoundContext, clients: np.ndarray, received: torch.Tensor) -> None:
        ctx.client_state["cloud"][torch.as_tensor(clients, device=ctx.device)] = received


class PFedMe(Rule):
    """pFedMe (module docstring; Dinh et al. NeurIPS 2020): PL model theta, uploaded local model pulled to
    it."""

    name = "pfedme"
    plain = False
    lam = 15.0

    def local_update(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor
                     ) -> torch.Tensor:
        theta = ctx.client_state["pl"][torch.as_tensor(clients, device=ctx.device)]
        return pfedme_local_model(start, theta, alg.local.lr, self.lam)

    def personalize(self, alg: WPFL, ctx: RoundContext, learners: np.ndarray) -> None:
        pl, received = ctx.client_state["pl"], ctx.client_state["received"]
        for clients, idx, batch in chunks(ctx, learners):
            theta, w = pl[idx].clone(), received[idx]
            for step in range(alg.local.steps):
                theta = pfedme_personal_step(theta, w, pl_gradient(alg, ctx, clients, batch, theta, step),
                                             alg.pl_lr, self.lam)
            pl[idx] = theta


class FedAMP(_Cloud):
    """FedAMP (module docstring; Huang et al. AAAI 2021): attention-weighted personalized cloud models."""

    name = "fedamp"
    alpha, sigma, lam = 1.0, 0.1, 1.0

    def local_update(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor
                     ) -> torch.Tensor:
        return ctx.client_state["pl"][torch.as_tensor(clients, device=ctx.device)].clone()

    def downlink(self, alg: WPFL, ctx: RoundContext, new_global: torch.Tensor) -> None:
        cloud = ctx.client_state["cloud"]
        rows = fedamp_weights(cloud, self.alpha, self.sigma) @ cloud
        everyone = np.arange(ctx.num_clients)
        ctx.client_state["received"] = alg._downlink(ctx, rows, everyone, row=ctx.round + 1, key=ctx.round)

    def personalize(self, alg: WPFL, ctx: RoundContext, learners: np.ndarray) -> None:
        pl, received = ctx.client_state["pl"], ctx.client_state["received"]
        pull = self.lam / self.alpha
        for clients, idx, batch in chunks(ctx, learners):
            w, u = pl[idx].clone(), received[idx]
            for step in range(alg.local.steps):
                w = w - alg.pl_lr * (pl_gradient(alg, ctx, clients, batch, w, step) + pull * (w - u))
            pl[idx] = w


class Apple(_Cloud):
    """APPLE (module docstring; Luo & Wu IJCAI 2022): learned per-client mixing of downloaded core models."""

    name = "apple"
    mu0, share = 1.0, 0.2

    def state(self, alg: WPFL, ctx: RoundContext) -> dict[str, torch.Tensor]:
        n = ctx.num_clients
        start = ctx.global_params.repeat(n, 1)
        return {**super().state(alg, ctx), "core": start.clone(),
                "cores_rx": ctx.global_params.expand(n, n, -1).clone(),
                "mix": torch.full((n, n), 1.0 / n, dtype=start.dtype, device=start.device)}

    def local_update(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor
                     ) -> torch.Tensor:
        return ctx.client_state["core"][torch.as_tensor(clients, device=ctx.device)].clone()

    def downlink(self, alg: WPFL, ctx: RoundContext, new_global: torch.Tensor) -> None:
        """Client ``n`` downloads every core through its own bit errors (N models each)."""
        cloud, n = ctx.client_state["cloud"], ctx.num_clients
        if not alg.quantized:
            ctx.client_state["cores_rx"] = cloud.expand(n, -1, -1).clone()
            return
        wrong = 0
        for c in range(n):
            ber = np.full(n, alg.schedule.downlink_ber[ctx.round + 1, c])
            rngs = [ctx.streams.numpy("downlink_bits", ctx.round, c, j) for j in range(n)]
            ctx.client_state["cores_rx"][c], changed = transmit(cloud, alg.clip_norm, alg.bits, ber, rngs)
            wrong += changed
        ctx.log("downlink_element_errors", wrong)

    def personalize(self, alg: WPFL, ctx: RoundContext, learners: np.ndarray) -> None:
        state = ctx.client_state
        mu = apple_mu(ctx.round, alg.rounds, self.mu0, self.share)
        for c in learners:
            cores = state["cores_rx"][c].clone()
            for step in range(alg.local.steps):
                cores[c] = state["core"][c]
                one = np.array([c])
                pl = (state["mix"][c] @ cores).unsqueeze(0)
                grad = pl_gradient(alg, ctx, one, ctx.data.gather(one), pl, step)[0]
                state["mix"][c], state["core"][c] = apple_step(state["mix"][c], cores, int(c), grad,
                                                               alg.pl_lr, alg.pl_lr, mu)
            cores[c] = state["core"][c]
            state["pl"][c] = state["mix"][c] @ cores


class FedALA(Rule):
    """FedALA (module docstring; Zhang et al. AAAI 2023): adaptive local aggregation of the global model
    into the local one, then local SGD."""

    name = "fedala"
    plain = False
    lr_ala = 1.0

    def state(self, alg: WPFL, ctx: RoundContext) -> dict[str, torch.Tensor]:
        return {"ala": torch.ones_like(ctx.global_params).repeat(ctx.num_clients, 1)}

    def start_models(self, alg: WPFL, ctx: RoundContext, clients: np.ndarray) -> torch.Tensor:
        return ctx.client_state["pl"][torch.as_tensor(clients, device=ctx.device)]

    def personalize(self, alg: WPFL, ctx: RoundContext, learners: np.ndarray) -> None:
        pl, received, ala = (ctx.client_state[k] for k in ("pl", "received", "ala"))
        for clients, idx, batch in chunks(ctx, learners):
            w, g, weights = pl[idx].clone(), received[idx], ala[idx].clone()
            for step in range(alg.local.steps):
                grad = pl_gradient(alg, ctx, clients, batch, fedala_init(w, g, weights), step, "ala_batch")
                weights = fedala_weight_step(weights, grad, w, g, self.lr_ala)
                w = fedala_init(w, g, weights)
                w = w - alg.pl_lr * pl_gradient(alg, ctx, clients, batch, w, step)
            pl[idx], ala[idx] = w, weights


_RULES = {r.name: r for r in (Rule, PFedMe, Apple, FedAMP, FedALA)}
PERSONALIZATIONS = tuple(_RULES)
"""The values of ``[wpfl] personalization``."""


def rule(name: str) -> Rule:
    """The personalization rule called ``name`` (one of :data:`PERSONALIZATIONS`)."""
    if name not in _RULES:
        raise ParameterError("personalization", name, "one of " + ", ".join(PERSONALIZATIONS))
    return _RULES[name]()
