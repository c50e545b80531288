"""Theorems as data: a sympy expression with typed parameters, conditions, a source and named variants.

The pieces, smallest first:

* :class:`Param`: one named parameter (sympy symbol, domain, integer or real, doc).  Out-of-domain input
  raises :class:`~fedbound.errors.ParameterError` naming the parameter, the value and the range.
* :class:`Definition`: a named sub-expression (``c``, ``P``, ``kappa_1`` ...) of a paper, with the
  :class:`Condition` s it carries (e.g. ``0 < P < 1``).  Theorems are written in terms of these symbols,
  which keeps their LaTeX readable and lets a variant swap one piece.
* :class:`Variant`: an erratum's corrected reading (or another alternative), as overrides of definitions.
  ``"paper"`` (no override) is always the default; variants combine with ``+`` (``"two_sided+regime_aware"``).
* :class:`Notation`: one paper's parameters, definitions and variants.
* :class:`Theorem`: the object users meet.  ``theorem.evaluate(...)`` returns an :class:`Evaluation` (value,
  ``defined``/``valid``/``vacuous`` flags and warnings); calling ``theorem(...)`` returns the plain number
  and raises :class:`~fedbound.errors.DomainError` where the formula is undefined or its hypotheses fail.
  Numeric evaluation is a cached ``sympy.lambdify`` to numpy that broadcasts over arrays; derivatives come
  from sympy (``theorem.derivative("T", 2)``); ``theorem.latex()`` and ``_repr_latex_`` render it.

Condition severities (what happens where a condition is false):

========== ======================================= ==========================================
severity   Evaluation                              plain call ``theorem(...)``
========== ======================================= ==========================================
undefined  ``defined=False``, value masked (NaN)   DomainError
required   ``valid=False`` (hypothesis fails)      DomainError
caveat     ``valid=False`` (guarantee heuristic)   a warning of the condition's category
vacuous    ``vacuous=True`` (true but useless)     a VacuousBoundWarning
========== ======================================= ==========================================
"""

from __future__ import annotations

import sys
import warnings as _warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedbound.bounds.compiled import cached_function, cached_json, fingerprint
from fedbound.checks import check_int, check_real, interval
from fedbound.errors import DomainError, FedboundWarning, ParameterError, VacuousBoundWarning

if TYPE_CHECKING:  # sympy is imported where an expression is built, never for a cached evaluation
    import sympy as sp

__all__ = ["Domain", "ConditionInfo", "Param", "Condition", "Definition", "Variant", "Source", "Notation",
           "Evaluable", "Record", "Theorem", "Evaluation", "Comparison", "MissingInputError", "SEVERITIES",
           "PAPER"]

PAPER = "paper"
SEVERITIES = ("undefined", "required", "caveat", "vacuous")
_MODULES = ["numpy", "scipy"]


class _Ranged:
    """Range checks shared by :class:`Param` and :class:`Domain` (fields ``name``, ``doc``, ``low`` ...)."""

    name: str
    doc: str
    low: float | None
    high: float | None
    low_open: bool
    high_open: bool
    integer: bool

    def valid_range(self) -> str:
        return interval(self.low, self.high, self.low_open, self.high_open, integer=self.integer)

    def check(self, value: Any) -> np.ndarray:
        """``value`` as a float64 array, or a ParameterError naming this parameter and its range."""
        hint = self.doc
        if self.integer:
            low = None if self.low is None else int(np.floor(self.low)) + (1 if self.low_open else 0)
            high = None if self.high is None else int(np.ceil(self.high)) - (1 if self.high_open else 0)
            return check_int(self.name, value, low, high, hint=hint).astype(np.float64)
        return check_real(self.name, value, self.low, self.high, low_open=self.low_open,
                          high_open=self.high_open, hint=hint)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "doc": self.doc, "low": self.low, "high": self.high,
                "low_open": self.low_open, "high_open": self.high_open, "integer": self.integer}


