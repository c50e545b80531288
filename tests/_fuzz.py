"""Shared pieces of the fuzz suites (issue 8): typed junk, a per-case time limit, and the verdict every case
must reach (a finite answer, or one line of ValueError naming an input).

Profiles: CI-sized by default; ``FEDBOUND_FUZZ=long`` runs ~20x more examples and the costly accountants
(PLD, sampling without replacement) in the random search too.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Mapping

import numpy as np
from hypothesis import strategies as st

LONG = os.environ.get("FEDBOUND_FUZZ") == "long"
EXAMPLES = 2000 if LONG else 80
CASE_SECONDS = 10.0
"""Every public function answers any input within this (issue 8's target on 2 cores)."""

EXTREMES = [0, -0.0, -1, 1, 0.5, math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, 5e-324, 1e-12, 1e12,
            2**63 - 1, 2**63, -(2**63), 2**64 + 1, 10**30, True]
JUNK = ["abc", "", None, [], [1.0, math.nan], [[1.0], [2.0, 3.0]], "x" * 10_000, {"a": 1}, b"\xff", 1j]

junk = st.one_of(
    st.sampled_from(EXTREMES),
    st.sampled_from(JUNK),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e308, math.nan]), min_size=1, max_size=3),
)


class CaseTimeout(AssertionError):
    pass


WALL_GUARD = 30.0
"""A wall-clock guard against hangs only (a sleeping or blocked case uses no CPU): this many times the CPU
limit, so a loaded machine (load 15 on 2 cores) never fails a case that is merely slow to be scheduled."""


@contextlib.contextmanager
def time_limit(seconds: float = CASE_SECONDS):
    """Fail the case (CaseTimeout) when it uses more than ``seconds`` of CPU time (the process's user +
    system time, SIGPROF), or hangs for ``WALL_GUARD`` times that in wall time (SIGALRM): a time limit in a
    test counts CPU seconds, never the wall clock of a shared machine (issue 26, item 10)."""
    def handler(signum, frame):
        kind = "CPU" if signum == signal.SIGPROF else "wall-clock (a hang)"
        raise CaseTimeout(f"a fuzz case ran longer than its {kind} limit ({seconds:g} CPU s)")

    old_prof = signal.signal(signal.SIGPROF, handler)
    old_alarm = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_GUARD)
    start = time.process_time()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alarm)
    assert time.process_time() - start < seconds


def finite_values(result) -> list[float]:
    """Every number in a result (floats, arrays, named tuples, MethodRow tuples, dataclasses)."""
    if result is None or isinstance(result, str | bool):
        return []
    if isinstance(result, Mapping):
        return [v for item in result.values() for v in finite_values(item)]
    if isinstance(result, tuple | list):
        return [v for item in result for v in finite_values(item)]
    if hasattr(result, "__dataclass_fields__"):
        return [v for name in ("value", "saving_percent", "epsilon", "delta", "sigma")
                for v in finite_values(getattr(result, name, None))]
    return [float(v) for v in np.asarray(result, dtype=float).ravel()]


def check_verdict(call, names: tuple[str, ...]):
    """Run ``call()``: it must return only finite numbers, or raise a one-line ValueError naming one of
    ``names`` (the inputs the caller typed).  Returns the result or the exception."""
    try:
        with time_limit():
            result = call()
    except CaseTimeout:
        raise
    except ValueError as exc:
        text = str(exc)
        assert "\n" not in text, f"multi-line error: {text!r}"
        assert any(n in text for n in names), f"error does not name an input of {names}: {text}"
        assert len(text) < 2000, f"error message of {len(text)} characters"
        return exc
    values = finite_values(result)
    assert all(math.isfinite(v) for v in values), f"non-finite answer {result!r}"
    return result


# ---- the command-line fuzz: every command, every option, every registered paper's keys (issue 26) ----------

MEMORY_BYTES = 1536 * 2**20
"""Address space a CLI case may add beyond the worker's imports (RLIMIT_AS)."""
CASE_WALL_SECONDS = 180.0
"""A case still running after this long is a hang (it uses no CPU, or the machine is very loaded)."""

HOSTILE = ["", "nan", "inf", "-inf", "0", "-1", "1e308", "1e-308", "9223372036854775808", "1" * 400, "abc",
           "[1, 2]", "true", "é∑\u202e", "/proc/x", "DIR/", "FILE", "./", "-0"]
"""The corpus of hostile values: empty, non-finite, zero, negative, huge and tiny, huge integers, wrong types,
unicode, and paths (``DIR/`` and ``FILE`` are replaced by an existing folder and an existing file)."""


