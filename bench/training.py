"""Simulator speed: ours against plain baselines measured in the same run (``python bench/training.py``).

Three figures (issue 4), each a ratio of wall times on this machine, timed interleaved (A B A B ...,
``_harness.interleaved``): medians with the min-max of the paired ratios, and the machine load:

1. Per-sample clipping, one DP-SGD step (clip, noise, update), batch 512, MLP 784-256-10 on the MNIST
   subset: ours (per-layer norms, ``fedbound.training.clipping``) against (a) a per-sample backward loop,
   (b) ``torch.func.vmap(grad)`` with ``functional_call``, (c) a non-private step (``torch.nn``).
   Target: ours <= 2x (c).
2. Many small clients: 1,000 clients x 20 digits samples, one round of 5 local full-batch steps (logistic
   regression and a 64-32-10 MLP): the engine's round against a per-client ``torch.nn`` loop of the same
   math.  Target >= 10x.
3. The NbAFL round (seed 002): 50 clients x 100 MNIST samples, MLP 784-256-10, 10 local proximal steps:
   the engine against a per-client loop (target: no slower), DP (whole-model clipping, uplink and server
   noise, privacy ledger) against the same round without DP (target: <= 1.3x), and the chunk-size sweep
   behind the engine's default (all participants in one chunk when memory allows).

CUDA: measured only when a GPU is present (none was lent to this session; the JSON says so).
Writes ``bench/results/training.json``.  ``--quick`` uses fewer repeats.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fmt, interleaved, ratio, write_result  # noqa: E402

from fedbound.training.clipping import clip_rows, per_sample_clipped_grad  # noqa: E402
from fedbound.training.data import digits, mnist_subset  # noqa: E402
from fedbound.training.engine import Algorithm, RunOptions, run  # noqa: E402
from fedbound.training.federation import ClientData  # noqa: E402
from fedbound.training.local import LocalSGD  # noqa: E402
from fedbound.training.models import build_model  # noqa: E402
from fedbound.training.nbafl import NbAFL  # noqa: E402
from fedbound.training.noise import Streams  # noqa: E402
from fedbound.training.partitions import iid  # noqa: E402
from fedbound.training.plan import NoisePlan, View  # noqa: E402

QUICK = "--quick" in sys.argv
REPEAT = 2 if QUICK else 3


def medians(t: dict) -> dict:
    return {k: v.to_json() for k, v in t.items()}


# --- 1. one DP-SGD step ------------------------------------------------------------------------------------

def dpsgd_step(device: str) -> dict:
    ds = mnist_subset(test_fraction=0.0)
    model = build_model("mlp", (784,), 10, hidden=256)
    flat = model.init(Streams(0).generator("init"))[None].to(device)
    x = torch.as_tensor(ds.x_train[:512], device=device)
    y = torch.as_tensor(ds.y_train[:512], device=device)
    weight = torch.full((1, 512), 1 / 512, device=device)
    clip, lr, sigma = 1.0, 0.1, 1.0 / 512
    gen = torch.Generator(device=device).manual_seed(0)
    module = model.to_module().to(device)
    params = dict(module.named_parameters())

    def ours():
        g = per_sample_clipped_grad(model, flat, x[None], y[None], weight, clip).grad
        g += sigma * torch.randn(g.shape, generator=gen, device=device)
        return flat - lr * g

    def non_private():
        module.zero_grad()
        torch.nn.functional.cross_entropy(module(x), y).backward()
        with torch.no_grad():
            for p in module.parameters():
                p -= 0 * lr * p.grad  # the update (zero-sized step keeps the weights fixed between repeats)

    def per_sample_loop():
        total = [torch.zeros_like(p) for p in module.parameters()]
        for b in range(512):
            module.zero_grad()
            torch.nn.functional.cross_entropy(module(x[b:b + 1]), y[b:b + 1]).backward()
            gs = [p.grad for p in module.parameters()]
            norm = torch.sqrt(sum(g.square().sum() for g in gs))
            factor = clip / max(float(norm), clip)
            for t, g in zip(total, gs, strict=True):
                t += factor * g
        return [t / 512 + sigma * torch.randn(t.shape, generator=gen, device=device) for t in total]

    def sample_loss(p, xb, yb):
        return torch.nn.functional.cross_entropy(functional_call(module, p, (xb[None],)), yb[None])

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))

    def vmap_grad():
        detached = {k: v.detach() for k, v in params.items()}
        gs = per_sample(detached, x, y)
        norms = torch.sqrt(sum(g.reshape(512, -1).square().sum(1) for g in gs.values()))
        factor = clip / torch.clamp(norms, min=clip)
        return {k: torch.einsum("b,b...->...", factor, g) / 512
                + sigma * torch.randn(g.shape[1:], generator=gen, device=device) for k, g in gs.items()}

    t = interleaved({"ours": ours, "non_private_step": non_private, "vmap_grad": vmap_grad,
                     "per_sample_loop": per_sample_loop}, repeat=REPEAT)
    over = ratio(t["ours"], t["non_private_step"])
    return {"seconds": medians(t), "ours_over_non_private": over,
            "per_sample_loop_over_ours": ratio(t["per_sample_loop"], t["ours"]),
            "vmap_grad_over_ours": ratio(t["vmap_grad"], t["ours"]),
            "vmap_grad_over_non_private": ratio(t["vmap_grad"], t["non_private_step"]),
            "per_sample_loop_over_non_private": ratio(t["per_sample_loop"], t["non_private_step"]),
            "target": "ours <= 2x non-private step", "met": over["median"] <= 2}


# --- per-client reference loops -----------------------------------------------------------------------------

def loop_round(model, data: ClientData, start: torch.Tensor, steps: int, lr: float, prox_mu: float = 0.0,
               clip: float | None = None, noise: tuple[float, float] | None = None, seed: int = 0
               ) -> torch.Tensor:
    """One FedAvg/NbAFL round client by client with torch.nn: the same math as the engine's round."""
    module = model.to_module().to(data.x.device, data.x.dtype)
    params = list(module.parameters())
    agg = torch.zeros_like(start)
    p = data.sizes / data.sizes.sum()
    streams = Streams(seed, data.x.device)
    for i in range(data.num_clients):
        n = int(data.sizes[i])
        x, y = data.x[i, :n], data.y[i, :n]
        torch.nn.utils.vector_to_parameters(start.clone(), params)  # clone: the module must not alias start
        for _ in range(steps):
            module.zero_grad()
            torch.nn.functional.cross_entropy(module(x), y).backward()
            with torch.no_grad():
                if prox_mu:
                    w = torch.nn.utils.parameters_to_vector(params)
                    g = torch.nn.utils.parameters_to_vector([q.grad for q in params]) + prox_mu * (w - start)
                    torch.nn.utils.vector_to_parameters(w - lr * g, params)
                else:
                    for q in params:
                        q -= lr * q.grad
        w = torch.nn.utils.parameters_to_vector(params).detach()
        if clip is not None:
            w = clip_rows(w[None], clip)[0][0]
        if noise is not None:
            w = w + noise[0] * streams.normal(("uplink", 0), [i], w.shape, w.dtype)[0]
        agg += float(p[i]) * w
    if noise is not None and noise[1] > 0:
        agg += noise[1] * streams.normal(("server", 0), [-1], agg.shape, agg.dtype)[0]
    return agg


