"""Estimators of the loss constants the papers' bounds assume, measured on a real model along a trajectory.

The objective is the federated training loss ``F(w) = sum_i p_i F_i(w) + (lambda/2) ||w||^2`` with
``p_i = |D_i| / sum_j |D_j|`` (NbAFL, Wei et al. 2020, eq. (1); the engine reports the same ``loss``),
evaluated in float64 (float32 for non-convex models, half the time).  Each estimator looks at the points
``w_0, w_1, ...`` of a short non-private run and
returns an :class:`Estimate`: the value the bound needs (a supremum or an infimum over the points) with its
spread (min, median, max over the points).

* :func:`smoothness` -- ``L`` / ``rho``: the largest Hessian eigenvalue by power iteration on
  Hessian-vector products (double backward through the model).
* :func:`strong_convexity` -- the smallest Hessian eigenvalue by Lanczos (``scipy.sparse.linalg.eigsh`` on a
  ``LinearOperator`` of Hessian-vector products); for convex models it is the strong-convexity modulus and
  a PL constant.
* :func:`pl_constant` -- the Polyak-Lojasiewicz ratio ``(1/2)||grad F||^2 / (F - F*)`` (its infimum is the
  PL constant ``l``/``mu``: ``(1/2)||grad F||^2 >= l (F - F*)``).
* :func:`gradient_bound` -- ``beta`` with ``||grad F|| <= beta`` (how NbAFL's proof uses it, spec 002 F13).
* :func:`dissimilarity` -- NbAFL's ``B(w) = sqrt(sum_i p_i ||grad F_i||^2) / ||grad F||`` (Wei et al. 2020,
  Lemma 2, eq. (26)), via :func:`fedbound.bounds.nbafl.estimate_B`.
* :func:`gradient_divergence` -- UDP's ``xi-bar`` (Wei et al. 2021, Assumption 1.5): ``xi_i`` = the largest
  ``||grad F_i - grad F||`` over the points, ``xi-bar`` their mean.
* :func:`minimise` -- ``F*``: L-BFGS to a gradient tolerance (exact for convex models) or, for other models,
  the best value of a long L-BFGS run from ``w_0`` (a local minimum: an estimate, said so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedbound.errors import DomainError, ParameterError

__all__ = ["Estimate", "Objective", "smoothness", "strong_convexity", "pl_constant", "gradient_bound",
           "dissimilarity", "gradient_divergence", "dissimilarity_at", "divergence_at", "minimise", "Minimum"]


@dataclass(frozen=True)
class Estimate:
    """A measured constant: ``value`` (what the bound needs), its spread over the trajectory points
    (``low``, ``median``, ``high``), how it was measured, and the per-point values."""

    name: str
    value: float
    low: float
    median: float
    high: float
    method: str
    points: tuple[float, ...] = ()
    note: str = ""

    @classmethod
    def over(cls, name: str, values: Sequence[float], pick: str, method: str, note: str = "") -> Estimate:
        """The estimate from per-point ``values``: ``pick`` is "max" (a supremum) or "min" (an infimum)."""
        arr = np.asarray(values, dtype=float)
        finite = arr[np.isfinite(arr)]
        if not len(finite):
            raise DomainError(name, float("nan"), "a finite value at some trajectory point",
                              hint="every point gave an undefined value")
        value = float(finite.max() if pick == "max" else finite.min())
        return cls(name, value, float(finite.min()), float(np.median(finite)), float(finite.max()), method,
                   tuple(float(v) for v in arr), note)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "low": self.low, "median": self.median,
                "high": self.high, "method": self.method, "points": list(self.points), "note": self.note}


@dataclass
class Objective:
    """``F(w) = sum_i p_i F_i(w) + (weight_decay/2) ||w||^2`` of a :class:`~fedbound.training.models.Model`
    on padded client data (``x`` ``(N, n, ...)``, ``y``, ``mask`` ``(N, n)``), in the data's dtype."""

    model: Any
    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    sizes: np.ndarray
    weight_decay: float = 0.0
    hvp_count: int = field(default=0, init=False)

    @classmethod
    def from_client_data(cls, model: Any, data: Any, weight_decay: float = 0.0,
                         dtype: torch.dtype = torch.float64) -> Objective:
        """From a :class:`~fedbound.training.federation.ClientData` (converted to ``dtype``)."""
        y = data.y.to(dtype) if data.y.is_floating_point() else data.y
        return cls(model, data.x.to(dtype), y, data.mask.to(dtype), np.asarray(data.sizes),
                   float(weight_decay))

    @property
    def dtype(self) -> torch.dtype:
        return self.x.dtype

    def __post_init__(self) -> None:
        keep = self.mask > 0
        self._x_all = self.x[keep].unsqueeze(0)  # every sample once: F = mean over all of them (p_i ~ n_i)
        self._y_all = self.y[keep].unsqueeze(0)

    def loss_t(self, w: torch.Tensor) -> torch.Tensor:
        """``F(w)`` as a tensor: with ``p_i = n_i / n``, ``sum_i p_i F_i`` is the mean over all samples."""
        out = self.model(w.reshape(1, -1), self._x_all)
        return self.model.per_sample_loss(out, self._y_all).mean() + 0.5 * self.weight_decay * (w @ w)

    def loss(self, w: torch.Tensor) -> float:
        with torch.no_grad():
            return float(self.loss_t(w.to(self.dtype)))

    def grad(self, w: torch.Tensor) -> tuple[float, torch.Tensor]:
        """``(F(w), grad F(w))``."""
        w = w.detach().to(self.dtype).clone().requires_grad_(True)
        value = self.loss_t(w)
        (g,) = torch.autograd.grad(value, w)
        return float(value.detach()), g

    def client_grads(self, w: torch.Tensor) -> torch.Tensor:
        """``grad F_i(w)`` of every client (with the weight-decay term), ``(N, d)``."""
        k = self.x.shape[0]
        w = w.detach().to(self.dtype)
        ws = w.reshape(1, -1).repeat(k, 1).requires_grad_(True)
        out = self.model(ws, self.x)
        per_sample = self.model.per_sample_loss(out, self.y) * self.mask
        losses = per_sample.sum(1) / torch.as_tensor(self.sizes, dtype=self.dtype)
        (g,) = torch.autograd.grad(losses.sum(), ws)
        return g + self.weight_decay * w

    def hvp(self, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Hessian-vector product ``H(w) v`` by double backward."""
        self.hvp_count += 1
        w = w.detach().to(self.dtype).clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss_t(w), w, create_graph=True)
        (hv,) = torch.autograd.grad(g @ v.to(self.dtype), w)
        return hv.detach()


def _power_iteration(obj: Objective, w: torch.Tensor, iters: int, tol: float, seed: int) -> float:
    """The largest-magnitude Hessian eigenvalue at ``w`` (Rayleigh quotient of the power iteration)."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(w.shape, generator=gen, dtype=obj.dtype)
    v /= v.norm()
    value = 0.0
    for _ in range(iters):
        hv = obj.hvp(w, v)
        new = float(v @ hv)
        norm = float(hv.norm())
        if norm == 0.0:
            return 0.0
        v = hv / norm
        if abs(new - value) <= tol * abs(new):
            return new
        value = new
    return value


def smoothness(obj: Objective, points: Sequence[torch.Tensor], iters: int = 30, tol: float = 1e-4,
               seed: int = 0) -> Estimate:
    """``L`` (``rho``): the largest Hessian eigenvalue over the points, by power iteration on
    Hessian-vector products (convergence to relative change ``tol``, at most ``iters`` products)."""
    values = [_power_iteration(obj, w, iters, tol, seed + i) for i, w in enumerate(points)]
    return Estimate.over("smoothness", np.abs(values), "max",
                         f"power iteration on Hessian-vector products at {len(points)} trajectory points")


def _lanczos_min(obj: Objective, w: torch.Tensor, tol: float) -> float:
    from scipy.sparse.linalg import LinearOperator, eigsh

    d = w.numel()

    def matvec(v: np.ndarray) -> np.ndarray:
        return obj.hvp(w, torch.as_tensor(np.ravel(v), dtype=obj.dtype)).to(torch.float64).numpy()

    op = LinearOperator((d, d), matvec=matvec, dtype=np.float64)
    if d <= 2:
        dense = np.column_stack([matvec(e) for e in np.eye(d)])
        return float(np.linalg.eigvalsh(0.5 * (dense + dense.T))[0])
    v0 = np.random.default_rng(0).standard_normal(d)
    return float(eigsh(op, k=1, which="SA", tol=tol, v0=v0, ncv=min(d, 40), maxiter=50 * d)[0][0])


def strong_convexity(obj: Objective, points: Sequence[torch.Tensor], tol: float = 1e-10) -> Estimate:
    """The smallest Hessian eigenvalue over the points, by Lanczos (``eigsh(which="SA")`` on a
    LinearOperator of Hessian-vector products): the strong-convexity modulus of a convex model."""
    values = [_lanczos_min(obj, w, tol) for w in points]
    return Estimate.over("strong_convexity", values, "min",
                         f"Lanczos (smallest Hessian eigenvalue) at {len(points)} trajectory points")


def pl_constant(losses: Sequence[float], grad_norms: Sequence[float], f_star: float) -> Estimate:
    """The PL constant: the infimum over the points of ``(1/2)||grad F||^2 / (F - F*)`` (points at the
    optimum, ``F - F* <= 0``, are skipped)."""
    gap = np.asarray(losses, dtype=float) - f_star
    ratio = np.where(gap > 0, 0.5 * np.asarray(grad_norms, dtype=float) ** 2 / np.where(gap > 0, gap, 1.0),
                     np.nan)
    return Estimate.over("pl", ratio, "min", "PL ratio (1/2)||grad F||^2 / (F - F*) along the trajectory")


def gradient_bound(grad_norms: Sequence[float]) -> Estimate:
    """``beta``: the largest ``||grad F||`` over the points."""
    return Estimate.over("gradient_bound", grad_norms, "max", "largest ||grad F|| along the trajectory")


def dissimilarity_at(client_grads: np.ndarray, sizes: np.ndarray) -> float:
    """NbAFL's ``B(w) = sqrt(sum_i p_i ||grad F_i||^2) / ||grad F||`` at one point from the client gradients
    ``(N, d)`` (Wei et al. 2020, Lemma 2, eq. (26)), via :func:`fedbound.bounds.nbafl.estimate_B`."""
    from fedbound.bounds.nbafl import estimate_B

    return estimate_B(client_grads, sizes)


def divergence_at(client_grads: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``||grad F_i(w) - grad F(w)||`` of every client at one point, ``(N,)`` (UDP, Wei et al. 2021,
    Assumption 1.5), with ``grad F = sum_i p_i grad F_i``."""
    g = np.asarray(client_grads, dtype=float)
    p = np.asarray(sizes, dtype=float) / np.sum(sizes)
    return np.linalg.norm(g - p @ g, axis=1)


def dissimilarity(values: Sequence[float]) -> Estimate:
    """NbAFL's ``B``: the largest ``B(w)`` (:func:`dissimilarity_at`) over the points."""
    return Estimate.over("dissimilarity", values, "max",
                         "B(w) = sqrt(sum p_i ||grad F_i||^2) / ||grad F|| (NbAFL, Wei et al. 2020, "
                         "eq. (26)) along the trajectory")


def gradient_divergence(per_point: Sequence[np.ndarray]) -> Estimate:
    """UDP's ``xi-bar`` from :func:`divergence_at` at each point: ``xi_i = max_t ||grad F_i - grad F||``,
    ``xi-bar = mean_i xi_i``; the spread is over the clients' ``xi_i``."""
    xi = np.max(np.stack([np.asarray(v, dtype=float) for v in per_point]), axis=0)
    est = Estimate.over("gradient_divergence", xi, "max",
                        "xi_i = max_t ||grad F_i - grad F|| along the trajectory, xi-bar = mean_i xi_i")
    return Estimate(est.name, float(xi.mean()), est.low, est.median, est.high, est.method, est.points,
                    "spread over the clients' xi_i")


@dataclass(frozen=True)
class Minimum:
    """``F*`` and where it was found: ``exact`` when L-BFGS met the gradient tolerance on a convex model."""

    value: float
    grad_norm: float
    iterations: int
    exact: bool
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "grad_norm": self.grad_norm, "iterations": self.iterations,
                "exact": self.exact, "method": self.method}


def minimise(obj: Objective, w0: torch.Tensor, convex: bool, gtol: float = 1e-9, maxiter: int = 2000
             ) -> Minimum:
    """``F*`` by L-BFGS (scipy) from ``w0``: to ``||grad F|| <= gtol`` on a convex model (then exact up to
    ``gtol^2 / (2 mu)``), otherwise the best value of ``maxiter`` iterations (a local minimum)."""
    from scipy.optimize import minimize

    if maxiter < 1:
        raise ParameterError("maxiter", maxiter, "integer in [1, inf)")

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, g = obj.grad(torch.as_tensor(x))
        return value, g.to(torch.float64).numpy()

    res = minimize(fun, w0.detach().to(torch.float64).numpy(), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30})
    value, g = obj.grad(torch.as_tensor(res.x))
    gnorm = float(g.norm())
    exact = bool(convex and gnorm <= max(gtol, 1e-7))
    how = (f"L-BFGS to ||grad F|| <= {gtol:.0e} on a convex model (exact)" if exact else
           f"best of {int(res.nit)} L-BFGS iterations from w0 (a local minimum: an estimate of F*)")
    return Minimum(float(value), gnorm, int(res.nit), exact, how)
