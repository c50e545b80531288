"""One code path from a paper's setting to its Plan: ``fedbound plan`` and ``fedbound report`` both call
it."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any

__all__ = ["plan_for", "example_overrides"]


def plan_for(paper: Any, setting: Any, variant: str = "paper", check: bool = False) -> Any:
    """The registered planner's Plan for ``paper`` (a :class:`fedbound.registry.Paper`) on ``setting`` (its
    :meth:`~fedbound.registry.Paper.load_setting`); the setting's assumed and measured keys and its notes
    are recorded in the plan, and every validity problem is in ``plan.warnings`` (printed once) instead of
    raised as a Python warning.  ``check``: the planner runs its certificate's full independent check
    (``fedbound plan --check``; planners take ``check=`` as a keyword)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        planner = paper.load("planner")
        takes_check = "check" in inspect.signature(planner).parameters
        result = planner(setting.values, variant, check=True) if check and takes_check \
            else planner(setting.values, variant)
    return dataclasses.replace(result, assumed=setting.assumed, measured=setting.measured,
                               warnings=(*setting.notes, *result.warnings))


def example_overrides(paper: Any) -> list[str]:
    """The paper's registered example (its own experiment) as ``--set KEY=VALUE`` overrides."""
    from fedbound.validation.reproduce import toml_literal

    return [f"{k}={toml_literal(v)}" for k, v in paper.example.items()]
