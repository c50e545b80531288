"""Shared helpers of the certified-plan tests (issue 23): a paper's setting as the CLI loads it, a planner
called without its Python warnings, and the exact Gaussian calibration written from Balle & Wang (scipy)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from scipy.optimize import brentq
from scipy.stats import norm

from fedbound import registry

ROOT = Path(__file__).resolve().parents[1]


def setting(paper: str, config: str | None, **over: Any) -> dict:
    """The [paper] values of ``examples/config`` (None: the registry's example), unset keys dropped."""
    from fedbound.commands.papers import _setting as load
    from fedbound.planning import example_overrides

    entry = registry.get(paper)
    st = (load(entry, ROOT / "examples" / config, []) if config
          else load(entry, None, example_overrides(entry)))
    return {**{k: v for k, v in st.values.items() if v is not None}, **over}


def quiet(planner: Any, s: dict, check: bool = False) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return planner(s, check=check)


def exact_gaussian_z(eps: float, delta: float) -> float:
    """Std of the sensitivity-1 Gaussian that is exactly (eps, delta)-DP (Balle & Wang 2018, Thm 8), by
    root finding on the closed-form delta."""
    def gap(s: float) -> float:
        return norm.cdf(0.5 / s - eps * s) - math.exp(eps) * norm.cdf(-0.5 / s - eps * s) - delta
    return brentq(gap, 1e-6, 1e4, xtol=1e-14, rtol=1e-14)