@dataclass(frozen=True)
class Domain(_Ranged):
    """A parameter's name, meaning and domain without its sympy symbol (what a cached evaluation needs)."""

    name: str
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False


@dataclass(frozen=True)
class Param(_Ranged):
    """A named parameter: sympy symbol, domain (integer or real, open or closed ends) and meaning."""

    name: str
    symbol: sp.Symbol
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False


@dataclass(frozen=True)
class ConditionInfo:
    """What an evaluation needs of a :class:`Condition`: everything but its sympy expression."""

    name: str
    severity: str
    message: str
    blame: str
    valid: str
    category: type[Warning] = FedboundWarning

    def to_json(self) -> dict[str, Any]:
        cat = self.category
        return {"name": self.name, "severity": self.severity, "message": self.message, "blame": self.blame,
                "valid": self.valid, "category": f"{cat.__module__}:{cat.__qualname__}"}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConditionInfo:
        import importlib

        module, _, qualname = d["category"].partition(":")
        category = importlib.import_module(module)
        for part in qualname.split("."):
            category = getattr(category, part)
        return cls(d["name"], d["severity"], d["message"], d["blame"], d["valid"], category)


@dataclass(frozen=True)
class Condition:
    """A predicate a formula needs, with what to say when it fails.

    ``expr`` is a sympy boolean in parameters and definition symbols.  ``blame`` names the quantity the
    error message shows (a parameter name or a definition symbol's name) and ``valid`` the range it must
    lie in, in words, e.g. ``T > eps / (-ln(1 - K/N))``.
    """

    name: str
    expr: sp.Basic
    severity: str
    message: str
    blame: str
    valid: str
    category: type[Warning] = FedboundWarning

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    def info(self) -> ConditionInfo:
        return ConditionInfo(self.name, self.severity, self.message, self.blame, self.valid, self.category)


@dataclass(frozen=True)
class Definition:
    """A named sub-expression ``symbol := expr`` and the conditions it carries."""

    symbol: sp.Symbol
    expr: sp.Expr
    doc: str = ""
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class Variant:
    """A named alternative reading: definitions replaced, conditions dropped;
    ``source`` cites the erratum."""

    name: str
    doc: str
    source: str
    overrides: tuple[Definition, ...] = ()
    drops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """Where a formula comes from: the paper (its registry id, and ``short``, the citation a reader knows,
    set by the paper's theory module), equation(s), and fedbound's internal handle of the formula (``spec``,
    kept for cross-checks, never printed)."""

    seed: str
    equation: str
    spec: str = ""
    short: str = ""

    def __str__(self) -> str:
        """As a reader cites it: "NbAFL (Wei et al. 2020), Theorem 2, eq. (14)"."""
        return f"{self.short or 'paper ' + self.seed}, {self.equation}"


