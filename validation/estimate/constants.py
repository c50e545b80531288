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
* per-client constants (batched over clients): :func:`client_smoothness` and
  :func:`client_strong_convexity` (DP-PFL's L, l), :func:`client_gradient_bound` (its lambda, B),
  :func:`weighted_divergence` (eps_het), :func:`hessian_dissimilarity` (gamma), :func:`hessian_lipschitz`
  (rho), :func:`sample_gradient_std` / :func:`sample_hessian_std` (sigma_G, sigma_H),
  :func:`meta_initial_gap` (Delta0 of the meta objective G); PADPFL's :func:`mean_dissimilarity` (A) and
  :func:`lower_curvature` (rho_-); WPFL's :func:`optimum_spread` (M) and :func:`initial_distance`
  (``||w0 - w*||^2``).
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
           "dissimilarity", "gradient_divergence", "dissimilarity_at", "divergence_at", "minimise", "Minimum",
           "client_hvp", "batched_top_eigenvalue", "dense_operators", "spectral_extremes",
           "client_smoothness", "client_strong_convexity",
           "lower_curvature", "client_gradient_bound", "mean_dissimilarity_at", "mean_dissimilarity",
           "weighted_divergence", "hessian_dissimilarity", "hessian_lipschitz", "sample_gradient_std",
           "sample_hessian_std", "meta_loss_t", "meta_initial_gap", "client_objective",
           "initial_distance", "optimum_spread"]


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


