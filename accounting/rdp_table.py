"""The per-step RDP of the Poisson-subsampled Gaussian as a piecewise Chebyshev interpolant in log z.

For a fixed sampling rate q and a set of Renyi orders, ``f_alpha(u) = log R_alpha(e^u)`` (R the exact RDP of
one sampled Gaussian release at noise multiplier z = e^u, Mironov, Talwar & Zhang 2019, Sec. 3.3, evaluated
by :func:`fedbound.accounting.rdp.rdp_subsampled_gaussian`) is analytic in u.  :class:`RdpTable` stores it on
segments ``[k w, (k + 1) w]`` of u (w = ln 2 / 2) as degree-``NODES - 1`` Chebyshev series through the
first-kind Chebyshev nodes, built on first use; an order whose series misses the tolerance is refitted on
2, 4, ... equal pieces of the segment (large integer orders at small z switch between dominant terms of the
binomial sum within a short stretch of u).  Everything after the build is polynomial arithmetic: one
table answers every (eps, delta, T) calibration at this q, so a calibration over a whole grid of T costs
no sampled-Gaussian evaluation at all.

Error: each segment's series is checked when it is built against the exact RDP at ``CHECK`` off-node points
(the midpoints between nodes, where the interpolation error peaks); ``max_error`` records the largest
|log R| error seen (typically ~1e-13).  An order whose error on a segment exceeds :data:`TOLERANCE` is
refitted on finer pieces; where even 2^MAX_LEVEL pieces miss it, that order is evaluated exactly there
instead, so a table never silently answers beyond TOLERANCE.  The segments can be kept on disk
(``directory``): an array file per (q, orders, segment), keyed also by a hash of this module and ``_sgm.py``.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["OutsideTable", "RdpTable", "SEGMENT", "NODES", "TOLERANCE", "Z_MAX", "table"]

SEGMENT = math.log(2.0) / 2.0
"""Width of a segment in u = ln z."""
NODES = 24
"""Chebyshev nodes per segment (series degree NODES - 1)."""
TOLERANCE = 1e-10
"""Largest accepted |error| of ln R at the check points of a segment."""
MAX_LEVEL = 5
"""A segment is split in at most 2^MAX_LEVEL pieces; an order that still misses TOLERANCE there is not
tabulated on that segment: :meth:`RdpTable.log_rdp` evaluates it exactly (``derivative`` NaN)."""
CHECK = 6
"""Off-node check points per segment (midpoints between consecutive nodes, spread over the segment)."""
K_RANGE = (-40, 80)
"""Segments allowed: z in [2^-20, 2^40] (beyond, :class:`OutsideTable`)."""
Z_MAX = 2.0 ** (K_RANGE[1] // 2)
"""The largest noise multiplier a table covers."""


class OutsideTable(ValueError):
    """The table cannot answer here (z outside its range, RDP underflow, or a series beyond TOLERANCE):
    callers fall back to the exact point-by-point evaluation."""


def _code_hash() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=10)
    for name in ("rdp_table.py", "_sgm.py", "rdp.py"):
        try:
            h.update((here / name).read_bytes())
        except OSError:
            h.update(os.urandom(8))
    return h.hexdigest()


_NODE_T = np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES)[::-1]  # ascending, in (-1, 1)
_DCT = np.cos(np.pi * np.outer(np.arange(NODES), np.arange(NODES)[::-1] + 0.5) / NODES) * (2.0 / NODES)
_DCT[0] *= 0.5


def _derivative(c: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of d/dt along the last axis (same length, last entry 0)."""
    n = c.shape[-1]
    d = np.zeros_like(c)
    for j in range(n - 2, -1, -1):
        d[..., j] = (d[..., j + 2] if j + 2 < n else 0.0) + 2.0 * (j + 1) * c[..., j + 1]
    d[..., 0] *= 0.5
    return d


