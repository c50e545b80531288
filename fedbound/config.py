"""TOML configuration: one file per setting drives ``plan``, ``train`` and ``validate``.

A config file is a set of TOML tables (sections).  Each consumer declares the sections it reads as a
:class:`Section` of typed, range-checked :class:`Field` s, next to the code that uses them (e.g. the NbAFL
planner declares ``[nbafl]``, the simulator declares ``[train]``).  Sections a command does not use are
kept untouched, so one file can hold the whole setting::

    [nbafl]          # the privacy/system setting and the loss constants, in the spec's notation
    N = 50
    eps = 6.0
    ...
    [train]          # what the simulator needs on top
    model = "mlp"

Overrides: ``--set KEY=VALUE`` (repeatable).  ``KEY`` is either ``section.key`` or a bare ``key`` that
belongs to exactly one of the sections the command reads.  ``VALUE`` is parsed as a TOML literal
(``6``, ``0.01``, ``true``, ``"text"``); anything that is not a TOML literal is taken as a plain string,
so ``--set dataset=digits`` works without quotes.

Errors are :class:`fedbound.errors.ConfigError` and name the file, the key, the value and the valid range.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fedbound.checks import interval
from fedbound.errors import ConfigError

__all__ = ["Field", "Section", "Config", "load_config", "parse_override", "REQUIRED"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Sentinel default: the key must be given (in the file or by ``--set``)."""


@dataclass(frozen=True)
class Field:
    """One typed configuration key.

    ``kind`` is ``int``, ``float``, ``str`` or ``bool``.  Numeric fields may carry an interval
    (``low``/``high`` with open or closed ends); string fields may carry ``choices``.  ``optional=True``
    lets the key be absent (its value is then ``default``, typically ``None``).
    """

    name: str
    kind: type
    default: Any = REQUIRED
    doc: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False

    def valid_range(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "a string"
        return interval(self.low, self.high, self.low_open, self.high_open, integer=self.kind is int)

    def coerce(self, where: str, value: Any) -> Any:
        """Return ``value`` converted to ``kind`` and checked against the range, or raise ConfigError."""
        if value is None and self.optional:
            return None

        def fail(why: str = "") -> ConfigError:
            extra = f" ({why})" if why else ""
            return ConfigError(f"{where} = {value!r} is outside its valid range {self.valid_range()}{extra}")

        if self.kind is bool:
            if not isinstance(value, bool):
                raise fail("expected a boolean")
            return value
        if self.kind is str:
            if not isinstance(value, str):
                raise fail("expected a string")
            if self.choices is not None and value not in self.choices:
                raise fail()
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail(f"expected {'an integer' if self.kind is int else 'a number'}")
        if self.kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    raise fail("expected an integer")
                value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise fail("NaN and infinity are not allowed")
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise fail()
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            raise fail()
        return value


@dataclass(frozen=True)
class Section:
    """A TOML table with a fixed set of typed keys."""

    name: str
    fields: tuple[Field, ...]
    doc: str = ""
    _index: Mapping[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"section [{self.name}] declares keys twice: {sorted(dupes)}")
        object.__setattr__(self, "_index", {f.name: f for f in self.fields})

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def field(self, key: str) -> Field:
        return self._index[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def validate(self, raw: Mapping[str, Any], source: str) -> dict[str, Any]:
        """Typed, range-checked values of this section; unknown or missing keys raise ConfigError."""
        unknown = [k for k in raw if k not in self._index]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, self.keys(), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{source}: unknown key {key!r} in [{self.name}]{hint} "
                              f"Valid keys: {', '.join(self.keys())}")
        out: dict[str, Any] = {}
        for f in self.fields:
            where = f"{source}: [{self.name}] {f.name}"
            if f.name in raw:
                out[f.name] = f.coerce(where, raw[f.name])
            elif f.default is not REQUIRED:
                out[f.name] = f.default
            elif f.optional:
                out[f.name] = None
            else:
                doc = f" ({f.doc})" if f.doc else ""
                raise ConfigError(f"{where} is required{doc}: set it in the file or with --set "
                                  f"{self.name}.{f.name}=VALUE; valid range {f.valid_range()}")
        return out


class Config(Mapping[str, Mapping[str, Any]]):
    """A loaded configuration: validated sections by name, plus the raw TOML for everything else."""

    def __init__(self, sections: Mapping[str, Mapping[str, Any]], raw: Mapping[str, Any], source: str):
        self._sections = {k: MappingProxyType(dict(v)) for k, v in sections.items()}
        self.raw = raw
        self.source = source

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        try:
            return self._sections[name]
        except KeyError:
            raise ConfigError(f"{self.source}: section [{name}] was not loaded; loaded: "
                              f"{', '.join(self._sections) or 'none'}") from None

    def __iter__(self):
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self._sections.items()}


def parse_override(item: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE`` and parse VALUE as a TOML literal (falling back to a plain string)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set eps=6")
    key, _, text = item.partition("=")
    key, text = key.strip(), text.strip()
    if not key:
        raise ConfigError(f"--set {item!r}: the key before '=' is empty")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return key, value


def _apply_overrides(raw: dict[str, Any], sections: Sequence[Section], overrides: Iterable[str]) -> None:
    for item in overrides:
        key, value = parse_override(item)
        if "." in key:
            section_name, _, sub = key.partition(".")
            target = next((s for s in sections if s.name == section_name), None)
            if target is not None and sub not in target:
                close = difflib.get_close_matches(sub, target.keys(), n=1)
                hint = f"; did you mean {section_name}.{close[0]}?" if close else ""
                raise ConfigError(f"--set {item!r}: [{section_name}] has no key {sub!r}{hint}")
        else:
            owners = [s for s in sections if key in s]
            if not owners:
                known = [k for s in sections for k in s.keys()]
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"--set {item!r}: no section used by this command has a key {key!r}{hint}")
            if len(owners) > 1:
                names = ", ".join(f"{s.name}.{key}" for s in owners)
                raise ConfigError(f"--set {item!r}: {key!r} is ambiguous; write one of {names}")
            section_name, sub = owners[0].name, key
        table = raw.setdefault(section_name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {item!r}: {section_name!r} is a value, not a [section]")
        table[sub] = value


def load_config(path: str | Path | None, sections: Sequence[Section],
                overrides: Iterable[str] = ()) -> Config:
    """Read a TOML file (or nothing, when ``path`` is None), apply overrides, validate ``sections``."""
    source = str(path) if path is not None else "<no config file>"
    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {source!r} does not exist")
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    _apply_overrides(raw, sections, overrides)
    validated: dict[str, dict[str, Any]] = {}
    for section in sections:
        table = raw.get(section.name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {section.name!r} must be a [section] table")
        validated[section.name] = section.validate(table, source)
    return Config(validated, raw, source)
