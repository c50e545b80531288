"""A paper's theorems without importing sympy: declarations are imported only when the cache lacks them.

A paper's bounds are declared with sympy in ``bounds/NAME_theory.py`` (parameters, definitions,
conditions, variants, :class:`~fedbound.bounds.core.Theorem` objects).  Building them takes importing sympy
(~0.4 s) and running the declarations; a ``fedbound plan`` only evaluates them numerically.
``bounds/NAME.py`` therefore holds *stand-ins*: a :class:`Theory` handle on the declaring module, a
:class:`LazyNotation` and one :class:`LazyTheorem` per theorem.  A stand-in evaluates exactly as its
theorem (the same :class:`~fedbound.bounds.core.Evaluable` code over the same cached records and compiled
functions, :mod:`fedbound.bounds.compiled`); only on a cache miss, or when something symbolic is asked for
(an expression, LaTeX, a definition), is the declaring module imported, and every attribute a stand-in
lacks is then looked up on the real object.  Cache keys carry a fingerprint of the declaring file, so an
edited formula never meets a stale entry.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

from fedbound.bounds.compiled import cached_json, fingerprint
from fedbound.bounds.core import (
    Domain,
    Evaluable,
    Notation,
    Record,
    Theorem,
    check_derivative,
    derivative_names,
    variant_names,
)

__all__ = ["Theory", "LazyNotation", "LazyTheorem", "VariantInfo"]


@dataclass(frozen=True)
class VariantInfo:
    """A variant's name, meaning and source (its definitions stay with the declarations)."""

    name: str
    doc: str
    source: str


class Theory:
    """Handle on a module of theorem declarations, e.g. ``Theory("fedbound.bounds.nbafl_theory")``."""

    def __init__(self, module: str) -> None:
        self.module = module
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise ImportError(f"no module named {module!r}")
        self.file = str(Path(spec.origin).resolve())
        self.fingerprint = fingerprint(self.file)

    def __repr__(self) -> str:
        return f"<Theory {self.module}>"

    def real(self) -> ModuleType:
        """The declaring module (imports sympy)."""
        return importlib.import_module(self.module)

    @cached_property
    def index(self) -> dict[str, Any]:
        """What the stand-ins need without the declarations: notations, theorems and mappings of theorems."""
        return cached_json(f"{self.fingerprint}|index:{self.module}", self._build_index)

    def _build_index(self) -> dict[str, Any]:
        found = vars(self.real())
        notations = {a: n for a, n in found.items() if isinstance(n, Notation)}

        def notation_of(t: Theorem) -> str:
            return next(a for a, n in notations.items() if n is t.notation)

        theorems = {a: t for a, t in found.items() if isinstance(t, Theorem)}
        attr_of = {id(t): a for a, t in theorems.items()}
        mappings = {a: {k: attr_of[id(t)] for k, t in m.items()} for a, m in found.items()
                    if isinstance(m, dict) and m and all(id(t) in attr_of for t in m.values())}
        return {"notations": {a: n.describe_json() for a, n in notations.items()},
                "theorems": {a: {"name": t.name, "lhs": t.lhs, "doc": t.doc, "source": str(t.source),
                                 "notation": notation_of(t)} for a, t in theorems.items()},
                "mappings": mappings}

    def notation(self, attr: str = "NOTATION") -> LazyNotation:
        return self._stand_in(("notation", attr), lambda: LazyNotation(self, attr))

    def theorem(self, attr: str) -> LazyTheorem:
        def make() -> LazyTheorem:
            info = self.index["theorems"][attr]
            return LazyTheorem(self, info, lambda: getattr(self.real(), attr))

        return self._stand_in(("theorem", attr), make)

    def theorems(self, attrs: str) -> tuple[LazyTheorem, ...]:
        """Stand-ins of the space-separated theorem attributes ``attrs``."""
        return tuple(self.theorem(a) for a in attrs.split())

    def mapping(self, attr: str) -> dict[str, LazyTheorem]:
        """A module-level dict of theorems (e.g. ``THEOREMS``) as stand-ins."""
        return {k: self.theorem(a) for k, a in self.index["mappings"][attr].items()}

    def attribute(self, module: str, name: str) -> Any:
        """``name`` of the declaring module, for a bounds module's ``__getattr__`` (imports sympy)."""
        if name.startswith("__") or not hasattr(real := self.real(), name):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(real, name)

    def _stand_in(self, key: tuple[str, str], make: Callable[[], Any]) -> Any:
        made = self.__dict__.setdefault("_made", {})
        if key not in made:
            made[key] = make()
        return made[key]


