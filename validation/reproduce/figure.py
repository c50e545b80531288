"""The figure of a reproduction: one curve per case, the mean over seeds with its min-max band.

:func:`curves` turns a reproduction's tidy table into the curves (shared by the static figure here and the
report's interactive one); :func:`draw` writes the PNG and the SVG with matplotlib.  With ``x = "round"``
each case is a curve of ``metric`` against the round; otherwise each run contributes the mean of ``metric``
over its last rounds, plotted against the label ``x`` (one curve per value of the other labels; bars when
``x`` is not numeric).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Curve", "curves", "draw"]

TAIL = 3
"""Rounds averaged at the end of each run when the x axis is a label (the claims' default tail)."""


@dataclass(frozen=True)
class Curve:
    """One curve: its name, the x values, and the mean, smallest and largest value over seeds at each x."""

    name: str
    x: list[Any]
    mean: list[float]
    low: list[float]
    high: list[float]


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in values)


def curves(table: Any, x: str, metric: str, labels: Sequence[str]) -> list[Curve]:
    """The curves of a reproduction table (module docstring); runs without ``metric`` are left out.  A
    table without a ``key`` column (a formula's points, :class:`~fedbound.validation.reproduce.bound.
    BoundFigure`) is plotted as it is: one row per point."""
    from fedbound.validation.reproduce.claims import case_name, run_values

    labels = list(labels)
    if "key" not in table.columns:  # a formula's curve: every row is one point already
        per_run = table.dropna(subset=[metric]).assign(value=lambda t: t[metric])
        groups = [k for k in labels if k != x]
    elif x == "round":
        data = table.dropna(subset=[metric])
        groups = labels
        per_run = data.assign(value=data[metric])
    else:
        per_run = run_values(table, metric, labels, TAIL)
        groups = [k for k in labels if k != x]
    out = []
    grouped = per_run.groupby(groups, sort=False, dropna=False) if groups else [((), per_run)]
    for key, group in grouped:
        key = key if isinstance(key, tuple) else (key,)
        name = case_name(dict(zip(groups, key, strict=True))) or metric
        stats = group.groupby(x, sort=True)["value"].agg(["mean", "min", "max"])
        out.append(Curve(name, [v.item() if hasattr(v, "item") else v for v in stats.index],
                         stats["mean"].tolist(), stats["min"].tolist(), stats["max"].tolist()))
    return out


def draw(target: Any, table: Any, png: Path) -> dict[str, Path]:
    """The figure of ``target`` from its table, as ``png`` and the same name with ``.svg``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn = curves(table, target.x, target.metric, target.labels)
    categorical = not _numeric([v for c in drawn for v in c.x])
    width = 0.8 / max(len(drawn), 1)
    for i, c in enumerate(drawn):
        if categorical:
            pos = np.arange(len(c.x)) + i * width
            err = [np.subtract(c.mean, c.low), np.subtract(c.high, c.mean)]
            ax.bar(pos, c.mean, width, yerr=err, label=c.name, capsize=3)
            ax.set_xticks(np.arange(len(c.x)) + (len(drawn) - 1) * width / 2, [str(v) for v in c.x])
        else:
            dots = target.x != "round" and len(c.x) <= 30
            line, = ax.plot(c.x, c.mean, marker="o" if dots else None, label=c.name)
            ax.fill_between(c.x, c.low, c.high, alpha=0.2, color=line.get_color())
    ax.set_xlabel(target.x)
    ax.set_ylabel(target.metric.replace("_", " "))
    ax.set_title(textwrap.fill(f"{target.paper} {target.figure}: {target.title}", 90), fontsize=8)
    if len(drawn) > 1:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    png = Path(png)
    svg = png.with_suffix(".svg")
    fig.savefig(png, dpi=120)
    fig.savefig(svg)
    plt.close(fig)
    return {"png": png, "svg": svg}