def _clenshaw(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum_j c[..., j] T_j(t) for t broadcast against c[..., 0]."""
    c = np.moveaxis(c, -1, 0)
    if c.ndim == 2:
        c = np.ascontiguousarray(c)  # rows of one coefficient: contiguous
    b1 = np.zeros(np.broadcast_shapes(c.shape[1:], np.shape(t)))
    b2 = np.zeros_like(b1)
    t2 = 2.0 * t
    for j in range(c.shape[0] - 1, 0, -1):
        b1, b2 = t2 * b1 - b2 + c[j], b1
    return t * b1 - b2 + c[0]


class RdpTable:
    """ln R_alpha(e^u) of the sampled Gaussian at rate ``q`` for every order in ``orders``."""

    def __init__(self, q: float, orders: np.ndarray, directory: Path | None = None) -> None:
        self.q = float(q)
        self.orders = np.asarray(orders, dtype=float).ravel()
        self.directory = directory
        key = f"{self.q!r}|{self.orders.tobytes().hex()}|{NODES}|{SEGMENT!r}|{_code_hash()}"
        self._key = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
        self._coef: dict[int, np.ndarray] = {}  # k -> (pieces, orders, NODES)
        self._dcoef: dict[int, np.ndarray] = {}
        self._pieces: dict[int, np.ndarray] = {}  # k -> pieces per order (a power of 2)
        self.max_error = 0.0
        self.built = 0  # segments computed here (not read from disk)

    def _file(self, k: int) -> Path | None:
        return None if self.directory is None else self.directory / f"rdp-{self._key}-{k}.npy"

    def _build(self, k: int) -> np.ndarray:
        """Segment k's series, shape (2^L, orders, NODES): order j's row holds its own 2^{L_j} pieces (NaN
        beyond), L_j <= MAX_LEVEL the least that meets TOLERANCE (all NaN: not tabulated)."""
        if not K_RANGE[0] <= k < K_RANGE[1]:
            raise OutsideTable(f"noise multiplier e^{k * SEGMENT:.3g} outside the RDP table's range "
                             f"[2^{K_RANGE[0] // 2}, 2^{K_RANGE[1] // 2}]")
        path = self._file(k)
        if path is not None and path.is_file():
            try:
                c = np.load(path)
                if c.ndim == 3 and c.shape[1:] == (self.orders.size, NODES) and np.all(
                        np.isfinite(c[0]) | np.all(np.isnan(c), axis=(0, 2))[:, None]):
                    return c
            except (OSError, ValueError):
                pass
        c, err = self._fit(k * SEGMENT, np.arange(self.orders.size), 0)
        todo = np.flatnonzero(err > TOLERANCE)
        level = 0
        while todo.size and level < MAX_LEVEL:  # split further for the orders that vary fastest
            level += 1
            c = np.concatenate([c, np.full_like(c, np.nan)], axis=0)
            sub, e = self._fit(k * SEGMENT, todo, level)
            c[:, todo] = sub
            err[todo] = e
            todo = todo[e > TOLERANCE]
        c[:, todo] = np.nan  # still beyond TOLERANCE (a near-kink of ln R): evaluated exactly, not tabulated
        err[todo] = 0.0
        err = float(err.max())
        self.max_error = max(self.max_error, err)
        self.built += 1
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as tmp:
                    np.save(tmp, c)
                os.replace(tmp.name, path)
            except OSError:
                pass
        return c

    def _fit(self, start: float, cols: np.ndarray, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Series of the orders ``cols`` on the 2^level equal pieces of the segment from ``start`` (shape
        (pieces, len(cols), NODES)), and each order's largest |error| at the check points."""
        from fedbound.accounting.rdp import rdp_subsampled_gaussian

        pieces, width = 2**level, SEGMENT / 2**level
        idx = np.linspace(0, NODES - 2, CHECK).round().astype(int)
        t_check = 0.5 * (_NODE_T[idx] + _NODE_T[idx + 1])
        mids = start + (np.arange(pieces) + 0.5) * width
        u = mids[:, None] + 0.5 * width * np.concatenate([_NODE_T, t_check])[None, :]
        with np.errstate(divide="ignore"):
            f = np.log(np.asarray(rdp_subsampled_gaussian(self.orders[cols], self.q, np.exp(u.ravel())),
                                  dtype=float))
        if not np.all(np.isfinite(f)):
            raise OutsideTable(f"the sampled-Gaussian RDP underflows at q = {self.q:g}, z near "
                             f"{math.exp(start):.3g}: outside the RDP table's range")
        f = f.reshape(pieces, NODES + CHECK, cols.size)
        c = np.einsum("pno,jn->poj", f[:, :NODES], _DCT)  # (pieces, orders, NODES)
        fitted = _clenshaw(c[:, :, None, :], t_check[None, None, :])
        err = np.abs(fitted - np.transpose(f[:, NODES:], (0, 2, 1)))
        return c, err.max(axis=(0, 2))

    def coefficients(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(series, derivative series in u) of segment k, shape (pieces, orders, NODES) each."""
        if k not in self._coef:
            c = self._build(k)
            self._coef[k] = c
            self._pieces[k] = np.sum(np.isfinite(c[:, :, 0]), axis=0)
            self._dcoef[k] = _derivative(c) * (2.0 * self._pieces[k][None, :, None] / SEGMENT)
        return self._coef[k], self._dcoef[k]

    def log_rdp(self, u: np.ndarray, cols: np.ndarray, derivative: bool = False):
        """ln R at element-wise pairs (u, order index ``cols``) (any equal shapes); with ``derivative`` also
        d ln R / du."""
        u, cols = np.broadcast_arrays(np.asarray(u, dtype=float), np.asarray(cols))
        shape, u, cols = u.shape, u.ravel(), cols.ravel()
        ks = np.floor(u / SEGMENT).astype(np.int64)
        out = np.empty(u.shape)
        dout = np.empty(u.shape) if derivative else None
        for k in np.unique(ks):
            sel = ks == k
            c, d = self.coefficients(int(k))
            pieces = self._pieces[k][cols[sel]]  # each order's own subdivision of the segment
            x = (u[sel] - k * SEGMENT) / SEGMENT * np.maximum(pieces, 1)
            piece = np.clip(np.floor(x).astype(np.int64), 0, np.maximum(pieces, 1) - 1)
            t = np.clip(2.0 * (x - piece) - 1.0, -1.0, 1.0)
            out[sel] = _clenshaw(c[piece, cols[sel]], t)
            if derivative:
                dout[sel] = _clenshaw(d[piece, cols[sel]], t)
            exact = np.flatnonzero(sel)[pieces == 0]
            if exact.size:  # not tabulated here: the exact RDP
                out[exact] = self._exact(u[exact], cols[exact])
        out = out.reshape(shape)
        return (out, dout.reshape(shape)) if derivative else out

    def _exact(self, u: np.ndarray, cols: np.ndarray) -> np.ndarray:
        from fedbound.accounting import _sgm

        alpha = self.orders[cols]
        log_a = _sgm.log_a(alpha, np.full(alpha.shape, self.q), np.exp(u))
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(log_a / (alpha - 1.0), 0.0))

    def grid(self, u: np.ndarray) -> np.ndarray:
        """ln R at every (u, order): shape (len(u), len(orders))."""
        u = np.asarray(u, dtype=float).ravel()
        cols = np.broadcast_to(np.arange(self.orders.size), (u.size, self.orders.size))
        return self.log_rdp(np.broadcast_to(u[:, None], cols.shape), cols)


_TABLES: dict[tuple, RdpTable] = {}


def table(q: float, orders: np.ndarray, directory: Path | None = None) -> RdpTable:
    """The process-wide table for (q, orders) (kept across calls; ``directory``: the disk cache)."""
    o = np.asarray(orders, dtype=float).ravel()
    key = (float(q), o.tobytes(), str(directory))
    if key not in _TABLES:
        _TABLES[key] = RdpTable(q, o, directory)
    return _TABLES[key]
