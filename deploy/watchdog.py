"""The watchdog of a local Flower deployment: the one process that starts every SuperLink, SuperNode and
``flwr`` process of the deployment, and stops all of them, their children included, when told to or when
the ``fedbound`` process that drives it is gone.

Run as ``python -m fedbound.deploy.watchdog RECORD`` by :class:`fedbound.deploy.processes.Supervisor`, in
a session of its own (so a Ctrl-C typed at the terminal reaches ``fedbound``, which then stops the
deployment in order, and not every Flower process at once).  It reads one JSON request per line on stdin
and answers one JSON line on stdout:

* ``{"op": "start", "name", "argv", "env", "log", "cwd"}``: start ``argv`` (stdout and stderr to ``log``,
  stdin from /dev/null) in a process group of its own; answers ``{"pid"}`` or ``{"error"}``;
* ``{"op": "poll"}``: ``{"exited": {name: returncode}}`` for the processes it started that have ended;
* ``{"op": "stop", "grace"}``: SIGTERM to every process it started and every descendant of theirs, then,
  after ``grace`` seconds, SIGKILL to what is left; answers ``{"stopped", "left"}`` and exits.

Whatever ends ``fedbound`` (Ctrl-C, SIGTERM, SIGKILL, a crash), its end of the pipe closes: stdin reaches
EOF, and the watchdog stops everything as for ``stop`` and exits (it also checks, every 0.2 s, that its
parent is still the process that started it).  On Linux it is a child subreaper (``prctl``), so a
descendant whose parent died (Flower starts its SuperExec detached) is re-parented to the watchdog and is
still found; elsewhere the descendants are looked up every 0.2 s and remembered.  Every descendant seen
is appended to ``RECORD`` (JSON lines: pid, parent pid, start time, command line), which the tests read to
check that none of them is left.

Standard library only: it must start in a blink and keep running whatever state the rest is in.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

POLL_SECONDS = 0.2


def _subreaper() -> None:
    """Become a child subreaper (Linux; PR_SET_CHILD_SUBREAPER = 36); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every live process, zombies left out (``/proc``; ``ps`` where
    there is none)."""
    out: dict[int, tuple[int, str]] = {}
    if os.path.isdir("/proc/self"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
            if fields[0] not in ("Z", "X"):  # a zombie has ended: only its exit status is left to collect
                out[int(entry)] = (int(fields[1]), fields[19])  # ppid, starttime (clock ticks since boot)
        return out
    text = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,lstart="], capture_output=True, text=True,
                          check=False).stdout
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            out[int(parts[0])] = (int(parts[1]), parts[2].strip())
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:4000]
    except OSError:
        return ""


class Watchdog:
    """The processes started, every descendant seen, and how to stop them (module docstring)."""

    def __init__(self, record: str) -> None:
        self.me = os.getpid()
        self.parent = os.getppid()
        self.record = open(record, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life
        self.started: dict[str, subprocess.Popen] = {}
        self.seen: dict[int, str] = {}  # pid -> start time

    # --- bookkeeping -------------------------------------------------------------------------------------
    def descendants(self) -> dict[int, str]:
        """pid -> start time of every live descendant (and of every process seen before that still runs
        with the same start time: found even after its parent died, where there is no subreaper)."""
        table = _table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        found: dict[int, str] = {}
        todo = [self.me, *(p.pid for p in self.started.values())]
        while todo:
            pid = todo.pop()
            for child in children.get(pid, ()):
                if child not in found and child != self.me:
                    found[child] = table[child][1]
                    todo.append(child)
        for proc in self.started.values():
            if proc.pid in table and proc.returncode is None:
                found.setdefault(proc.pid, table[proc.pid][1])
        for pid, start in self.seen.items():
            if pid in table and table[pid][1] == start:
                found.setdefault(pid, start)
        for pid, start in found.items():
            if self.seen.get(pid) != start:
                self.seen[pid] = start
                name = next((n for n, p in self.started.items() if p.pid == pid), None)
                self.record.write(json.dumps({"pid": pid, "ppid": table.get(pid, (None,))[0], "start": start,
                                              "name": name, "cmd": _cmdline(pid)}) + "\n")
        return found

    def reap(self) -> None:
        """Collect exit statuses: of the processes started (kept for :meth:`poll`), then of re-parented
        orphans (a subreaper inherits their zombies)."""
        for proc in self.started.values():
            proc.poll()
        by_pid = {p.pid: p for p in self.started.values()}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in by_pid and by_pid[pid].returncode is None:  # exited between the two steps
                by_pid[pid].returncode = os.waitstatus_to_exitcode(status)

    # --- requests ----------------------------------------------------------------------------------------
    def start(self, req: dict) -> dict:
        name = str(req["name"])
        try:
            with open(req["log"], "ab") as log:
                proc = subprocess.Popen(req["argv"], env=req.get("env"), cwd=req.get("cwd"),
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        except (OSError, ValueError) as exc:
            return {"error": f"{name}: cannot start {req['argv'][0]!r}: {exc}"}
        self.started[name] = proc
        self.descendants()
        return {"pid": proc.pid}

    def poll(self) -> dict:
        return {"exited": {n: p.poll() for n, p in self.started.items() if p.poll() is not None}}

    def _signal(self, sig: int) -> None:
        for proc in self.started.values():
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, sig)  # the group it leads (start_new_session)
        for pid in self.descendants():
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def stop(self, grace: float) -> dict:
        """SIGTERM everything, wait up to ``grace`` s, SIGKILL what is left, wait until nothing is left."""
        stopped = set(self.descendants())
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            self._signal(sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.reap()
                left = self.descendants()
                stopped |= set(left)
                if not left:
                    return {"stopped": sorted(stopped), "left": []}
                time.sleep(0.05)
        return {"stopped": sorted(stopped), "left": sorted(self.descendants())}


def _reader(requests: queue.Queue) -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            try:
                requests.put(json.loads(line))
            except ValueError:
                continue
    requests.put(None)  # EOF: the driving process is gone


def main() -> None:
    _subreaper()
    dog = Watchdog(sys.argv[1])
    requests: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(requests,), daemon=True).start()
    ending: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: ending.append(signum))

    def answer(obj: dict) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    while True:
        try:
            req = requests.get(timeout=POLL_SECONDS)
        except queue.Empty:
            req = {"op": "tick"}
        if req is None or ending or os.getppid() != dog.parent:
            dog.stop(5.0)
            return
        op = req.get("op")
        if op == "start":
            answer(dog.start(req))
        elif op == "poll":
            answer(dog.poll())
        elif op == "stop":
            answer(dog.stop(float(req.get("grace", 10.0))))
            return
        dog.reap()
        dog.descendants()


if __name__ == "__main__":
    main()
