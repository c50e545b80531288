"""One code path from a paper's setting to its Plan: ``fedbound plan`` and ``fedbound report`` both call
it."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

__all__ = ["plan_for", "example_overrides"]


def plan_for(paper: Any, setting: Any, variant: str = "paper") -> Any:
    """The registered planner's Plan for ``paper`` (a :class:`fedbound.registry.Paper`) on ``setting`` (its
    :meth:`~fedbound.registry.Paper.load_setting`); the setting's assumed and measured keys and its notes
    are recorded in the plan, and every validity problem is in ``plan.warnings`` (printed once) instead of
    raised as a Python warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = paper.load("planner")(setting.values, variant)
    return dataclasses.replace(result, assumed=setting.assumed, measured=setting.measured,
                               warnings=(*setting.notes, *result.warnings))


def example_overrides(paper: Any) -> list[str]:
    """The paper's registered example (its own experiment) as ``--set KEY=VALUE`` overrides."""
    from fedbound.validation.reproduce import toml_literal

    return [f"{k}={toml_literal(v)}" for k, v in paper.example.items()]
