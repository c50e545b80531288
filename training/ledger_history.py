"""A privacy ledger's state: every client's release history, stored once per distinct history.

A client's history in one view is a multiset of releases: per distinct release *key* ``(q, z, z_all, s)``
(the sampling rate, the noise multiplier the tight accountant counts, the multiplier the paper's accountant
reads for clients that sat out, ``inf`` unless it reads one, and the stage's sensitivity) the number of
releases of that key.  These are the sufficient statistics of every accountant of the ledger (the RDP curve
``sum count * RDP(q, z)``, the Gaussian sum ``sum count / z^2``, PLD's ``(q, z, count)``, the papers' sums),
so nothing else is stored: ``fedbound.training.privacy`` derives the curves from the entries when an
epsilon is asked for.

Clients with the same history in every view share one *group*.  The state is ``group_of`` (client ->
group, one small integer per client) and, per view, :class:`ViewHistory`: the sorted table of distinct keys
and each group's entries (key ids ascending, counts).  A run whose clients all release alike holds one
group whatever N is; K of N participation gives at most ``T + 1`` groups per distinct multiplier.

Recording a round (:meth:`History.record`) returns a new history (the old one is never changed: a trial of
the budget check is a history of its own that a commit adopts).  Groups are numbered in the sorted order of
their entries, so equal histories have equal states whatever the order in which they were reached (a run
resumed from a checkpoint, or accounted in a batch of runs, holds exactly the state of the run alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ViewHistory", "History", "RoundEvent", "KEY_COLUMNS"]

KEY_COLUMNS = ("q", "z", "z_all", "sensitivity")
"""The columns of a release key."""
_PAD = -1  # key id of an empty entry slot (its count is 0)


@dataclass(frozen=True)
class RoundEvent:
    """One view's releases in one round, per client: ``z`` (``inf``: no release to the tight accountant),
    ``z_all`` (kept in the key only with ``keep_all``: a paper accountant that reads every client's
    multiplier), the stage's sensitivity ``s`` (scalar or ``(N,)``), ``count`` releases each, rate ``q``."""

    name: str
    q: float
    z: np.ndarray
    z_all: np.ndarray
    s: np.ndarray
    count: int
    keep_all: bool = False


@dataclass(frozen=True)
class ViewHistory:
    """One view's entries: ``keys`` ``(E, 4)`` distinct release keys (:data:`KEY_COLUMNS`), sorted; ``ent``
    ``(G, L)`` each group's key ids, ascending, padded with -1; ``cnt`` ``(G, L)`` their release counts."""

    keys: np.ndarray
    ent: np.ndarray
    cnt: np.ndarray

    def scaled(self, scale: float) -> ViewHistory:
        """Every multiplier (z, z_all) times ``scale`` (every stage's sigma scaled by it)."""
        keys = self.keys.copy()
        keys[:, 1:3] *= scale
        return ViewHistory(keys, self.ent, self.cnt)


def _constant(values: np.ndarray) -> bool:
    return bool(len(values) == 0 or (values.min() == values.max()))


