"""A training round at paper scale against one at demo scale, per paper (issue 34's speed line).

For each paper, one figure's run at its demo setting (embedded data, small model) and at its paper setting
(``fedbound reproduce --scale paper``: the full MNIST, the paper's N, samples per client and model), both
built as the sweep builds them; then rounds of the two are timed interleaved (one round of each per
repetition, ``time.process_time``: CPU seconds of this one-thread process, robust on a shared machine).
Reported per paper: the median CPU seconds per round at each scale and their ratio.  Needs the full MNIST
in fedbound's data cache (``fedbound data mnist``).

Usage: ``python bench/paper_scale.py [--quick]`` (``--quick``: 3 timed rounds instead of 5).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import interleaved, write_result  # noqa: E402

CASES = {"nbafl": ("fig2", {"eps": 60.0}), "udp": ("fig8", {"crd": False, "eps": 8.0}),
         "adaptive": ("fig3", {"ratios": "0,1,2", "eps": 20.0}), "dppfl": ("fig2", {"eps": 2.0}),
         "wpfl": ("fig3", {"policy": "proposed"})}
"""The run timed per paper: a figure and the labels of one of its cases."""

HEADLINE = ("A training round at paper scale (full MNIST) vs demo scale, CPU s, one thread: NbAFL "
            "{nbafl_paper_s:.2f} vs {nbafl_demo_s:.3f}, UDP {udp_paper_s:.2f} vs {udp_demo_s:.3f}, PADPFL "
            "{adaptive_paper_s:.2f} vs {adaptive_demo_s:.3f}, DP-PFL {dppfl_paper_s:.2f} vs "
            "{dppfl_demo_s:.3f}, WPFL {wpfl_paper_s:.2f} vs {wpfl_demo_s:.3f}.")


def _runner(paper: str, figure: str, labels: dict, scale: str, folder: Path):
    """A Runner of the case of ``figure`` labelled ``labels`` at ``scale``, built as the sweep builds it."""
    from fedbound.training.engine import Runner
    from fedbound.validation.recipes.runner import build_run
    from fedbound.validation.reproduce import find, specs, toml_text

    target = find(paper, figure)
    config = folder / f"{paper}_{scale}.toml"
    config.write_text(toml_text(target.config))
    spec = next(s for s in specs(target, config, scale, seeds=1) if s.label == labels)
    built = build_run(spec.prepare())
    return Runner(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                  options=built.options, test=built.setup.test)


def _one_round(runner) -> None:
    from fedbound.training.engine import auto_chunk_size

    chunk = auto_chunk_size(runner.model, runner.data, runner.options)
    participants = runner.begin_round()
    ctx = runner.ctx
    for lo in range(0, len(participants), chunk):
        clients = participants[lo:lo + chunk]
        batch = runner.data.gather(clients)
        start = runner.algorithm.start_models(ctx, clients)
        runner.add_upload(lo, clients, runner.algorithm.local_update(ctx, clients, start, batch))
    runner.end_round()


def main(argv: list[str] | None = None) -> dict:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    repeat = 3 if args.quick else 5
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for paper, (figure, labels) in CASES.items():
            t0 = time.perf_counter()
            runners = {scale: _runner(paper, figure, labels, scale, Path(tmp)) for scale in ("demo", "paper")}
            timing = interleaved({scale: (lambda r=r: _one_round(r)) for scale, r in runners.items()},
                                 repeat=repeat, clock=time.process_time)
            demo, full = timing["demo"].median, timing["paper"].median
            figures.update({f"{paper}_demo_s": demo, f"{paper}_paper_s": full, f"{paper}_ratio": full / demo})
            print(f"{paper} {figure}: demo {demo:.4f} CPU s per round, paper {full:.3f} "
                  f"({full / demo:.0f}x); {time.perf_counter() - t0:.0f} s", flush=True)
    write_result("paper_scale", figures)
    return figures


if __name__ == "__main__":
    main()
