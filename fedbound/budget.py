"""A CPU-time budget for an answer (issue 36: every answer within 10 CPU s, a clear message where the full
answer would take longer).

The command line runs its answering commands (``plan``, ``plot``, ``claims``, ``schedule``, ``calibrate``,
``account``, ``papers``, ``crd``) inside :func:`cpu_budget`; the searches and calibrations that can run long
call :func:`check` where they loop, which raises :class:`CpuBudgetExceeded` once the process's CPU time has
passed the budget's end.  Outside a budget (the Python API, the explorer's threads, training) :func:`check`
does nothing.  The budget is CPU time (``time.process_time``), never wall time: a loaded machine does not
make an answer fail.

``FEDBOUND_CPU_BUDGET`` sets the seconds (default :data:`DEFAULT_SECONDS`; ``0`` or ``off``: no budget).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Iterator

from fedbound.errors import FedboundError

__all__ = ["DEFAULT_SECONDS", "ENV", "CpuBudgetExceeded", "cpu_budget", "check", "seconds_from_env"]

DEFAULT_SECONDS = 6.0
"""CPU seconds an answering command may compute (its imports, 1-2 s, come on top: every answer stays within
10 CPU s; the slowest example plan, DP-PFL on CIFAR with --check, computes for about 4.5 s)."""
ENV = "FEDBOUND_CPU_BUDGET"

_END: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("fedbound_cpu_budget",
                                                                                  default=None)


class CpuBudgetExceeded(FedboundError):
    """The answer needs more CPU time than its budget: where it stopped, the budget, how to raise it."""

    def __init__(self, where: str, seconds: float) -> None:
        self.where, self.seconds = where, seconds
        super().__init__(f"the answer needs more than its CPU budget of {seconds:g} s ({where}); "
                         f"raise it with {ENV}=SECONDS, or change the input that makes it this costly")


def seconds_from_env() -> float | None:
    """The budget in seconds from ``FEDBOUND_CPU_BUDGET`` (None: no budget)."""
    text = os.environ.get(ENV, "").strip().lower()
    if not text:
        return DEFAULT_SECONDS
    if text in ("0", "off", "none", "inf"):
        return None
    try:
        value = float(text)
    except ValueError:
        from fedbound.errors import ConfigError

        raise ConfigError(f"{ENV} = {text!r} is outside its valid range: a number of CPU seconds > 0, or "
                          "'off'") from None
    return value if value > 0 and value != float("inf") else None


@contextlib.contextmanager
def cpu_budget(seconds: float | None) -> Iterator[None]:
    """Run the block within ``seconds`` of CPU time from now (None: no budget); a budget inside another
    ends no later than the outer one."""
    if seconds is None:
        yield
        return
    end = time.process_time() + seconds
    outer = _END.get()
    if outer is not None and outer[0] < end:
        end, seconds = outer
    token = _END.set((end, seconds))
    try:
        yield
    finally:
        _END.reset(token)


def check(where: str) -> None:
    """Raise :class:`CpuBudgetExceeded` (naming ``where``: what was being computed) when the current budget
    is spent; nothing outside a budget."""
    budget = _END.get()
    if budget is not None and time.process_time() > budget[0]:
        raise CpuBudgetExceeded(where, budget[1])
