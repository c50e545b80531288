"""What the explorer's JSON API answers, in plain Python (no web framework here): the CLI's JSON.

* :func:`papers_json` is ``fedbound papers --json``;
* :func:`plan_json` is ``fedbound plan PAPER --set KEY=VALUE ... --variant V --json``: the body's keys are
  the ``--set`` keys, turned into the same override strings and sent through the CLI's own code path
  (:func:`fedbound.commands.papers.build_plan`);
* :func:`curve_json` is the paper's figure against one variable (``fedbound plot PAPER --vs X``) as data
  (:func:`fedbound.validation.reproduce.plots.figure_data`);
* :func:`claims_json` is ``fedbound claims PAPER --json``, each counterexample with an explorer link where
  its point is a setting of the paper's config section;
* :func:`form_json` gives each config key's numeric domain, so the page can build inputs and sliders, and
  the setting the page starts from (the paper's experiment, changed where its registry entry's
  ``explore`` says, so that the page opens on an informative recommendation) and the plot it shows first
  (the bound against T, where the recommended design is marked);
* :func:`vacuity_json`: when a recommendation is vacuous, what to change (:mod:`fedbound.explorer.vacuity`).

Every value is checked against the paper's config domains before anything is computed: a bad value raises
:class:`BadInput`, a one-line message naming the parameter (the web layer answers 422).  Nothing here reads
or writes a file.
"""

from __future__ import annotations

import json
import math
import threading
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any

from fedbound.checks import to_jsonable
from fedbound.errors import ConfigError, FedboundError, ParameterError

__all__ = ["BadInput", "papers_json", "form_json", "plan_json", "curve_json", "claims_json",
           "counterexample_links", "overrides", "vacuity_json"]

MAX_KEYS = 64
"""At most this many keys in one request body (a section has far fewer)."""


class BadInput(ConfigError):
    """A request the explorer refuses: ``parameter`` (None when no single one is to blame) and a one-line
    message naming it, its value and the valid range."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


def _paper(name: str, capability: str | None = None) -> Any:
    from fedbound.registry import get

    try:
        return get(name, capability)
    except ConfigError as exc:
        raise BadInput(str(exc), "paper") from None


def papers_json() -> dict[str, Any]:
    """``fedbound papers --json``."""
    from fedbound.registry import papers

    return to_jsonable({"papers": [p.describe() for p in papers().values()]})


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def form_json(name: str) -> dict[str, Any]:
    """The inputs of a paper's page: per config key its kind, numeric domain (``low``/``high``, None when
    unbounded, with open ends flagged), choices, whether it is optional, its default and meaning; plus the
    plot variables, the variants and the example setting the page starts from."""
    from fedbound.config import REQUIRED

    paper = _paper(name)
    fields = []
    for f in paper.config_section.fields:
        default = paper.defaults.get(f.name, None if f.default is REQUIRED else f.default)
        fields.append({"key": f.name, "kind": f.kind.__name__, "low": _finite_or_none(f.low),
                       "high": _finite_or_none(f.high), "low_open": f.low_open, "high_open": f.high_open,
                       "choices": list(f.choices) if f.choices else None, "domain": f.valid_range(),
                       "optional": f.optional or f.default is not REQUIRED or f.name in paper.defaults,
                       "default": default, "meaning": f.doc})
    plots = list(paper.load("plots")) if paper.plots else []
    variants = ["paper", *paper.variants()] if paper.theorems else ["paper"]
    start = {k: v for k, v in {**paper.example, **paper.explore}.items() if v is not None}
    return to_jsonable({"paper": paper.name, "short": paper.short, "fields": fields, "plots": plots,
                        "variants": variants, "example": dict(paper.example), "start": start,
                        "start_vs": "T" if "T" in plots else (plots[0] if plots else None),
                        "supports": list(paper.supports)})


def _toml_literal(value: Any) -> str:
    """A JSON value as the TOML literal ``--set`` reads (strings quoted, booleans lower case)."""
    return json.dumps(value, allow_nan=False)


def _kind(body: Any) -> str:
    """What a request body is, in JSON's words."""
    if isinstance(body, list | tuple):
        return "a JSON array"
    if isinstance(body, str | bytes):
        return "text (send a JSON object with Content-Type: application/json)"
    return "null" if body is None else f"a JSON {'boolean' if isinstance(body, bool) else 'number'}"