def _local_keys(event: RoundEvent, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The round's distinct keys of one view and each client's id among them (-1: no release); None when
    no client releases."""
    z_all = event.z_all if event.keep_all else np.full(n, np.inf)
    present = ~np.isinf(event.z) | ~np.isinf(z_all)
    every = bool(present.all())
    if not every and not present.any():
        return None
    z, za = (event.z, z_all) if every else (event.z[present], z_all[present])
    s = np.broadcast_to(np.asarray(event.s, dtype=np.float64), (n,))
    s = s if every else s[present]
    if _constant(z) and _constant(za) and _constant(s):
        keys = np.array([[event.q, z[0], za[0], s[0]]], dtype=np.float64)
        ids = np.zeros(n, np.int64) if every else np.where(present, 0, _PAD)
        return keys, ids
    cand = np.column_stack([np.full(len(z), float(event.q)), z, za, s])
    keys, where = np.unique(cand, axis=0, return_inverse=True)
    ids = np.full(n, _PAD, np.int64)
    ids[present] = np.asarray(where).ravel()
    return keys, ids


_SMALL = 64  # keys merged in Python below this many (numpy's unique over rows costs more for a few)


def _merge_keys(old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted distinct rows of ``old`` and ``new`` (lexicographic, by value) and where each row of
    ``old`` and of ``new`` went."""
    if len(old) + len(new) > _SMALL:
        keys, where = np.unique(np.concatenate([old, new]), axis=0, return_inverse=True)
        where = np.asarray(where).ravel()
        return keys, where[:len(old)], where[len(old):]
    rows = [tuple(r) for r in old.tolist()] + [tuple(r) for r in new.tolist()]
    distinct = sorted(set(rows))
    if len(distinct) == len(old) and rows[:len(old)] == distinct:  # nothing new: the old keys as they are
        keys = old
    else:
        keys = np.array(distinct, dtype=np.float64).reshape(-1, old.shape[1])
    position = {row: i for i, row in enumerate(distinct)}
    where = np.fromiter((position[row] for row in rows), dtype=np.int64, count=len(rows))
    return keys, where[:len(old)], where[len(old):]


def _pairs(columns: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of the per-client columns (group, then each view's round key id or -1): the rows
    ``(P, columns)`` and each client's row index."""
    n = len(columns[0])
    if all(_constant(c) for c in columns):
        return np.array([[int(c[0]) if len(c) else 0 for c in columns]], np.int64), np.zeros(n, np.int64)
    radix = [size + 1 for size in sizes]  # values -1 .. size-1 shifted to 0 .. size
    if float(np.prod(np.asarray(radix, dtype=np.float64))) < 2.0**62:
        code = np.zeros(n, np.int64)
        for col, r in zip(columns, radix, strict=True):
            code = code * r + (col + 1)
        _, first, where = np.unique(code, return_index=True, return_inverse=True)
        return np.column_stack([c[first] for c in columns]), np.asarray(where).ravel()
    rows, where = np.unique(np.column_stack(columns), axis=0, return_inverse=True)
    return rows, np.asarray(where).ravel()


def _insert(ent: np.ndarray, cnt: np.ndarray, key: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's entries with ``count`` releases of key ``key[p]`` added (-1: none)."""
    hit = (ent == key[:, None]) & (key[:, None] >= 0)
    cnt = cnt + hit * float(count)
    new = (key >= 0) & ~hit.any(axis=1)
    if not new.any():
        return ent, cnt
    ent = np.concatenate([ent, np.where(new, key, _PAD)[:, None]], axis=1)
    cnt = np.concatenate([cnt, np.where(new, float(count), 0.0)[:, None]], axis=1)
    order = np.argsort(np.where(ent < 0, np.iinfo(np.int64).max, ent), axis=1, kind="stable")
    return np.take_along_axis(ent, order, axis=1), np.take_along_axis(cnt, order, axis=1)


def _trim(ent: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Without the columns that are padding in every row."""
    width = int((ent >= 0).sum(axis=1).max()) if ent.size else 0
    return ent[:, :width], cnt[:, :width]


@dataclass(frozen=True)
class History:
    """Every client's release history (module docstring): ``group_of`` ``(N,)``, per view its entries."""

    group_of: np.ndarray
    views: dict[str, ViewHistory]

    @classmethod
    def empty(cls, num_clients: int, names: Sequence[str]) -> History:
        """No release yet: every client in one group with no entries."""
        views = {name: ViewHistory(np.zeros((0, len(KEY_COLUMNS))), np.zeros((1, 0), np.int64),
                                   np.zeros((1, 0))) for name in names}
        return cls(np.zeros(num_clients, dtype=_index_dtype(num_clients)), views)

    @property
    def num_clients(self) -> int:
        return len(self.group_of)

    @property
    def groups(self) -> int:
        return next(iter(self.views.values())).ent.shape[0] if self.views else 1

    def record(self, events: Sequence[RoundEvent]) -> History:
        """This history with one round's releases added (a new history; module docstring)."""
        n = self.num_clients
        local = [_local_keys(ev, n) for ev in events]
        used = [(ev, found) for ev, found in zip(events, local, strict=True) if found is not None]
        if not used:
            return self
        columns = [self.group_of.astype(np.int64, copy=False), *(ids for _, (_, ids) in used)]
        pairs, pair_of = _pairs(columns, [self.groups, *(len(keys) for _, (keys, _) in used)])
        rounds = {ev.name: (ev, found, 1 + j) for j, (ev, found) in enumerate(used)}
        views: dict[str, ViewHistory] = {}
        for name, vh in self.views.items():
            ent, cnt = vh.ent[pairs[:, 0]], vh.cnt[pairs[:, 0]]
            if name not in rounds:
                views[name] = ViewHistory(vh.keys, ent, cnt)
                continue
            ev, (keys_round, _), col = rounds[name]
            keys, old, new = _merge_keys(vh.keys, keys_round)
            ent = np.where(ent >= 0, old[np.maximum(ent, 0)], _PAD) if len(vh.keys) else ent
            key = np.where(pairs[:, col] >= 0, new[np.maximum(pairs[:, col], 0)], _PAD)
            ent, cnt = _insert(ent, cnt, key, ev.count)
            views[name] = ViewHistory(keys, ent, cnt)
        return _grouped(views, pair_of)

    def scaled(self, scale: float) -> History:
        """Every multiplier times ``scale`` (``fedbound.training.budget``: every sigma scaled)."""
        return History(self.group_of, {name: vh.scaled(scale) for name, vh in self.views.items()})

    def state_dict(self) -> dict[str, dict[str, np.ndarray]]:
        """The arrays, by name: ``{"groups": {"group_of"}, "view:<name>": {"keys", "ent", "cnt"}}``."""
        out = {"groups": {"group_of": self.group_of}}
        for name, vh in self.views.items():
            out[f"view:{name}"] = {"keys": vh.keys, "ent": vh.ent, "cnt": vh.cnt}
        return out

    @classmethod
    def from_state_dict(cls, state: dict, names: Sequence[str], num_clients: int) -> History | None:
        """The history of :meth:`state_dict`; None for a state of another form (an older fedbound's)."""
        if "groups" not in state or any(f"view:{name}" not in state for name in names):
            return None
        group_of = np.asarray(state["groups"]["group_of"])
        if group_of.shape != (num_clients,):
            return None
        views = {name: ViewHistory(np.asarray(state[f"view:{name}"]["keys"], np.float64),
                                   np.asarray(state[f"view:{name}"]["ent"], np.int64),
                                   np.asarray(state[f"view:{name}"]["cnt"], np.float64)) for name in names}
        return cls(group_of, views)


def _index_dtype(n: int) -> type:
    return np.int32 if n < 2**31 else np.int64


def _grouped(views: dict[str, ViewHistory], pair_of: np.ndarray) -> History:
    """Rows (one per distinct (group, round keys) pair) merged where their entries are equal in every view,
    numbered in sorted order; each client's group from its pair."""
    rows = next(iter(views.values())).ent.shape[0]
    n = len(pair_of)
    if rows == 1:
        return History(np.zeros(n, dtype=_index_dtype(n)), views)
    table = np.concatenate([np.concatenate([vh.ent.astype(np.float64), vh.cnt], axis=1)
                            for vh in views.values()], axis=1)
    uniq, first, where = np.unique(table, axis=0, return_index=True, return_inverse=True)
    trimmed = {}
    for name, vh in views.items():
        trimmed[name] = ViewHistory(vh.keys, *_trim(vh.ent[first], vh.cnt[first]))
    del uniq
    group_of = np.asarray(where).ravel()[pair_of].astype(_index_dtype(n))
    return History(group_of, trimmed)