def _lbfgs(obj: Objective, w0: torch.Tensor, gtol: float, maxiter: int) -> Any:
    """scipy's L-BFGS-B on ``F`` from ``w0`` (the OptimizeResult: ``x``, ``nit``)."""
    from scipy.optimize import minimize

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, g = obj.grad(torch.as_tensor(x))
        return value, g.to(torch.float64).numpy()

    return minimize(fun, w0.detach().to(torch.float64).numpy(), jac=True, method="L-BFGS-B",
                    options={"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30})


def minimise(obj: Objective, w0: torch.Tensor, convex: bool, gtol: float = 1e-9, maxiter: int = 2000
             ) -> Minimum:
    """``F*`` by L-BFGS (scipy) from ``w0``: to ``||grad F|| <= gtol`` on a convex model (then exact up to
    ``gtol^2 / (2 mu)``), otherwise the best value of ``maxiter`` iterations (a local minimum)."""
    if maxiter < 1:
        raise ParameterError("maxiter", maxiter, "integer in [1, inf)")
    res = _lbfgs(obj, w0, gtol, maxiter)
    value, g = obj.grad(torch.as_tensor(res.x))
    gnorm = float(g.norm())
    exact = bool(convex and gnorm <= max(gtol, 1e-7))
    how = (f"L-BFGS to ||grad F|| <= {gtol:.0e} on a convex model (exact)" if exact else
           f"best of {int(res.nit)} L-BFGS iterations from w0 (a local minimum: an estimate of F*)")
    return Minimum(float(value), gnorm, int(res.nit), exact, how)


# ---------------------------------------------------------------------------------------------------------
# Per-client constants (PADPFL's A and lower curvature; DP-PFL's Assumptions (15)-(21), (29))
# ---------------------------------------------------------------------------------------------------------
def client_hvp(obj: Objective, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``H_i(w) v_i`` of every client ``i`` (``v``: ``(N, d)``), with the weight-decay term, by one double
    backward through the client-batched model."""
    k = obj.x.shape[0]
    obj.hvp_count += 1
    ws = w.detach().to(obj.dtype).reshape(1, -1).repeat(k, 1).requires_grad_(True)
    out = obj.model(ws, obj.x)
    per_sample = obj.model.per_sample_loss(out, obj.y) * obj.mask
    losses = per_sample.sum(1) / torch.as_tensor(obj.sizes, dtype=obj.dtype)
    (g,) = torch.autograd.grad(losses.sum(), ws, create_graph=True)
    (hv,) = torch.autograd.grad((g * v.to(obj.dtype)).sum(), ws)
    return hv.detach() + obj.weight_decay * v.to(obj.dtype)


DENSE_MAX = 256
"""Models with at most this many parameters get dense Hessians (d batched HVPs, then ``eigvalsh``: exact);
larger ones batched power iteration."""


def batched_top_eigenvalue(apply: Any, rows: int, dim: int, dtype: torch.dtype, iters: int = 200,
                           tol: float = 1e-8, seed: int = 0) -> np.ndarray:
    """The largest-magnitude eigenvalue of ``rows`` symmetric operators at once (power iteration; ``apply``
    maps ``(rows, dim)`` to ``(rows, dim)``, row ``r`` by operator ``r``); Rayleigh quotients, ``(rows,)``."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn((rows, dim), generator=gen, dtype=dtype)
    v /= v.norm(dim=1, keepdim=True)
    value = torch.zeros(rows, dtype=dtype)
    for _ in range(iters):
        hv = apply(v)
        new = (v * hv).sum(1)
        norm = hv.norm(dim=1, keepdim=True)
        done = (new - value).abs() <= tol * new.abs()
        value = new
        if bool(done.all()) or bool((norm == 0).all()):
            break
        v = torch.where(norm > 0, hv / torch.where(norm > 0, norm, 1.0), v)
    return value.to(torch.float64).numpy()


def dense_operators(apply: Any, rows: int, dim: int, dtype: torch.dtype) -> np.ndarray:
    """The ``(rows, dim, dim)`` symmetric matrices of ``rows`` batched linear operators (``dim`` calls of
    ``apply`` on the unit vectors, symmetrised)."""
    cols = [apply(torch.zeros((rows, dim), dtype=dtype).index_fill_(1, torch.tensor([j]), 1.0))
            for j in range(dim)]
    mats = torch.stack(cols, dim=2).to(torch.float64).numpy()
    return 0.5 * (mats + np.swapaxes(mats, 1, 2))


def spectral_extremes(apply: Any, rows: int, dim: int, dtype: torch.dtype, which: str) -> np.ndarray:
    """Per operator: ``which="norm"`` the spectral norm, ``"min"`` the smallest eigenvalue; exact
    (dense, ``eigvalsh``) up to :data:`DENSE_MAX` parameters, power iteration above (``"min"`` on
    ``s I - H`` with ``s`` above the top eigenvalue)."""
    if dim <= DENSE_MAX:
        eig = np.linalg.eigvalsh(dense_operators(apply, rows, dim, dtype))
        return np.abs(eig).max(1) if which == "norm" else eig[:, 0]
    top = np.abs(batched_top_eigenvalue(apply, rows, dim, dtype))
    if which == "norm":
        return top
    shift = torch.as_tensor(top * 1.001 + 1e-12, dtype=dtype)
    rest = batched_top_eigenvalue(lambda v: shift[:, None] * v - apply(v), rows, dim, dtype, iters=1000)
    return shift.to(torch.float64).numpy() - rest


def _weights(sizes: np.ndarray) -> np.ndarray:
    return np.asarray(sizes, dtype=float) / float(np.sum(sizes))


def _clients(obj: Objective, w: torch.Tensor, which: str) -> np.ndarray:
    return spectral_extremes(lambda v: client_hvp(obj, w, v), obj.x.shape[0], w.numel(), obj.dtype, which)


def client_smoothness(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """``L``: the largest eigenvalue of every client's Hessian ``H_i`` over the points, the smoothness of
    each ``F_i`` (DP-PFL, Wei et al. 2023, Assumption (16)); batched over clients
    (:func:`spectral_extremes`)."""
    values = [float(_clients(obj, w, "norm").max()) for w in points]
    return Estimate.over("client_smoothness", values, "max",
                         f"max_i of the top eigenvalue of H_i at {len(points)} trajectory points")


def client_strong_convexity(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """``l``: the smallest eigenvalue of every client's Hessian over the points, the strong-convexity modulus
    of each ``F_i`` (DP-PFL, Wei et al. 2023, Assumption (29)); batched over clients."""
    values = [float(_clients(obj, w, "min").min()) for w in points]
    return Estimate.over("client_strong_convexity", values, "min",
                         f"min_i of the smallest eigenvalue of H_i at {len(points)} trajectory points")


def lower_curvature(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """``rho_-``: ``max(0, -lambda_min(H_i))`` over clients and points, so that every local loss has
    ``H_i >= -rho_- I`` (PADPFL, Talaei and Izadi 2024, Lemma 2's mu_bar = mu - rho_-); 0 for convex
    models."""
    values = [max(0.0, -float(_clients(obj, w, "min").min())) for w in points]
    return Estimate.over("lower_curvature", values, "max",
                         f"max(0, -min_i smallest eigenvalue of H_i) at {len(points)} trajectory points")


def client_gradient_bound(client_grads: Sequence[np.ndarray]) -> Estimate:
    """``lambda`` / ``B``: the largest ``||grad F_i||`` over clients and points (DP-PFL, Wei et al. 2023,
    Assumptions (15) (Lipschitz F_i) and Assumption 1's gradient bound); ``client_grads``: ``(N, d)`` per
    point."""
    values = [float(np.linalg.norm(np.asarray(g, dtype=float), axis=1).max()) for g in client_grads]
    return Estimate.over("client_gradient_bound", values, "max", "max_i ||grad F_i|| along the trajectory")


def mean_dissimilarity_at(client_grads: np.ndarray, sizes: np.ndarray) -> float:
    """``sum_i p_i ||grad F_i(w)|| / ||grad F(w)||`` at one point (PADPFL, Talaei and Izadi 2024, Lemma 1,
    eqs. (15)/(22): the tightest A there), via :func:`fedbound.bounds.adaptive.empirical_dissimilarity`."""
    from fedbound.bounds.adaptive import empirical_dissimilarity

    g = np.asarray(client_grads, dtype=float)
    p = _weights(sizes)
    return empirical_dissimilarity(p, np.linalg.norm(g, axis=1), float(np.linalg.norm(p @ g)))


def mean_dissimilarity(values: Sequence[float]) -> Estimate:
    """PADPFL's ``A``: the largest :func:`mean_dissimilarity_at` over the points (A >= 1 by the triangle
    inequality)."""
    return Estimate.over("mean_dissimilarity", values, "max",
                         "A(w) = sum p_i ||grad F_i|| / ||grad F|| (PADPFL, Talaei and Izadi 2024, eq. (15)) "
                         "along the trajectory")


def weighted_divergence(per_point: Sequence[np.ndarray], sizes: np.ndarray) -> Estimate:
    """DP-PFL's ``eps_het = sum_i p_i eps_i`` with ``eps_i = max_t ||grad F_i - grad F||`` (Wei et al. 2023,
    Assumption (18)); per-point values from :func:`divergence_at`; the spread is over the clients' eps_i."""
    eps = np.max(np.stack([np.asarray(v, dtype=float) for v in per_point]), axis=0)
    est = Estimate.over("weighted_divergence", eps, "max", "eps_i = max_t ||grad F_i - grad F||, "
                        "eps_het = sum_i p_i eps_i")
    return Estimate(est.name, float(_weights(sizes) @ eps), est.low, est.median, est.high, est.method,
                    est.points, "spread over the clients' eps_i")


def hessian_dissimilarity(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """DP-PFL's ``gamma = sum_i p_i gamma_i`` with ``gamma_i = max_t ||H_i - H||_2`` (Wei et al. 2023,
    Assumption (19)), ``H v = sum_j p_j H_j v``; batched over clients."""
    k = obj.x.shape[0]
    p = torch.as_tensor(_weights(obj.sizes), dtype=obj.dtype)

    def diff(w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        full = torch.stack([p @ client_hvp(obj, w, v[i].expand(k, -1)) for i in range(k)])
        return client_hvp(obj, w, v) - full

    per_client = np.max(np.stack([spectral_extremes(lambda v, w=w: diff(w, v), k, w.numel(), obj.dtype,
                                                    "norm") for w in points]), axis=0)
    est = Estimate.over("hessian_dissimilarity", per_client, "max",
                        f"gamma_i = max_t ||H_i - H||_2 at {len(points)} trajectory points, "
                        "gamma = sum_i p_i gamma_i")
    return Estimate(est.name, float(p.to(torch.float64).numpy() @ per_client), est.low, est.median, est.high,
                    est.method, est.points, "spread over the clients' gamma_i")


def hessian_lipschitz(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """DP-PFL's ``rho`` (Wei et al. 2023, Assumption (17)): the largest ``||H_i(w_a) - H_i(w_b)||_2 /
    ||w_a - w_b||`` over clients and consecutive pairs of points (a finite-difference lower estimate of the
    supremum; 0 for quadratic losses); batched over clients."""
    k = obj.x.shape[0]
    values = []
    for a, b in zip(points[:-1], points[1:], strict=True):
        step = float((a - b).norm())
        if step > 0.0:
            top = spectral_extremes(lambda v, a=a, b=b: client_hvp(obj, a, v) - client_hvp(obj, b, v), k,
                                    a.numel(), obj.dtype, "norm")
            values.append(float(top.max()) / step)
    return Estimate.over("hessian_lipschitz", values or [0.0], "max",
                         "max_i ||H_i(w_a) - H_i(w_b)|| / ||w_a - w_b|| over consecutive trajectory points")


def _client_samples(obj: Objective, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    keep = obj.mask[i] > 0
    return obj.x[i][keep], obj.y[i][keep]


def sample_gradient_std(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """DP-PFL's ``sigma_G`` (Wei et al. 2023, Assumption (20)): ``max_i sqrt(mean_x ||grad f(w; x) -
    grad F_i(w)||^2)`` over the points (the per-sample gradient std within each client)."""
    values = []
    for w in points:
        worst = 0.0
        for i in range(obj.x.shape[0]):
            x, y = _client_samples(obj, i)
            ws = w.detach().to(obj.dtype).reshape(1, -1).repeat(len(x), 1).requires_grad_(True)
            loss = obj.model.per_sample_loss(obj.model(ws, x.unsqueeze(1)), y.unsqueeze(1)).sum()
            (g,) = torch.autograd.grad(loss, ws)
            worst = max(worst, float(((g - g.mean(0)) ** 2).sum(1).mean().sqrt()))
        values.append(worst)
    return Estimate.over("sample_gradient_std", values, "max",
                         "max_i of the per-sample gradient std within client i along the trajectory")


def _per_sample_hvp(obj: Objective, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor
                    ) -> torch.Tensor:
    """``H(w; x_s) v_s`` for every sample ``s`` of ``x`` (loss only, no weight decay), ``(n, d)``."""
    ws = w.repeat(len(x), 1).requires_grad_(True)
    per = obj.model.per_sample_loss(obj.model(ws, x.unsqueeze(1)), y.unsqueeze(1))
    (g,) = torch.autograd.grad(per.sum(), ws, create_graph=True)
    return torch.autograd.grad((g * v).sum(), ws)[0]


def sample_hessian_std(obj: Objective, points: Sequence[torch.Tensor]) -> Estimate:
    """DP-PFL's ``sigma_H`` (Wei et al. 2023, Assumption (21)):
    ``max_i sqrt(mean_x ||H(w; x) - H_i(w)||_2^2)`` over the points, ``H_i`` the mean of the client's
    per-sample Hessians; batched over the samples."""
    values = []
    for w in points:
        worst = 0.0
        wd = w.detach().to(obj.dtype).reshape(1, -1)
        for i in range(obj.x.shape[0]):
            x, y = _client_samples(obj, i)
            n, d = len(x), wd.shape[1]

            def per_sample_hvp(v: torch.Tensor, x: torch.Tensor = x, y: torch.Tensor = y,
                               wd: torch.Tensor = wd) -> torch.Tensor:
                return _per_sample_hvp(obj, wd, x, y, v)

            if d <= DENSE_MAX:
                mats = dense_operators(per_sample_hvp, n, d, obj.dtype)
                dev = np.abs(np.linalg.eigvalsh(mats - mats.mean(0))).max(1)
            else:  # the mean Hessian applied to every sample's vector: H_i v_s = mean_s' H_s' v_s
                def deviation(v: torch.Tensor, fn: Any = per_sample_hvp, n: int = n) -> torch.Tensor:
                    mean = torch.stack([fn(v[s].expand(n, -1)).mean(0) for s in range(n)])
                    return fn(v) - mean

                dev = np.abs(batched_top_eigenvalue(deviation, n, d, obj.dtype, iters=100, tol=1e-6))
            worst = max(worst, float(np.sqrt(np.mean(dev ** 2))))
        values.append(worst)
    return Estimate.over("sample_hessian_std", values, "max",
                         "max_i sqrt(mean_x ||H(w; x) - H_i(w)||_2^2) along the trajectory")


def meta_loss_t(obj: Objective, w: torch.Tensor, eta: float) -> torch.Tensor:
    """DP-PFL's meta objective ``G(w) = sum_i p_i F_i(w - eta grad F_i(w))`` (Wei et al. 2023, eq. (5)),
    differentiable in ``w``."""
    k = obj.x.shape[0]
    sizes = torch.as_tensor(obj.sizes, dtype=obj.dtype)

    def client_losses(ws: torch.Tensor) -> torch.Tensor:
        per_sample = obj.model.per_sample_loss(obj.model(ws, obj.x), obj.y) * obj.mask
        return per_sample.sum(1) / sizes + 0.5 * obj.weight_decay * (ws * ws).sum(1)

    ws = w.to(obj.dtype).reshape(1, -1).repeat(k, 1)
    if not ws.requires_grad:
        ws.requires_grad_(True)
    (g,) = torch.autograd.grad(client_losses(ws).sum(), ws, create_graph=True)
    return (sizes / sizes.sum()) @ client_losses(ws - eta * g)


def meta_initial_gap(obj: Objective, points: Sequence[torch.Tensor], eta: float, convex: bool,
                     gtol: float = 1e-9, maxiter: int = 500) -> Estimate:
    """DP-PFL's ``Delta0 = G(w0) - G(w*)`` (Wei et al. 2023, Theorems 2-3) with ``G*`` by L-BFGS on the meta
    objective (:func:`meta_loss_t`, gradients by double backward) from ``w0``: exact to ``gtol`` on convex
    models with ``eta L < 1`` (G is then convex, Lemma 6), otherwise a local minimum."""
    from scipy.optimize import minimize

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        w = torch.as_tensor(x, dtype=obj.dtype).requires_grad_(True)
        value = meta_loss_t(obj, w, eta)
        (g,) = torch.autograd.grad(value, w)
        return float(value.detach()), g.to(torch.float64).numpy()

    res = minimize(fun, points[0].detach().to(torch.float64).numpy(), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30})
    g0 = fun(points[0].detach().to(torch.float64).numpy())[0]
    best = min([float(res.fun)] + [fun(w.detach().to(torch.float64).numpy())[0] for w in points])
    exact = convex and float(np.linalg.norm(res.jac)) <= max(gtol, 1e-7)
    how = ("G* by L-BFGS to tolerance (exact on a convex model)" if exact else
           f"G* as the best of {int(res.nit)} L-BFGS iterations (a local minimum: an estimate)")
    return Estimate("meta_initial_gap", g0 - best, g0 - best, g0 - best, g0 - best, f"G(w0) - G*, {how}")


def client_objective(obj: Objective, i: int) -> Objective:
    """Client ``i``'s own ``F_i`` (its mean loss plus the weight-decay term) as an :class:`Objective`."""
    return Objective(obj.model, obj.x[i:i + 1], obj.y[i:i + 1], obj.mask[i:i + 1], obj.sizes[i:i + 1],
                     obj.weight_decay)


def _optimum(obj: Objective, w0: torch.Tensor, gtol: float = 1e-10, maxiter: int = 2000) -> torch.Tensor:
    return torch.as_tensor(_lbfgs(obj, w0, gtol, maxiter).x, dtype=torch.float64)


def initial_distance(obj: Objective, w0: torch.Tensor) -> Estimate:
    """``||w0 - w*||^2`` with ``w* = argmin F`` by L-BFGS (exact on a strongly convex model): the initial
    distance of WPFL's Theorem 2 (Zhao et al. 2025, eq. (27b), ``E||w_hat^0 - w*||^2``)."""
    value = float(((w0.to(torch.float64) - _optimum(obj, w0)) ** 2).sum())
    return Estimate("initial_distance", value, value, value, value, "||w0 - argmin F||^2, argmin by L-BFGS")


def optimum_spread(obj: Objective, w0: torch.Tensor) -> Estimate:
    """WPFL's ``M`` (Zhao et al. 2025, Assumption 1.3): ``max_n ||u_n* - w*||`` with ``u_n* = argmin F_n`` and
    ``w* = argmin F``, each by L-BFGS (exact on strongly convex models); the spread is over the clients."""
    star = _optimum(obj, w0)
    dist = [float((_optimum(client_objective(obj, i), star) - star).norm()) for i in range(obj.x.shape[0])]
    return Estimate.over("optimum_spread", dist, "max", "max_n ||argmin F_n - argmin F|| by L-BFGS")
