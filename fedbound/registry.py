"""The paper registry: one :class:`Paper` entry per paper; the CLI, the explorer and the tests are generic
over it.

How to add a paper (the contract)
=================================

A paper is a unit: its own modules plus one registration file, and no edit anywhere else (no CLI command,
no enum, no test list).  For a paper with CLI name ``NAME``:

1. ``bounds/NAME_theory.py`` -- its theorems as data, declared with sympy (:mod:`fedbound.bounds.core`:
   ``NOTATION``, theorem objects, ``THEOREMS``); ``bounds/NAME.py`` -- their stand-ins
   (:mod:`fedbound.bounds.lazy`: ``Theory("fedbound.bounds.NAME_theory")``, so that a cached plan never
   imports sympy), its declared claims (``CLAIMS``, :mod:`fedbound.bounds.claims`), and ONE noise function
   ``noise(setting, T, method="paper") -> {stage: sigma}``: the noise std of every stage (``"uplink"``,
   ``"server"``, ``"inner"`` ...) for ``T`` rounds, by the paper's formula (``method="paper"``) or its tight
   calibration through :mod:`fedbound.accounting` (``"tight"``); papers may offer more methods (e.g.
   ``"corrected"``).  It is the only place that decides "which sigma": the planner and the training recipe
   both call it.  bounds/ never imports fedbound.config or the CLI.
2. ``scheduling/NAME.py`` -- its optimisers, returning :class:`fedbound.scheduling.results.Optimum`, any
   claims about optima (``CLAIMS``), and ``plan(settings, variant="paper") -> Plan``
   (:class:`fedbound.scheduling.results.Plan`): the recommendation first (the design that minimises the
   bound under noise whose accounting provably meets (eps, delta), and the bound it predicts), then the
   paper's own answer and the differences.
3. optionally ``validation/reproduce/plots_NAME.py`` -- ``PLOTS = {vs: draw}`` where
   ``draw(ax, settings, variant)`` draws on a matplotlib axis and returns the title; and
   ``validation/recipes/NAME.py`` -- ``RECIPE`` (:class:`fedbound.validation.recipes.runner.Recipe`) for
   ``fedbound train NAME``.
4. ``fedbound/papers/NAME.py`` -- the registration: ``PAPER = Paper(...)`` with the name, seed id, title,
   authors, venue, the config :class:`~fedbound.config.Section` ``[NAME]`` (keys with domain, default and
   meaning, in the shared vocabulary below) and references (``"module:attribute"`` strings, imported only
   when used, so ``fedbound --help`` stays fast) to the pieces above.  Discovery is automatic: every module
   of :mod:`fedbound.papers` that defines ``PAPER`` is registered.

Shared vocabulary of config keys (the same meaning in every section): ``T`` rounds, ``N`` clients,
``K`` clients per round, ``eps`` and ``delta`` the privacy target, ``C`` the clipping threshold, ``m`` the
smallest local dataset.  A paper that names a key otherwise maps it with ``aliases`` (e.g. seed 004's
``T0`` -> ``T``); the alias is accepted with a note.

Warnings and messages cite a paper by ``Paper.short`` and equation, e.g. "NbAFL (Wei et al. 2020), eq. (10)",
never an internal spec handle.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fedbound.errors import ConfigError, FedboundWarning

__all__ = ["Paper", "Setting", "papers", "get", "names", "resolve", "field_from_param"]

CAPABILITIES = ("plan", "plot", "claims", "train", "audit")


def resolve(ref: Any) -> Any:
    """``"package.module:attribute"`` -> the object (imported now); anything else is returned as is."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Setting:
    """A paper's validated setting: ``values`` (unset optional keys dropped, defaults filled in), the keys
    taken from the paper's documented defaults (``assumed``), notes (e.g. an alias was used) and the keys
    the config marks as measured by ``fedbound estimate`` (``measured``)."""

    values: dict[str, Any]
    assumed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    """The keys set with ``--set`` (canonical names): the inputs an error should name first."""


def _registered_section(section: Any, aliases: Mapping[str, str], defaults: Mapping[str, Any]) -> Any:
    """The paper's Section as the registry documents it: accepting ``aliases`` (resolved by
    :meth:`fedbound.config.Section.resolve_aliases`, the one resolver of files, ``--set`` and the explorer),
    and with every key that has a documented default in ``defaults`` optional (the default is filled in and
    listed as assumed), so ``fedbound papers`` and every command agree on what is required."""
    import dataclasses

    from fedbound.config import REQUIRED

    fields = tuple(dataclasses.replace(f, default=None, optional=True)
                   if f.name in defaults and f.default is REQUIRED and not f.optional else f
                   for f in section.fields)
    return dataclasses.replace(section, fields=fields, aliases={**section.aliases, **aliases})


