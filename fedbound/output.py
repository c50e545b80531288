"""How commands print results: a rich table for people, one JSON object for programs.

``to_jsonable`` (in fedbound.checks, the floor every layer may use) turns dataclasses, numpy scalars/arrays,
tuples and paths into plain JSON values and refuses NaN/inf (JSON cannot carry them, and fedbound never emits
them silently): a non-finite value is a bug or an unhandled domain edge and raises, naming where it sits.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from fedbound.checks import to_jsonable

__all__ = ["to_jsonable", "print_json", "print_table", "print_warnings", "print_plan", "console"]


def print_json(obj: Any) -> None:
    """Write one JSON object to stdout (and nothing else)."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2) + "\n")


UNBOUNDED_WIDTH = 10_000
"""Console width without a terminal (output piped to a file or a program): a line of prose (a warning, a
plan's line) stays one line, whatever its length; rich's own default there is 80 columns, which cut tables
and numbers.  Tables are laid out at :data:`READABLE_WIDTH` there instead (:func:`print_table`)."""
READABLE_WIDTH = 100
"""Width of a table in piped output: its text columns wrap at word boundaries to fit, no word (so no
number) is ever split; a table whose unbreakable words need more is as wide as they need."""


def _piped() -> bool:
    """No terminal on stdout and no ``$COLUMNS``: the output goes to a file or a program."""
    import os

    return not getattr(sys.stdout, "isatty", lambda: False)() and not os.environ.get("COLUMNS", "").strip()


def console():
    """The stdout console: the terminal's width on a terminal (or ``$COLUMNS`` when set), else unbounded."""
    from rich.console import Console

    return Console(width=UNBOUNDED_WIDTH if _piped() else None)


def _cell(value: Any, digits: int) -> str:
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 6,
                caption: str | None = None) -> None:
    """A rich table on stdout; floats shown with ``digits`` significant digits.  A cell too wide for a
    narrow terminal folds onto the next line, never cut short (no digit is lost).  Piped (no terminal), the
    table is :data:`READABLE_WIDTH` wide: long notes wrap at word boundaries, and every column is at least
    as wide as its longest word, so no number is split (issue 36: a 900-column note padded every row)."""
    from rich.table import Table
    from rich.text import Text

    cells = [[_cell(v, digits) for v in row] for row in rows]
    piped = _piped()
    table = Table(title=title, caption=caption)
    words = []
    for i, col in enumerate(columns):
        column = [row[i] for row in cells if i < len(row)]
        words.append(max((len(w) for text in [str(col), *column] for w in text.split()), default=1))
        text = i == 0 or any(len(c.split()) > 2 for c in column)  # prose reads from the left, numbers right
        table.add_column(col, justify="left" if text else "right", overflow="fold",
                         min_width=words[-1] if piped else None)
    for row in cells:  # Text, not str: data such as "[paper]" must not be read as rich markup
        table.add_row(*(Text(c) for c in row))
    # the borders and padding: 3 characters per column and 1
    width = max(READABLE_WIDTH, sum(words) + 3 * len(columns) + 1) if piped else None
    console().print(table, width=width)


def _prose(con: Any, text: str, indent: str = "  ") -> None:
    """A line of a plan: one line on a terminal (rich folds it at the terminal's width); piped, wrapped at
    :data:`READABLE_WIDTH` with a hanging indent, at spaces only (no word, so no number, is split)."""
    from rich.text import Text

    if _piped():
        import textwrap

        text = textwrap.fill(text, READABLE_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_long_words=False, break_on_hyphens=False)
    else:
        text = indent + text
    con.print(Text(text), highlight=False)


def print_warnings(warnings: Sequence[str]) -> None:
    """Validity warnings after a table, one per line, in yellow."""
    con = console()
    from rich.text import Text

    for w in warnings:
        con.print(Text("warning: ", style="yellow") + Text(str(w)), highlight=False)


def _num(value: Any) -> str:
    """A number for people; a per-client or per-round array as its range."""
    import numpy as np

    if value is None:
        return "undefined"
    arr = np.asarray(value, dtype=float) if not isinstance(value, str) else None
    if arr is not None and arr.ndim:
        lo, hi = float(arr.min()), float(arr.max())
        return f"{lo:.6g} (all {arr.size})" if lo == hi else f"{lo:.6g} to {hi:.6g} ({arr.size} values)"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def print_plan(plan: Any) -> None:
    """Any paper's Plan (fedbound.scheduling.results): the recommendation first, then the paper's answer
    beside the tight one, the differences, the assumed defaults and every warning."""
    from rich.text import Text

    con = console()
    rec = plan.recommendation
    con.print(Text(f"{plan.title} (variant {plan.variant})", style="bold"), highlight=False)
    con.print(Text("Recommendation", style="bold green"), highlight=False)
    clients = f"K = {rec.K} clients per round" if rec.K is not None else "all clients every round"
    lines = [f"T = {rec.T} rounds, {clients}",
             "noise std per coordinate: " + ", ".join(f"{k} {_num(v)}" for k, v in rec.sigma.items()),
             f"predicted bound: {_num(rec.bound)}",
             f"accounting: {rec.accounting}", f"why: {rec.why}"]
    lines += [f"rests on: {p}" for p in rec.premises]
    cert = getattr(plan, "certificate", None)
    lines.append("certificate: " + (cert.line() if cert is not None else "none (this planner does not "
                                                                         "certify)"))
    for line in lines:
        _prose(con, line)
    print_table("The paper's answer and the tight one", ["quantity", "paper", "tight", "note"],
                [[r.quantity, r.paper, r.tight, r.note] for r in plan.rows], caption=plan.caption or None)
    if plan.differences:
        con.print(Text("Differences from the paper's answer", style="bold"), highlight=False)
        for d in plan.differences:
            _prose(con, f"- {d}")
    if plan.assumed:
        why = ("not measured: given in the config or documented defaults" if getattr(plan, "measured", ())
               else "documented defaults, not given")
        con.print(Text(f"assumed ({why}): " + ", ".join(plan.assumed)), highlight=False)
    if getattr(plan, "measured", ()):
        con.print(Text("measured (fedbound estimate, see the config's header): " + ", ".join(plan.measured)),
                  highlight=False)
    print_warnings(plan.warnings)