class Notation:
    """One paper's parameters, definitions (named sub-expressions) and variants."""

    def __init__(self, name: str, params: Sequence[Param], definitions: Sequence[Definition] = (),
                 variants: Sequence[Variant] = ()) -> None:
        self.name = name
        self.params = {p.name: p for p in params}
        self._by_symbol = {p.symbol: p for p in params}
        # the file that declares this notation keys the compiled-function cache (fedbound.bounds.compiled)
        self.fingerprint = fingerprint(sys._getframe(1).f_globals.get("__file__", name))
        self.definitions: dict[sp.Symbol, Definition] = {}
        for d in definitions:
            self.define(d)
        self.variants = {v.name: v for v in variants}

    def symbol(self, name: str) -> sp.Symbol:
        return self.params[name].symbol

    def symbols(self, names: str) -> tuple[sp.Symbol, ...]:
        return tuple(self.params[n].symbol for n in names.split())

    def define(self, d: Definition) -> sp.Symbol:
        if d.symbol in self.definitions or d.symbol in self._by_symbol:
            raise ValueError(f"{d.symbol} is defined twice in {self.name}")
        self.definitions[d.symbol] = d
        return d.symbol

    def add_variant(self, v: Variant) -> None:
        self.variants[v.name] = v

    def param_of(self, symbol: sp.Symbol) -> Param | None:
        return self._by_symbol.get(symbol)

    # -- variants ----------------------------------------------------------------------------------------
    def variant_names(self, variant: str) -> tuple[str, ...]:
        """Split ``"a+b"`` into known variant names; ``"paper"`` is the empty combination."""
        return variant_names(variant, self.variants)

    def describe_json(self) -> dict[str, Any]:
        """Name, parameter domains and variants as JSON: what :mod:`fedbound.bounds.lazy` keeps cached."""
        return {"name": self.name, "params": [p.to_json() for p in self.params.values()],
                "variants": {v.name: {"doc": v.doc, "source": v.source} for v in self.variants.values()}}

    def definitions_for(self, variant: str) -> tuple[dict[sp.Symbol, Definition], set[str]]:
        """The definitions in force under ``variant`` and the condition names it drops."""
        defs = dict(self.definitions)
        changed: dict[sp.Symbol, str] = {}
        drops: set[str] = set()
        for name in self.variant_names(variant):
            v = self.variants[name]
            for d in v.overrides:
                if d.symbol in changed and changed[d.symbol] != name:
                    raise ParameterError("variant", variant, "variants that change different definitions",
                                         hint=f"{changed[d.symbol]} and {name} both redefine {d.symbol}")
                defs[d.symbol] = d
                changed[d.symbol] = name
            drops |= set(v.drops)
        return defs, drops


def check_derivative(params: Mapping[str, Any], wrt: str) -> None:
    if wrt not in params:
        raise ParameterError("wrt", wrt, "one of " + ", ".join(params))


def derivative_names(theorem: Any, wrt: str, order: int) -> tuple[str, str, str]:
    """(name, lhs, doc) of the ``order``-th derivative of ``theorem`` in ``wrt``."""
    mark = "'" * order if order <= 3 else f"^({order})"
    return (f"{theorem.name}_d{order}_{wrt}", f"{theorem.lhs}{mark} wrt {wrt}",
            f"d^{order}/d{wrt}^{order} of {theorem.name} (sympy)")


def _reachable(expr: sp.Basic, defs: Mapping[sp.Symbol, Definition]) -> list[sp.Symbol]:
    """Definition symbols used by ``expr`` (transitively), in first-use order."""
    seen: list[sp.Symbol] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        for s in sorted(e.free_symbols, key=str):
            if s in defs and s not in seen:
                seen.append(s)
                stack.append(defs[s].expr)
                for c in defs[s].conditions:
                    stack.append(c.expr)
    return seen


def _resolve(expr: sp.Basic, defs: Mapping[sp.Symbol, Definition]) -> sp.Basic:
    """Substitute definitions until only parameters remain."""
    for _ in range(64):
        subs = {s: defs[s].expr for s in expr.free_symbols if s in defs}
        if not subs:
            return expr
        expr = expr.xreplace(subs)
    raise RecursionError("definitions are cyclic")


class MissingInputError(ParameterError):
    """A formula needs a parameter that was not given: says "needs NAME", its meaning and its range."""

    def __init__(self, param: Param, where: str) -> None:
        self.param_doc = param.doc
        super().__init__(param.name, None, param.valid_range())
        self.args = (f"{where} needs {param.name} ({param.doc}): give a value in {param.valid_range()}",)

    def __str__(self) -> str:
        return self.args[0]