def overrides(paper: Any, body: Any) -> list[str]:
    """The body (``{key: value}``, the ``--set`` keys) as ``KEY=VALUE`` override strings, each value checked
    first against its key's domain so that the error names the key; null values are left unset."""
    if not isinstance(body, Mapping):
        raise BadInput(f"the request body must be a JSON object of {paper.name} config keys, "
                       f"e.g. {{\"eps\": 6}}; got {_kind(body)}", None)
    if len(body) > MAX_KEYS:
        raise BadInput(f"the request body has {len(body)} keys; at most {MAX_KEYS}", None)
    section = paper.config_section
    out = []
    for key, value in body.items():
        if value is None:
            continue
        if key not in section:
            import difflib

            close = difflib.get_close_matches(str(key), section.keys(), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BadInput(f"unknown key {str(key)[:60]!r} in [{paper.name}]{hint} Valid keys: "
                           f"{', '.join(section.keys())}", str(key)[:60])
        target = section.field(key)
        try:
            target.coerce(key, value)
            literal = _toml_literal(value)
        except (ConfigError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ConfigError) else (f"{key} = {value!r} is outside its valid "
                                                                 f"range {target.valid_range()}")
            raise BadInput(why, key) from None
        out.append(f"{key}={literal}")
    return out


def _blame(exc: FedboundError, keys: list[str], note: str = "") -> BadInput:
    """A BadInput from an error raised after the per-key checks (a missing key, a combination of values the
    planner refuses): the parameter is the one the error names, when it names one of the section's keys."""
    name = getattr(exc, "name", None)
    if name not in keys:
        words = str(exc).replace("[", " ").replace("]", " ").replace("=", " ").split()
        name = next((w for w in words if w in keys), None)
    return BadInput((str(exc).splitlines()[0] if str(exc) else type(exc).__name__) + note, name)


def _variant(paper: Any, variant: str) -> str:
    from fedbound.commands.papers import _check_variant

    try:
        return _check_variant(paper, variant)
    except (ParameterError, ConfigError) as exc:
        raise BadInput(str(exc), "variant") from None


def _unset(body: Any) -> str:
    """"; null leaves K unset" for the body's null keys (an error about a missing key then names them)."""
    nulls = [str(k)[:60] for k, v in body.items() if v is None] if isinstance(body, Mapping) else []
    return f" (the body's null leaves {', '.join(nulls)} unset)" if nulls else ""


_PLAN_LOCKS: dict[tuple[str, tuple[str, ...], str], threading.Lock] = {}
_PLAN_LOCKS_GUARD = threading.Lock()


def _build_plan(name: str, sets: list[str], variant: str) -> Any:
    """The CLI's ``build_plan``, computed once for requests that ask for the same plan at the same time (the
    page sends its plan and its curve together; the curve marks the plan's design): the second waits for the
    first and takes the kept plan (``fedbound.planning.cached_plan``) instead of planning again."""
    from fedbound.commands.papers import build_plan

    key = (name, tuple(sets), variant)
    with _PLAN_LOCKS_GUARD:
        if len(_PLAN_LOCKS) > 1024:  # forget old keys (a forgotten lock only loses the sharing)
            _PLAN_LOCKS.clear()
        lock = _PLAN_LOCKS.setdefault(key, threading.Lock())
    with lock:
        return build_plan(name, None, sets, variant)


def plan_json(name: str, body: Any, variant: str = "paper") -> dict[str, Any]:
    """``fedbound plan NAME --set KEY=VALUE ... --variant VARIANT --json``, as a dict."""
    paper = _paper(name, "plan")
    sets = overrides(paper, body)
    _variant(paper, variant)
    try:
        return to_jsonable(_build_plan(name, sets, variant))
    except FedboundError as exc:
        raise _blame(exc, paper.config_section.keys(), _unset(body)) from None


def curve_json(name: str, body: Any, vs: str = "T", variant: str = "paper") -> dict[str, Any]:
    """The paper's figure against ``vs`` for the body's setting, as data (``fedbound plot NAME --vs VS``
    draws the same lines), with the plan's ``recommended`` design (T, bound) on the T axis."""
    from fedbound.validation.reproduce.plots import figure_data

    paper = _paper(name, "plot")
    sets = overrides(paper, body)
    _variant(paper, variant)
    plots = paper.load("plots")
    if vs not in plots:
        raise BadInput(f"vs = {vs!r} is outside its valid range one of {', '.join(plots)}", "vs")
    try:
        from fedbound.planning import blame_input

        setting = paper.load_setting(None, sets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failure is blamed on the input that causes it, as in plan
            data = blame_input(paper, setting.values, lambda values: figure_data(plots, values, vs, variant),
                               setting.given)
        rec = _recommended(name, sets, variant, vs)
        return to_jsonable({"paper": paper.name, **data, "recommended": rec})
    except FedboundError as exc:
        raise _blame(exc, paper.config_section.keys(), _unset(body)) from None


def _recommended(name: str, sets: list[str], variant: str, vs: str) -> dict[str, Any] | None:
    """The plan's recommended T and its bound for the curve's setting (the figure marks the same design and
    draws its deployed-noise curve through it); None off the T axis or without a planner."""
    if vs != "T" or not getattr(_paper(name), "planner", None):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = _build_plan(name, sets, variant).recommendation
    return None if rec is None else {"T": rec.T, "bound": rec.bound}


def vacuity_json(name: str, body: Any, variant: str = "paper") -> dict[str, Any]:
    """Whether the plan of the body's setting is vacuous and, when it is, what to change (each of the
    paper's levers alone, checked by planning it: :func:`fedbound.explorer.vacuity.remedies`)."""
    from fedbound.explorer.vacuity import remedies, vacuous

    paper = _paper(name, "plan")
    sets = overrides(paper, body)
    _variant(paper, variant)
    section = paper.config_section
    try:
        plan = _build_plan(name, sets, variant)
        out: dict[str, Any] = {"paper": paper.name, "vacuous": vacuous(plan)}
        if not out["vacuous"]:
            return out
        values = paper.load_setting(None, sets).values

        def plan_with(changes: Mapping[str, Any]) -> Any:
            kept = [s for s in sets if section.canonical(s.partition("=")[0].strip()) not in changes]
            return _build_plan(name, kept + [f"{k}={_toml_literal(v)}" for k, v in changes.items()
                                             if v is not None], variant)

        return to_jsonable({**out, "why": str(plan.recommendation.why).split(". ")[0] + ".",
                            **remedies(paper, values, plan_with)})
    except FedboundError as exc:
        raise _blame(exc, section.keys(), _unset(body)) from None


def counterexample_links(name: str) -> list[list[str | None]]:
    """Per declared claim of the paper, per counterexample: the page's query string that opens it (paper,
    variant and the point's values), or None where the point is not a setting of the paper's section."""
    from urllib.parse import urlencode

    paper = _paper(name, "claims")
    keys = set(paper.config_section.keys())
    out = []
    for claim in paper.all_claims():
        links = []
        for point, variant in claim.counterexamples:
            given = {k: v for k, v in point.items() if v is not None}
            loadable = (given and set(given) <= keys
                        and all(isinstance(v, int | float | str) for v in given.values()))
            links.append(urlencode({"paper": paper.name, "variant": variant, **given}) if loadable else None)
        out.append(links)
    return out


@cache
def claims_json(name: str) -> dict[str, Any]:
    """``fedbound claims NAME --json`` (10 points per claim, seed 0: the CLI's defaults; the answer does not
    depend on the setting, so it is computed once per paper and kept across runs, keyed by the code's
    fingerprint: checking a paper's claims takes seconds), each claim with ``explore``: its
    :func:`counterexample_links`."""
    from fedbound.bounds.compiled import cached_json
    from fedbound.planning import code_fingerprint

    paper = _paper(name, "claims")

    def check() -> dict[str, Any]:
        from fedbound.bounds.claims import check_all

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reports = check_all(paper.all_claims(), n=10, seed=0)
        return to_jsonable({"paper": paper.name, "points_per_claim": 10, "claims": reports})

    out = cached_json(f"explorer-claims|{paper.name}|{code_fingerprint()}", check)
    for report, links in zip(out["claims"], counterexample_links(name), strict=True):
        report["explore"] = links
    return out
