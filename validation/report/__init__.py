"""``fedbound.validation.report``: The report: one self-contained HTML page over a results folder (plans,
predicted vs measured, every claim, errata); ``html`` holds the HTML pieces.

Modules: ``html``, ``results``, ``kinds``.

``fedbound report RESULTS_DIR``: one self-contained HTML page with everything fedbound knows per paper.

For every registered paper, in this order (every result kind the folder holds, each with its key numbers
and the binding epsilon: :mod:`fedbound.validation.report.results` finds them):

1. **Plan**: the recommendation against the paper's own answer, for the paper's registered example setting
   (the planner called through the registry, the code path of ``fedbound plan --json``), then every plan
   saved in RESULTS_DIR (``fedbound plan ... --json > FILE``).
2. **Predicted vs measured**: what ``fedbound validate`` left in RESULTS_DIR (``validation.json`` with its
   figure, the binding epsilon of the runs it trained), when it is there.
3. **Runs**: ``fedbound train`` and ``fedbound flower --run`` run directories (rounds, final loss and
   accuracy, binding epsilon, Flower's epsilon beside it) and ``fedbound sweep`` folders (per setting).
4. **Audit**: every ``fedbound audit`` result (verdict; per adversary view the epsilon lower bound against
   the binding epsilon the ledger reports and the one dp-accounting recomputes; its figure).
5. **Claims**: every bound claim, checked now (the checker of ``fedbound claims``), and every figure claim
   with the verdict ``fedbound reproduce`` left in RESULTS_DIR (``verdicts.json``, one per figure) and its
   kind (training, bound, predicted vs measured), the binding epsilon of its runs, its figure redrawn
   interactively (plotly, zoom and hover) from the figure's CSV; figure claims not yet run or not
   reproduced are listed as such.
6. **Errata**: the errata table of the paper's page in ``docs/papers/NAME.md``.

Results of a mechanism outside the registry (e.g. the deployed DP-FedAvg) follow the papers.

The page carries plotly.js inline from the installed plotly package and every image as a data URI: it
opens with no network.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError
from fedbound.validation.report.html import esc, image, page, section, table
from fedbound.validation.report.kinds import audits_html, number, plans_html, runs_html
from fedbound.validation.report.results import Result, binding, read_json, run_index, scan, walk

__all__ = ["build_report", "find_results", "SECTIONS"]

SECTIONS = ("plan", "measured", "runs", "audit", "claims", "errata")
"""The sections of every paper, in page order (ids ``NAME-plan`` ...)."""

DOCS = Path(__file__).resolve().parents[2] / "docs" / "papers"


MAX_FILES = 200_000
"""A results folder is walked up to this many entries (``report /`` must not walk the whole disk)."""


def find_results(results: Path, name: str, tree: Any = None) -> dict[str, list[tuple[Path, dict]]]:
    """Files named ``name`` under ``results`` (JSON objects with a ``paper`` key), grouped by paper; a
    folder of more than MAX_FILES entries is refused (ConfigError) instead of walked, and so is a damaged
    file (not UTF-8 JSON, or holding NaN or Infinity): its numbers would be shown as results.  ``tree``:
    the folder as :func:`fedbound.validation.report.results.walk` returned it (walked here when None)."""
    found: dict[str, list[tuple[Path, dict]]] = {}
    tree = walk(results, MAX_FILES) if tree is None else tree
    for path in sorted(folder / name for folder, _, files in tree if name in files):
        doc = read_json(path)  # strict: fedbound never writes NaN or Infinity (nor non-UTF-8)
        if isinstance(doc, dict) and isinstance(doc.get("paper"), str):
            found.setdefault(doc["paper"], []).append((path, doc))
    return found


def _plan_section(paper: Any) -> str:
    from fedbound.checks import to_jsonable
    from fedbound.planning import example_overrides, plan_for

    if paper.planner is None:
        return "<p class='muted'>No planner for this paper in fedbound yet.</p>"
    plan = to_jsonable(plan_for(paper, paper.load_setting(None, example_overrides(paper))))
    rec = plan["recommendation"]
    setting = ", ".join(f"{k} = {v}" for k, v in paper.example.items())
    sigma = ", ".join(f"{k} {number(v)}" for k, v in rec.get("sigma", {}).items())
    lines = [("rounds T", rec.get("T")), ("clients per round K", rec.get("K") or "all"),
             ("noise std per stage", sigma), ("predicted bound", number(rec.get("bound"))),
             ("accounting", rec.get("accounting")), ("why", rec.get("why"))]
    body = [f"<p>The paper's own experiment ({esc(setting)}), as <code>fedbound plan {esc(paper.name)} "
            f"--set ... --json</code> answers it.</p>", "<h4>Recommendation</h4>",
            table(["quantity", "value"], lines), _bound_figure(paper),
            "<h4>The paper's answer and the tight one</h4>",
            table(["quantity", "paper", "tight", "note"],
                  [[r.get("quantity"), number(r.get("paper")), number(r.get("tight")), r.get("note")]
                   for r in plan["rows"]])]
    if plan.get("differences"):
        body.append("<h4>Differences from the paper's answer</h4><ul>"
                    + "".join(f"<li>{esc(d)}</li>" for d in plan["differences"]) + "</ul>")
    if plan.get("assumed"):
        body.append(f"<p class='muted'>assumed (documented defaults): {esc(', '.join(plan['assumed']))}</p>")
    if plan.get("warnings"):
        items = "".join(f"<li>{esc(w)}</li>" for w in plan["warnings"])
        body.append(f"<h4>Warnings</h4><ul>{items}</ul>")
    return "".join(body)


def _plain(label: str) -> str:
    return label.replace(r"$\Theta$", "Θ").replace(r"$\epsilon$", "ε").replace("$", "")


def _bound_figure(paper: Any) -> str:
    """The paper's bound-vs-T figure for its example, interactive: the data of ``fedbound plot NAME --vs T``
    and the explorer's ``/api/curve`` (the paper's curves, the deployed-noise curve, the recommended T, Theta
    where the paper has one), so the page shows one bound per design."""
    import warnings

    import plotly.graph_objects as go

    from fedbound.planning import example_overrides
    from fedbound.validation.reproduce.plots import figure_data

    plots = paper.load("plots") if paper.plots else {}
    if "T" not in plots:
        return ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setting = paper.load_setting(None, example_overrides(paper)).values
        d = figure_data(plots, setting, "T")
    fig = go.Figure()
    for c in d["curves"]:
        fig.add_trace(go.Scatter(x=c["x"], y=c["y"], mode="lines", name=_plain(c["label"]),
                                 line={"color": c["color"], "dash": c["dash"]}))
    for pt in d["points"]:
        fig.add_trace(go.Scatter(x=pt["x"], y=pt["y"], mode="markers", name=_plain(pt["label"]),
                                 marker={"color": pt["color"], "size": 9}, showlegend=bool(pt["label"])))
    for h in d["hlines"]:
        fig.add_hline(y=h["y"], line={"color": h["color"], "dash": h["dash"]},
                      annotation_text=_plain(h["label"]), annotation_position="top left")
    for v in d["vlines"]:
        fig.add_vline(x=v["x"], line={"color": v["color"], "dash": v["dash"]},
                      annotation_text=_plain(v["label"]), annotation_position="top right")
    for note in d["notes"]:
        log_x, log_y = d["xscale"] == "log", d["yscale"] == "log"  # plotly places on log axes by log10
        fig.add_annotation(x=math.log10(note["x"]) if log_x else note["x"],
                           y=math.log10(note["y"]) if log_y else note["y"], text=_plain(note["text"]),
                           showarrow=False,
                           xanchor="left", yanchor="bottom", font={"size": 10},
                           xshift=note.get("dx", 4) * 4 / 3, yshift=note.get("dy", 6) * 4 / 3)
    fig.update_layout(title=_plain(d["title"]), xaxis_title=d["xlabel"], yaxis_title=d["ylabel"],
                      height=420, margin={"t": 60}, template="plotly_white", xaxis_type=d["xscale"],
                      yaxis_type=d["yscale"])
    if d["ylim"]:
        fig.update_yaxes(range=d["ylim"] if d["yscale"] == "linear" else None)
    return "<h4>Bound against T: the recommended design</h4>" + fig.to_html(
        full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=f"{paper.name}-bound-T",
        config={"displaylogo": False, "responsive": True})


def _lines(doc: Mapping[str, Any]) -> list[str]:
    """Verdict lines of a validate result, whatever shape its verdicts take."""
    verdicts = doc.get("verdicts", [])
    if isinstance(verdicts, Mapping):
        verdicts = list(verdicts.values())
    out = []
    for v in verdicts:
        out.append(v if isinstance(v, str) else str(v.get("line") or v.get("text") or v.get("verdict") or
                                                      json.dumps(v, default=str)))
    return out


def _trained(folder: Path, index: Mapping[str, dict]) -> list[dict]:
    """The summaries of the runs a validate trained in its ``sweep`` folder (by run key)."""
    runs = folder / "sweep" / "runs"
    return [index[p.name] for p in sorted(runs.iterdir()) if p.name in index] if runs.is_dir() else []


def _measured_section(paper: Any, found: Sequence[tuple[Path, dict]], index: Mapping[str, dict]) -> str:
    if not found:
        return (f"<p class='muted'>Not measured yet: run <code>fedbound validate {esc(paper.name)} CONFIG "
                f"--out RESULTS_DIR/validate_{esc(paper.name)}</code>.</p>")
    body = []
    for path, doc in found:
        body.append(f"<h4>{esc(path.parent.name)}</h4>")
        lines = _lines(doc)
        trained = _trained(path.parent, index)
        if trained:
            lines.append(f"privacy: {len(trained)} runs trained, binding {binding(trained)}")
        if lines:
            body.append("<ul>" + "".join(f"<li class='verdict'>{esc(v)}</li>" for v in lines) + "</ul>")
        pngs = sorted(path.parent.glob("*.png"))
        body.extend(image(png, f"{paper.name} predicted vs measured") for png in pngs)
    return "".join(body)


def _status(holds: bool | None, text: str) -> str:
    css = "muted" if holds is None else ("holds" if holds else "fails")
    return f"<span class='{css}'>{esc(text)}</span>"


def _bound_claims(paper: Any, points: int, seed: int) -> str:
    from fedbound.bounds.claims import check_all

    if not paper.claims:
        return "<p class='muted'>No declared bound claims.</p>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reports = check_all(paper.all_claims(), n=points, seed=seed)
    rows = []
    for r in reports:
        where = f" (fails in: {r.fails_in})" if r.fails_in else ""
        css = "bad" if r.status == "CONTRADICTED" else None
        cell = f"<span class='bad'>{esc(r.status)}</span>" if css else _status(r.status == "holds", r.status)
        rows.append([esc(r.id), cell, esc(r.statement + where)])
    held = sum(r.status == "holds" for r in reports)
    return (f"<p>{held} of {len(reports)} hold on {points} random points each; the rest fail in the region "
            "shown (the paper's claim is false there), as <code>fedbound claims</code> reports.</p>"
            + table(["id", "status", "claim"], rows, raw=True))


def _plotly_figure(doc: Mapping[str, Any], csv: Path, div_id: str) -> str:
    import pandas as pd
    import plotly.graph_objects as go

    from fedbound.validation.reproduce.figure import curves

    data = pd.read_csv(csv)
    drawn = curves(data, doc["x"], doc["metric"], doc["labels"])
    fig = go.Figure()
    categorical = any(isinstance(v, str) for c in drawn for v in c.x)
    for c in drawn:
        if categorical:
            up = [h - m for h, m in zip(c.high, c.mean, strict=True)]
            down = [m - lo for m, lo in zip(c.mean, c.low, strict=True)]
            fig.add_trace(go.Bar(x=[str(v) for v in c.x], y=c.mean, name=c.name,
                                 error_y={"type": "data", "symmetric": False, "array": up,
                                          "arrayminus": down}))
        else:
            fig.add_trace(go.Scatter(x=c.x + c.x[::-1], y=c.high + c.low[::-1], fill="toself", opacity=0.15,
                                     line={"width": 0}, hoverinfo="skip", showlegend=False, name=c.name))
            fig.add_trace(go.Scatter(x=c.x, y=c.mean, mode="lines+markers", name=c.name))
    fig.update_layout(title=f"{doc['paper']} {doc['figure']}: {doc['title']}", xaxis_title=doc["x"],
                      yaxis_title=doc["metric"].replace("_", " "), height=420, margin={"t": 60},
                      template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _figure_runs(csv: Path, index: Mapping[str, dict]) -> list[dict]:
    """The summaries of the runs behind a reproduced figure (the run keys of its CSV)."""
    import pandas as pd

    if not csv.is_file():
        return []
    keys = pd.read_csv(csv, usecols=lambda c: c == "key").get("key")
    return [] if keys is None else [index[k] for k in dict.fromkeys(keys.astype(str)) if k in index]


def _figure_claims(paper: Any, found: Sequence[tuple[Path, dict]], index: Mapping[str, dict]) -> str:
    from fedbound.validation.reproduce import Uncovered, targets

    done = {(doc["figure"]): (path, doc) for path, doc in found}
    rows, figures = [], []
    for t in targets(paper.name):
        if isinstance(t, Uncovered):
            rows.append([esc(t.figure), "-", "-", _status(None, "not reproduced"),
                         esc(f"{t.claim} ({t.reason})")])
            continue
        if t.figure not in done:
            for claim, statement in t.statements():
                rows.append([esc(t.figure), esc(t.kind), esc(claim), _status(None, "not run"),
                             esc(f"{statement} (fedbound reproduce {paper.name} {t.figure})")])
            continue
        path, doc = done[t.figure]
        for v in doc["claims"]:
            text = "holds" if v["holds"] else "does not hold"
            rows.append([esc(t.figure), esc(doc.get("kind", t.kind)), esc(v["id"]),
                         _status(v["holds"], f"{text} ({doc['scale']})"),
                         f"{esc(v['statement'])}<div class='verdict'>{esc(v['line'])}</div>"])
        if doc.get("privacy"):  # the paper's own mechanism past its budget: what its runs really spend
            rows.append([esc(t.figure), esc(doc.get("kind", t.kind)), "privacy",
                         _status(False, "not (ε, δ)-DP at the stated budget"), esc(doc["privacy"])])
        csv = path.parent / doc["csv"]
        trained = _figure_runs(csv, index)
        if trained:
            rows.append([esc(t.figure), esc(doc.get("kind", t.kind)), "binding ε", _status(None, "trained"),
                         esc(f"{len(trained)} runs: binding {binding(trained)}")])
        if csv.exists():
            figures.append(_plotly_figure(doc, csv, f"fig-{paper.name}-{t.figure}"))
    return (table(["figure", "verdict", "claim", "status", "statement and verdict"], rows, raw=True)
            + "".join(figures))


def errata_markdown(paper_name: str) -> str | None:
    """The errata part of ``docs/papers/NAME.md``: from the line that names the errata to the next heading."""
    path = DOCS / f"{paper_name}.md"
    if not path.exists():
        return None
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if re.search(r"errat", line, re.I)
                  and (line.startswith("#") or line.startswith("**"))), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")
                or (lines[i].startswith("**") and i > start + 2 and not lines[i - 1].strip())), len(lines))
    # the report's section already has its own heading: a page's "## Errata ..." heading becomes the same bold
    # lead-in line the other pages use, so no paper's errata nest at another level
    lines[start] = re.sub(r"^#+\s*(.*?)\s*$", r"**\1**", lines[start])
    return "\n".join(lines[start:end])


def _errata_section(paper: Any) -> str:
    from markdown_it import MarkdownIt

    text = errata_markdown(paper.name)
    if text is None:
        return f"<p class='muted'>No errata page (docs/papers/{esc(paper.name)}.md) next to this install.</p>"
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def _count(items: Sequence[Any], what: str) -> str:
    return f"{len(items)} {what}" if items else "<span class='muted'>none</span>"


def _summary(reproduced: Mapping[str, list], measured: Mapping[str, list],
             others: Mapping[str, list[Result]]) -> str:
    from fedbound.registry import papers

    rows = []
    for name, p in papers().items():
        verdicts = [v for _, doc in reproduced.get(name, []) for v in doc["claims"]]
        held = sum(v["holds"] for v in verdicts)
        mine = others.get(name, [])
        kinds = {k: [r for r in mine if r.kind == k] for k in ("plan", "train", "flower", "sweep", "audit")}
        rows.append([f"<a href='#paper-{esc(name)}'>{esc(p.short)}</a>",
                     f"{held} of {len(verdicts)} hold" if verdicts else "<span class='muted'>not run</span>",
                     f"{len(measured.get(name, []))} result(s)" if measured.get(name)
                     else "<span class='muted'>not run</span>",
                     _count(kinds["plan"], "saved"), _count(kinds["train"], "run(s)"),
                     _count(kinds["flower"], "run(s)"), _count(kinds["sweep"], "sweep(s)"),
                     ", ".join(str(r.doc.get("verdict", "")).split(":")[0] for r in kinds["audit"])
                     or "<span class='muted'>none</span>"])
    return table(["paper", "figure claims reproduced", "predicted vs measured", "plans", "train runs",
                  "Flower runs", "sweeps", "audits"], rows, raw=True)


def _other_mechanisms(others: Mapping[str, list[Result]], results: Path) -> str:
    """Results of mechanisms outside the registry (e.g. the deployed DP-FedAvg), one section each."""
    from fedbound.registry import names

    body = []
    for name in sorted(set(others) - set(names())):
        found = others[name]
        inner = plans_html(found, results) + runs_html(found, results, name) + (
            audits_html(found, results, name) if any(r.kind == "audit" for r in found) else "")
        body.append(section(f"paper-{name}", f"{name} (not a registered paper)", inner, css="paper", level=2))
    return "".join(body)


def build_report(results: str | Path, out: str | Path | None = None, *, points: int = 10,
                 seed: int = 0) -> Path:
    """Write the report of ``results`` (module docstring) to ``out`` (default RESULTS_DIR/report.html).

    ``points``: random points per bound claim (as ``fedbound claims --points``)."""
    import plotly.offline

    from fedbound import __version__
    from fedbound.checks import check_int
    from fedbound.registry import papers

    results = Path(results)
    if not results.is_dir():
        raise ConfigError(f"RESULTS_DIR {str(results)!r} is not a folder (give the --out folder of fedbound "
                          "reproduce / validate)")
    points = int(check_int("--points", points, 1, 10_000))
    out = Path(out) if out is not None else results / "report.html"
    tree = walk(results, MAX_FILES)
    reproduced = find_results(results, "verdicts.json", tree)
    measured = find_results(results, "validation.json", tree)
    others, index = scan(tree), run_index(tree)
    if not reproduced and not measured and not others:
        raise ConfigError(f"RESULTS_DIR {str(results)!r} holds no fedbound results (no verdicts.json "
                          "of fedbound reproduce, no validation.json of fedbound validate, no plan, run, "
                          "sweep or audit): give their --out folder")
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f'<header id="overview"><h1>fedbound report</h1><p class="muted">fedbound {esc(__version__)}, '
            f"{esc(when)}, results from <code>{esc(results)}</code>.</p>",
            "<p>Per paper: the plan (recommendation first, then the paper's answer, then the plans saved "
            "in the folder), predicted against measured, the training and Flower runs and sweeps, the "
            "privacy audits, every claim's status (bound claims checked now, figure claims from "
            "<code>fedbound reproduce</code>) and the errata fedbound found; every result with the binding "
            "ε: the ε on the accountant its budget binds on.</p>",
            _summary(reproduced, measured, others), "</header>"]
    for name, paper in papers().items():
        mine = others.get(name, [])
        parts = {
            "plan": ("Plan: recommendation and the paper's answer",
                     _plan_section(paper) + plans_html([r for r in mine if r.kind == "plan"], results)),
            "measured": ("Predicted vs measured", _measured_section(paper, measured.get(name, []), index)),
            "runs": ("Training runs, Flower runs and sweeps", runs_html(mine, results, name)),
            "audit": ("Privacy audits", audits_html(mine, results, name)),
            "claims": ("Claims", "<h4>Bound claims (the theorems)</h4>" + _bound_claims(paper, points, seed)
                       + "<h4>Figure claims (training on the simulator, the bound's formula, predicted "
                         "vs measured)</h4>"
                       + _figure_claims(paper, reproduced.get(name, []), index)),
            "errata": ("Errata fedbound found", _errata_section(paper)),
        }
        inner = "".join(section(f"{name}-{key}", *parts[key], css=key) for key in SECTIONS)
        body.append(section(f"paper-{name}", f"{paper.short}: {paper.title}",
                            f"<p class='muted'>{esc(paper.citation)}</p>{inner}", css="paper", level=2))
    body.append(_other_mechanisms(others, results))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page("fedbound report", "".join(body), plotly.offline.get_plotlyjs()), encoding="utf-8")
    return out
