"""Figures of a paper's bound against one variable: one generic driver over a paper's ``PLOTS``.

A paper's plots module defines ``PLOTS = {vs: draw}`` with ``draw(ax, settings, variant) -> title``: it draws
labelled lines on a matplotlib axis.  :func:`draw_figure` makes the figure (Agg backend: headless), adds the
legend and title, writes PNG and SVG, and returns the plotted curves as data (what ``fedbound plot --json``
prints), so analysts can re-plot.  :func:`figure_data` draws the same figure without writing anything and
returns all of it as data (curves, marked points, reference lines, axis labels and scales): what the design
explorer re-draws in the browser.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ParameterError

__all__ = ["draw_figure", "render_figure", "figure_data", "plotted_curves", "masked"]

Draw = Callable[[Any, Mapping[str, Any], str], str]


def plotted_curves(ax: Any) -> list[dict[str, Any]]:
    """The labelled curves drawn on ``ax`` as data: ``label``, ``x``, ``y`` (``None`` where the bound is
    undefined or its hypotheses fail, the gaps of the figure)."""
    curves = []
    for line in ax.get_lines():
        label = line.get_label()
        if label.startswith("_") or len(line.get_xdata()) < 2:
            continue
        curves.append({"label": label, "x": np.asarray(line.get_xdata(), dtype=float).tolist(),
                       "y": _finite(line.get_ydata())})
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


def _finite(values: Any) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def _style(line: Any) -> dict[str, Any]:
    from matplotlib.colors import to_hex

    dash = {"--": "dash", ":": "dot", "-.": "dashdot"}.get(line.get_linestyle(), "solid")
    return {"color": to_hex(line.get_color()), "dash": dash}


def _axis_lines(ax: Any) -> dict[str, list[dict[str, Any]]]:
    """Every line on ``ax``, sorted: ``curves`` (labelled lines of two or more points, as
    :func:`plotted_curves`), ``points`` (markers: optima and the like), ``hlines``/``vlines`` (reference
    lines spanning the axis, e.g. Theta "vacuous above")."""
    out: dict[str, list[dict[str, Any]]] = {"curves": [], "points": [], "hlines": [], "vlines": []}
    for line in ax.get_lines():
        label = line.get_label()
        label = "" if label.startswith("_") else label
        transform = line.get_transform()
        if transform is ax.get_yaxis_transform():
            out["hlines"].append({"label": label, "y": float(line.get_ydata()[0]), **_style(line)})
        elif transform is ax.get_xaxis_transform():
            out["vlines"].append({"label": label, "x": float(line.get_xdata()[0]), **_style(line)})
        elif len(line.get_xdata()) < 2 or line.get_linestyle() in ("None", "", " "):
            out["points"].append({"label": label, "x": _finite(line.get_xdata()),
                                  "y": _finite(line.get_ydata()), **_style(line)})
        elif label:
            out["curves"].append({"label": label, "x": _finite(line.get_xdata()),
                                  "y": _finite(line.get_ydata()), **_style(line)})
    return out


def figure_data(plots: Mapping[str, Draw], settings: Mapping[str, Any], vs: str,
                variant: str = "paper") -> dict[str, Any]:
    """``plots[vs]`` drawn for ``settings`` (nothing written) and returned as data: ``vs``, ``title``,
    ``xlabel``/``ylabel``, ``xscale``/``yscale`` ("linear" or "log"), ``ylim`` (None: automatic), the lines of
    :func:`_axis_lines` and the ``notes`` written on the axis (text, position, e.g. "T* = 12", and ``dx``,
    ``dy``: the offset in points of the text's corner from its point, placed by :func:`_place_notes` so that
    no two notes overlap)."""
    if vs not in plots:
        raise ParameterError("vs", vs, "one of " + ", ".join(plots))
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")  # no pyplot: no global state, thread-safe
    ax = fig.add_subplot()
    title = plots[vs](ax, {k: v for k, v in settings.items() if v is not None}, variant)
    if ax.texts:  # the notes' offsets where they overlap nothing (points): the browser shifts them alike
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        _place_notes(fig, ax, FigureCanvasAgg(fig), line_labels=True)
    bottom, top = ax.get_ylim()
    return {"vs": vs, "variant": variant, "title": title, "xlabel": ax.get_xlabel(),
            "ylabel": ax.get_ylabel(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
            "ylim": [float(bottom), float(top)] if not ax.get_autoscaley_on() else None,
            **_axis_lines(ax),
            "notes": [{"text": t.get_text(), "x": float(t.xy[0]), "y": float(t.xy[1]),
                       **({"dx": float(t.xyann[0]), "dy": float(t.xyann[1])} if hasattr(t, "xyann") else {})}
                      for t in ax.texts if hasattr(t, "xy")]}


def render_figure(plots: Mapping[str, Draw], settings: Mapping[str, Any], vs: str,
                  variant: str = "paper") -> Any:
    """``plots[vs]`` for ``settings`` on a new matplotlib Figure (no pyplot state), with the title (wrapped
    to the figure's width), grid and legend, the legend outside the axes below them so that it never covers
    a curve or a label on the axes: what :func:`draw_figure` writes."""
    if vs not in plots:
        raise ParameterError("--vs", vs, "one of " + ", ".join(plots))
    import textwrap

    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    title = plots[vs](ax, {k: v for k, v in settings.items() if v is not None}, variant)
    ax.set_title("\n".join(textwrap.wrap(title, 95)), fontsize=9)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    for ncols in (3, 2, 1):  # the most columns whose legend fits the figure's width
        ncols = min(ncols, len(handles))
        if not handles:
            break
        fig.set_figheight(4.2 + 0.19 * math.ceil(len(handles) / ncols))
        legend = fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=ncols)
        canvas.draw()
        if legend.get_window_extent().width <= fig.bbox.width - 4 or ncols == 1:
            break
        legend.remove()
    _place_notes(fig, ax, canvas)
    return fig


def _place_notes(fig: Any, ax: Any, canvas: Any, line_labels: bool = False) -> None:
    """Move each annotation of ``ax`` (e.g. "T* = 12", "recommended T = 40") to the first of a few offsets
    around its point where its box stays inside the axes and overlaps no other label (texts, tick labels,
    the title and the legend); annotations are left out of the layout so that moving them moves nothing
    else.  ``line_labels``: also keep clear of each labelled horizontal line's label written at its right
    end (where the browser's figures write it)."""
    notes = [t for t in ax.texts if hasattr(t, "xyann") and t.get_visible()]
    if not notes:
        return
    for t in notes:
        t.set_in_layout(False)
    fig.draw_without_rendering()  # the layout and every extent, without painting pixels
    r = canvas.get_renderer()
    area = ax.get_window_extent(r)
    fixed = [lg.get_window_extent(r) for lg in fig.legends]
    fixed += [x.get_window_extent(r) for x in (ax.title, ax.xaxis.label, ax.yaxis.label) if x.get_text()]
    if line_labels:
        for line in ax.get_lines():
            if line.get_transform() is ax.get_yaxis_transform() and not line.get_label().startswith("_"):
                tmp = ax.text(1, line.get_ydata()[0], line.get_label(), transform=ax.get_yaxis_transform(),
                              ha="right", va="bottom", fontsize=9)
                fixed.append(tmp.get_window_extent(r).expanded(1.05, 1.2))
                tmp.remove()
    placed: list[Any] = []
    pt = fig.dpi / 72.0
    for t in notes:
        if not t._check_xy(r):  # its point is off the axes: not drawn
            continue
        box = t.get_window_extent(r)
        w, h = box.width / pt, box.height / pt
        x0, y0 = t.xyann
        options = [(x0, y0)] + [(dx, dy) for dy in (6, -6 - h, 6 + h, -6 - 2 * h, 6 + 2 * h, -6 - 3 * h,
                                                      6 + 3 * h, -6 - 4 * h)
                                for dx in (4, -4 - w, -w / 2)]
        for dx, dy in options:
            t.xyann = (dx, dy)
            b = t.get_window_extent(r)
            inside = b.x0 >= area.x0 and b.x1 <= area.x1 and b.y0 >= area.y0 and b.y1 <= area.y1
            if inside and not any(b.overlaps(o) for o in fixed + placed):
                break
        else:
            t.xyann = (x0, y0)
        placed.append(t.get_window_extent(r))


def draw_figure(plots: Mapping[str, Draw], settings: Mapping[str, Any], vs: str, out: str | Path,
                variant: str = "paper") -> tuple[list[Path], list[dict[str, Any]]]:
    """Draw ``plots[vs]`` for ``settings`` (:func:`render_figure`), write ``out`` as .png and .svg; return
    the paths and curves."""
    if vs not in plots:
        raise ParameterError("--vs", vs, "one of " + ", ".join(plots))
    paths = _writable(Path(out))
    fig = render_figure(plots, settings, vs, variant)
    curves = plotted_curves(fig.axes[0])
    for p in paths:
        fig.savefig(p, dpi=130)
    return paths, curves