class Comparison(dict):
    """``{variant: Evaluation}`` of :meth:`Theorem.compare`, plus ``skipped``: variants left out and why."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, str] = {}


@dataclass(frozen=True)
class Evaluation:
    """A formula's value with explicit flags; arrays where the inputs were arrays.

    ``value`` holds NaN exactly where ``defined`` is False (never elsewhere); :meth:`require` turns that
    into a DomainError.  ``admissible``: defined and every 'required' hypothesis holds (caveats aside);
    ``valid``: admissible and every caveat holds.  ``checks`` maps each condition name to where it holds.
    """

    theorem: str
    variant: str
    value: float | np.ndarray
    defined: bool | np.ndarray
    valid: bool | np.ndarray
    vacuous: bool | np.ndarray
    warnings: tuple[str, ...]
    admissible: bool | np.ndarray = True
    checks: Mapping[str, bool | np.ndarray] = field(repr=False, default_factory=dict)
    failures: tuple[tuple[Condition, Any, Any], ...] = field(repr=False, default=())

    def require(self, emit_warnings: bool = True) -> float | np.ndarray:
        """The value; DomainError where undefined or where a 'required' hypothesis fails.

        With ``emit_warnings`` the caveats and vacuity become Python warnings of their categories.
        """
        for cond, shown, _ in self.failures:
            if cond.name == "finite":  # no input to name: say what overflowed, in words
                error = DomainError(cond.blame, shown, cond.valid, hint=cond.message)
                error.args = (f"{self.theorem} overflows at these inputs (not finite in floating point)",)
                raise error
            if cond.severity in ("undefined", "required"):
                raise DomainError(cond.blame, shown, cond.valid, hint=f"{cond.message} [{self.theorem}]")
        if emit_warnings:
            for cond, _, text in self.failures:
                if cond.severity == "caveat":
                    _warnings.warn(text, cond.category, stacklevel=3)
                elif cond.severity == "vacuous":
                    _warnings.warn(text, VacuousBoundWarning, stacklevel=3)
        return self.value

    def to_dict(self) -> dict[str, Any]:
        return {"theorem": self.theorem, "variant": self.variant, "value": self.value,
                "defined": self.defined, "admissible": self.admissible, "valid": self.valid,
                "vacuous": self.vacuous,
                "warnings": list(self.warnings)}


def _scalar(x: np.ndarray) -> Any:
    if np.ndim(x) == 0:
        return x.item()
    return x


def variant_names(variant: str, known: Iterable[str]) -> tuple[str, ...]:
    """Split ``"a+b"`` into known variant names; ``"paper"`` is the empty combination."""
    known = tuple(known)
    names = tuple(n.strip() for n in str(variant).split("+") if n.strip() and n.strip() != PAPER)
    for n in names:
        if n not in known:
            raise ParameterError("variant", n, "one of " + ", ".join([PAPER, *known]))
    return names


@dataclass(frozen=True)
class Record:
    """What evaluating a theorem under one variant needs, without sympy: the parameters (in argument order
    of the compiled functions), the conditions in force, and the blamed definitions that have a compiled
    "show" function.  Kept in the cache as JSON (:meth:`to_json`)."""

    params: tuple[str, ...]
    conditions: tuple[ConditionInfo, ...]
    shows: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"params": list(self.params), "conditions": [c.to_json() for c in self.conditions],
                "shows": list(self.shows)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Record:
        return cls(tuple(d["params"]), tuple(ConditionInfo.from_json(c) for c in d["conditions"]),
                   tuple(d["shows"]))


class Evaluable:
    """Numeric evaluation of a theorem from its cached :class:`Record` and compiled functions.

    Shared by :class:`Theorem` (which builds a missing record from its sympy expression) and
    :class:`fedbound.bounds.lazy.LazyTheorem` (which imports the declaring module only on a cache miss),
    so that a cached evaluation never imports sympy.  Subclasses provide ``name``, ``lhs``, ``doc``,
    ``source``, ``notation`` (its ``params``: name -> domain, ``variants``, ``name`` and ``fingerprint``),
    :meth:`_build_record` and :meth:`_build`.
    """

    name: str
    lhs: str
    doc: str
    source: Any
    notation: Any

    def _params(self) -> Mapping[str, Any]:
        return self.notation.params

    def _variant_list(self) -> tuple[str, ...]:
        return tuple(self.notation.variants)

    def _key(self, variant: str, what: str) -> str:
        """The cache key: the declaring file's fingerprint, the notation, the theorem, variant and what."""
        return f"{self.notation.fingerprint}|{self.notation.name}|{self.name}|{variant}|{what}"

    def _build_record(self, variant: str) -> Record:
        raise NotImplementedError

    def _build(self, variant: str, what: str) -> tuple[list[Any], Any]:
        """(sympy symbols, sympy expression) of the value (``what="value"``), of a condition (its name) or
        of a blamed definition (``"show:NAME"``)."""
        raise NotImplementedError

    def _numeric(self) -> dict[Any, Any]:
        cache = self.__dict__.get("_numeric_cache")
        if cache is None:
            cache = self.__dict__["_numeric_cache"] = {}
        return cache

    def forget(self) -> None:
        """Drop the records and compiled functions held in memory (the next evaluation reloads them)."""
        self._numeric().clear()

    def canonical(self, variant: str) -> str:
        """``variant`` with its parts checked and in canonical form (``"paper"`` when none)."""
        memo = self._numeric()
        if ("variant", variant) not in memo:
            memo["variant", variant] = "+".join(variant_names(variant, self._variant_list())) or PAPER
        return memo["variant", variant]

    def record(self, variant: str = PAPER) -> Record:
        """The :class:`Record` of ``variant`` (from the cache when it is there)."""
        variant = self.canonical(variant)
        memo = self._numeric()
        if ("record", variant) not in memo:
            memo["record", variant] = Record.from_json(
                cached_json(self._key(variant, "record"), lambda: self._build_record(variant).to_json()))
        return memo["record", variant]

    def function(self, variant: str = PAPER, what: str = "value") -> tuple[Any, tuple[str, ...]]:
        """The compiled numpy function of the value (or of a condition) and its argument names."""
        variant = self.canonical(variant)
        memo = self._numeric()
        if ("fn", variant, what) not in memo:
            fn = cached_function(self._key(variant, what), lambda: self._build(variant, what))
            memo["fn", variant, what] = (fn, self.record(variant).params)
        return memo["fn", variant, what]

    def unchecked(self, names: Sequence[str], variant: str = PAPER) -> Any:
        """The compiled value as a plain function of the positional parameters ``names`` (which must include
        every parameter it uses), with no input checks and no conditions: for inner loops whose inputs were
        checked once."""
        fn, params = self.function(variant)
        missing = [p for p in params if p not in names]
        if missing:
            raise ParameterError("names", list(names), f"a list that includes {', '.join(missing)}")
        idx = [list(names).index(p) for p in params]
        return lambda *args: fn(*(args[i] for i in idx))

    def _inputs(self, variant: str, values: Mapping[str, Any]) -> tuple[list[np.ndarray], tuple[int, ...]]:
        params = self._params()
        args = []
        for name in self.record(variant).params:
            p = params[name]
            if name not in values or values[name] is None:
                raise MissingInputError(p, f"{self.name} (variant {variant})")
            args.append(p.check(values[name]))
        unknown = [k for k in values if k not in params]
        if unknown:
            raise TypeError(f"{self.name}: unknown parameter(s) {unknown}; known: {', '.join(params)}")
        shape = np.broadcast_shapes(*(a.shape for a in args)) if args else ()
        return ([np.broadcast_to(a, shape) for a in args] if shape else args), shape

    def evaluate(self, values: Mapping[str, Any] | None = None, /, *, variant: str = PAPER,
                 **kw: Any) -> Evaluation:
        """Evaluate on scalars or broadcastable arrays; flags and warnings instead of NaN or exceptions.

        Parameters may come as a mapping, as keywords, or both.  Parameters of the notation that this
        theorem does not use are ignored, so one settings dict can feed every theorem of a paper.
        """
        values = {**(values or {}), **kw}
        variant = self.canonical(variant)
        args, shape = self._inputs(variant, values)
        fn, _ = self.function(variant)
        with np.errstate(all="ignore"):
            value = np.broadcast_to(np.asarray(fn(*args), dtype=np.float64), shape).copy()
        ones = np.ones(shape, dtype=bool)
        defined, valid, vacuous = ones.copy(), ones.copy(), np.zeros(shape, dtype=bool)
        required = ones.copy()
        checks: dict[str, Any] = {}
        failures: list[tuple[ConditionInfo, Any, Any]] = []
        messages: list[str] = []
        order = {"undefined": 0, "required": 1, "caveat": 2, "vacuous": 3}
        for cond in sorted(self.record(variant).conditions, key=lambda c: order[c.severity]):
            cfn, _ = self.function(variant, cond.name)
            with np.errstate(all="ignore"):
                holds = np.broadcast_to(np.asarray(cfn(*args), dtype=bool), shape)
            if cond.severity == "vacuous":
                holds = holds | ~defined | ~np.isfinite(value)
            checks[cond.name] = _scalar(holds.copy())
            if holds.all():
                continue
            bad = ~holds
            shown = self._shown(cond, variant, args, bad, values)
            where = "" if not shape else f" at {int(bad.sum())} of {bad.size} points"
            text = f"{cond.message}{where} ({cond.blame} = {shown!r}; needs {cond.valid})"
            failures.append((cond, shown, text))
            messages.append(text)
            if cond.severity == "undefined":
                defined &= holds
            elif cond.severity == "vacuous":
                vacuous |= bad
            else:
                valid &= holds
                if cond.severity == "required":
                    required &= holds
        nonfinite = defined & ~np.isfinite(value)
        if nonfinite.any():
            cond = ConditionInfo("finite", "undefined",
                                 "the value overflows or is not finite in floating point", self.name,
                                 "a finite value")
            where = "" if not shape else f" at {int(nonfinite.sum())} of {nonfinite.size} points"
            text = f"{cond.message}{where}"
            failures.append((cond, "non-finite", text))
            messages.append(text)
            defined &= ~nonfinite
        value[~defined] = np.nan
        vacuous &= defined
        return Evaluation(self.name, variant, _scalar(value), _scalar(defined), _scalar(valid & defined),
                          _scalar(vacuous), tuple(messages), _scalar(required & defined), checks,
                          tuple(failures))

    def _shown(self, cond: ConditionInfo, variant: str, args: list[np.ndarray], bad: np.ndarray,
               values: Mapping[str, Any]) -> Any:
        """The value of the blamed quantity at the first failing point (for messages)."""
        idx = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
        if cond.blame in self._params() and cond.blame in values:
            return np.broadcast_to(np.asarray(values[cond.blame], dtype=float), bad.shape)[idx].item()
        if cond.blame not in self.record(variant).shows:
            return None
        fn, _ = self.function(variant, f"show:{cond.blame}")
        with np.errstate(all="ignore"):
            out = np.broadcast_to(np.asarray(fn(*args), dtype=float), bad.shape)
        return out[idx].item()

    def __call__(self, values: Mapping[str, Any] | None = None, /, *, variant: str = PAPER,
                 **kw: Any) -> float | np.ndarray:
        """The plain number (or array): DomainError where undefined or a hypothesis fails."""
        return self.evaluate(values, variant=variant, **kw).require()

    def parameters(self, variant: str = PAPER) -> tuple[Any, ...]:
        """The parameters the value and its conditions depend on, in the notation's order."""
        params = self._params()
        return tuple(params[n] for n in self.record(variant).params)

    def variants(self) -> tuple[str, ...]:
        """Variant names that change this theorem (the others evaluate exactly as the paper)."""
        return tuple(cached_json(self._key("*", "variants"), self._build_variants))

    def _build_variants(self) -> list[str]:
        raise NotImplementedError

    def as_function(self, args: str, name: str | None = None) -> Any:
        """A plain function of positional ``args`` (e.g. ``"eps delta C m L"``), plus ``variant`` and extra
        parameters by keyword, that returns the number (DomainError where undefined): the thin wrappers a
        paper module offers, generated with a real signature and a docstring citing the source."""
        import inspect

        names = args.split()
        theorem = self

        def function(*values: Any, variant: str = PAPER, **extra: Any) -> Any:
            if len(values) > len(names):
                raise TypeError(f"{function.__name__}() takes {len(names)} positional arguments "
                                f"({', '.join(names)}), {len(values)} given")
            return theorem({**dict(zip(names, values, strict=False)), **extra}, variant=variant)

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
        params += [inspect.Parameter("variant", inspect.Parameter.KEYWORD_ONLY, default=PAPER),
                   inspect.Parameter("extra", inspect.Parameter.VAR_KEYWORD)]
        function.__signature__ = inspect.Signature(params)
        function.__name__ = function.__qualname__ = name or self.name
        function.__doc__ = f"{self.lhs}: {self.doc} ({self.source}); the plain number of :data:`{self.name}`."
        return function

    def compare(self, values: Mapping[str, Any] | None = None, /, *, variants: Iterable[str] | None = None,
                **kw: Any) -> Comparison:
        """The paper reading and each variant side by side.

        A variant that needs a parameter the values do not hold (e.g. ``d`` for a noise dimension) is left
        out and listed in ``Comparison.skipped`` with what it needs, unless it was asked for by name.
        """
        values = {**(values or {}), **kw}
        names = [PAPER, *(self.variants() if variants is None else variants)]
        out = Comparison()
        for v in names:
            try:
                out[v] = self.evaluate(values, variant=v)
            except MissingInputError as exc:
                if variants is not None:
                    raise
                out.skipped[v] = f"needs {exc.name}: {exc.param_doc}"
        return out