class LazyNotation:
    """A :class:`~fedbound.bounds.core.Notation`'s name, parameter domains and variants, from the cache.

    ``params`` maps names to :class:`~fedbound.bounds.core.Domain` (no sympy symbol); anything else
    (``definitions``, ``symbols``, ``params[...].symbol`` via ``real``) comes from the declarations."""

    def __init__(self, theory: Theory, attr: str) -> None:
        self.theory = theory
        self.attr = attr
        info = theory.index["notations"][attr]
        self.name: str = info["name"]
        self.params: dict[str, Domain] = {p["name"]: Domain(**p) for p in info["params"]}
        self.variants: dict[str, VariantInfo] = {k: VariantInfo(k, v["doc"], v["source"])
                                                 for k, v in info["variants"].items()}
        self.fingerprint = theory.fingerprint

    def __repr__(self) -> str:
        return f"<LazyNotation {self.name} of {self.theory.module}>"

    @property
    def real(self) -> Notation:
        return getattr(self.theory.real(), self.attr)

    def variant_names(self, variant: str) -> tuple[str, ...]:
        return variant_names(variant, self.variants)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.real, name)


class LazyTheorem(Evaluable):
    """Stands in for a :class:`~fedbound.bounds.core.Theorem`: evaluates it from the cache, and forwards
    every symbolic request (``expression``, ``latex``, ``conditions`` ...) to the real theorem."""

    def __init__(self, theory: Theory, info: Mapping[str, Any], resolve: Callable[[], Theorem]) -> None:
        self.theory = theory
        self.name: str = info["name"]
        self.lhs: str = info["lhs"]
        self.doc: str = info["doc"]
        self.source: str = info["source"]
        self._notation_attr: str = info["notation"]
        self._resolve = resolve
        self._derived: dict[tuple[str, int], LazyTheorem] = {}

    def __repr__(self) -> str:
        return f"<Theorem {self.name}: {self.lhs} ({self.source})>"

    @property
    def notation(self) -> LazyNotation:
        return self.theory.notation(self._notation_attr)

    @cached_property
    def real(self) -> Theorem:
        """The declared theorem (imports sympy)."""
        return self._resolve()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("real", "_resolve", "theory"):
            raise AttributeError(name)
        return getattr(self.real, name)

    # -- what Evaluable needs (its notation, _params, _variant_list and _key are Evaluable's) ------------
    def _build_record(self, variant: str) -> Record:
        return self.real._build_record(variant)

    def _build(self, variant: str, what: str) -> tuple[list[Any], Any]:
        return self.real._build(variant, what)

    def _build_variants(self) -> list[str]:
        return self.real._build_variants()

    def derivative(self, wrt: str, order: int = 1) -> LazyTheorem:
        """Stand-in for ``theorem.derivative(wrt, order)`` (the derivative is taken on a cache miss only)."""
        check_derivative(self.notation.params, wrt)
        if (wrt, order) not in self._derived:
            name, lhs, doc = derivative_names(self, wrt, order)
            info = {"name": name, "lhs": lhs, "doc": doc, "source": self.source,
                    "notation": self._notation_attr}
            self._derived[wrt, order] = LazyTheorem(self.theory, info,
                                                    lambda: self.real.derivative(wrt, order))
        return self._derived[wrt, order]
