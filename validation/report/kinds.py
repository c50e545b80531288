"""The report's HTML for the result kinds of :mod:`fedbound.validation.report.results`: the plans, training
and Flower runs, sweeps and audits a results folder holds, each with its key numbers and the binding epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedbound.validation.report.html import esc, image, table
from fedbound.validation.report.results import Result, binding

__all__ = ["plans_html", "runs_html", "audits_html", "number"]


def number(v: Any, digits: int = 4) -> str:
    """A number to ``digits`` significant digits, a per-round list as its range, '-' for nothing."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v):
        lo, hi = min(v), max(v)
        return (number(lo, digits) if lo == hi
                else f"{number(lo, digits)} to {number(hi, digits)} over {len(v)} rounds")
    if isinstance(v, float):
        return f"{v:.{digits}g}" if math.isfinite(v) else str(v)
    return str(v)


def _where(result: Result, results: Path) -> str:
    try:
        return str(result.path.relative_to(results))
    except ValueError:
        return str(result.path)


def _plan_privacy(doc: Mapping[str, Any]) -> str:
    """Each stage's epsilon as the plan's certificate re-accounted it, against its target."""
    stages = (doc.get("certificate") or {}).get("privacy") or []
    parts = [f"{s.get('stage')}: ε {number(s.get('eps_achieved'))} of {number(s.get('eps_target'))} at "
             f"δ = {number(s.get('delta'))} ({s.get('method')})" for s in stages if isinstance(s, Mapping)]
    return "; ".join(parts) or "-"


def plans_html(found: Sequence[Result], results: Path) -> str:
    """The plans saved in the folder (``fedbound plan ... --json > FILE``)."""
    if not found:
        return ""
    rows = []
    for r in found:
        rec = r.doc["recommendation"]
        sigma = ", ".join(f"{k} {number(v)}" for k, v in (rec.get("sigma") or {}).items())
        vacuous = str(rec.get("why", "")).startswith("VACUOUS")
        rows.append([esc(_where(r, results)), esc(rec.get("T")), esc(rec.get("K") or "all"), esc(sigma),
                     esc(number(rec.get("bound"))) + (" <span class='fails'>(vacuous)</span>" if vacuous
                                                      else ""),
                     esc(_plan_privacy(r.doc))])
    return ("<h4>Plans saved in the results folder</h4>"
            + table(["file", "T", "K", "noise std per stage", "predicted bound", "ε per stage (certificate)"],
                    rows, raw=True))


def _accuracy(summary: Mapping[str, Any]) -> str:
    test, train = summary.get("final_test_accuracy"), summary.get("final_accuracy")
    if test is None and train is None:
        return "-"
    return f"{number(train)} / {number(test)}"


def _run_kind(r: Result) -> str:
    if r.kind == "train":
        return "fedbound train"
    return "Flower deployment" if (r.path / "deployment").is_dir() else "Flower simulation"


def _run_row(r: Result, results: Path) -> list[str]:
    s = r.doc
    flower = ""
    if r.kind == "flower":
        flower = (f"Flower's RdpAccountant ε {number(s.get('epsilon_flower'))}; "
                  f"noise {s.get('noise_source', '-')}")
    done = f"{s.get('rounds_done', '-')} of {s.get('rounds_planned', s.get('rounds', '-'))}"
    return [esc(_where(r, results)), esc(_run_kind(r)), esc(done), esc(number(s.get("final_loss"))),
            esc(_accuracy(s)), esc(binding([s])), esc(s.get("privacy") or "-"), esc(flower or "-"),
            esc(f"{number(s.get('wall_time_s'), 3)} s")]


def _label(spec: Mapping[str, Any]) -> str:
    label = spec.get("label") or {}
    return ", ".join(f"{k} = {number(v)}" for k, v in label.items()) or "(the config)"


def _order(spec: Mapping[str, Any]) -> tuple:
    """Settings in the order of their values (numbers numerically), then by seed."""
    label = spec.get("label") or {}
    return (tuple((0, v, "") if isinstance(v, int | float) else (1, 0, str(v)) for v in label.values()),
            spec.get("seed", 0))


