"""Nothing left running (issue 37, item 2): the watchdog that starts a deployment's processes stops every one
of them and every descendant, whether the block that started them ends normally, by SIGINT or SIGTERM, or
the process driving it is killed outright (SIGKILL).

The process trees are small shell and Python stand-ins with the shapes Flower's have: a child in a session
of its own (Flower's SuperLink starts its SuperExec detached), an orphan whose parent exited, a process that
ignores SIGTERM.  Each carries a unique marker in its command line; "nothing left" is checked by scanning
every process's command line for it (not through the watchdog's own record), with a deadline for the
kernel to finish the kills.  tests/test_deploy_flower_deployment.py does the same with real SuperLinks and
SuperNodes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from fedbound.deploy.processes import RECORD, Supervisor, Terminated, alive, signals_raise
from fedbound.tests._processes import live_commands

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="scans /proc")


def _marked() -> str:
    """A unique number for ``sleep`` (a marker in the command line)."""
    return f"{1000 + uuid.uuid4().int % 10**6}.{os.getpid()}"


def _running(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (pytest's own left out)."""
    return [pid for pid, cmd in live_commands().items() if marker in cmd and "pytest" not in cmd]


def _until_gone(marker: str, seconds: float = 20.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _running(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _tree(marker: str) -> dict[str, list[str]]:
    """name -> argv of processes shaped like a deployment's (module docstring)."""
    py = sys.executable
    return {
        "detached": ["bash", "-c", f"setsid sleep {marker} & sleep {marker}"],
        "stubborn": [py, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                               f"time.sleep(1000)  # {marker}"],
        "orphaning": ["bash", "-c", f"(sleep {marker} &); exit 3"],
    }


def test_the_watchdog_stops_every_process_started_and_every_descendant(tmp_path):
    marker = _marked()
    with Supervisor(tmp_path, grace=1.0) as sup:
        for name, argv in _tree(marker).items():
            assert sup.start(name, argv, os.environ, tmp_path / f"{name}.log") > 0
        deadline = time.monotonic() + 20
        while len(_running(marker)) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_running(marker)) >= 5  # sleep x2, the SIGTERM-proof python, the orphan (+ shells)
        while "orphaning" not in sup.exited() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sup.exited() == {"orphaning": 3}
        started = time.monotonic()
    assert time.monotonic() - started < 15  # SIGTERM, 1 s of grace, SIGKILL for the one ignoring it
    assert _until_gone(marker) == []
    assert sup.stopped["left"] == []
    assert alive(tmp_path) == []
    record = (tmp_path / RECORD).read_text()
    assert record.count(marker) >= 4  # the watchdog saw the children of the children too


def test_a_failed_start_is_one_error_and_the_rest_is_still_stopped(tmp_path):
    marker = _marked()
    with pytest.raises(Exception, match="cannot start"), Supervisor(tmp_path, grace=1.0) as sup:
        sup.start("sleeper", ["sleep", marker], os.environ, tmp_path / "s.log")
        sup.start("missing", [str(tmp_path / "no-such-program")], os.environ, tmp_path / "m.log")
    assert _until_gone(marker) == []


_DRIVER = textwrap.dedent("""
    import os, sys, time
    from fedbound.deploy.processes import Supervisor, signals_raise
    folder, marker = sys.argv[1], sys.argv[2]
    with signals_raise(), Supervisor(folder, grace=1.0) as sup:
        sup.start("detached", ["bash", "-c", f"setsid sleep {marker} & sleep {marker}"], os.environ,
                  os.path.join(folder, "d.log"))
        sup.start("orphaning", ["bash", "-c", f"(sleep {marker} &); sleep {marker}"], os.environ,
                  os.path.join(folder, "o.log"))
        print("ready", flush=True)
        time.sleep(1000)
""")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_ctrl_c_a_kill_or_a_hard_kill_of_the_driver_stops_everything(tmp_path, how):
    """SIGINT (Ctrl-C) and SIGTERM reach the driver, whose ``finally`` stops the deployment; SIGKILL leaves
    the watchdog to notice that its driver's pipe closed."""
    marker = _marked()
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path), marker], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert driver.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        while len(_running(marker)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_running(marker)) >= 4
        driver.send_signal(getattr(signal, how))
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert _until_gone(marker) == []
    assert alive(tmp_path) == []
    if how != "SIGKILL":
        assert driver.returncode != 0 and "Traceback" in driver.stderr.read()  # uncaught: the CLI's job


def test_signals_raise_turns_sigterm_into_an_exception_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(Terminated) as info:
        with signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                cleaned.append(True)
    assert info.value.signum == signal.SIGTERM and cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) is before