def worker_main() -> None:
    """A worker process: read cases (JSON on stdin), run each in a forked child under RLIMIT_CPU and RLIMIT_AS
    in its own empty working directory, print the outcomes (JSON).  The imports are paid once per worker."""
    import json
    import sys
    import tempfile

    cases = json.load(sys.stdin)
    import fedbound.cli
    for module in ("numpy", "scipy.stats", "scipy.optimize", "pandas", "torch", "sympy", "matplotlib.pyplot",
                   "cvxpy", "fedbound.registry"):
        with contextlib.suppress(ImportError):
            __import__(module)
    for paper in fedbound.registry.papers().values():
        paper.config_section  # noqa: B018 - built once, shared by the children
    base = tempfile.mkdtemp(prefix="fedbound-fuzz-")
    try:
        out = [_run_forked(fedbound.cli.main, case["argv"], base, i) for i, case in enumerate(cases)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    sys.stdout.write(json.dumps(out))


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _run_forked(main, argv: list[str], base: str, index: int) -> dict:
    import resource
    import sys
    import traceback

    folder = os.path.join(base, f"case{index}")
    os.mkdir(folder)
    os.mkdir(os.path.join(folder, "DIR"))
    with open(os.path.join(folder, "FILE"), "w") as f:
        f.write("not a fedbound file\n")
    paths = {k: os.path.join(folder, k + ".txt") for k in ("out", "err")}
    limit = _vm_bytes() + MEMORY_BYTES
    pid = os.fork()
    if pid == 0:  # the case
        code = 1
        try:
            os.chdir(folder)
            for fd, key in ((1, "out"), (2, "err")):
                os.dup2(os.open(paths[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            resource.setrlimit(resource.RLIMIT_CPU, (int(CASE_SECONDS), int(CASE_SECONDS) + 2))
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            code = main(list(argv))
        except BaseException:  # noqa: BLE001 - what the user would see: a traceback, exit 1
            traceback.print_exc()
            code = 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code if isinstance(code, int) else 1)
    deadline = time.monotonic() + CASE_WALL_SECONDS
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return {"code": None, "signal": "hang", "cpu": usage.ru_utime + usage.ru_stime, "out": "",
                    "err": ""}
        time.sleep(0.01)
    texts = {}
    for key, path in paths.items():
        with open(path, encoding="utf-8", errors="replace") as f:
            texts[key] = f.read(200_000)
    sig = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else None
    return {"code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None, "signal": sig,
            "cpu": usage.ru_utime + usage.ru_stime, **texts}


def run_cli_cases(cases: list[dict], workers: int = 2) -> list[dict]:
    """Run ``cases`` (each ``{"argv": [...], ...}``) in ``workers`` worker processes (batches: the imports are
    paid once per worker); returns each case's outcome (code, signal, cpu, out, err) in order."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200",
           "FEDBOUND_FUZZ_WORKER": "1", "PYTHONWARNINGS": "ignore"}
    chunks = [cases[i::workers] for i in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-c", "from fedbound.tests._fuzz import worker_main; "
                               "worker_main()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in chunks]
    outs = []
    for proc, chunk in zip(procs, chunks, strict=True):
        proc.stdin.write(json.dumps([{"argv": c["argv"]} for c in chunk]))
        proc.stdin.close()
    for proc in procs:
        stdout = proc.stdout.read()
        stderr = proc.stderr.read()
        proc.wait()
        assert proc.returncode == 0, f"fuzz worker failed: {stderr[-3000:]}"
        outs.append(json.loads(stdout))
    results = [None] * len(cases)
    for w, chunk_out in enumerate(outs):
        for j, outcome in enumerate(chunk_out):
            results[w + j * workers] = outcome
    return results


_NONFINITE = re.compile(r"(?i)(^|[\s│|:,\[(=])[-+]?(nan|inf|infinity)([\s│|,\])]|$)")


def cli_verdict(case: dict, outcome: dict) -> str | None:
    """None when the case answered as it must (exit 0 with finite output, or exit 2 with one line naming one
    of ``case["names"]``); otherwise why not."""
    import json

    code, err, out = outcome["code"], outcome["err"], outcome["out"]
    if outcome["signal"] is not None:
        return (f"killed by {outcome['signal']} after {outcome['cpu']:.1f} CPU s (limits: {CASE_SECONDS:g} "
                f"CPU s, {MEMORY_BYTES >> 20} MiB)")
    if "Traceback (most recent call last)" in err or code not in (0, 2):
        tail = [x for x in err.strip().splitlines() if x.strip()][-1:] or [""]
        return f"exit {code}: {tail[0][:300]}"
    if code == 0:
        if "--json" in case["argv"] and out.strip():
            try:
                json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError as exc:
                return f"exit 0 with output that is not finite JSON: {str(exc)[:200]}"
        else:
            cells = [line for line in out.splitlines() if "(" not in line and "[" not in line]
            bad = next((line for line in cells if _NONFINITE.search(line)), None)
            if bad is not None:
                return f"exit 0 with a non-finite number: {bad.strip()[:200]}"
        return None
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("warning:")]
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return f"exit 2 without one error line: {err[:300]!r}"
    names = case.get("names", ())
    if names and not any(n.lower() in lines[0].lower() for n in names):
        return f"the error does not name {' or '.join(names)}: {lines[0][:300]}"
    return None
