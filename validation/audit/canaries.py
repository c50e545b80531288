"""The canaries of an audit and the search for the worst participant.

Record level (:func:`record_canary`): one record of a client replaced (``worst``: the largest noise-free
upload shift found by ``fedbound.training.sensitivity.probe(crafted=True)``: label flips, swapped
features, crafted large-norm outliers along principal, mean, gradient-aligned and random directions with
every label, amplified records; ``flip``: record 0 relabelled; ``given``: record 0 replaced by training
record ``canary_record``).  Client level (:func:`client_canary`): ALL its records replaced (``flip``: all
relabelled; ``given``: copies of one record; ``worst``: the largest shift among ``flip``, mirrored clients
and whole clients made of one searched record).

Every participant (:func:`search`): the full search runs on the smallest participant (the largest
per-record sensitivity of most plans); every other participant tries its own natural records (flips and
swaps of ``NATURAL_RECORDS`` records) and the search's ``SHARED`` best crafted records in place of its record
0 (at client level: its flipped and mirrored selves and clients made of the shared records).  Each
participant's canary is its largest shift; the *target* is the participant whose shift is the largest
fraction of the sensitivity the ledger assumes for it (ties: the smallest), the one closest to (or past) its
bound.  Every participant's canary then gets its own shift check (``fedbound.training.trials.
coupled_shifts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["Canary", "record_canary", "client_canary", "search", "worst", "classes", "CANARY_SEARCH",
           "NATURAL_RECORDS", "SHARED"]

NATURAL_RECORDS = 1
"""Records per non-smallest participant whose flips are tried."""
SHARED = 4
"""The full search's best crafted records every other participant tries."""


@dataclass(frozen=True)
class Canary:
    """One participant's canary: its change, the noise-free shift it makes, the sensitivity the ledger
    assumes for it, the search's result (the full search only) and the largest natural shift."""

    client: int
    change: Any
    shift: float
    sensitivity: float
    found: Any = None

    @property
    def ratio(self) -> float:
        return self.shift / self.sensitivity if self.sensitivity > 0 else float("inf")


def classes(model: Any) -> int:
    """Classes of the model's labels (1: regression)."""
    return model.n_outputs if model.loss != "squared" else 1


def record_canary(kind: str, s: Any, prepared: Any, starts: Any, probe_records: int,
                  canary_record: int | None, seed: int, client: int | None = None) -> tuple[Any, Any]:
    """One record of ``client`` (default the target) replaced and, for ``worst``, the search's result."""
    from fedbound.training.sensitivity import Replacement, label_flips, probe

    client = s.target if client is None else client
    x0 = s.data.x[client, 0].cpu().numpy()
    y0 = s.data.y[client, 0].cpu().item()
    if kind == "flip":
        return Replacement(0, x0, label_flips(y0, classes(s.model))[0]), None
    if kind == "given":
        n = len(s.dataset.y_train)
        j = n - 1 if canary_record is None else int(canary_record)
        if not 0 <= j < n:
            raise ConfigError(f"--canary-record = {j} is outside its valid range integer in [0, {n - 1}]")
        return Replacement(0, np.asarray(s.dataset.x_train[j]), s.dataset.y_train[j].item()), None
    found = probe(prepared, s.model, s.data, client, starts, records=probe_records, options=s.options,
                  crafted=True, seed=seed)
    return found.worst, found


def _labels(ys: np.ndarray, n_classes: int) -> list:
    """Labels a crafted client's records all take: each class, or the natural extremes (regression)."""
    return list(range(n_classes)) if n_classes > 1 else [float(ys.max()), float(ys.min())]


def _client_candidates(s: Any, client: int, shared: list) -> list[tuple]:
    from fedbound.training.sensitivity import Replacement, label_flips

    n = int(s.data.sizes[client])
    xs, ys = s.data.x[client, :n].cpu().numpy(), s.data.y[client, :n].cpu().numpy()
    flips = tuple(Replacement(i, xs[i], label_flips(ys[i].item(), classes(s.model))[0]) for i in range(n))
    mirrored = [tuple(Replacement(i, -scale * xs[i], y) for i in range(n))
                for scale in (1.0, 10.0) for y in _labels(ys, classes(s.model))]
    return [flips, *mirrored, *(tuple(Replacement(i, one.x, one.y) for i in range(n)) for one in shared)]