@dataclass(frozen=True)
class Paper:
    """One registered paper: identity, config section and (lazy) references to its pieces.

    ``section``: a :class:`~fedbound.config.Section` or a reference to one or to a zero-argument function
    returning one.  ``claims``: references to tuples of :class:`~fedbound.bounds.claims.Claim` (theorem
    claims and optimiser claims, all in one list).  ``noise``/``planner``/``plots``/``recipe``: references
    (``None``: not supported).  ``defaults``: documented values assumed for keys the user did not give when
    planning without a file (the plan says which were assumed).  ``aliases``: ``{old key: key}``.
    ``example``: a complete setting (with ``defaults``) that plans and plots: the paper's own experiment,
    used by the tests over the registry and as the explorer's starting point.  ``audit``: a reference to
    the paper's :class:`fedbound.validation.audit.AuditViews` (``fedbound audit PAPER``; needs ``recipe``).
    ``validation``: reference to the paper's :class:`fedbound.validation.estimate.paper_entry.Validation`
    (``fedbound estimate`` / ``validate``: which constants its bound needs and how to evaluate it at measured
    ones). ``reproduce``: reference to the paper's figure claims for ``fedbound reproduce`` (a tuple of
    :class:`fedbound.validation.reproduce.Target` and ``Uncovered`` entries).
    """

    name: str
    seed: str
    short: str
    title: str
    authors: str
    venue: str
    year: int
    section: Any
    theorems: str | None = None
    claims: tuple[str, ...] = ()
    noise: str | None = None
    planner: str | None = None
    plots: str | None = None
    recipe: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""
    example: Mapping[str, Any] = field(default_factory=dict)
    audit: str | None = None
    validation: str | None = None
    reproduce: str | None = None

    @property
    def citation(self) -> str:
        return f"{self.authors}, \"{self.title}\", {self.venue}, {self.year}"

    @property
    def supports(self) -> tuple[str, ...]:
        have = {"plan": self.planner, "plot": self.plots, "claims": self.claims or None, "train": self.recipe,
                "audit": self.audit if self.recipe else None}
        return tuple(c for c in CAPABILITIES if have[c])

    @cached_property
    def config_section(self) -> Any:
        """The ``[NAME]`` Section (built on first use; accepts the paper's aliases)."""
        obj = resolve(self.section)
        return _registered_section(obj() if callable(obj) and not hasattr(obj, "fields") else obj,
                                   self.aliases, self.defaults)

    def _refuse_misplaced(self, cfg: Any) -> None:
        """A key of ``[NAME]`` written under ``[train]`` is a ConfigError here too, not only in ``train``
        (``plan`` reads [NAME] alone and would silently ignore it; no [train] key is also a paper key)."""
        table = cfg.raw.get("train")
        section = self.config_section
        misplaced = [k for k in table if k in section] if isinstance(table, dict) else []
        if misplaced:
            key = misplaced[0]
            raise ConfigError(f"{cfg.source}: [train] {key} is a key of [{self.name}], not of [train]: "
                              f"move it under [{self.name}] (plan and train read it only there)")

    def load_setting(self, config: Any = None, overrides: Any = ()) -> Setting:
        """The ``[NAME]`` section of a TOML file (or none) with ``--set`` overrides, validated, unset optional
        keys dropped and the documented defaults filled in (listed in ``Setting.assumed``); a [NAME] key
        under [train] is refused."""
        from fedbound.config import load_config, measured_keys

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FedboundWarning)
            cfg = load_config(config, [self.config_section], list(overrides),
                              known_sections=(*names(), "train"))
        self._refuse_misplaced(cfg)
        values = {k: v for k, v in cfg[self.name].items() if v is not None}
        assumed = tuple(k for k in self.defaults if k not in values)
        values.update({k: self.defaults[k] for k in assumed})
        measured = tuple(k for k in measured_keys(config) if k in values and k not in assumed)
        if measured:  # a measured config: every other loss constant is an assumption, given or defaulted
            assumed = tuple(k for k in self.defaults if k not in measured)
        section = self.config_section
        keys = (str(o).partition("=")[0].strip().split(".", 1)[-1] for o in overrides)
        given = tuple(dict.fromkeys(section.canonical(k) for k in keys if k in section))
        notes = tuple(dict.fromkeys(str(w.message) for w in caught))
        return Setting(values, assumed, notes, measured, given)

    def variants(self, variant: str = "paper") -> tuple[str, ...]:
        """The named readings ``variant`` combines (ParameterError for an unknown one); all of them when
        ``variant`` is "paper"."""
        notation = resolve(self.theorems).NOTATION
        names = notation.variant_names(variant)
        return names or tuple(notation.variants)

    def load(self, what: str) -> Any:
        """The object behind a reference: ``noise``, ``planner``, ``plots``, ``recipe``, ``audit`` or
        ``theorems``."""
        ref = getattr(self, what)
        if ref is None:
            raise ConfigError(f"{self.short} has no {what} in fedbound yet (it supports: "
                              f"{', '.join(self.supports) or 'nothing'})")
        return resolve(ref)

    def all_claims(self) -> tuple[Any, ...]:
        """Every declared claim of the paper: theorem claims and optimiser claims, in one tuple."""
        return tuple(c for ref in self.claims for c in resolve(ref))

    def keys(self) -> list[dict[str, Any]]:
        """The config keys with domain, default and meaning (what ``fedbound papers --json`` lists)."""
        from fedbound.config import REQUIRED

        out = []
        for f in self.config_section.fields:
            default = self.defaults.get(f.name, None if f.default is REQUIRED else f.default)
            out.append({"key": f.name, "type": f.kind.__name__, "domain": f.valid_range(), "default": default,
                        "required": f.default is REQUIRED and not f.optional and f.name not in self.defaults,
                        "meaning": f.doc})
        for old, new in self.aliases.items():
            out.append({"key": old, "type": "alias", "domain": f"alias of {new}", "default": None,
                        "required": False, "meaning": f"accepted for {new}"})
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "seed": self.seed, "short": self.short, "title": self.title,
                "authors": self.authors, "venue": self.venue, "year": self.year, "citation": self.citation,
                "summary": self.summary, "supports": list(self.supports), "config_section": self.name,
                "keys": self.keys(), "example": dict(self.example)}


