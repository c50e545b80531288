"""TOML configuration: one file per setting drives ``plan``, ``train`` and ``validate``.

A config file is a set of TOML tables (sections).  Each consumer declares the sections it reads as a
:class:`Section` of typed, range-checked :class:`Field` s, next to the code that uses them (e.g. the NbAFL
planner declares ``[nbafl]``, the simulator declares ``[train]``).  Known sections a command does not use
are kept untouched, so one file can hold the whole setting; a section fedbound does not know (a typo such
as ``[nbafll]``) is an error with a "did you mean"::

    [nbafl]          # the privacy/system setting and the loss constants, in the spec's notation
    N = 50
    eps = 6.0
    ...
    [train]          # what the simulator needs on top
    model = "mlp"

Overrides: ``--set KEY=VALUE`` (repeatable).  ``KEY`` is either ``section.key`` or a bare ``key`` that
belongs to exactly one of the sections the command reads; an override of a section or key the command does
not read is an error (it would otherwise be silently ignored).  ``VALUE`` is parsed as a TOML literal
(``6``, ``0.01``, ``true``, ``"text"``); anything that is not a TOML literal is taken as a plain string,
so ``--set dataset=digits`` works without quotes, and a string key takes the text as written
(``--set group_clients=20`` is ``"20"``).  Integer keys are capped at ``fedbound.checks.MAX_INT`` (1e12).

Errors are :class:`fedbound.errors.ConfigError`, one line, and name the file or the override, the key, the
value and the valid range.
"""

from __future__ import annotations

import difflib
import math
import tomllib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fedbound.checks import MAX_INT, interval
from fedbound.errors import ConfigError, FedboundWarning

__all__ = ["Field", "Section", "Config", "load_config", "parse_override", "parse_literal", "REQUIRED"]


def _q(value: Any, limit: int = 60) -> str:
    """``repr(value)``, shortened for an error message (a 100 kB override must not make a 100 kB error)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


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
            return ConfigError(f"{where} = {_q(value)} is outside its valid range {self.valid_range()}"
                               f"{extra}")

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
            if abs(value) > MAX_INT:
                raise fail(f"fedbound caps integer keys at {MAX_INT:.0e} in magnitude")
        else:
            try:
                value = float(value)
            except OverflowError:  # an integer literal beyond the float range
                raise fail("beyond the float64 range") from None
            if not math.isfinite(value):
                raise fail("NaN and infinity are not allowed")
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise fail()
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            raise fail()
        return value


@dataclass(frozen=True)
class Section:
    """A TOML table with a fixed set of typed keys.

    ``aliases`` (``{alias: key}``, e.g. WPFL's ``T0`` -> ``T``) are resolved here, in one place, for
    config files (:meth:`validate`), ``--set`` (:func:`load_config`) and the explorer's API
    (:meth:`canonical`, :meth:`field`): an alias is accepted with a note; an alias and its key given with
    different values is a ConfigError.
    """

    name: str
    fields: tuple[Field, ...]
    doc: str = ""
    aliases: Mapping[str, str] = field(default_factory=dict)
    _index: Mapping[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"section [{self.name}] declares keys twice: {sorted(dupes)}")
        bad = {a: k for a, k in self.aliases.items() if a in names or k not in names}
        if bad:
            raise ValueError(f"section [{self.name}]: aliases must name a new key and an existing one: {bad}")
        object.__setattr__(self, "_index", {f.name: f for f in self.fields})

    def __contains__(self, key: str) -> bool:
        return key in self._index or key in self.aliases

    def canonical(self, key: str) -> str:
        """The key an alias stands for (``key`` itself when it is not an alias)."""
        return self.aliases.get(key, key)

    def spellings(self, key: str) -> list[str]:
        """Every name of ``key`` (its canonical name first, then its aliases)."""
        key = self.canonical(key)
        return [key, *(a for a, k in self.aliases.items() if k == key)]

    def field(self, key: str) -> Field:
        return self._index[self.canonical(key)]

    def keys(self) -> list[str]:
        return list(self._index)

    def resolve_aliases(self, raw: Mapping[str, Any], source: str) -> dict[str, Any]:
        """``raw`` with every alias replaced by its key (a FedboundWarning notes each one); ConfigError when
        an alias and its key (or two aliases of one key) are both given with different values."""
        table = dict(raw)
        for alias, key in self.aliases.items():
            if alias not in table:
                continue
            value = table.pop(alias)
            if key in table and not _same(table[key], value):
                raise ConfigError(f"{source}: [{self.name}] sets both {alias} = {_q(value)} and {key} = "
                                  f"{_q(table[key])}; {alias!r} is an alias of {key!r}, keep one")
            table[key] = value
            warnings.warn(f"[{self.name}] {alias} is accepted as an alias of {key}", FedboundWarning,
                          stacklevel=3)
        return table

    def validate(self, raw: Mapping[str, Any], source: str,
                 origins: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Typed, range-checked values of this section; unknown or missing keys raise ConfigError.

        ``origins`` maps keys set by ``--set`` to the override text, so an error names the override the user
        typed instead of the file.
        """
        origins = origins or {}
        raw = self.resolve_aliases(raw, source)
        unknown = [k for k in raw if k not in self._index]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, self.keys(), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{source}: unknown key {_q(key)} in [{self.name}]{hint} "
                              f"Valid keys: {', '.join(self.keys())}")
        out: dict[str, Any] = {}
        for f in self.fields:
            where = (f"--set {_q(origins[f.name])}: [{self.name}] {f.name}" if f.name in origins
                     else f"{source}: [{self.name}] {f.name}")
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


