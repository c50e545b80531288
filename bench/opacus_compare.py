"""One DP-SGD step, fedbound against Opacus, interleaved in one run (``python bench/opacus_compare.py``).

The step: batch 512 of the MNIST subset, MLP 784-256-10, every per-sample gradient clipped to norm 1,
Gaussian noise, an SGD update.  Timed A B C D A B C D ... (``_harness.interleaved``):

* ``fedbound``: ``fedbound.training.clipping.per_sample_clipped_grad`` (per-sample norms from the layer
  tape) + noise + update;
* ``opacus_ghost``: Opacus ``make_private(grad_sample_mode="ghost")`` (ghost clipping: norms without
  per-sample gradients, a second backward);
* ``opacus_hooks``: Opacus ``make_private(grad_sample_mode="hooks")`` (per-sample gradients by hooks);
* ``non_private``: the same ``torch.nn`` step without DP, the baseline every ratio is taken against.

Writes ``bench/results/opacus_compare.json``.  ``--quick`` uses fewer repetitions.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fmt, interleaved, ratio, write_result  # noqa: E402

from fedbound.training.clipping import per_sample_clipped_grad  # noqa: E402
from fedbound.training.data import mnist_subset  # noqa: E402
from fedbound.training.models import build_model  # noqa: E402
from fedbound.training.noise import Streams  # noqa: E402

QUICK = "--quick" in sys.argv
BATCH, CLIP, LR, NOISE = 512, 1.0, 0.1, 1.0


def _opacus_step(mode: str, model_fb, x: torch.Tensor, y: torch.Tensor):
    from opacus import PrivacyEngine

    module = model_fb.to_module()
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    criterion = torch.nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = PrivacyEngine().make_private(module=module, optimizer=optimizer, data_loader=loader,
                                            noise_multiplier=NOISE, max_grad_norm=CLIP,
                                            poisson_sampling=False, grad_sample_mode=mode,
                                            criterion=criterion)
    if mode == "ghost":
        dp_module, dp_optimizer, dp_criterion, _ = made
    else:
        (dp_module, dp_optimizer, _), dp_criterion = made, criterion

    def step() -> None:
        dp_optimizer.zero_grad()
        dp_criterion(dp_module(x), y).backward()
        dp_optimizer.step()

    return step


def main() -> None:
    torch.manual_seed(0)
    ds = mnist_subset(test_fraction=0.0)
    model = build_model("mlp", (784,), 10, hidden=256)
    flat = model.init(Streams(0).generator("init"))[None]
    x = torch.as_tensor(ds.x_train[:BATCH], dtype=torch.float32)
    y = torch.as_tensor(ds.y_train[:BATCH])
    weight = torch.full((1, BATCH), 1 / BATCH)
    gen = torch.Generator().manual_seed(0)
    sigma = NOISE * CLIP / BATCH

    def fedbound_step():
        g = per_sample_clipped_grad(model, flat, x[None], y[None], weight, CLIP).grad
        g += sigma * torch.randn(g.shape, generator=gen)
        return flat - LR * g

    module = model.to_module()
    plain_opt = torch.optim.SGD(module.parameters(), lr=LR)

    def non_private():
        plain_opt.zero_grad()
        torch.nn.functional.cross_entropy(module(x), y).backward()
        plain_opt.step()

    steps = {"fedbound": fedbound_step, "opacus_ghost": _opacus_step("ghost", model, x, y),
             "opacus_hooks": _opacus_step("hooks", model, x, y), "non_private": non_private}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' notes on hooks, once per step
        t = interleaved(steps, repeat=5 if QUICK else 15, warmup=2)
    base = t["non_private"]
    ratios = {name: ratio(t[name], base) for name in ("fedbound", "opacus_ghost", "opacus_hooks")}
    result = {"seconds": {k: v.to_json() for k, v in t.items()},
              "over_non_private_step": ratios,
              "opacus_ghost_over_fedbound": ratio(t["opacus_ghost"], t["fedbound"]),
              "opacus_hooks_over_fedbound": ratio(t["opacus_hooks"], t["fedbound"]),
              "setting": {"batch": BATCH, "model": "mlp 784-256-10", "clip": CLIP, "noise_multiplier": NOISE},
              "target": "fedbound's DP-SGD step no slower than Opacus ghost clipping (keep the lead)",
              "met": ratio(t["fedbound"], t["opacus_ghost"])["median"] <= 1.0}
    for name, r in ratios.items():
        print(f"one DP-SGD step, {name}: {fmt(r)} a non-private step")
    print(f"Opacus ghost / fedbound: {fmt(result['opacus_ghost_over_fedbound'])}; "
          f"Opacus hooks / fedbound: {fmt(result['opacus_hooks_over_fedbound'])}")
    write_result("opacus_compare", result)


if __name__ == "__main__":
    main()
