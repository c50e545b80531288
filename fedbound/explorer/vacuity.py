"""Why a recommendation is vacuous, and what to change: one parameter at a time, each change checked by
planning it.

A plan is VACUOUS when its bound is not below the level it must beat to promise anything (NbAFL's and
PADPFL's initial gap Theta, DP-PFL's Delta0 or its no-training level, WPFL's initial distance D0); its
``why`` then starts with ``VACUOUS``.  Each paper's registry entry names its ``levers``: the config keys that
move its bound towards informative and in which direction (``"up"``/``"down"`` for a number, None to leave
the key unset so the planner searches it, or the choice to set).  :func:`remedies` tries each lever alone
on the user's setting and reports the smallest change that makes the recommendation informative, with the
design and bound it then gets, or how far it tried without success.  Numbers: 2, 10 and 100 times (or a
half, a tenth and a hundredth of) the current value (:data:`FACTORS`), then bisection in log scale between
the last vacuous and the first informative value, rounded to two significant digits outward and planned
again.
The search stops after :data:`CPU_SECONDS` of this thread's CPU time and says so.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from fedbound.errors import FedboundError

__all__ = ["remedies", "vacuous", "FACTORS", "CPU_SECONDS", "BISECTIONS"]

FACTORS = (2.0, 10.0, 100.0)
"""How far from the current value each lever is tried (a factor up or down), in order, until one is
informative: the search then bisects between the last value still vacuous and that one."""
BISECTIONS = 5
"""Log-scale bisection steps between the last vacuous and the first informative value (a factor of 2
narrowed to within 2.2 %, a factor of 10 to within 7.5 %)."""
CPU_SECONDS = 12.0
"""CPU seconds (this thread's) the search may take; what it found by then is reported."""


def vacuous(plan: Any) -> bool:
    """Whether a plan's recommendation is vacuous (its ``why`` says so first)."""
    rec = getattr(plan, "recommendation", None)
    return rec is not None and str(rec.why).startswith("VACUOUS")


def _nice(value: float, up: bool, integer: bool) -> float:
    """``value`` rounded outward (up when raising, down when lowering) to two significant digits."""
    if integer:
        return float(math.ceil(value) if up else math.floor(value))
    if value <= 0:
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    q = value / scale
    q = math.ceil(q - 1e-9) if up else math.floor(q + 1e-9)
    return float(f"{q * scale:.12g}")


def _inside(field: Any, value: float) -> bool:
    if field.low is not None and (value <= field.low if field.low_open else value < field.low):
        return False
    return not (field.high is not None and (value >= field.high if field.high_open else value > field.high))


def _ladder(field: Any, now: float, up: bool) -> list[float]:
    integer = field.kind is int
    out = []
    for f in FACTORS:
        c = now * f if up else now / f
        c = float(math.ceil(c) if up else math.floor(c)) if integer else c
        if c != now and _inside(field, c) and c not in out:
            out.append(c)
    return out


class _Search:
    """Plans of the setting with one key changed, within the CPU budget."""

    def __init__(self, plan_with: Callable[[Mapping[str, Any]], Any], seconds: float) -> None:
        self.plan_with, self.deadline, self.stopped = plan_with, time.thread_time() + seconds, False

    def informative(self, key: str, value: Any, *more: tuple[str, Any]) -> Any:
        """The plan with ``key`` = ``value`` (and the ``more`` pairs) when it is informative, else None (a
        refused setting too)."""
        if time.thread_time() > self.deadline:
            self.stopped = True
            return None
        try:
            plan = self.plan_with(dict([(key, value), *more]))
        except FedboundError:
            return None
        return None if vacuous(plan) else plan

    def number(self, key: str, field: Any, now: float, up: bool) -> tuple[float | None, Any, float | None]:
        """(the smallest change found, its plan, the farthest value tried)."""
        integer = field.kind is int
        last, tried = now, None
        for c in _ladder(field, now, up):
            tried = c
            plan = self.informative(key, int(c) if integer else c)
            if plan is None:
                last = c
                continue
            good = c
            for _ in range(BISECTIONS):  # between the last vacuous value and the first informative one
                mid = math.sqrt(last * good) if last > 0 and good > 0 else (last + good) / 2
                mid = float(math.ceil(mid) if up else math.floor(mid)) if integer else mid
                if mid in (last, good):
                    break
                found = self.informative(key, int(mid) if integer else mid)
                last, good, plan = (last, mid, found) if found is not None else (mid, good, plan)
            nice = _nice(good, up, integer)
            if nice != good and _inside(field, nice):
                found = self.informative(key, int(nice) if integer else nice)
                good, plan = (nice, found) if found is not None else (good, plan)
            return good, plan, tried
        return None, None, tried


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _design(plan: Any) -> str:
    rec = plan.recommendation
    return f"T = {rec.T}, bound {rec.bound:.4g}"


def remedies(paper: Any, values: Mapping[str, Any], plan_with: Callable[[Mapping[str, Any]], Any],
             seconds: float = CPU_SECONDS) -> dict[str, Any]:
    """What to change so that the recommendation is informative (module docstring): ``changes`` (each
    lever that works alone: key, now, to, the words and the design it gets; when none does, the changes of
    the explorer's starting setting together, if they work), ``not_enough`` (levers tried without
    success, how far), ``text`` (all of it in words) and ``complete`` (False when the CPU budget stopped
    the search).  ``values``: the setting (documented defaults filled in); ``plan_with({key: value})``: the
    plan of the setting with those keys changed (None: left unset)."""
    search = _Search(plan_with, seconds)
    changes, not_enough = [], []
    section = paper.config_section
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, how in paper.levers.items():
            field, now = section.field(key), values.get(key)
            if how in ("up", "down") and field.kind in (int, float):
                if not isinstance(now, int | float) or isinstance(now, bool) or now <= 0:
                    continue
                to, plan, tried = search.number(key, field, float(now), how == "up")
                verb = "raise" if how == "up" else "lower"
                if to is not None:
                    more = "or more" if how == "up" else "or less"
                    changes.append({"key": key, "now": now, "to": int(to) if field.kind is int else to,
                                    "text": f"{verb} {key} from {_shown(now)} to {_shown(to)} {more} "
                                            f"({_design(plan)})"})
                elif tried is not None and not search.stopped:
                    tried = int(tried) if field.kind is int else tried
                    doing = "raising" if how == "up" else "lowering"
                    not_enough.append({"key": key, "tried": tried,
                                       "text": f"{doing} {key} (still vacuous at {key} = {_shown(tried)})"})
                continue
            if how is None and now is None or how is not None and now == how:
                continue  # already unset, or already this choice
            plan = search.informative(key, how)
            if plan is not None:
                words = f"leave {key} unset, so the planner searches it" if how is None else \
                    f"set {key} = {_shown(how)}"
                changes.append({"key": key, "now": now, "to": how, "text": f"{words} ({_design(plan)})"})
            elif not search.stopped:
                words = f"leaving {key} unset" if how is None else f"setting {key} = {_shown(how)}"
                not_enough.append({"key": key, "tried": how, "text": f"{words} (still vacuous)"})
        if not changes and paper.explore:
            changes.extend(_together(search, paper.explore, values))
    return {"changes": changes, "not_enough": not_enough, "complete": not search.stopped,
            "text": _words(changes, not_enough, search.stopped, seconds)}


def _together(search: _Search, start: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict]:
    """The explorer's starting changes (the registry's ``explore``), all at once, when they make this
    setting informative."""
    pairs = [(k, v) for k, v in start.items() if values.get(k) != v]
    plan = search.informative(*pairs[0], *pairs[1:]) if pairs else None
    if plan is None:
        return []
    words = " and ".join(f"{k} unset" if v is None else f"{k} = {_shown(v)}" for k, v in pairs)
    return [{"key": "+".join(k for k, _ in pairs), "now": {k: values.get(k) for k, _ in pairs},
             "to": dict(pairs), "text": f"change {words} together, as the page's starting setting does "
                                        f"({_design(plan)})"}]


def _words(changes: list[dict], not_enough: list[dict], stopped: bool, seconds: float) -> str:
    if changes:
        text = ("To get an informative recommendation (each change checked by planning it): "
                + "; or ".join(c["text"] for c in changes) + ".")
    else:
        text = "No single change of the parameters that move this bound makes it informative."
    if not_enough:
        text += " Not enough alone: " + "; ".join(c["text"] for c in not_enough) + "."
    if stopped:
        text += f" (The search stopped after its {seconds:g} CPU s; other changes may also work.)"
    return text
