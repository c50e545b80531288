"""Checkpoints: the whole run state after every round, written atomically to ``run_dir/checkpoint.pt``.

A checkpoint holds the rounds done, the planned total, the global model, per-client and algorithm state,
the current noise plan, the privacy ledger and the metrics rows.  All randomness is keyed by (seed, round,
stage, client) (``noise.py``), so no generator state is needed: a resumed run draws exactly what the
uninterrupted run would have drawn.  ``run_key`` (e.g. a hash of the config) guards against resuming a
different run.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from fedbound.errors import ConfigError

__all__ = ["CHECKPOINT", "save", "load"]

CHECKPOINT = "checkpoint.pt"
FORMAT = 1


def save(run_dir: str | Path, run_key: str, state) -> Path:
    """Write ``state`` (an ``engine.RunState``) to ``run_dir/checkpoint.pt`` via a temporary file + rename."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "run_key": run_key, "round": state.round, "rounds": state.rounds,
               "global_params": state.global_params.detach().cpu(),
               "client_state": {k: v.detach().cpu() for k, v in state.client_state.items()},
               "algo_state": state.algo_state, "plan": state.plan, "rows": state.rows,
               "warnings": state.warnings, "ledger": state.ledger}
    path = run_dir / CHECKPOINT
    tmp = run_dir / (CHECKPOINT + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load(run_dir: str | Path, run_key: str, device: torch.device | str = "cpu"):
    """The saved ``RunState``, or None when there is no checkpoint; ConfigError if ``run_key`` differs."""
    from fedbound.training.engine import RunState

    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("format") != FORMAT:
        raise ConfigError(f"{path}: unknown checkpoint format {payload.get('format')!r}")
    if payload["run_key"] != run_key:
        raise ConfigError(f"{path} belongs to a different run (another config, algorithm or seed); "
                          "use another output folder or delete the checkpoint to start afresh")
    return RunState(round=payload["round"], rounds=payload["rounds"],
                    global_params=payload["global_params"].to(device),
                    client_state={k: v.to(device) for k, v in payload["client_state"].items()},
                    algo_state=payload["algo_state"], plan=payload["plan"], rows=payload["rows"],
                    warnings=payload["warnings"], ledger=payload["ledger"])
