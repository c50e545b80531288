"""How long a long run will take, said once, after its first round, run or batch of trials (``train``,
``reproduce``, ``sweep``, ``validate``, ``flower`` and ``audit``).

One line on stderr (through tqdm, so a progress bar on the same stream stays whole), never on stdout, so
``--json`` output is untouched::

    nbafl: about 1 min 43 s left (1 of 50 rounds took 2.1 s)

The estimate is the pace so far times what is left; it is said only when the whole would take at least
:data:`MIN_SECONDS` (a run of seconds needs none), and only once per run.  :func:`timed_bar` adds it to a
tqdm progress bar (the engine's, ``fedbound.training.metrics.progress_bar``, and a sweep's), so every
command that trains through the engine with a bar says it without the engine knowing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Estimate", "duration", "timed_bar", "MIN_SECONDS"]

MIN_SECONDS = 10.0
"""A run whose estimated whole is shorter says nothing."""


def duration(seconds: float) -> str:
    """``4.2 s``, ``45 s``, ``3 min 20 s``, ``2 h 5 min`` (rounded to what a person reads)."""
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{round(seconds)} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _write(line: str) -> None:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - the train extra brings tqdm
        print(line, file=sys.stderr, flush=True)
    else:
        tqdm.write(line, file=sys.stderr)


class Estimate:
    """Says once how long ``total`` units (rounds, runs, trials) of ``what`` take, from the pace of the
    first ones.  :meth:`step` takes the units done so far (in this session) and, where the clock should
    not be the one started at construction (a round's own time), the seconds they took; :meth:`add`
    counts units as they finish.  ``write`` and ``clock`` are hooks (tests)."""

    def __init__(self, what: str, unit: str, total: int, *, note: str = "", enabled: bool = True,
                 write: Callable[[str], Any] | None = None, clock: Callable[[], float] | None = None) -> None:
        self.what, self.unit, self.total, self.note = what, unit, int(total), note
        self.enabled, self.said, self.done = bool(enabled), False, 0
        self.clock, self.write = clock or time.perf_counter, write or _write
        self.started = self.clock()

    def line(self, done: float, elapsed: float, label: str | None = None) -> str | None:
        """The line for ``done`` of ``total`` units in ``elapsed`` seconds (None: nothing worth saying);
        ``label`` says what was done instead of ``done of total units``."""
        if done <= 0 or done >= self.total or elapsed <= 0:
            return None
        whole = elapsed * self.total / done
        if whole < MIN_SECONDS:
            return None
        units = f"{self.unit}s" if self.total != 1 else self.unit
        label = label or f"{done:,} of {self.total:,} {units}"
        left = duration(whole - elapsed)
        return f"{self.what}: about {left} left ({label} took {duration(elapsed)}){self.note}"

    def step(self, done: float, elapsed: float | None = None, label: str | None = None) -> None:
        """``done`` units finished (``elapsed`` seconds, default the clock since construction; ``label``:
        :meth:`line`'s)."""
        if self.said or not self.enabled or done <= 0:
            return
        self.said = True  # said now, or the run is short: either way once
        line = self.line(done, self.clock() - self.started if elapsed is None else elapsed, label)
        if line is not None:
            self.write(line)

    def add(self, n: int) -> None:
        """``n`` more units finished."""
        self.done += int(n)
        self.step(self.done)


class _TimedBar:
    """A progress bar that says :class:`Estimate`'s line after its first update (attributes pass through
    to the bar: the engine sets ``total``)."""

    def __init__(self, bar: Any, estimate: Estimate, initial: int) -> None:
        object.__setattr__(self, "_bar", bar)
        object.__setattr__(self, "eta", estimate)
        object.__setattr__(self, "_initial", initial)

    def update(self, n: int = 1) -> Any:
        out = self._bar.update(n)
        estimate = self.eta
        estimate.total = int(getattr(self._bar, "total", 0) or 0) - self._initial
        estimate.step(int(getattr(self._bar, "n", 0)) - self._initial)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bar, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._bar, name, value)


def timed_bar(bar: Any, what: str, unit: str, initial: int = 0, **kw: Any) -> Any:
    """``bar`` (a tqdm bar at ``initial`` of its ``total``) saying how long the rest takes after its first
    update (``kw``: :class:`Estimate`'s hooks; the bar's ``eta`` is the Estimate, to say it earlier)."""
    total = int(getattr(bar, "total", 0) or 0)
    return _TimedBar(bar, Estimate(what, unit, total - initial, **kw), initial)
