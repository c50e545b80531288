"""Figures of a paper's bound against one variable: one generic driver over a paper's ``PLOTS``.

A paper's plots module defines ``PLOTS = {vs: draw}`` with ``draw(ax, settings, variant) -> title``: it draws
labelled lines on a matplotlib axis.  :func:`draw_figure` makes the figure (Agg backend: headless), adds the
legend and title, writes PNG and SVG, and returns the plotted curves as data (what ``fedbound plot --json``
prints), so analysts can re-plot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ParameterError

__all__ = ["draw_figure", "plotted_curves", "masked"]

Draw = Callable[[Any, Mapping[str, Any], str], str]


def plotted_curves(ax: Any) -> list[dict[str, Any]]:
    """The labelled curves drawn on ``ax`` as data: ``label``, ``x``, ``y`` (``None`` where the bound is
    undefined or its hypotheses fail, the gaps of the figure)."""
    curves = []
    for line in ax.get_lines():
        label = line.get_label()
        if label.startswith("_") or len(line.get_xdata()) < 2:
            continue
        y = np.asarray(line.get_ydata(), dtype=float)
        curves.append({"label": label, "x": np.asarray(line.get_xdata(), dtype=float).tolist(),
                       "y": [float(v) if np.isfinite(v) else None for v in y]})
    return curves


def masked(ev: Any) -> np.ndarray:
    """A theorem evaluation's values, NaN (a gap in the figure) where undefined or a hypothesis fails."""
    ok = np.asarray(ev.defined) & np.asarray(ev.admissible)
    return np.where(ok, np.asarray(ev.value, dtype=float), np.nan)


def _writable(out: Path) -> list[Path]:
    if not str(out) or out.name in ("", ".", ".."):
        raise ParameterError("--out", str(out), "a file name such as fig.png")
    paths = [out.with_suffix(".png"), out.with_suffix(".svg")]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for p in paths:
            if p.is_dir():
                raise ParameterError("--out", str(out), "a file path, not a directory")
            with open(p, "ab"):
                pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ParameterError("--out", str(out), "a writable file path", hint=why) from None
    return paths


def draw_figure(plots: Mapping[str, Draw], settings: Mapping[str, Any], vs: str, out: str | Path,
                variant: str = "paper") -> tuple[list[Path], list[dict[str, Any]]]:
    """Draw ``plots[vs]`` for ``settings``, write ``out`` as .png and .svg; return the paths and curves."""
    if vs not in plots:
        raise ParameterError("--vs", vs, "one of " + ", ".join(plots))
    paths = _writable(Path(out))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    try:
        title = plots[vs](ax, {k: v for k, v in settings.items() if v is not None}, variant)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        curves = plotted_curves(ax)
        for p in paths:
            fig.savefig(p, dpi=130)
    finally:
        plt.close(fig)
    return paths, curves