def _mean(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return sum(numbers) / len(numbers) if numbers else None


def _sweep_html(r: Result, results: Path) -> str:
    groups: dict[str, list[dict]] = {}
    for spec, summary in sorted(r.runs, key=lambda run: _order(run[0])):
        groups.setdefault(_label(spec), []).append(summary)
    rows = [[esc(label), esc(len(runs)), esc(number(_mean([s.get("final_loss") for s in runs]))),
             esc(number(_mean([s.get("final_accuracy") for s in runs]))), esc(binding(runs))]
            for label, runs in groups.items()]
    summaries = [s for _, s in r.runs]
    return (f"<h4>Sweep {esc(_where(r, results))}</h4><p>{len(summaries)} runs ({len(groups)} settings); "
            f"binding {esc(binding(summaries))}. Every row: <code>{esc(_where(r, results))}/table.csv</code>."
            "</p>"
            + table(["setting", "runs (seeds)", "final loss (mean)", "final accuracy (mean)", "binding ε"],
                    rows, raw=True))


def runs_html(found: Sequence[Result], results: Path, name: str) -> str:
    """Training runs, Flower runs and sweeps of one paper."""
    runs = [r for r in found if r.kind in ("train", "flower")]
    sweeps = [r for r in found if r.kind == "sweep"]
    if not runs and not sweeps:
        return (f"<p class='muted'>No training run, Flower run or sweep in RESULTS_DIR: <code>fedbound train "
                f"{esc(name)} CONFIG --out RESULTS_DIR/train_{esc(name)}</code>, <code>fedbound flower "
                f"{esc(name)} CONFIG --run</code> or <code>fedbound sweep</code> put one there.</p>")
    body = []
    if runs:
        body.append("<h4>Training and Flower runs</h4>" + table(
            ["run", "how", "rounds", "final loss", "final accuracy (train / test)", "binding ε",
             "privacy", "Flower", "wall time"], [_run_row(r, results) for r in runs], raw=True))
    body.extend(_sweep_html(r, results) for r in sweeps)
    return "".join(body)


def _verdict(verdict: str) -> str:
    css = "bad" if verdict.startswith("LEAK") else ("holds" if verdict == "consistent" else "fails")
    return f"<span class='{css}'>{esc(verdict.split(':')[0])}</span>"


def audits_html(found: Sequence[Result], results: Path, name: str) -> str:
    """The privacy audits of one paper: verdict, trials, and per adversary view the epsilon lower bound
    against the epsilon the ledger reports (the binding one) and the one dp-accounting recomputes."""
    audits = [r for r in found if r.kind == "audit"]
    if not audits:
        return (f"<p class='muted'>No audit in RESULTS_DIR: <code>fedbound audit {esc(name)} CONFIG --out "
                f"RESULTS_DIR/audit_{esc(name)}.png</code> puts one there.</p>")
    body = []
    for r in audits:
        d = r.doc
        rows = [[esc(v.get("view")), *(esc(number(v.get(k))) for k in ("epsilon_lower", "epsilon_reported",
                                                                         "epsilon_independent",
                                                                         "control_epsilon_lower")),
                 esc(f"{number(v.get('noise_std_measured'))} / {number(v.get('noise_std_planned'))}")]
                for v in d.get("views", []) if isinstance(v, Mapping)]
        reasons = "".join(f"<li>{esc(x)}</li>" for x in d.get("reasons") or [])
        body.append(
            f"<h4>{esc(_where(r, results))}: {_verdict(str(d.get('verdict', '')))}</h4>"
            f"<p>{esc(d.get('trials'))} trials per side, {esc(d.get('rounds'))} round(s), "
            f"{esc(d.get('level'))} level, δ = {esc(number(d.get('delta')))}; the "
            f"{esc(d.get('budget_accountant'))} accountant holds the run's budget (the binding ε is the one "
            "it reports).</p>"
            + table(["view", "ε lower bound (95 %)", "ε reported (binding)", "ε independent (dp-accounting)",
                     "control (noise halved): ε lower", "noise std measured / planned"], rows, raw=True)
            + (f"<ul>{reasons}</ul>" if reasons else ""))
        png = r.path.with_suffix(".png")
        if png.is_file():
            body.append(image(png, f"{name} audit"))
    return "".join(body)
