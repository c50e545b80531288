"""The Ray executor: a local Ray runtime (2 CPUs) gives the table the local executor gives."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fedbound.tests._sweep_helpers import CONFIG, numbers
from fedbound.validation.sweep import RunSpec, run_sweep


def test_ray_and_local_give_identical_tables(tmp_path: Path) -> None:
    config = tmp_path / "nbafl_small.toml"
    config.write_text(CONFIG)
    specs = [RunSpec("nbafl", config, (f"T={T}",), seed, {"T": T}) for T in (2, 3) for seed in (0, 1)]
    specs.append(RunSpec("nbafl", config, ("T=2", "train.lr=0.05"), 0, {"T": 2}))  # a second group
    local = run_sweep(specs, tmp_path / "local", progress=False)
    ray = run_sweep(specs, tmp_path / "ray", executor="ray", workers=2, progress=False)
    assert not ray.failed and len(ray.summaries) == len(specs)
    pd.testing.assert_frame_equal(numbers(ray.table), numbers(local.table))