def _same(a: Any, b: Any) -> bool:
    """Two config values that mean the same (``20`` and ``20.0`` do)."""
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | complex) \
            and not isinstance(b, bool | complex):
        return a == b
    return type(a) is type(b) and a == b


def _did_you_mean(name: str, candidates: Iterable[str], quote: bool = True) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    if not close:
        return ""
    return f"; did you mean {close[0]!r}?" if quote else f"; did you mean {close[0]}?"


MAX_LITERAL_DIGITS = 400
"""The most digits a number typed on the command line may have (no key's range needs more; Python refuses
integers of over 4300 digits, and a 100,000-digit one must be an error, not a traceback)."""


def parse_literal(text: str, what: str) -> Any:
    """``text`` as a TOML literal (``6``, ``1e-3``, ``"a"``, ``[1, 2]``), else the text itself.

    A run of more than :data:`MAX_LITERAL_DIGITS` digits is refused (ConfigError naming ``what``) before
    it is parsed."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch.isdigit() else (run if ch == "_" else 0)
        longest = max(longest, run)
    if longest > MAX_LITERAL_DIGITS:
        raise ConfigError(f"{what} = {_q(text)} is outside its valid range: numbers of at most "
                          f"{MAX_LITERAL_DIGITS} digits (this one has {longest})")
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):
        return text


def _split_override(item: str) -> tuple[str, str, Any]:
    """``KEY=VALUE`` -> (key, the value's text, the value parsed as a TOML literal or kept as text)."""
    if "=" not in item:
        raise ConfigError(f"--set {_q(item)}: expected KEY=VALUE, e.g. --set eps=6")
    key, _, text = item.partition("=")
    key, text = key.strip(), text.strip()
    if not key:
        raise ConfigError(f"--set {_q(item)}: the key before '=' is empty")
    return key, text, parse_literal(text, f"--set {key}")


def parse_override(item: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE`` and parse VALUE as a TOML literal (falling back to a plain string)."""
    key, _, value = _split_override(item)
    return key, value


def _override_target(item: str, key: str, sections: Sequence[Section], known: set[str]
                     ) -> tuple[Section, str]:
    """The section and key an override sets; ConfigError for a section or key this command does not use."""
    used = [s.name for s in sections]
    if "." in key:
        section_name, _, sub = key.partition(".")
        target = next((s for s in sections if s.name == section_name), None)
        if target is None:
            if section_name in known:
                raise ConfigError(f"--set {_q(item)}: this command does not read [{section_name}] (it reads "
                                  f"{', '.join(f'[{u}]' for u in used)}), so the override would be ignored")
            raise ConfigError(f"--set {_q(item)}: unknown section {_q(section_name)}"
                              f"{_did_you_mean(section_name, sorted(known | set(used)))} "
                              f"This command reads {', '.join(f'[{u}]' for u in used)}")
        if sub not in target:
            raise ConfigError(f"--set {_q(item)}: [{section_name}] has no key {_q(sub)}"
                              f"{_did_you_mean(sub, target.keys())} Valid keys: {', '.join(target.keys())}")
        return target, sub
    owners = [s for s in sections if key in s]
    if not owners:
        known_keys = [k for s in sections for k in s.keys()]
        raise ConfigError(f"--set {_q(item)}: no section used by this command has a key {_q(key)}"
                          f"{_did_you_mean(key, known_keys)}")
    if len(owners) > 1:
        names = ", ".join(f"{s.name}.{key}" for s in owners)
        raise ConfigError(f"--set {_q(item)}: {_q(key)} is ambiguous; write one of {names}")
    return owners[0], key


def _apply_overrides(raw: dict[str, Any], sections: Sequence[Section], overrides: Iterable[str],
                     known: set[str]) -> dict[str, dict[str, str]]:
    """Write the overrides into ``raw``; returns {section: {key: override text}} for error messages.

    A string key takes the value's text as written (``--set group_clients=20`` is the string "20").
    """
    origins: dict[str, dict[str, str]] = {}
    given: dict[tuple[str, str], tuple[str, str, Any]] = {}  # (section, key) -> (spelling, item, value)
    for item in overrides:
        key, text, value = _split_override(item)
        target, sub = _override_target(item, key, sections, known)
        name = target.canonical(sub)
        if target.field(name).kind is str and not isinstance(value, str):
            value = text
        table = raw.setdefault(target.name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {_q(item)}: {target.name!r} is a value, not a [section]")
        spelling, first, before = given.get((target.name, name), (sub, item, value))
        if spelling != sub and not _same(before, value):
            raise ConfigError(f"--set {_q(first)} and --set {_q(item)} set [{target.name}] {name} twice "
                              f"with different values ({spelling!r} and {sub!r} are the same key); keep one")
        given[(target.name, name)] = (sub, item, value)
        if sub != name:
            warnings.warn(f"[{target.name}] {sub} is accepted as an alias of {name}", FedboundWarning,
                          stacklevel=2)
        for other in target.spellings(name):  # the override replaces the file's value, whatever its name
            table.pop(other, None)
        table[name] = value
        origins.setdefault(target.name, {})[name] = item
    return origins


def _read_toml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    p = Path(path)
    try:
        is_file = bool(source.strip()) and p.is_file()
    except (OSError, ValueError):  # e.g. an embedded NUL byte
        is_file = False
    if not is_file:
        raise ConfigError(f"config file {source!r} does not exist (or is not a regular file)")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start:exc.start + 1]
        raise ConfigError(f"{source}: not a UTF-8 text file (byte {exc.start} is {bad!r}); "
                          "TOML config files must be UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {source!r} cannot be read: {exc.strerror or exc}") from None


def _check_file_sections(raw: Mapping[str, Any], source: str, known: set[str]) -> None:
    """Every top-level entry of the file must be a known [section]; a typo is an error, not ignored."""
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {_q(name)} = {_q(value)} stands outside any [section]; move it "
                              f"into one of {', '.join(f'[{k}]' for k in sorted(known))}")
        if name not in known:
            raise ConfigError(f"{source}: unknown section [{name}]{_did_you_mean(name, sorted(known))} "
                              f"Known sections: {', '.join(sorted(known))}")


def load_config(path: str | Path | None, sections: Sequence[Section],
                overrides: Iterable[str] = (), *, known_sections: Iterable[str] | None = None) -> Config:
    """Read a TOML file (or nothing, when ``path`` is None), apply overrides, validate ``sections``.

    ``known_sections``: the names of every section fedbound knows (a file may hold sections another command
    reads, e.g. [nbafl] next to [train]); None means the used sections plus "train".  A section in the file
    that is not known, or an override of a section or key the command does not read, is a ConfigError with
    a "did you mean".
    """
    source = str(path) if path is not None else "<no config file>"
    used = {s.name for s in sections}
    known = used | (set(known_sections) if known_sections is not None else {"train"})
    raw: dict[str, Any] = _read_toml(path) if path is not None else {}
    _check_file_sections(raw, source, known)
    origins = _apply_overrides(raw, sections, overrides, known)
    validated: dict[str, dict[str, Any]] = {}
    for section in sections:
        table = raw.get(section.name, {})
        validated[section.name] = section.validate(table, source, origins.get(section.name))
    return Config(validated, raw, source)


MEASURED_MARKER = "fedbound-measured:"
"""Comment line ``# fedbound-measured: KEY KEY ...`` that ``fedbound estimate --write`` puts at the top of a
config: those keys hold measured constants (``fedbound plan`` lists them as measured, not assumed)."""


def measured_keys(path: str | Path | None) -> tuple[str, ...]:
    """The keys named by the ``# fedbound-measured:`` marker of the config at ``path`` (none without one)."""
    if path is None or not Path(path).is_file():
        return ()
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(f"# {MEASURED_MARKER}"):
            return tuple(line[len(MEASURED_MARKER) + 2:].replace(",", " ").split())
    return ()

