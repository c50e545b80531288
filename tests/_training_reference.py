"""Plain per-client reference implementations for the training tests (the oracle side).

Everything here is written the slow, obvious way: one client at a time, a ``torch.nn`` module, autograd
per sample where the algorithm clips per sample.  Randomness comes from the same keyed streams as the
engine (``fedbound.training.noise.Streams``), so the numbers must agree.
"""

from __future__ import annotations

import numpy as np
import torch

from fedbound.training.data import digits
from fedbound.training.federation import ClientData
from fedbound.training.models import build_model
from fedbound.training.noise import Streams
from fedbound.training.participation import uniform_subset
from fedbound.training.partitions import iid


def tiny_setup(num_clients: int = 6, per_client: int = 12, hidden: int = 16, dtype=torch.float64,
               seed: int = 0, sizes: list[int] | None = None):
    """Digits split over a few clients (optionally unequal sizes), a small MLP."""
    ds = digits(test_fraction=0.2, seed=seed)
    rng = np.random.default_rng(seed)
    if sizes is None:
        parts = iid(len(ds.y_train), num_clients, rng, per_client)
    else:
        order = rng.permutation(len(ds.y_train))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        parts = [np.sort(order[bounds[i]:bounds[i + 1]]) for i in range(len(sizes))]
    data = ClientData.from_dataset(ds, parts, dtype=dtype)
    model = build_model("mlp", (64,), 10, hidden=hidden)
    return ds, parts, data, model


def module_with(model, flat: torch.Tensor) -> torch.nn.Module:
    module = model.to_module().to(flat.dtype)
    torch.nn.utils.vector_to_parameters(flat.detach().clone(), module.parameters())
    return module


def flat_grad(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in module.parameters()])


def client_arrays(data: ClientData, i: int):
    n = int(data.sizes[i])
    return data.x[i, :n], data.y[i, :n]


def participants(streams: Streams, round_: int, n: int, k: int | None) -> np.ndarray:
    if k is None or k >= n:
        return np.arange(n)
    return uniform_subset(streams.numpy("participation", round_), n, k)


def nbafl_reference(model, data: ClientData, init: torch.Tensor, rounds: int, *, lr: float, mu: float,
                    steps: int, clip: float, sigma_up: float, sigma_server: float, seed: int,
                    k: int | None = None) -> torch.Tensor:
    """Seed 002 Alg. 1 client by client (spec 002 Sec. 5.1), K-of-N scheduling when ``k`` is given."""
    streams = Streams(seed)
    w_global = init.clone()
    d = len(w_global)
    for t in range(rounds):
        chosen = participants(streams, t, data.num_clients, k)
        sizes = data.sizes[chosen].astype(np.float64)
        p = sizes / sizes.sum()
        agg = torch.zeros_like(w_global)
        for j, i in enumerate(chosen):
            x, y = client_arrays(data, i)
            w = w_global.clone()
            for _ in range(steps):
                module = module_with(model, w)
                loss = torch.nn.functional.cross_entropy(module(x), y)
                loss.backward()
                w = w - lr * (flat_grad(module) + mu * (w - w_global))
            w = w / max(1.0, float(w.norm()) / clip)
            if sigma_up > 0:
                w = w + sigma_up * streams.normal(("uplink", t), [int(i)], (d,), w.dtype)[0]
            agg = agg + float(p[j]) * w
        if sigma_server > 0:
            agg = agg + sigma_server * streams.normal(("server", t), [-1], (d,), agg.dtype)[0]
        w_global = agg
    return w_global


def udp_reference(model, data: ClientData, init: torch.Tensor, rounds: int, *, lr: float, clip: float,
                  sigma: np.ndarray, seed: int, k: int) -> torch.Tensor:
    """Seed 003 Alg. 1 client by client, with a per-sample backward loop for the clipping."""
    streams = Streams(seed)
    w_global = init.clone()
    d = len(w_global)
    for t in range(rounds):
        chosen = participants(streams, t, data.num_clients, k)
        sizes = data.sizes[chosen].astype(np.float64)
        p = sizes / sizes.sum()
        agg = torch.zeros_like(w_global)
        for j, i in enumerate(chosen):
            x, y = client_arrays(data, i)
            module = module_with(model, w_global)
            total = torch.zeros_like(w_global)
            for b in range(len(y)):
                module.zero_grad()
                torch.nn.functional.cross_entropy(module(x[b:b + 1]), y[b:b + 1]).backward()
                g = flat_grad(module)
                total = total + g / max(1.0, float(g.norm()) / clip)
            w = w_global - lr * total / len(y)
            w = w + float(sigma[i]) * streams.normal(("uplink", t), [int(i)], (d,), w.dtype)[0]
            agg = agg + float(p[j]) * w
        w_global = agg
    return w_global


def resumed_and_full(make_algorithm, model, data, plan, options, run_dir, stop_after: int, columns):
    """Run once uninterrupted and once stopped after ``stop_after`` rounds then resumed from the checkpoint;
    assert the final parameters and the metric ``columns`` are identical.  Returns (resumed, full)."""
    from fedbound.training.engine import run

    full = run(make_algorithm(), model, data, plan=plan, options=options)
    first = run(make_algorithm(), model, data, plan=plan, options=options, run_dir=run_dir, run_key="k",
                stop_after=stop_after)
    assert first.state.round == stop_after
    resumed = run(make_algorithm(), model, data, plan=plan, options=options, run_dir=run_dir, run_key="k")
    assert resumed.summary["resumed_from_round"] == stop_after
    assert torch.equal(resumed.params, full.params)
    assert resumed.metrics[list(columns)].equals(full.metrics[list(columns)])
    return resumed, full
