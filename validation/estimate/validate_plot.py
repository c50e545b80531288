"""The figure of ``fedbound validate``: measured gap against the swept variable, with the bound.

One axis: the measured mean gap ``F(w_T) - F*`` with its 95 % band over seeds (and every run as a dot), the
raw bound with the paper's noise and with tight noise (dashed where defined), the calibrated prediction
(fitted points filled, held-out points open), the predicted optimum (vertical dotted line) and the measured
best (star).  Where the bound's hypotheses fail at the measured constants, the reason is written on the axes
instead.  Log-scaled y when the curves span more than two decades.  PNG and SVG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["draw"]


def draw(result: Any, out: str | Path) -> dict[str, str]:
    """Draw ``result`` (a :class:`~fedbound.validation.estimate.validate.ValidationResult`) to ``out`` (.png,
    .svg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    vs = result.vs
    x = np.array([p[vs] for p in result.measured])
    mean = np.array([p["mean"] for p in result.measured])
    lo = np.array([np.nan if p["ci_low"] is None else p["ci_low"] for p in result.measured], dtype=float)
    hi = np.array([np.nan if p["ci_high"] is None else p["ci_high"] for p in result.measured], dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    try:
        ax.fill_between(x, np.where(np.isfinite(lo), lo, mean), np.where(np.isfinite(hi), hi, mean),
                        color="C0", alpha=0.2, label="measured, 95 % interval over seeds")
        ax.plot(x, mean, "o-", color="C0", label=r"measured $F(w_T) - F^*$ (mean)")
        positive = [mean[mean > 0]]
        for name, style, color in (("paper", "-", "C3"), ("tight", "--", "C1")):
            y = np.asarray([np.nan if v is None else v for v in result.bound[name]], dtype=float)
            if np.isfinite(y).any():
                ax.plot(x, y, style, color=color, label=f"bound, {name} noise ({result.theorem})")
                positive.append(y[np.isfinite(y) & (y > 0)])
        cal = np.asarray([np.nan if v is None else v for v in result.calibrated["prediction"]], dtype=float)
        if np.isfinite(cal).any():
            ax.plot(x, cal, ":", color="C2", label="calibrated prediction (2 scale factors)")
            held = np.asarray(result.calibrated["held_out"], dtype=int)
            fit = np.asarray(result.calibrated["fit_points"], dtype=int)
            ax.plot(x[fit], cal[fit], "s", color="C2", ms=5, label="fitted on")
            ax.plot(x[held], cal[held], "s", mfc="none", color="C2", ms=7, label="predicted (held out)")
            positive.append(cal[np.isfinite(cal) & (cal > 0)])
        if result.verdicts["holds"]["status"] == "not applicable":
            import textwrap

            ax.text(0.98, 0.02, "bound not drawn: " + textwrap.fill(result.verdicts["holds"]["text"], 60),
                    transform=ax.transAxes, fontsize=7, va="bottom", ha="right", color="C3")
        opt = result.verdicts["optimum"]
        if opt["predicted"] is not None:
            ax.axvline(opt["predicted"], color="C3", ls=":", lw=1,
                       label=f"{vs}* predicted = {opt['predicted']:g}")
        best = int(np.argmin(mean))
        ax.plot([x[best]], [mean[best]], "*", color="k", ms=12, label=f"{vs} measured best = {x[best]:g}")
        values = np.concatenate([v for v in positive if len(v)])
        if len(values) and values.max() / max(values.min(), 1e-300) > 100:
            ax.set_yscale("log")
        ax.set_xlabel(vs)
        ax.set_ylabel(r"$F(w_T) - F^*$")
        ax.set_title(f"{result.paper}: predicted vs measured over {vs} ({result.seeds} seeds per point)",
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        paths = {"png": out.with_suffix(".png"), "svg": out.with_suffix(".svg")}
        for p in paths.values():
            fig.savefig(p, dpi=130)
    finally:
        plt.close(fig)
    return {k: str(v) for k, v in paths.items()}
