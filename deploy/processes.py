"""Start the processes of a local Flower deployment so that nothing is left running.

:class:`Supervisor` starts every process of a deployment through one watchdog process
(:mod:`fedbound.deploy.watchdog`), each in a process group of its own, and stops them all, children
included, on :meth:`Supervisor.stop` or when the block it guards ends, however it ends: normally, by an
error (a failed round), by Ctrl-C (SIGINT) or by SIGTERM (:func:`signals_raise`).  If ``fedbound`` itself
is killed (SIGKILL, a crash), the watchdog sees its pipe close and stops them all the same.  The
watchdog records every process it saw (``processes.jsonl``); :func:`alive` tells which of them still run
(a pid reused by an unrelated process since does not count).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError

__all__ = ["Supervisor", "signals_raise", "Terminated", "alive", "RECORD"]

RECORD = "processes.jsonl"
"""The watchdog's record of every process it saw, in the deployment folder."""


class Terminated(BaseException):  # noqa: N818 - named as what happened, like KeyboardInterrupt
    """SIGTERM (or SIGHUP) received: raised in the main thread so that the deployment stops in order;
    ``signum`` says which.  A BaseException, like KeyboardInterrupt: no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread (SIGINT already
    raises KeyboardInterrupt), so that ``finally`` clauses stop what was started; the handlers in place
    before are restored after.  Outside the main thread, nothing is changed."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


class Supervisor:
    """The processes of one deployment, started and stopped through the watchdog (module docstring).

    ``folder``: where the watchdog keeps its record (:data:`RECORD`).  Use it as a context manager: the
    processes are stopped when the block ends, whatever ends it."""

    def __init__(self, folder: str | os.PathLike, grace: float = 10.0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.grace = float(grace)
        self.pids: dict[str, int] = {}
        self.stopped: dict[str, Any] | None = None
        self._dog = subprocess.Popen([sys.executable, "-m", "fedbound.deploy.watchdog",
                                      str(self.folder / RECORD)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)

    def _ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self._dog.poll() is not None:
            raise ConfigError(f"the deployment's watchdog exited (code {self._dog.returncode}): the "
                              "deployment was stopped")
        with _no_signals():  # a request and its answer are never torn apart by Ctrl-C
            self._dog.stdin.write(json.dumps(dict(request)) + "\n")
            self._dog.stdin.flush()
            line = self._dog.stdout.readline()
        if not line:
            raise ConfigError("the deployment's watchdog stopped answering: the deployment was stopped")
        return json.loads(line)

    def start(self, name: str, argv: list[str], env: Mapping[str, str], log: str | os.PathLike,
              cwd: str | os.PathLike | None = None) -> int:
        """Start ``argv`` as ``name`` (output to ``log``); its pid.  ConfigError if it cannot start."""
        answer = self._ask({"op": "start", "name": name, "argv": [str(a) for a in argv], "env": dict(env),
                            "log": str(log), "cwd": None if cwd is None else str(cwd)})
        if "error" in answer:
            raise ConfigError(answer["error"])
        self.pids[name] = int(answer["pid"])
        return self.pids[name]

    def exited(self) -> dict[str, int]:
        """The processes started that have ended: name -> exit code (negative: killed by that signal)."""
        return {k: int(v) for k, v in self._ask({"op": "poll"})["exited"].items()}

    def stop(self) -> dict[str, Any]:
        """Stop every process started and all their descendants (SIGTERM, then SIGKILL after the grace
        period); ``{"stopped": [pids], "left": [pids]}`` (``left`` is empty unless a process survived
        SIGKILL).  Idempotent."""
        if self.stopped is not None:
            return self.stopped
        result: dict[str, Any] = {"stopped": [], "left": []}
        with _no_signals():
            try:
                result = self._ask({"op": "stop", "grace": self.grace})
            except (ConfigError, OSError, ValueError):
                pass  # the watchdog is gone already: it stopped everything when it went
            with contextlib.suppress(OSError):
                self._dog.stdin.close()
            try:
                self._dog.wait(timeout=self.grace + 30)
            except subprocess.TimeoutExpired:  # pragma: no cover - a watchdog stuck in the kernel
                self._dog.kill()
                self._dog.wait()
        self.stopped = result
        return result

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextlib.contextmanager
def _no_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back during the block (POSIX ``pthread_sigmask``), delivered after."""
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def alive(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The processes in the watchdog's record (:data:`RECORD` in ``folder``) that still run: the same pid
    with the same start time, not a zombie (Linux ``/proc``)."""
    record = Path(folder) / RECORD
    if not record.is_file():
        return []
    out = []
    for line in record.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            try:
                stat = Path(f"/proc/{entry['pid']}/stat").read_text(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[0] not in ("Z", "X") and fields[19] == entry["start"]:
                out.append(entry)
    return out