def engine_round(algo, model, data, plan=None, chunk: int = 0, device: str = "cpu", init=None):
    opts = RunOptions(device=device, eval_every=0, eval_clients=False, chunk_size=chunk)
    return run(algo, model, data, plan=plan, options=opts, init_params=init).params


# --- 2. many small clients ----------------------------------------------------------------------------------

def many_small_clients(device: str) -> dict:
    ds = digits(test_fraction=0.0)
    rng = np.random.default_rng(0)
    x = np.concatenate([ds.x_train] * 12)[: 20_000]
    y = np.concatenate([ds.y_train] * 12)[: 20_000]
    data = ClientData.from_partition(x, y, iid(len(y), 1000, rng, 20), device=device)
    out = {}
    for name, hidden in (("logreg", 0), ("mlp_64_32_10", 32)):
        model = build_model("logreg" if not hidden else "mlp", (64,), 10, hidden=max(hidden, 1))
        init = model.init(Streams(0).generator("init")).to(device)
        algo = Algorithm(1, LocalSGD(steps=5, lr=0.5))
        t = interleaved({"engine_round": lambda: engine_round(algo, model, data, device=device,  # noqa: B023
                                                             init=init),  # noqa: B023
                         "per_client_loop": lambda: loop_round(model, data, init, 5, 0.5)},  # noqa: B023
                        repeat=REPEAT)
        a = engine_round(algo, model, data, device=device, init=init)
        b = loop_round(model, data, init, 5, 0.5)
        speedup = ratio(t["per_client_loop"], t["engine_round"])
        out[name] = {"seconds": medians(t), "speedup": speedup,
                     "max_abs_difference": float((a - b).abs().max()), "target": ">= 10x",
                     "met": speedup["median"] >= 10}
    return out


# --- 3. the NbAFL round ------------------------------------------------------------------------------------

