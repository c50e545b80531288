"""Every result kind a results folder holds, found by the files fedbound writes, grouped by paper.

* **plan**: the JSON of ``fedbound plan PAPER ... --json > FILE`` (``recommendation``, ``rows``,
  ``certificate``);
* **train** / **flower**: a run directory of ``fedbound train`` / ``fedbound flower --run`` (``summary.json``
  beside ``config.toml``, no ``spec.json``: a sweep's runs have one); a Flower run's summary carries Flower's
  accounting (``flower_accounting``), a local deployment leaves its ``deployment/`` folder;
* **sweep**: a ``fedbound sweep`` folder (``table.csv`` beside ``runs/``), unless it is the sweep a
  ``validate`` (``validation.json`` beside it) or a ``reproduce`` (its ``runs/`` beside the figures'
  ``verdicts.json``) trained for its own result;
* **audit**: the JSON ``fedbound audit ... --out FIG.png`` writes beside its figure (``verdict``, ``views``,
  ``trials``).

``validate`` (``validation.json``) and ``reproduce`` (``verdicts.json``) results are read by
:func:`fedbound.validation.report.find_results`; :func:`run_index` finds the summaries of the runs they
trained (by run key), so their pages can state the binding epsilon too (:func:`binding`).

A folder is walked once, up to :data:`fedbound.validation.report.MAX_FILES` entries; a JSON file that is not
fedbound's is skipped, a damaged result of a kind above is refused (ConfigError naming the file): a run's
summary, or a JSON file holding a plan's or an audit's keys (:data:`MARKERS`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError

__all__ = ["Result", "KINDS", "walk", "scan", "run_index", "binding", "read_json"]

KINDS = ("plan", "train", "flower", "sweep", "audit")
"""The result kinds :func:`scan` finds (validate's and reproduce's are the report's own sections)."""

OWN = {"validation.json", "verdicts.json", "summary.json", "spec.json"}
"""JSON files read elsewhere (by name), never classified by content."""

MARKERS = (b'"recommendation"', b'"verdict"')
"""Keys only a plan's or an audit's JSON holds: a damaged JSON file holding one is refused, not skipped."""

MAX_JSON_BYTES = 64 << 20
"""Larger JSON files are not read as results (an audit with every score stays far below)."""


Tree = list[tuple[Path, list[str], list[str]]]
"""What :func:`walk` returns: ``(folder, sub-folders, files)`` per folder."""


@dataclass(frozen=True)
class Result:
    """One result: its ``kind`` (:data:`KINDS`), paper, where it lies (a file or a run folder), its JSON
    (the plan, the audit, a run's summary; for a sweep its first run's), and for a sweep every run's
    ``(label, summary)``."""

    kind: str
    paper: str
    path: Path
    doc: dict
    runs: tuple[tuple[dict, dict], ...] = field(default=())


def read_json(path: Path) -> Any:
    """Strict JSON of ``path`` (fedbound never writes NaN, Infinity or non-UTF-8); ConfigError naming the file
    when it is damaged."""
    from fedbound.checks import strict_json

    try:
        return strict_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"{path} is damaged ({str(exc).splitlines()[0][:120]}): run the command that wrote "
                          "it again, or remove it") from None


def walk(results: Path, limit: int) -> Tree:
    """``(folder, sub-folders, files)`` of every folder under ``results``, sorted; ConfigError past ``limit``
    entries (``report /`` must not walk the whole disk)."""
    out, seen = [], 0
    for folder, dirs, files in os.walk(results):
        dirs.sort()
        seen += len(dirs) + len(files)
        if seen > limit:
            raise ConfigError(f"RESULTS_DIR {str(results)!r} holds more than {limit:,} files: give the --out "
                              "folder of fedbound reproduce / validate, not a folder above it")
        out.append((Path(folder), dirs, sorted(files)))
    return out


def _json_kind(doc: Any) -> str | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("paper"), str):
        return None
    if isinstance(doc.get("recommendation"), dict) and "rows" in doc:
        return "plan"
    if "verdict" in doc and isinstance(doc.get("views"), list) and "trials" in doc:
        return "audit"
    return None


