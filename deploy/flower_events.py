"""What the ServerApp tells whoever watches the run: one JSON line per event in the run directory.

The ServerApp (:func:`fedbound.deploy.flower_server.serve`) appends to ``RUN_DIR/flower-events.jsonl``

* ``{"event": "round", "round", "rounds", "seconds", "text", "epsilon", "budget", "accountant",
  "epsilon_flower"}`` after each round it counted (``text``: the labelled progress line of
  :func:`~fedbound.deploy.flower_server.progress_text`; ``seconds``: the round's wall time);
* ``{"event": "done", "rounds_done"}`` when the run directory is complete, or
  ``{"event": "error", "type", "message"}`` when the ServerApp stopped on an error (``type``: the
  exception's class name, e.g. ``PrivacyBudgetExceeded``, ``RoundRefused``, ``ConfigError``).

and writes the same round line to Flower's log, which ``flwr run --stream`` and ``flwr log`` show on the
machine the run was submitted from.  ``fedbound flower --run --deployment local``
(:mod:`fedbound.deploy.flower_deployment`), whose ServerApp runs in another process, prints the rounds
from this file and re-raises the error it names.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["EVENTS_FILE", "write_event", "read_events", "round_line", "log_round"]

EVENTS_FILE = "flower-events.jsonl"


def _finite(value: Any) -> Any:
    """A non-finite float as None (the file is strict JSON); numpy scalars as Python numbers."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_event(run_dir: str | os.PathLike, event: dict[str, Any]) -> None:
    """Append ``event`` (one JSON line) to the run's events file; a failure to write is not the run's."""
    with contextlib.suppress(OSError, TypeError, ValueError):
        path = Path(run_dir) / EVENTS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({k: _finite(v) for k, v in event.items()}, allow_nan=False, default=str)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def read_events(run_dir: str | os.PathLike, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The complete events written after byte ``offset``, and the offset after them (a line still being
    written is left for the next call)."""
    path = Path(run_dir) / EVENTS_FILE
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events, offset + end


def round_line(event: dict[str, Any]) -> str:
    """A round event as the line a terminal shows: its number, the labelled progress (the binding eps
    against the budget first) and the round's time."""
    return f"round {event['round']}/{event['rounds']}: {event['text']}  [{event['seconds']:.1f} s/round]"


def log_round(event: dict[str, Any]) -> None:
    """The round line in Flower's log (``flwr run --stream``), when Flower is installed."""
    with contextlib.suppress(ImportError):
        from flwr.common.logger import log

        log(logging.INFO, "fedbound %s", round_line(event))
