"""Issue 23: the labels of every paper's bound-vs-T figure do not overlap and stay inside the figure.

Each paper's ``PLOTS["T"]`` is rendered as ``fedbound plot`` writes it (:func:`render_figure`) on its example
config, drawn with the Agg renderer, and the window extent of every visible text (title, axis labels, tick
labels, annotations such as "recommended T" and "T*") and of the legend is compared pairwise."""

from __future__ import annotations

import itertools
import tomllib
import warnings
from pathlib import Path

import pytest

from fedbound import registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"nbafl": "nbafl_mnist.toml", "udp": "udp_mnist.toml", "adaptive": "adaptive_s3_plan.toml",
            "dppfl": "dppfl_mnist.toml", "wpfl": "wpfl_mnist.toml"}


def _setting(paper: str, name: str) -> dict:
    entry = registry.get(paper)
    raw = tomllib.loads((ROOT / "examples" / name).read_text())[entry.name]
    values = entry.config_section.validate(raw, name)
    return {**entry.defaults, **{k: v for k, v in values.items() if v is not None}}


def _label_boxes(fig):
    """(name, Bbox) of every visible text and the legend, after a full draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    boxes = []
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        boxes.append(("legend", legend.get_window_extent(r)))
    for ax in fig.axes:
        (x_lo, x_hi), (y_lo, y_hi) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        ticks = [t for t in ax.get_xticklabels() if x_lo <= t.get_position()[0] <= x_hi]
        ticks += [t for t in ax.get_yticklabels() if y_lo <= t.get_position()[1] <= y_hi]
        texts = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts,
                 *ticks, ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text()]
        for t in texts:
            if t.get_visible() and t.get_text().strip() and t.get_window_extent(r).width > 0:
                if hasattr(t, "xy") and not t._check_xy(r):  # an annotation whose point is off the axes
                    continue
                boxes.append((t.get_text()[:40], t.get_window_extent(r)))
    return boxes, fig.bbox


@pytest.mark.parametrize("paper", sorted(EXAMPLES))
def test_bound_vs_T_labels_do_not_overlap_or_leave_the_figure(paper):
    from fedbound.validation.reproduce.plots import render_figure

    entry = registry.get(paper)
    plots = entry.load("plots")
    if "T" not in plots:
        pytest.fail(f"{paper} has no bound-vs-T figure")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = render_figure(plots, _setting(paper, EXAMPLES[paper]), "T")
        boxes, frame = _label_boxes(fig)
    assert len(boxes) > 8
    for name, b in boxes:
        assert b.x0 >= frame.x0 - 0.5 and b.y0 >= frame.y0 - 0.5 and b.x1 <= frame.x1 + 0.5 and \
            b.y1 <= frame.y1 + 0.5, (paper, name, b, frame)
    for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
        inter_w = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        inter_h = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        assert inter_w <= 0.5 or inter_h <= 0.5, (paper, n1, n2, b1, b2)