def field_from_param(param: Any, *, default: Any = None, optional: bool = False, doc: str = "",
                     kind: type | None = None, low: float | None = None, high: float | None = None) -> Any:
    """A config :class:`~fedbound.config.Field` with the domain and meaning of a theorem parameter
    (:class:`fedbound.bounds.core.Param`), so a key's range is declared once, next to the formula.

    ``low``/``high`` narrow the domain to what the planner answers in bounded time and without overflow
    (documented maxima, e.g. N <= 10^5); a bound given here is closed."""
    from fedbound.config import REQUIRED, Field

    kw: dict[str, Any] = {"low": param.low, "high": param.high, "low_open": param.low_open,
                          "high_open": param.high_open}
    if low is not None:
        kw.update(low=low, low_open=False)
    if high is not None:
        kw.update(high=high, high_open=False)
    kw["default"] = None if optional else (REQUIRED if default is None else default)
    return Field(param.name, kind or (int if param.integer else float), doc=param.doc + doc,
                 optional=optional, **kw)


_REGISTRY: dict[str, Paper] = {}


def _discover() -> dict[str, Paper]:
    if not _REGISTRY:
        import fedbound.papers as pkg

        found = []
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"fedbound.papers.{info.name}")
            entry = getattr(module, "PAPER", None)
            if isinstance(entry, Paper):
                found.append(entry)
        for entry in sorted(found, key=lambda p: p.seed):
            if entry.name in _REGISTRY:
                raise RuntimeError(f"two papers registered as {entry.name!r}")
            _REGISTRY[entry.name] = entry
    return _REGISTRY


def papers() -> dict[str, Paper]:
    """Every registered paper, by name, in seed order."""
    return dict(_discover())


def names(capability: str | None = None) -> tuple[str, ...]:
    """Registered paper names (those supporting ``capability`` when given)."""
    return tuple(n for n, p in _discover().items() if capability is None or capability in p.supports)


def get(name: str, capability: str | None = None) -> Paper:
    """The paper registered as ``name``; ConfigError (with "did you mean") otherwise."""
    reg = _discover()
    if name not in reg:
        close = difflib.get_close_matches(str(name), list(reg), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"paper {name!r} is outside its valid range one of {', '.join(reg)}{hint}")
    paper = reg[name]
    if capability is not None and capability not in paper.supports:
        raise ConfigError(f"fedbound {capability} {name}: {paper.short} has no {capability} in fedbound yet "
                          f"(it supports: {', '.join(paper.supports) or 'nothing'})")
    return paper

