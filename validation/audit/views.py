"""What a paper's audit entry declares (``Paper.audit`` points to an :class:`AuditViews`), and
:func:`without`, the shallow copy entries use to prepare an algorithm for the audit."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound.errors import ParameterError

__all__ = ["AuditViews", "without", "LEVELS"]

LEVELS = ("record", "client")
"""Neighbouring relations the audit can build: one record of the target replaced, or all of them."""


def _same(algorithm: Any) -> Any:
    return algorithm


@dataclass(frozen=True)
class AuditViews:
    """What a paper's audit needs beyond its training recipe (``Paper.audit`` points to one).

    An entry provides:

    * ``prepare(algorithm)``: the algorithm as the audit runs it on copies of round 1's federation (e.g.
      without bookkeeping that assumes the original federation).  It must keep every privacy-relevant hook
      (``local_update``, ``upload``, ``server_update``): the audit runs them end to end;
    * ``doc``: what the audit of this paper tests;
    * ``small``: a configuration (``{section: {key: value}}``) inside the paper's assumptions that audits in
      seconds at the default trial count, with the positive control detected (the tests over the registry,
      the positive-control suite and ``make demo`` run it);
    * ``levels``: the neighbouring relations (``LEVELS``) worth auditing, the paper's own unit first;
    * ``releases``: ``{view name: release name}`` for plan views that see neither the upload nor the
      broadcast: the algorithm hands that release to the audit with
      ``fedbound.training.sensitivity.record_release(ctx, name, clients, values)``;
    * ``release_std``: ``{view name: f(plan, client, rounds) -> (rounds,) std}``, the planned std of the
      Gaussian noise in what such a view sees (default: the view's stage sigma of the client); declared,
      it is also a noise check (the release minus its noise-free value must have that std per coordinate:
      declare it only where the noise is added to the release itself, not e.g. inside local steps).

    The suite ``tests/validation/audit/test_audit_suite.py`` audits ``small`` with the bugs of
    ``tests/_audit.py`` injected into the mechanism or the ledger: each must give LEAK, the correct
    mechanism must not.

    Views of kind ``upload``/``steps`` see the target's upload, ``broadcast`` the server's output.  Every
    noise stage's input is checked against ``ledger_plan.stage_sensitivity(stage)`` of each participant
    (``fedbound.training.trials.coupled_shifts``).
    """

    prepare: Callable[[Any], Any] = _same
    doc: str = ""
    small: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    levels: tuple[str, ...] = ("record",)
    releases: Mapping[str, str] = field(default_factory=dict)
    release_std: Mapping[str, Callable[[Any, int, int], np.ndarray]] = field(default_factory=dict)
    release_sensitivity: Mapping[str, Callable[[Any, int], float]] = field(default_factory=dict)
    """``{view name: f(ledger plan, target) -> sensitivity}`` of a release that is not one stage's (e.g.
    two stages side by side: the root of the sum of their squares); default: the view's stage's."""
    prepare_target: Callable[[Any, int], Any] | None = None
    """``prepare`` for an entry that needs the audited client too (e.g. to send every copy through its
    channel); used instead of ``prepare`` when given."""
    ledger: Callable[[Any], Any] = _same
    """The plan the ledger reads under the audit's replacement relation (default: as planned; a paper
    whose ledger counts add/remove neighbours doubles its sensitivity: replace = remove + add).  Every
    sensitivity it holds is a replace-one sensitivity (what the independent epsilon reads)."""
    checked_releases: Mapping[str, str] = field(default_factory=dict)
    """``{stage: release name}``: check that stage's noise (std: the plan's stage sigma of each client) on
    that release (pairs of trials: its noise-free part cancels; other randomness only adds variance, so the
    check can miss low noise but never flags correct noise)."""

    def __post_init__(self) -> None:
        if not self.levels or not set(self.levels) <= set(LEVELS):
            raise ParameterError("AuditViews.levels", self.levels, f"a non-empty subset of {LEVELS}")

    def prepared(self, algorithm: Any, client: int) -> Any:
        """The algorithm as audited with ``client`` the target."""
        if self.prepare_target is None:
            return self.prepare(algorithm)
        return self.prepare_target(algorithm, client)


def without(algorithm: Any, **attributes: Any) -> Any:
    """A shallow copy of ``algorithm`` with ``attributes`` set (for ``AuditViews.prepare``)."""
    out = copy.copy(algorithm)
    for name, value in attributes.items():
        setattr(out, name, value)
    return out
