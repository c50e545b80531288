"""PADPFL's impact factors (PADPFL eq. (2), (51), Sec. V-VI; spec 001 Sec. 3.11-3.12): the simplex, the
rules that set p (ratio rule, uniform, by size, from scores, dropout redistribution, schedules and their
alpha), and an [adaptive] setting made concrete (:class:`Design`: parts, sizes, ratio phases).  Plain data:
no theorem and no config import (re-exported by :mod:`fedbound.bounds.adaptive`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound.checks import check_int, check_real, scalar_or_array
from fedbound.errors import ConfigError, ParameterError

__all__ = [
    "SIMPLEX_ATOL",
    "validate_impact_factors",
    "impact_factors_uniform",
    "impact_factors_by_size",
    "impact_factors_from_scores",
    "impact_factors_from_ratios",
    "impact_schedule",
    "redistribute_impact",
    "update_impact_factors",
    "impact_factor_change",
    "weight_summaries",
    "parse_lists",
    "Design",
    "design_from_settings",
]

Number = float | np.ndarray
SIMPLEX_ATOL = 1e-9


def validate_impact_factors(p: Any, atol: float = SIMPLEX_ATOL) -> np.ndarray:
    """``p`` (a vector, or one row per round) on the simplex: ``0 <= p_i <= 1``, ``sum_i p_i = 1``.

    PADPFL eq. (2); spec 001 F2.  Returns a float array; ParameterError otherwise.
    """
    arr = check_real("p", p, 0.0, 1.0)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ParameterError("p", arr, "a non-empty vector (or rows of vectors) on the simplex")
    sums = np.atleast_1d(arr.sum(axis=-1))
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        raise ParameterError("sum_i p_i", float(sums[bad][0]), f"1 to within {atol:g} (PADPFL eq. (2))")
    return arr


def _sizes(m: Any) -> np.ndarray:
    return check_int("m", m, 1)


def _m_min(m: Any) -> float:
    return float(np.min(_sizes(m)))


def impact_factors_uniform(N: int) -> np.ndarray:
    """``p_i = 1/N`` (PADPFL Sec. VI baseline; spec 001 Sec. 3.12)."""
    n = int(check_int("N", N, 1))
    return np.full(n, 1.0 / n)


def impact_factors_by_size(m: Any) -> np.ndarray:
    """``p_i = m_i / sum_j m_j`` (PADPFL Sec. III baseline, the FedAvg weights; spec 001 Sec. 3.12)."""
    sizes = _sizes(m).astype(float)
    return sizes / sizes.sum()


def impact_factors_from_scores(scores: Any) -> np.ndarray:
    """``p_i = s_i / sum_j s_j`` for scores ``s_i >= 0`` (toolkit extension of PADPFL Sec. III's
    "resources"; spec 001 Sec. 3.12)."""
    s = check_real("scores", scores, 0.0)
    if s.ndim != 1 or s.sum() <= 0:
        raise ParameterError("scores", s, "a vector of non-negative scores, at least one > 0")
    return s / s.sum()


def impact_factors_from_ratios(ratios: Sequence[float], part_sizes: Sequence[int]) -> np.ndarray:
    """``p_i = r_k(i) / sum_k' n_k' r_k'`` for the clients of part k (PADPFL Sec. VI, the "r1-r2-r3"
    labels; spec 001 F55): (0, 1, 2) over 20/20/20 clients gives (0, 1/60, 1/30) per part."""
    r = check_real("ratios", ratios, 0.0)
    n = check_int("part_sizes", part_sizes, 1)
    if r.ndim != 1 or r.shape != n.shape:
        raise ParameterError("ratios", r, f"one non-negative priority per part ({n.size} parts)")
    total = float(np.sum(r * n))
    if total <= 0:
        raise ParameterError("ratios", r, "non-negative priorities, at least one > 0")
    return np.repeat(r / total, n)


def impact_schedule(
    part_sizes: Sequence[int], ratios: Sequence[Sequence[float]], switch_after: Sequence[int], rounds: int
) -> np.ndarray:
    """``(rounds, N)`` impact factors: phase ``k``'s F55 factors from round ``switch_after[k-1] + 1`` on
    (1-based; PADPFL scenario 4: ratios (0,1,2) for t <= 10, (2,1,0) after, spec 001 Sec. 5)."""
    if len(switch_after) != len(ratios) - 1:
        raise ParameterError(
            "switch_after", list(switch_after), f"{len(ratios) - 1} round(s), one per later phase"
        )
    bounds = check_int("switch_after", list(switch_after), 1).ravel().tolist() if switch_after else []
    if any(b <= a for a, b in zip(bounds, bounds[1:], strict=False)):
        raise ParameterError("switch_after", bounds, "strictly increasing rounds")
    phase = np.searchsorted(np.asarray(bounds, dtype=np.int64), np.arange(rounds), side="right")
    rows = np.stack([impact_factors_from_ratios(r, part_sizes) for r in ratios])
    return rows[phase]


def redistribute_impact(p: Any, dropped: Any) -> np.ndarray:
    """Dropout redistribution: absent clients get 0, the others ``p_i / (1 - sum_{k dropped} p_k)``.

    PADPFL Sec. III says only "the server can distribute p_k among counterpart clients"; this proportional
    rule is the toolkit's reading (spec 001 Sec. 3.12).  ``dropped``: indices (or a boolean mask).
    """
    arr = validate_impact_factors(p)
    if arr.ndim != 1:
        raise ParameterError("p", arr.shape, "one vector (N,) of impact factors")
    mask = np.zeros(arr.shape, dtype=bool)
    idx = np.asarray(dropped)
    if idx.dtype == bool:
        if idx.shape != arr.shape:
            raise ParameterError("dropped", idx.shape, f"a boolean mask of shape {arr.shape}")
        mask = idx.copy()
    else:
        idx = check_int("dropped", idx.ravel() if idx.size else np.zeros(0, dtype=int), 0, arr.size - 1)
        mask[idx.astype(int)] = True
    kept = float(arr[~mask].sum())
    if kept <= 0:
        raise ParameterError(
            "dropped", np.flatnonzero(mask).tolist(), "a set of clients that leaves some impact factor > 0"
        )
    return np.where(mask, 0.0, arr / kept)


def update_impact_factors(p: Any, alpha: Any) -> np.ndarray:
    """``p^(t+1) = p^(t) + alpha^(t)`` with ``sum alpha = 0``, ``|alpha_i| <= 1`` and both on the simplex.

    PADPFL eq. (51) with the constraints below it; spec 001 F48-F49.
    """
    old = validate_impact_factors(p)
    a = check_real("alpha", alpha, -1.0, 1.0)
    if a.shape != old.shape:
        raise ParameterError("alpha", a.shape, f"the shape of p, {old.shape}")
    if abs(float(a.sum())) > SIMPLEX_ATOL:
        raise ParameterError("sum_i alpha_i", float(a.sum()), "0 (PADPFL eq. (51))")
    new = old + a
    return validate_impact_factors(np.where((new < 0) & (new > -SIMPLEX_ATOL), 0.0, new))


def impact_factor_change(p_old: Any, p_new: Any) -> np.ndarray:
    """``alpha^(t) = p^(t+1) - p^(t)`` (PADPFL eq. (51); spec 001 F48)."""
    return validate_impact_factors(p_new) - validate_impact_factors(p_old)


def weight_summaries(p: Any) -> tuple[Number, Number]:
    """``(max_i p_i, sum_i p_i^2)`` per row of ``p``: all the theorems need of the weights."""
    arr = validate_impact_factors(p)
    return scalar_or_array(arr.max(axis=-1)), scalar_or_array(np.sum(arr**2, axis=-1))


# --- an [adaptive] setting made concrete (parts, sizes, ratio phases); plain data, no config import ---------
def parse_lists(key: str, text: Any, kind: type = float) -> list[list]:
    """``"0,1,2; 2,1,0"`` -> ``[[0, 1, 2], [2, 1, 0]]`` (lists/numbers pass through); ConfigError naming
    ``[adaptive] key`` otherwise, and for a number that is not finite or exceeds ``MAX_INT`` (1e12) in
    magnitude (no list of the setting -- sizes, ratios, scores, weight bounds -- needs more)."""
    from fedbound.checks import MAX_INT

    if isinstance(text, int | float):
        rows: Any = [[text]]
    elif isinstance(text, Sequence) and not isinstance(text, str):
        rows = text if text and isinstance(text[0], Sequence) and not isinstance(text[0], str) else [text]
    else:
        rows = [[v for v in chunk.replace(" ", "").split(",") if v] for chunk in str(text).split(";")]
    shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:80] + "..."
    try:
        raw = [[float(v) for v in row] for row in rows]
        phases = [[kind(v) for v in row] for row in rows]
    except (ValueError, TypeError, OverflowError) as exc:
        raise ConfigError(
            f"[adaptive] {key} = {shown}: expected comma-separated numbers, phases separated by ';'"
        ) from exc
    if any(not (abs(v) <= MAX_INT) for row in raw for v in row):  # also NaN
        raise ConfigError(f"[adaptive] {key} = {shown} is outside its valid range: finite numbers of "
                          f"magnitude at most {MAX_INT:.0e}")
    if not phases or any(not p for p in phases):
        raise ConfigError(f"[adaptive] {key} = {shown}: every phase needs at least one number")
    return phases


@dataclass(frozen=True)
class Design:
    """An [adaptive] setting made concrete: groups, sizes per group, the impact-factor phases."""

    parts: tuple[int, ...]
    sizes: tuple[int, ...] | None
    ratios: tuple[tuple[float, ...], ...]
    switch_after: tuple[int, ...]

    @property
    def N(self) -> int:
        return int(sum(self.parts))

    @property
    def client_sizes(self) -> np.ndarray:
        if self.sizes is None:
            raise ConfigError("[adaptive] needs the local dataset sizes: sizes (one per part) or m")
        return np.repeat(np.asarray(self.sizes, dtype=np.int64), self.parts)

    @property
    def phase_rows(self) -> np.ndarray:
        """One row of impact factors per phase (F55), shape ``(phases, N)``."""
        return np.stack([impact_factors_from_ratios(r, self.parts) for r in self.ratios])

    def schedule(self, rounds: int) -> np.ndarray:
        """The ``(rounds, N)`` impact factors (F55 per phase)."""
        try:
            return impact_schedule(self.parts, self.ratios, self.switch_after, rounds)
        except ParameterError as exc:
            raise ConfigError(f"[adaptive] impact-factor schedule: {exc}") from exc


def design_from_settings(settings: Mapping[str, Any]) -> Design:
    """Groups (``parts``), per-group sizes (``sizes``; default every client ``m``), ratio phases and switch
    rounds of an [adaptive] setting; ConfigError for an inconsistent one."""
    parts = parse_lists("parts", settings["parts"], int)
    if len(parts) != 1:
        raise ConfigError(f"[adaptive] parts = {settings['parts']!r}: one list of clients per part (no ';')")
    parts = parts[0]
    if sum(parts) != settings["N"]:
        raise ConfigError(
            f"[adaptive] parts = {settings['parts']!r} sums to {sum(parts)}, but N = {settings['N']}"
        )
    ratios = parse_lists("ratios", settings["ratios"])
    if any(len(r) != len(parts) for r in ratios):
        raise ConfigError(
            f"[adaptive] ratios = {settings['ratios']!r}: every phase needs one ratio per part "
            f"({len(parts)} parts)"
        )
    text = settings.get("switch_after")
    switch = parse_lists("switch_after", text, int)[0] if text else []
    if len(switch) != len(ratios) - 1:
        raise ConfigError(
            f"[adaptive] switch_after = {text!r}: {len(ratios)} phase(s) of ratios need "
            f"{len(ratios) - 1} switch round(s)"
        )
    if settings.get("sizes") is not None:
        sizes = parse_lists("sizes", settings["sizes"], int)[0]
        if len(sizes) != len(parts):
            raise ConfigError(f"[adaptive] sizes = {settings['sizes']!r}: one local dataset size per part")
    elif settings.get("m") is not None:
        sizes = [int(settings["m"])] * len(parts)
    else:
        sizes = None
    if sizes is not None and settings.get("m") is not None and min(sizes) < settings["m"]:
        raise ConfigError(f"[adaptive] m = {settings['m']} exceeds the smallest of sizes = {sizes}")
    return Design(
        tuple(parts), None if sizes is None else tuple(sizes), tuple(tuple(r) for r in ratios), tuple(switch)
    )