def _looks_like_json_result(path: Path) -> bool:
    """Read only files small enough and starting like a JSON object (a user's other files are left alone)."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return False
        with path.open("rb") as f:
            return f.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


def _owned_sweep(folder: Path) -> bool:
    """The sweep a validate or reproduce trained for its own result (shown with that result)."""
    parent = folder.parent
    if (parent / "validation.json").is_file() or (parent / "verdicts.json").is_file():
        return True
    return folder.name == "runs" and next(parent.glob("*/*/verdicts.json"), None) is not None


def _run_paper(summary: Mapping[str, Any], spec: Mapping[str, Any] | None = None) -> str:
    return str((spec or {}).get("paper") or summary.get("algorithm") or "unknown")


def _sweep_runs(folder: Path) -> list[tuple[dict, dict]]:
    """``(spec, summary)`` of every finished run of a sweep folder (a damaged one is refused)."""
    runs = []
    root = folder / "runs"
    for run in sorted(p for p in root.iterdir() if (p / "summary.json").is_file()):
        spec = read_json(run / "spec.json") if (run / "spec.json").is_file() else {}
        summary = read_json(run / "summary.json")
        if isinstance(summary, dict):
            runs.append((spec if isinstance(spec, dict) else {}, summary))
    return runs


def scan(tree: Tree) -> dict[str, list[Result]]:
    """Every plan, train run, Flower run, sweep and audit of a walked folder (module docstring), by
    paper."""
    found: dict[str, list[Result]] = {}

    def add(result: Result) -> None:
        found.setdefault(result.paper, []).append(result)

    for folder, dirs, files in tree:
        names = set(files)
        if "table.csv" in names and "runs" in dirs and not _owned_sweep(folder):
            runs = _sweep_runs(folder)
            if runs:
                add(Result("sweep", _run_paper(runs[0][1], runs[0][0]), folder, runs[0][1], tuple(runs)))
        if {"summary.json", "config.toml"} <= names and "spec.json" not in names:
            summary = read_json(folder / "summary.json")
            if isinstance(summary, dict):
                flower = "flower_accounting" in summary or "flower-events.jsonl" in names
                add(Result("flower" if flower else "train", _run_paper(summary), folder, summary))
        for name in files:
            path = folder / name
            if not name.endswith(".json") or name in OWN or not _looks_like_json_result(path):
                continue
            try:
                doc = read_json(path)
            except ConfigError:  # damaged: refused when it is a plan or an audit, another file is left alone
                if any(marker in path.read_bytes() for marker in MARKERS):
                    raise
                continue
            kind = _json_kind(doc)
            if kind is not None:
                add(Result(kind, doc["paper"], path, doc))
    return found


def run_index(tree: Tree) -> dict[str, dict]:
    """Run key -> summary of every run a sweep, validate or reproduce trained in a walked folder (the folders
    ``runs/KEY/`` holding ``summary.json``)."""
    index = {}
    for folder, _, files in tree:
        if folder.parent.name == "runs" and "summary.json" in files:
            summary = read_json(folder / "summary.json")
            if isinstance(summary, dict):
                index[folder.name] = summary
    return index


def binding(summaries: Iterable[Mapping[str, Any]]) -> str:
    """The binding epsilon of some runs, in words: what a private run spent on the accountant its budget
    binds on against that budget (the run with the largest share of its budget when there are several),
    and every run that is not (eps, delta)-DP at its stated budget (the paper-reproduction mode) with its
    exact epsilon."""
    number = (int, float)
    runs = [s for s in summaries if s.get("private", True) and isinstance(s.get("epsilon_binding"), number)
            and isinstance(s.get("eps_budget"), number) and s["eps_budget"] > 0]
    if not runs:
        return "no private run"
    worst = max(runs, key=lambda s: s["epsilon_binding"] / s["eps_budget"])
    accountants = ", ".join(sorted({str(s.get("binding_accountant") or "tight") for s in runs}))
    text = (f"ε {worst['epsilon_binding']:.4g} of budget {worst['eps_budget']:g} at δ = "
            f"{worst.get('delta', 0):g} ({accountants} accountant"
            + (f"; the largest share of its budget of {len(runs)} private runs)" if len(runs) > 1 else ")"))
    not_dp = [s for s in runs if str(s.get("privacy", "")).startswith("not")]
    if not_dp:
        exact = max(float(s.get("epsilon_spent") or 0.0) for s in not_dp)
        text += (f"; {len(not_dp)} run{'s' if len(not_dp) > 1 else ''} not (ε, δ)-DP at the stated budget "
                 f"(paper reproduction: exact ε up to {exact:.4g})")
    return text
