"""What the audit reads from its trials, one batch at a time: each adversary view's likelihood-ratio scores,
every noise stage's measured std per client and per round, and tests of the noise streams' independence.

Views (:class:`ViewScores`).  A view sees the target's upload, the server's output (``broadcast``) or a named
release; its score per trial is ``sum_t <y_t - y_t(D), s_t> / std_t^2`` over the first ``max_releases``
rounds, with ``s_t = y_t(D') - y_t(D)`` the noise-free shift and ``std_t`` the view's planned noise std; a
broadcast whose sampling is hidden keeps the target's term in a fraction ``q`` of the trials.

Noise (:class:`NoiseSource`, :class:`NoiseStats`).  A source is a noise stage as some party's release shows
it: each participant's upload (its upload stage), the aggregate's uplink noise, the server's
(``broadcast - aggregate``), a release an entry names.  Trials on D come in pairs ``(a, b)`` of the same side
and ``u = (y_a - y_b) / (sqrt(2) sigma)`` (per round, per client; ``sigma`` the plan's std) is ``N(0, I)``
exactly when the noise is as planned, whatever the noise-free value and whatever other randomness (Poisson
sampling only adds variance): its sum of squares gives the std ratio's chi-square interval per (source,
client) and per (source, round).  The pairs also test the streams: draws reused across rounds, clients or
trials make ``u``'s of different rounds (same trial and client), of neighbouring clients (same trial and
round) or of successive pairs (same round and client) correlated, where independent draws give cosines of
mean 0; a one-sided t-test on the cosines of each relation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["ViewScores", "NoiseSource", "NoiseStats", "MIN_COSINES"]

MIN_COSINES = 20
"""Fewest cosines a stream test needs."""


@dataclass
class ViewScores:
    """One view's scores over the trials (module docstring): ``values(runs)`` ``(rounds, trials, d)`` what
    it sees, ``clean_out``/``clean_in`` ``(rounds, d)`` its noise-free values on D and D', ``std`` the planned
    std per round, ``weight`` the target's weight in it; ``hidden``: the sampling rate of a hidden broadcast
    (None: always present)."""

    values: Callable[[Any], torch.Tensor]
    clean_out: np.ndarray
    clean_in: np.ndarray
    std: np.ndarray
    weight: float = 1.0
    hidden: float | None = None
    target_clean: np.ndarray | None = None
    out: list[np.ndarray] = field(default_factory=list)
    inn: list[np.ndarray] = field(default_factory=list)
    sum_sq: float = 0.0
    count: int = 0

    @property
    def shift(self) -> np.ndarray:
        return self.clean_in - self.clean_out

    @property
    def planned_score_std(self) -> float:
        """The score's planned std ``sqrt(sum_t ||s_t||^2 / std_t^2)`` (its mean on D': the square)."""
        w = np.where(self.std > 0, 1.0 / np.maximum(self.std, 1e-300) ** 2, 0.0)
        return float(np.sqrt(np.sum(w * np.sum(self.shift**2, axis=1))))

    def add(self, runs: Any, sides: np.ndarray, rng: np.random.Generator) -> None:
        """Scores of a batch (``sides``: True for a trial on D')."""
        rounds = len(self.std)
        noisy = self.values(runs)[:rounds].double().numpy()
        centred = noisy - self.clean_out[:, None, :]
        if self.hidden is not None:  # the target sits out a fraction 1 - q of the trials: no term of it then
            up = runs.uploads[:rounds].double().numpy() - self.target_clean[:, None, :]
            absent = rng.random(centred.shape[:2]) >= self.hidden
            centred = centred - np.where(absent[:, :, None], self.weight * up, 0.0)
        w = np.where(self.std > 0, 1.0 / np.maximum(self.std, 1e-300) ** 2, 1.0)
        scores = (np.einsum("tkd,td->tk", centred, self.shift) * w[:, None]).sum(axis=0)
        self.out.append(scores[~sides])
        self.inn.append(scores[sides])
        self.sum_sq += float(np.sum(centred[:, ~sides] ** 2))
        self.count += int(centred[:, ~sides].size)

    @property
    def scores_out(self) -> np.ndarray:
        return np.concatenate(self.out) if self.out else np.zeros(0)

    @property
    def scores_in(self) -> np.ndarray:
        return np.concatenate(self.inn) if self.inn else np.zeros(0)

    @property
    def measured_std(self) -> float:
        return math.sqrt(self.sum_sq / self.count) if self.count else 0.0


@dataclass(frozen=True)
class NoiseSource:
    """A noise stage as a release shows it (module docstring): ``values(runs)`` ``(rounds, trials, k, d)``,
    ``sigma`` ``(rounds, k)`` the plan's std, ``clients`` the ``k`` ids (-1: the server, the aggregate)."""

    label: str
    values: Callable[[Any], torch.Tensor | None]
    sigma: np.ndarray
    clients: tuple[int, ...]


class NoiseStats:
    """Sums of squares and stream cosines over the pairs of trials on D (module docstring)."""

    def __init__(self) -> None:
        self.sq: dict[tuple, list[float]] = {}
        self.cos: dict[tuple, list[float]] = {}
        self._last: dict[str, np.ndarray] = {}

    def _sq(self, key: tuple, value: float, dof: int) -> None:
        acc = self.sq.setdefault(key, [0.0, 0])
        acc[0] += value
        acc[1] += dof

    def _cos(self, key: tuple, values: np.ndarray) -> None:
        acc = self.cos.setdefault(key, [0.0, 0.0, 0])
        acc[0] += float(values.sum())
        acc[1] += float((values**2).sum())
        acc[2] += int(values.size)

    def add(self, source: NoiseSource, runs: Any, rows: np.ndarray) -> None:
        """The pairs among the trials ``rows`` (trials on D of this batch, consecutive)."""
        values = source.values(runs)
        if values is None or len(rows) < 2:
            return
        rounds = source.sigma.shape[0]
        y = values[:rounds, rows[: len(rows) // 2 * 2]].double().numpy()
        u = (y[:, 0::2] - y[:, 1::2]) / (math.sqrt(2.0) * source.sigma[:, None, :, None])  # (R, P, k, d)
        dof = u.shape[1] * u.shape[3]
        for j, client in enumerate(source.clients):
            self._sq((source.label, "client", client), float(np.sum(u[:, :, j] ** 2)), u.shape[0] * dof)
        if rounds > 1:
            for t in range(rounds):
                self._sq((source.label, "round", t), float(np.sum(u[t] ** 2)), u.shape[2] * dof)
        norms = np.linalg.norm(u, axis=3, keepdims=True)
        unit = np.where(norms > 0, u / np.maximum(norms, 1e-300), 0.0)
        if rounds > 1:
            for t in range(rounds):
                for t2 in range(t + 1, rounds):
                    self._cos((source.label, "rounds"), np.sum(unit[t] * unit[t2], axis=-1).ravel())
        if unit.shape[2] > 1:
            self._cos((source.label, "clients"), np.sum(unit[:, :, :-1] * unit[:, :, 1:], axis=-1).ravel())
        first = unit[:, :1]
        if source.label in self._last:
            self._cos((source.label, "trials"), np.sum(self._last[source.label] * first, axis=-1).ravel())
        if unit.shape[1] > 1:
            self._cos((source.label, "trials"), np.sum(unit[:, :-1] * unit[:, 1:], axis=-1).ravel())
        self._last[source.label] = unit[:, -1:]

    def stream_tests(self) -> list[tuple[str, str, float, int]]:
        """``(source, relation, t statistic, cosines)`` of every relation with enough cosines."""
        out = []
        for (label, relation), (total, total_sq, n) in self.cos.items():
            if n < MIN_COSINES:
                continue
            mean = total / n
            var = max(total_sq / n - mean**2, 0.0) * n / (n - 1)
            t = mean / math.sqrt(var / n) if var > 0 else (math.inf if mean > 0 else 0.0)
            out.append((label, relation, t, n))
        return out
