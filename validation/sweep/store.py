"""A sweep's folder: finished runs, failed runs, runs in progress and who owns them.

Layout of ``out``::

    runs/<key>/    a finished run: metrics.csv, metrics.parquet, summary.json, config.toml, spec.json
    work/<key>/    a run in progress: its checkpoint (a killed run resumes from it, identical numbers)
    failed/<key>.txt  the traceback of a run that raised
    locks/<key>.lock  "host pid" of the worker that owns the run now
    damaged/<key>/    a finished run whose files were found damaged later (kept for inspection, retrained)

A run is trained in ``work/<key>/`` and renamed to ``runs/<key>/`` once all its files are written, so a
folder under ``runs/`` is complete when it is made, and its ``spec.json`` records the SHA-256 of
``summary.json`` and ``metrics.csv`` (:data:`CHECKED`); :meth:`SweepStore.damage` checks that the run still
reads back as written (a file edited, truncated or overwritten since: a checksum that differs, summary.json
not a UTF-8 JSON object of finite numbers, metrics.csv cut short or ending before the run's last round).

A worker takes a run by creating its lock file (``O_EXCL``: exactly one worker wins); a lock whose process
is gone (same host) is stale and taken over.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from fedbound.checks import strict_json

__all__ = ["SweepStore", "CHECKED"]

CHECKED = ("summary.json", "metrics.csv")
"""The files of a finished run whose SHA-256 ``spec.json`` records (what a sweep's table is read from)."""


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SweepStore:
    """The folders of one sweep (module docstring)."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)

    def run_dir(self, key: str) -> Path:
        return self.out / "runs" / key

    def work_dir(self, key: str) -> Path:
        return self.out / "work" / key

    def failed_file(self, key: str) -> Path:
        return self.out / "failed" / f"{key}.txt"

    def lock_file(self, key: str) -> Path:
        return self.out / "locks" / f"{key}.lock"

    def is_finished(self, key: str) -> bool:
        return (self.run_dir(key) / "summary.json").is_file()

    def finished_keys(self) -> list[str]:
        root = self.out / "runs"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "summary.json").is_file())

    def damage(self, key: str) -> str | None:
        """Why the finished run ``key`` cannot be read back as written (None when it can; module
        docstring)."""
        folder = self.run_dir(key)
        summary = _json_object(folder / "summary.json")
        if isinstance(summary, str):
            return summary
        spec = _json_object(folder / "spec.json")
        if isinstance(spec, str):
            return spec
        why = _metrics_damage(folder / "metrics.csv", summary.get("rounds_done"))
        sums = spec.get("checksums")
        if why is None and isinstance(sums, dict):  # runs finished before checksums were kept have none
            for name in CHECKED:
                if sums.get(name) != _sha256(folder / name):
                    return f"{name} changed after the run finished (its SHA-256 is not spec.json's)"
        return why

    def set_aside(self, key: str, why: str) -> Path:
        """Move the damaged run ``key`` to ``damaged/<key>/`` (a fresh name if one is there) with a note of
        ``why``; the run is then unfinished and a re-run trains it again."""
        root = self.out / "damaged"
        root.mkdir(parents=True, exist_ok=True)
        dest, n = root / key, 1
        while dest.exists():
            dest, n = root / f"{key}.{n}", n + 1
        os.replace(self.run_dir(key), dest)
        note = dest / "DAMAGED.txt" if dest.is_dir() else dest.with_name(dest.name + ".DAMAGED.txt")
        note.write_text(why + "\n")
        return dest

    def acquire(self, key: str) -> bool:
        """Take run ``key`` for this process; False when a live worker owns it."""
        path = self.lock_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        me = f"{socket.gethostname()} {os.getpid()}"
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._stale(path, me):
                    return False
                path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(me)
            return True
        return False

    @staticmethod
    def _stale(path: Path, me: str) -> bool:
        try:
            host, pid = path.read_text().split()
        except (OSError, ValueError):
            return True  # unreadable or half-written: its writer died between create and write
        if f"{host} {pid}" == me:
            return True  # this very process (an earlier call that raised)
        return host == socket.gethostname() and not _alive(int(pid))

    def release(self, key: str) -> None:
        self.lock_file(key).unlink(missing_ok=True)

    def start(self, key: str) -> Path:
        """The work folder of run ``key`` (kept from a killed attempt: its checkpoint resumes)."""
        self.failed_file(key).unlink(missing_ok=True)
        work = self.work_dir(key)
        work.mkdir(parents=True, exist_ok=True)
        return work

    def finish(self, key: str, spec: dict) -> Path:
        """Write ``spec.json`` into the work folder and rename it to ``runs/<key>`` (the commit point)."""
        work, final = self.work_dir(key), self.run_dir(key)
        sums = {name: _sha256(work / name) for name in CHECKED if (work / name).is_file()}
        (work / "spec.json").write_text(json.dumps({**spec, "checksums": sums}, indent=2, default=str) + "\n")
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # a finished copy from a worker that lost its lock; keep one
            shutil.rmtree(work, ignore_errors=True)
            return final
        os.replace(work, final)
        return final

    def fail(self, key: str, text: str) -> None:
        """Keep the traceback of run ``key`` and drop its work folder (a re-run starts afresh)."""
        path = self.failed_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
        shutil.rmtree(self.work_dir(key), ignore_errors=True)

    def failures(self) -> dict[str, str]:
        root = self.out / "failed"
        return {p.stem: p.read_text() for p in sorted(root.glob("*.txt"))} if root.is_dir() else {}


def _json_object(path: Path) -> dict | str:
    """The JSON object in ``path`` (strict: no NaN or Infinity), or why it is not one."""
    try:
        doc = strict_json(path.read_bytes())
    except FileNotFoundError:
        return f"{path.name} is missing"
    except OSError as exc:
        return f"{path.name} cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return f"{path.name} is not UTF-8 text (byte {exc.start})"
    except ValueError as exc:  # JSONDecodeError included
        return f"{path.name} is not valid JSON: {str(exc).splitlines()[0][:120]}"
    return doc if isinstance(doc, dict) else f"{path.name} is not a JSON object"


def _metrics_damage(path: Path, rounds_done: Any) -> str | None:
    """Why ``metrics.csv`` does not hold the run's rounds up to ``rounds_done`` (None when it does)."""
    import pandas as pd

    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 1, 0))
            last = fh.read(1)
        frame = pd.read_csv(path, usecols=lambda c: c in ("round", "client"))
    except FileNotFoundError:
        return "metrics.csv is missing"
    except OSError as exc:
        return f"metrics.csv cannot be read ({exc.strerror or exc})"
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        return f"metrics.csv is not a readable CSV table ({type(exc).__name__})"
    if last != b"\n":
        return "metrics.csv is cut short (its last line is incomplete)"
    if "round" not in frame.columns:
        return "metrics.csv has no round column"
    rows = frame[frame["client"].isna()] if "client" in frame.columns else frame
    rounds = pd.to_numeric(rows["round"], errors="coerce")
    if isinstance(rounds_done, int) and not isinstance(rounds_done, bool) and rounds_done > 0:
        if rounds.empty or not rounds.max() == rounds_done:
            end = "no round" if rounds.dropna().empty else f"round {rounds.max():g}"
            return f"metrics.csv ends at {end}, the run's summary at round {rounds_done}"
    return None
