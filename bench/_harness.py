"""Shared bits for benchmark scripts: interleaved timing, machine info and load, the JSON result file.

Every comparison is timed *interleaved*: A B A B ... (one call of each per repetition, after a warm-up of
each), so a change of machine load hits both sides alike.  Results report the median with min-max of each
side and the median with min-max of the per-repetition ratios; the machine load (``os.getloadavg``) is
recorded before and after, so a reader can tell a quiet measurement from a busy one.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Timing:
    """Wall times (s) of one side of an interleaved comparison."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": min(self.samples), "max": max(self.samples),
                "n": len(self.samples)}


def interleaved(fns: Mapping[str, Callable[[], Any]], repeat: int = 5, warmup: int = 1, number: int = 1,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, Timing]:
    """Time each of ``fns`` ``repeat`` times, A B A B ... (``number`` calls per sample, averaged); ``clock``:
    wall time, or ``time.process_time`` for CPU seconds on a shared machine."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = clock()
            for _ in range(number):
                fn()
            samples[name].append((clock() - t0) / number)
    return {name: Timing(tuple(v)) for name, v in samples.items()}


def ratio(a: Timing, b: Timing) -> dict[str, float]:
    """``a / b``: the median and min-max of the per-repetition ratios (paired: taken at the same load)."""
    pairs = [x / y for x, y in zip(a.samples, b.samples, strict=True)]
    return {"median": statistics.median(pairs), "min": min(pairs), "max": max(pairs)}


def fmt(r: Mapping[str, float], digits: int = 2) -> str:
    """``1.23x (1.10-1.40)`` for a :func:`ratio`."""
    return f"{r['median']:.{digits}f}x ({r['min']:.{digits}f}-{r['max']:.{digits}f})"


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (runnable processes; this machine has ``os.cpu_count()``)."""
    return [round(v, 2) for v in os.getloadavg()]


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(),
                            "cpus": os.cpu_count(), "load_at_end": load()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["cuda_device"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


_LOAD_AT_START = load()


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    info = {"load_at_start": _LOAD_AT_START, **machine()}
    path.write_text(json.dumps({"benchmark": name, "machine": info, **payload}, indent=2) + "\n")
    print(f"wrote {path} (load average {info['load_at_start']} -> {info['load_at_end']}, "
          f"{info['cpus']} cpus)")
    return path
