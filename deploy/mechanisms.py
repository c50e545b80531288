"""Deploy-level mechanisms: what ``fedbound flower NAME`` deploys besides the registry's papers.

The deploy code is registry-generic: it reads a paper's config section and recipe
(``fedbound.validation.recipes.runner.prepare_run``) and runs the recipe's algorithm on Flower. A mechanism
that is no paper of the registry (no theorems, claims or figures: the completeness tests run over every
registered paper) offers the same two things (:class:`fedbound.deploy.dpfedavg.Mechanism`) and is named here;
where its server side is a Flower strategy rather than fedbound's own aggregation, :data:`FLOWER_AGGREGATION`
names the function that aggregates a round's uploads (``fedbound.deploy.flower_server``).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MECHANISMS", "FLOWER_AGGREGATION", "NOT_DEPLOYED", "mechanism", "lookup", "flower_aggregation",
           "deployable_names", "not_deployed"]

MECHANISMS = {"dpfedavg": "fedbound.deploy.dpfedavg:MECHANISM"}
"""Name -> the mechanism object (``module:attribute``)."""

FLOWER_AGGREGATION = {"dpfedavg": "fedbound.deploy.flower_dpfedavg:aggregate"}
"""Name -> ``aggregate(runner, replies)``: the round's aggregate (and server noise) on Flower's side."""


NOT_DEPLOYED = {
    "wpfl": (
        "its mechanism is the noised model quantized to R bits and sent over the OFDMA subchannel its "
        "scheduler assigns (Kuhn-Munkres matching at full power), whose bit errors are part of what it "
        "computes (WPFL, Zhao et al. 2025, eqs. (2), (8), (15), (18)); Flower's transport (HTTPS over TCP) "
        "delivers every bit exactly and assigns no subchannels, so the schedule would do nothing and the "
        "channel could only be emulated, as the simulator does; and each client's personalized model is "
        "per-client state the engine keeps: run it with fedbound train wpfl"),
}
"""Registry papers ``fedbound flower`` does not deploy, and why (docs/guides/flower.md, "Which papers")."""


def not_deployed(name: str) -> str | None:
    """Why ``fedbound flower`` does not deploy paper ``name`` (None: it does)."""
    return NOT_DEPLOYED.get(name)


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def mechanism(name: str) -> Any:
    """The deploy mechanism called ``name``, or None for a registry paper."""
    return _load(MECHANISMS[name]) if name in MECHANISMS else None


def lookup(name: str) -> Any:
    """The mechanism or the registry paper (``fedbound.registry.get(name, "train")``) called ``name``."""
    from fedbound.registry import get

    return mechanism(name) or get(name, "train")


def flower_aggregation(name: str) -> Any:
    """The Flower-side aggregation of mechanism ``name``; None: fedbound's weighted sum."""
    return _load(FLOWER_AGGREGATION[name]) if name in FLOWER_AGGREGATION else None


def deployable_names() -> tuple[str, ...]:
    """The papers with a recipe that fedbound flower deploys, then the deploy mechanisms."""
    from fedbound.registry import names

    return (*(n for n in names("train") if n not in NOT_DEPLOYED), *MECHANISMS)