class Theorem(Evaluable):
    """A formula of a paper as data: expression, parameters, conditions, source, variants.

    ``expr`` is written in the notation's parameters and definition symbols.  ``conditions`` are the
    theorem's own (those of the definitions it uses are added automatically).
    """

    def __init__(self, notation: Notation, name: str, expr: sp.Expr, *, lhs: str, source: Source, doc: str,
                 conditions: Sequence[Condition] = (),
                 _parent: tuple[Theorem, str, int] | None = None) -> None:
        import sympy as sp

        self.notation = notation
        self.name = name
        self.template = sp.sympify(expr)
        self.lhs = lhs
        self.source = source
        self.doc = doc
        self.own_conditions = tuple(conditions)
        self._parent = _parent
        self._derived: dict[tuple[str, str], Theorem] = {}
        self._memos: dict[tuple[str, str], Any] = {}

    def __repr__(self) -> str:
        return f"<Theorem {self.name}: {self.lhs} ({self.source})>"

    # -- what Evaluable needs ----------------------------------------------------------------------------
    def _build_record(self, variant: str) -> Record:
        import sympy as sp

        defs, _ = self.notation.definitions_for(variant)
        conds = self.conditions(variant)
        symbols = set(self.expression(variant).free_symbols)
        for c in conds:
            symbols |= _resolve(c.expr, defs).free_symbols
        params = tuple(p.name for p in self.notation.params.values() if p.symbol in symbols)
        names = {str(s) for s in defs if isinstance(s, sp.Symbol)}
        shows = tuple(dict.fromkeys(c.blame for c in conds if c.blame not in self.notation.params
                                    and c.blame in names))
        return Record(params, tuple(c.info() for c in conds), shows)

    def _build(self, variant: str, what: str) -> tuple[list[Any], Any]:
        symbols = [self.notation.params[n].symbol for n in self.record(variant).params]
        defs, _ = self.notation.definitions_for(variant)
        if what == "value":
            return symbols, self.expression(variant)
        if what.startswith("show:"):
            blame = what[len("show:"):]
            return symbols, _resolve(next(s for s in defs if str(s) == blame), defs)
        cond = next(c for c in self.conditions(variant) if c.name == what)
        return symbols, _resolve(cond.expr, defs)

    def _build_variants(self) -> list[str]:
        base = self.expression(PAPER)
        return [name for name in self.notation.variants
                if self.expression(name) != base or self.conditions(name) != self.conditions(PAPER)]

    # -- structure ---------------------------------------------------------------------------------------
    def _memo(self, key: tuple[str, str], build: Any) -> Any:
        if key not in self._memos:
            self._memos[key] = build()
        return self._memos[key]

    def expression(self, variant: str = PAPER) -> sp.Expr:
        """The fully substituted sympy expression (parameters only) under ``variant``."""
        return self._memo(("expr", variant), lambda: self._expression(variant))

    def _expression(self, variant: str) -> sp.Expr:
        import sympy as sp

        if self._parent is not None:
            parent, wrt, order = self._parent
            # Max/Min as Piecewise: differentiated branch by branch (no Heaviside/DiracDelta at the kinks)
            expr = parent.expression(variant).replace(
                lambda e: isinstance(e, sp.Max | sp.Min), lambda e: e.rewrite(sp.Piecewise))
            return sp.diff(expr, self.notation.symbol(wrt), order)
        defs, _ = self.notation.definitions_for(variant)
        return _resolve(self.template, defs)

    def conditions(self, variant: str = PAPER) -> tuple[Condition, ...]:
        """Every condition in force: the theorem's own and those of the definitions it uses."""
        return self._memo(("conditions", variant), lambda: self._conditions(variant))

    def _conditions(self, variant: str) -> tuple[Condition, ...]:
        if self._parent is not None:
            return tuple(c for c in self._parent[0].conditions(variant) if c.severity != "vacuous")
        defs, drops = self.notation.definitions_for(variant)
        conds = list(self.own_conditions)
        for s in _reachable(self.template, defs):
            conds.extend(defs[s].conditions)
        for c in list(conds):
            for s in _reachable(c.expr, defs):
                conds.extend(x for x in defs[s].conditions if x not in conds)
        out: list[Condition] = []
        for c in conds:
            if c.name not in drops and c not in out:
                out.append(c)
        return tuple(out)

    def derivative(self, wrt: str, order: int = 1) -> Theorem:
        """The sympy derivative as a Theorem of its own (same parameters and conditions)."""
        import sympy as sp

        check_derivative(self.notation.params, wrt)
        key = (f"d{order}", wrt)
        if key not in self._derived:
            name, lhs, doc = derivative_names(self, wrt, order)
            self._derived[key] = Theorem(self.notation, name, sp.S.Zero, lhs=lhs, source=self.source, doc=doc,
                                         _parent=(self, wrt, order))
        return self._derived[key]

    # -- rendering ---------------------------------------------------------------------------------------
    def latex(self, variant: str = PAPER, expand: bool = False) -> str:
        """LaTeX of the theorem: compact (with its definitions listed) or fully expanded."""
        import sympy as sp

        if expand or self._parent is not None:
            return f"{self.lhs} = {sp.latex(self.expression(variant))}"
        defs, _ = self.notation.definitions_for(variant)
        top = defs[self.template].expr if self.template in defs else self.template
        parts = [f"{self.lhs} = {sp.latex(top)}"]
        where = [f"{sp.latex(s)} = {sp.latex(defs[s].expr)}" for s in _reachable(top, defs)]
        if where:
            parts.append(r",\quad\text{where }" + r",\; ".join(where))
        return "".join(parts)

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self.latex()}$"

    def describe(self, variant: str = PAPER) -> str:
        """Plain-text summary: source, parameters with domains, conditions, variants."""
        lines = [f"{self.name}: {self.doc}", f"  source: {self.source}"]
        for p in self.parameters(variant):
            lines.append(f"  {p.name:>6} in {p.valid_range():<22} {p.doc}")
        for c in self.conditions(variant):
            lines.append(f"  [{c.severity}] {c.name}: {c.message} ({c.blame}: {c.valid})")
        for v in self.variants():
            var = self.notation.variants[v]
            lines.append(f"  variant {v}: {var.doc} ({var.source})")
        return "\n".join(lines)
