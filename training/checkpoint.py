"""Checkpoints: the whole run state after every round, written atomically to ``run_dir/checkpoint.pt``.

A checkpoint holds the rounds done, the planned total, the global model, per-client and algorithm state,
the current noise plan, the privacy ledger and the metrics rows.  All randomness is keyed by (seed, round,
stage, client) (``noise.py``), so no generator state is needed: a resumed run draws exactly what the
uninterrupted run would have drawn.  ``run_key`` (e.g. a hash of the config) guards against resuming a
different run.

Integrity: the file is a one-line header (format, run key, BLAKE2b-256 digest and length of the body)
followed by the ``torch.save`` body.  A flipped bit, a truncated or an empty file fails the digest and is
refused with :class:`CheckpointError` before anything is unpickled; the body is then read with
``torch.load(weights_only=True)`` and only the few classes a run state holds allowed (no arbitrary code runs
from a checkpoint).

Size and memory: the privacy ledger is saved as its release histories (``fedbound.training.ledger_history``,
a few bytes per client), its arrays as tensors (written as they are, not pickled); the body streams into
the temporary file through the digest (:class:`_Digesting`), and the header, of fixed width, is written
last: a save holds no copy of the body in memory.

Run directories: :func:`prepare_run_dir` marks every directory fedbound creates with :data:`RUN_MARKER`
(holding the run key); ``overwrite`` works only in a directory carrying that marker (or an empty one) and
deletes only the files a run writes (:data:`RUN_FILES`): anything else the user put there stays.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np
import torch

from fedbound.errors import CheckpointError, ConfigError

__all__ = ["CHECKPOINT", "RUN_MARKER", "RUN_FILES", "CheckpointError", "save", "load", "prepare_run_dir"]

CHECKPOINT = "checkpoint.pt"
RUN_MARKER = ".fedbound-run"
RUN_FILES = (CHECKPOINT, CHECKPOINT + ".tmp", "metrics.csv", "metrics.parquet", "summary.json", "config.toml")
"""What a run writes into its directory (fedbound.training.metrics.write_outputs, :func:`save`): the only
files ``overwrite`` deletes."""
FORMAT = 3
"""3: the ledger as release histories, tensors for its arrays, a fixed-width header (2: per-client curves)."""
_MAGIC = b"FEDBOUND-CHECKPOINT"
_LENGTH_DIGITS = 20


def _safe_globals() -> list:
    from fedbound.training.plan import NoisePlan, View

    core = getattr(np, "_core", None) or np.core
    return [NoisePlan, View, np.ndarray, np.dtype, core.multiarray._reconstruct, core.multiarray.scalar,
            *(type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG")]


def _digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=32).hexdigest()


def _key_tag(run_key: str) -> str:
    """The run key as one header token (any text, hashed)."""
    return hashlib.blake2b(run_key.encode(), digest_size=16).hexdigest()


class _Digesting:
    """A binary file that digests and counts what is written to it (``torch.save`` streams into it)."""

    def __init__(self, fh) -> None:
        self.fh, self.size = fh, 0
        self.hash = hashlib.blake2b(digest_size=32)

    def write(self, data) -> int:
        self.hash.update(data)
        self.size += len(memoryview(data))
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def _header(run_key: str, digest: str, size: int) -> bytes:
    return f"{_MAGIC.decode()} {FORMAT} {_key_tag(run_key)} {digest} {size:0{_LENGTH_DIGITS}d}\n".encode()


def _tensors(value):
    """Numpy arrays in nested dicts as tensors sharing their memory (``torch.save`` writes tensors as they
    are, but pickles an array into an in-memory copy)."""
    if isinstance(value, dict):
        return {k: _tensors(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(value))
    return value


def _arrays(value):
    """:func:`_tensors` undone."""
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return value.numpy()
    return value


def save(run_dir: str | Path, run_key: str, state) -> Path:
    """Write ``state`` (an ``engine.RunState``) to ``run_dir/checkpoint.pt`` via a temporary file + rename,
    streaming the body through its digest (module docstring)."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        prepare_run_dir(run_dir, run_key)
    payload = {"format": FORMAT, "run_key": run_key, "round": state.round, "rounds": state.rounds,
               "global_params": state.global_params.detach().cpu(),
               "client_state": {k: v.detach().cpu() for k, v in state.client_state.items()},
               "algo_state": state.algo_state, "plan": state.plan, "rows": state.rows,
               "warnings": state.warnings, "ledger": _tensors(state.ledger), "initial": state.initial}
    path = run_dir / CHECKPOINT
    tmp = run_dir / (CHECKPOINT + ".tmp")
    placeholder = _header(run_key, "0" * 64, 0)
    with open(tmp, "wb") as fh:
        fh.write(placeholder)
        body = _Digesting(fh)
        torch.save(payload, body)
        fh.seek(0)
        fh.write(_header(run_key, body.hash.hexdigest(), body.size))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def _verified_body(path: Path, run_key: str) -> bytes:
    """The checkpoint body after the header's format, run key, length and digest are checked."""
    damaged = f"{path} is damaged ({{}}); delete it to restart the run from round 0, or use another --out"
    with open(path, "rb") as fh:
        head = fh.readline(len(_header(run_key, "0" * 64, 0)) + 64)
        body = fh.read()
    if not head:
        raise CheckpointError(damaged.format("the file is empty"))
    newline = head.endswith(b"\n")
    fields = head.rstrip(b"\n").split(b" ")
    if not newline or len(fields) != 5 or fields[0] != _MAGIC:
        raise CheckpointError(damaged.format("no fedbound checkpoint header: from an older fedbound or "
                                             "another program"))
    if fields[1] != str(FORMAT).encode():
        version = fields[1].decode(errors="replace")
        if version.isdigit() and int(version) < FORMAT:
            raise CheckpointError(f"{path} was written by an older fedbound (checkpoint format {version}, "
                                  f"this one reads {FORMAT}); delete it to restart the run from round 0, or "
                                  "use another --out")
        raise CheckpointError(damaged.format(f"unknown format {version}"))
    if fields[2].decode(errors="replace") != _key_tag(run_key):
        raise ConfigError(f"{path} belongs to a different run (another config, algorithm or seed); "
                          "use another output folder or delete the checkpoint to start afresh")
    if not fields[4].isdigit() or int(fields[4]) != len(body):
        said = int(fields[4]) if fields[4].isdigit() else fields[4].decode(errors="replace")
        raise CheckpointError(damaged.format(f"{len(body)} bytes of content, the header says {said}: "
                                             "truncated or extended"))
    if fields[3].decode(errors="replace") != _digest(body):
        raise CheckpointError(damaged.format("its content does not match its checksum"))
    return body


