"""Deployed noise from the OS CSPRNG against the simulator's seeded draws (issue 32, "secure randomness").

One noise vector of ``d`` coordinates, float32, on the CPU, CPU seconds, interleaved (``bench/_harness.py``):

* ``secure``: :func:`fedbound.training.secure_noise.secure_standard_normal` (os.urandom -> Downey uniforms ->
  Box-Muller -> sum of four over 2): what a deployed Flower client or server draws per release;
* ``seeded``: ``Streams(seed).normal`` (one torch.Generator per client, torch.randn): what ``fedbound
  train`` and a ``--reproducible-noise`` simulation draw;
* ``urandom``: ``os.urandom`` of the 32 bytes per draw alone (the kernel CSPRNG's share).

``d`` = 203,530 (the MNIST MLP 784-256-10 of examples/nbafl_mnist.toml) and 10^6.
"""

from __future__ import annotations

import argparse
import os
import time

from _harness import interleaved, load, ratio, write_result

QUICK_ARGS = ["--repeat", "3"]


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import torch

    from fedbound.training.noise import Streams
    from fedbound.training.secure_noise import secure_standard_normal

    torch.set_num_threads(1)
    streams = Streams(0)
    out: dict = {}
    for d in (203_530, 1_000_000):
        times = interleaved({"secure": lambda d=d: secure_standard_normal((d,), torch.float32),
                             "seeded": lambda d=d: streams.normal(("uplink", 0), [0], (d,)),
                             "urandom": lambda d=d: os.urandom(32 * d)},
                            repeat=args.repeat, clock=time.process_time)
        out[str(d)] = {"cpu_s": {k: v.to_json() for k, v in times.items()},
                       "secure_over_seeded": ratio(times["secure"], times["seeded"]),
                       "urandom_share_of_secure": times["urandom"].median / times["secure"].median}
        print(f"d = {d}: secure {times['secure'].median * 1e3:.1f} ms CPU, seeded "
              f"{times['seeded'].median * 1e3:.1f} ms ({out[str(d)]['secure_over_seeded']['median']:.1f}x), "
              f"os.urandom {out[str(d)]['urandom_share_of_secure']:.0%} of it", flush=True)
    out["load_after"] = load()
    write_result("secure_noise", out)
    return out


if __name__ == "__main__":
    main()
