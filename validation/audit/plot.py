"""The audit's figure: per adversary view, the two score histograms (runs on D and on D') and the ROC of the
held-out half with the boundary every (eps, delta)-DP mechanism's ROC stays under, at the reported eps:
``TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))`` (Kairouz, Oh & Viswanath 2015, Thm 2.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["dp_roc_bound", "draw_audit"]


def dp_roc_bound(fpr: np.ndarray, eps: float, delta: float) -> np.ndarray:
    """The largest TPR an (eps, delta)-DP mechanism allows at each FPR (module docstring)."""
    fpr = np.asarray(fpr, float)
    bound = np.minimum(np.exp(eps) * fpr + delta, 1.0 - np.exp(-eps) * (1.0 - delta - fpr))
    return np.clip(bound, 0.0, 1.0)


def draw_audit(result: Any, out: str | Path) -> list[Path]:
    """Write ``out`` (.png and .svg): one row per view of ``result`` (an AuditResult kept with its scores)."""
    import matplotlib

    from fedbound.validation.audit.stats import roc_curve
    from fedbound.validation.reproduce.plots import _writable

    paths = _writable(Path(out))
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = result.views
    fig, axes = plt.subplots(len(views), 2, figsize=(9, 3.2 * len(views)), layout="constrained",
                             squeeze=False)
    try:
        for (hist, roc), v in zip(axes, views, strict=True):
            out_s, in_s = np.asarray(v.scores_out), np.asarray(v.scores_in)
            bins = np.histogram_bin_edges(np.concatenate([out_s, in_s]), bins=50)
            hist.hist(out_s, bins=bins, alpha=0.55, label="D (canary out)")
            hist.hist(in_s, bins=bins, alpha=0.55, label="D' (canary in)")
            hist.set_title(f"{v.view} ({v.kind}): scores", fontsize=10)
            hist.set_xlabel("likelihood-ratio score")
            hist.legend(fontsize=8)
            fpr, tpr = roc_curve(out_s, in_s)
            grid = np.linspace(0, 1, 201)
            roc.plot(fpr, tpr, label=f"measured (eps_lb = {v.epsilon_lower:.2f})")
            roc.plot(grid, dp_roc_bound(grid, v.epsilon_reported, result.delta), "--",
                     label=f"DP bound at reported eps = {v.epsilon_reported:.2f}")
            roc.set_xlabel("false positive rate")
            roc.set_ylabel("true positive rate")
            roc.set_title(f"{v.view}: ROC (held-out half)", fontsize=10)
            roc.legend(fontsize=8)
            roc.grid(alpha=0.3)
        verdict = result.verdict if len(result.verdict) <= 90 else result.verdict[:87] + "..."
        fig.suptitle(f"fedbound audit {result.paper}: {verdict}", fontsize=11)
        for p in paths:
            fig.savefig(p, dpi=110)
    finally:
        plt.close(fig)
    return paths