def client_canary(kind: str, s: Any, prepared: Any, starts: Any, probe_records: int,
                  canary_record: int | None, seed: int, client: int | None = None) -> tuple[Any, Any]:
    """Every record of ``client`` (default the target) replaced (a tuple of ``Replacement``; module
    docstring) and, for ``worst``, the search's result."""
    from fedbound.training.sensitivity import Replacement, probe, shifts

    client = s.target if client is None else client
    n = int(s.data.sizes[client])
    if kind == "flip":
        return _client_candidates(s, client, [])[0], None
    if kind == "given":
        one = record_canary(kind, s, prepared, starts, probe_records, canary_record, seed, client)[0]
        return tuple(Replacement(i, one.x, one.y) for i in range(n)), None
    found = probe(prepared, s.model, s.data, client, starts, records=probe_records, options=s.options,
                  crafted=True, seed=seed)
    candidates = _client_candidates(s, client, list(found.replacements))
    moved = shifts(prepared, s.model, s.data, client, candidates, starts, options=s.options).max(axis=0)
    return candidates[int(np.argmax(moved))], found


CANARY_SEARCH = {"record": record_canary, "client": client_canary}


def _others(kind: str, level: str, s: Any, prepared: Any, starts: Any, client: int, found: Any,
            canary_record: int | None, seed: int) -> tuple[Any, float]:
    """A non-smallest participant's canary and its shift (module docstring)."""
    from fedbound.training.sensitivity import probe, shifts

    if kind != "worst":
        change, _ = CANARY_SEARCH[level](kind, s, prepared, starts, NATURAL_RECORDS, canary_record, seed,
                                         client)
        return change, float(shifts(prepared, s.model, s.data, client, [change], starts,
                                    options=s.options).max())
    best = np.argsort(-found.shifts.max(axis=0))[:SHARED]
    shared = [found.replacements[int(i)] for i in best]
    if level == "client":
        candidates = _client_candidates(s, client, shared)
        moved = shifts(prepared, s.model, s.data, client, candidates, starts, options=s.options).max(axis=0)
    else:
        tried = probe(prepared, s.model, s.data, client, starts, records=NATURAL_RECORDS, options=s.options,
                      extra=shared)
        candidates, moved = list(tried.replacements), tried.shifts.max(axis=0)
    k = int(np.argmax(moved))
    return candidates[k], float(moved[k])


def search(kind: str, level: str, s: Any, prepare: Callable[[int], Any], starts: Any, probe_records: int,
           canary_record: int | None, seed: int, stage: str) -> tuple[list[Canary], Any]:
    """Every participant's canary (module docstring), the smallest first, and the full search's result;
    ``prepare(client)``: the algorithm as audited with ``client`` the target; ``stage``: whose sensitivity
    (the ledger plan's at the level) ranks them."""
    from fedbound.training.sensitivity import shifts

    order = sorted(s.participants.tolist(), key=lambda c: (int(s.data.sizes[c]), c))
    sens = s.ledger_plan.stage_sensitivity(stage)
    first = order[0]
    prepared = prepare(first)
    change, found = CANARY_SEARCH[level](kind, s, prepared, starts, probe_records, canary_record, seed, first)
    if found is not None and level == "record":
        shift = found.max_shift
    else:
        shift = float(shifts(prepared, s.model, s.data, first, [change], starts, options=s.options).max())
    out = [Canary(first, change, shift, float(sens[first]), found)]
    for client in order[1:]:
        change, shift = _others(kind, level, s, prepare(client), starts, client, found, canary_record, seed)
        out.append(Canary(client, change, shift, float(sens[client])))
    return out, found


def worst(canaries: list[Canary]) -> Canary:
    """The participant whose shift is the largest fraction of its sensitivity (ties, within the float
    rounding of a noise-free shift, 1e-4: the first, i.e. the smallest)."""
    top = max(c.ratio for c in canaries)
    return next(c for c in canaries if c.ratio >= top * (1 - 1e-4))