def load(run_dir: str | Path, run_key: str, device: torch.device | str = "cpu"):
    """The saved ``RunState``, or None when there is no checkpoint.

    ConfigError if ``run_key`` differs; CheckpointError (one line, nothing unpickled) if the file is damaged.
    """
    from fedbound.training.engine import RunState

    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    body = _verified_body(path, run_key)
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            payload = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure of a verified body is one clear error
        raise CheckpointError(f"{path} cannot be read safely ({type(exc).__name__}); delete it to restart "
                              "the run from round 0") from None
    if payload.get("run_key") != run_key:
        raise CheckpointError(f"{path} is damaged (its header and content name different runs)")
    return RunState(round=payload["round"], rounds=payload["rounds"],
                    global_params=payload["global_params"].to(device),
                    client_state={k: v.to(device) for k, v in payload["client_state"].items()},
                    algo_state=payload["algo_state"], plan=payload["plan"], rows=payload["rows"],
                    warnings=payload["warnings"], ledger=_arrays(payload["ledger"]),
                    initial=payload["initial"])


def _describe(entries: list[Path]) -> str:
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in entries)
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


def prepare_run_dir(run_dir: str | Path, run_key: str, overwrite: bool = False) -> Path:
    """Create (or, with ``overwrite``, empty) ``run_dir`` before any training, and mark it as a run directory.

    Refused with ConfigError, naming what is there: ``run_dir`` is a file; it cannot be created or written;
    one of :data:`RUN_FILES` in it is a folder; ``overwrite`` of a non-empty directory that does not carry
    :data:`RUN_MARKER` (fedbound never deletes what it did not create).  ``overwrite`` deletes the
    :data:`RUN_FILES` only.  Without ``overwrite`` an existing directory is used as it is (a checkpoint of
    the same run resumes).
    """
    if not str(run_dir).strip():
        raise ConfigError("--out = '' names no folder: give the run directory to create")
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--out {str(run_dir)!r} is an existing file, not a folder: give a folder for the "
                          "run")
    entries = list(run_dir.iterdir()) if run_dir.is_dir() else []
    for name in (*RUN_FILES, RUN_MARKER):
        if (run_dir / name).is_dir():
            raise ConfigError(f"--out {str(run_dir)!r} holds a folder named {name}, where the run writes a "
                              "file: rename or remove that folder, or choose another --out")
    if overwrite and entries:
        if not (run_dir / RUN_MARKER).is_file():
            raise ConfigError(f"--overwrite refused: {str(run_dir)!r} is not a fedbound run directory (no "
                              f"{RUN_MARKER} marker) and holds {_describe(entries)}; remove it yourself or "
                              "choose another --out")
        try:
            for name in RUN_FILES:  # only what a run wrote: a file of the user's inside stays
                (run_dir / name).unlink(missing_ok=True)
        except OSError as exc:
            raise ConfigError(f"--overwrite: {str(run_dir / name)!r} cannot be deleted: "
                              f"{exc.strerror or exc}") from None
        entries = [p for p in run_dir.iterdir() if p.name != RUN_MARKER]
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        marker = run_dir / RUN_MARKER
        if not entries or marker.is_file():
            marker.write_text(f"fedbound run directory\nrun_key = {run_key}\n")
        else:  # an existing folder of the user's: check it is writable, do not mark it
            probe = run_dir / (RUN_MARKER + ".probe")
            probe.write_bytes(b"")
            probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--out {str(run_dir)!r} cannot be created or written: "
                          f"{exc.strerror or exc}") from None
    return run_dir