def nbafl_round(device: str) -> dict:
    ds = mnist_subset(test_fraction=0.0)
    data = ClientData.from_partition(ds.x_train, ds.y_train, iid(5000, 50, np.random.default_rng(0), 100),
                                     device=device)
    model = build_model("mlp", (784,), 10, hidden=256)
    init = model.init(Streams(0).generator("init")).to(device)
    steps, lr, mu, clip = 10, 0.2, 4.0, 20.0
    sigma_up, sigma_srv = 0.02071674307, 0.009935400946  # spec 002 TV1 (eps = 60, T = 25)
    sigma = {"uplink": np.full(1, sigma_up), "server": np.full(1, sigma_srv)}
    plan = NoisePlan(rounds=1, num_clients=50, sigma=sigma, sensitivity={"uplink": 2 * clip / 100}, eps=1e3,
                     delta=0.01,
                     views=(View("uplink", "upload", max_releases=1), View("downlink", "broadcast")))
    dp = NbAFL(1, clip, LocalSGD(steps=steps, lr=lr, prox_mu=mu))
    plain = NbAFL(1, float("inf"), LocalSGD(steps=steps, lr=lr, prox_mu=mu))
    t = interleaved({
        "engine_dp": lambda: engine_round(dp, model, data, plan, device=device, init=init),
        "engine_no_dp": lambda: engine_round(plain, model, data, device=device, init=init),
        "loop_dp": lambda: loop_round(model, data, init, steps, lr, mu, clip, (sigma_up, sigma_srv)),
        "loop_no_dp": lambda: loop_round(model, data, init, steps, lr, mu)}, repeat=REPEAT)
    chunks = interleaved({str(c): lambda c=c: engine_round(plain, model, data, chunk=c, device=device,
                                                           init=init)
                          for c in (1, 5, 10, 20, 25, 50)}, repeat=REPEAT)
    diff = (engine_round(dp, model, data, plan, device=device, init=init)
            - loop_round(model, data, init, steps, lr, mu, clip, (sigma_up, sigma_srv))).abs().max()
    flops = 3 * 2 * 5000 * steps * model.n_params
    med = {k: v.median for k, v in t.items()}
    dp_overhead = ratio(t["engine_dp"], t["engine_no_dp"])
    return {"seconds": medians(t), "chunk_size_sweep_seconds_no_dp": {k: v.median for k, v in chunks.items()},
            "engine_over_loop_no_dp": ratio(t["engine_no_dp"], t["loop_no_dp"]),
            "engine_over_loop_dp": ratio(t["engine_dp"], t["loop_dp"]),
            "dp_overhead_engine": dp_overhead,
            "dp_overhead_loop": ratio(t["loop_dp"], t["loop_no_dp"]),
            "gflops_per_s": {"engine_no_dp": flops / med["engine_no_dp"] / 1e9,
                             "loop_no_dp": flops / med["loop_no_dp"] / 1e9},
            "max_abs_difference_engine_vs_loop": float(diff),
            "targets": {"engine <= loop": med["engine_no_dp"] <= med["loop_no_dp"],
                        "dp overhead <= 1.3x": dp_overhead["median"] <= 1.3}}


def main() -> None:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    payload: dict = {"quick": QUICK, "torch_threads": torch.get_num_threads()}
    for device in devices:
        t0 = time.perf_counter()
        res = {"dpsgd_step_batch512_mlp": dpsgd_step(device),
               "many_small_clients": many_small_clients(device), "nbafl_round": nbafl_round(device)}
        res["bench_seconds"] = time.perf_counter() - t0
        payload[device] = res
    if "cuda" not in payload:
        payload["cuda"] = {"measured": False,
                           "reason": "no GPU was available to this run (none was lent to the session that "
                                     "wrote this benchmark); the code is device-agnostic (--device cuda)"}
    cpu = payload["cpu"]
    d, m, n = cpu["dpsgd_step_batch512_mlp"], cpu["many_small_clients"], cpu["nbafl_round"]
    print(f"DP-SGD step (batch 512, MLP 784-256-10): ours = {fmt(d['ours_over_non_private'])} a non-private "
          f"step (target <= 2); per-sample loop {fmt(d['per_sample_loop_over_ours'], 0)} ours, vmap(grad) "
          f"{fmt(d['vmap_grad_over_ours'], 1)} ours")
    for name, r in m.items():
        print(f"1,000 clients x 20 samples, {name}: engine {fmt(r['speedup'], 1)} faster than a per-client "
              "loop (target >= 10)")
    print(f"NbAFL round (50 x 100, MLP, 10 steps): engine/loop = {fmt(n['engine_over_loop_no_dp'])} (no DP), "
          f"{fmt(n['engine_over_loop_dp'])} (DP); DP overhead {fmt(n['dp_overhead_engine'])} "
          f"(target <= 1.3x); chunk sweep {n['chunk_size_sweep_seconds_no_dp']}")
    write_result("training", payload)


if __name__ == "__main__":
    main()
