"""Shared pieces of the fuzz suites (issue 8): typed junk, a per-case time limit, and the verdict every case
must reach (a finite answer, or one line of ValueError naming an input).

Profiles: CI-sized by default; ``FEDBOUND_FUZZ=long`` runs ~20x more examples and the costly accountants
(PLD, sampling without replacement) in the random search too.
"""

from __future__ import annotations

import contextlib
import math
import os
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
