"""``fedbound.validation.report``: The report: one self-contained HTML page over a results folder (plans,
predicted vs measured, every claim, errata); ``html`` holds the HTML pieces.

Modules: ``html``.

``fedbound report RESULTS_DIR``: one self-contained HTML page with everything fedbound knows per paper.

For every registered paper, in this order:

1. **Plan**: the recommendation against the paper's own answer, for the paper's registered example setting
   (the planner called through the registry, the code path of ``fedbound plan --json``).
2. **Predicted vs measured**: what ``fedbound validate`` left in RESULTS_DIR (``validation.json`` with its
   figure), when it is there.
3. **Claims**: every bound claim, checked now (the checker of ``fedbound claims``), and every figure claim
   with the verdict ``fedbound reproduce`` left in RESULTS_DIR (``verdicts.json``, one per figure) and its
   kind (training, bound, predicted vs measured), its figure redrawn interactively (plotly, zoom and hover)
   from the figure's CSV; figure claims not yet run or not reproduced are listed as such.
4. **Errata**: the errata table of the paper's page in ``docs/papers/NAME.md``.

The page carries plotly.js inline from the installed plotly package and every image as a data URI: it
opens with no network.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fedbound.checks import strict_json
from fedbound.errors import ConfigError
from fedbound.validation.report.html import esc, image, page, section, table

__all__ = ["build_report", "find_results", "SECTIONS"]

SECTIONS = ("plan", "measured", "claims", "errata")
"""The sections of every paper, in page order (ids ``NAME-plan`` ...)."""

DOCS = Path(__file__).resolve().parents[2] / "docs" / "papers"


MAX_FILES = 200_000
"""A results folder is walked up to this many entries (``report /`` must not walk the whole disk)."""


def find_results(results: Path, name: str) -> dict[str, list[tuple[Path, dict]]]:
    """Files named ``name`` under ``results`` (JSON objects with a ``paper`` key), grouped by paper; a
    folder of more than MAX_FILES entries is refused (ConfigError) instead of walked, and so is a damaged
    file (not UTF-8 JSON, or holding NaN or Infinity): its numbers would be shown as results."""
    found: dict[str, list[tuple[Path, dict]]] = {}
    paths, seen = [], 0
    for folder, dirs, files in os.walk(results):
        dirs.sort()
        seen += len(dirs) + len(files)
        if seen > MAX_FILES:
            raise ConfigError(f"RESULTS_DIR {str(results)!r} holds more than {MAX_FILES:,} files: "
                              "give the --out folder of fedbound reproduce / validate, not a folder above it")
        paths += [Path(folder) / name] if name in files else []
    for path in sorted(paths):
        try:  # strict: fedbound never writes NaN or Infinity (nor non-UTF-8) into its results
            doc = strict_json(path.read_bytes())
        except OSError as exc:
            raise ConfigError(f"{path} cannot be read ({exc.strerror or exc})") from None
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise ConfigError(f"{path} is damaged ({str(exc).splitlines()[0][:120]}): run the command that "
                              "wrote it again, or remove it") from None
        if isinstance(doc, dict) and isinstance(doc.get("paper"), str):
            found.setdefault(doc["paper"], []).append((path, doc))
    return found


def _value(v: Any) -> str:
    """A number (4 significant digits), or a per-round list as its range."""
    if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v):
        lo, hi = min(v), max(v)
        return f"{lo:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g} over {len(v)} rounds"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _plan_section(paper: Any) -> str:
    from fedbound.checks import to_jsonable
    from fedbound.planning import example_overrides, plan_for

    if paper.planner is None:
        return "<p class='muted'>No planner for this paper in fedbound yet.</p>"
    plan = to_jsonable(plan_for(paper, paper.load_setting(None, example_overrides(paper))))
    rec = plan["recommendation"]
    setting = ", ".join(f"{k} = {v}" for k, v in paper.example.items())
    sigma = ", ".join(f"{k} {_value(v)}" for k, v in rec.get("sigma", {}).items())
    lines = [("rounds T", rec.get("T")), ("clients per round K", rec.get("K") or "all"),
             ("noise std per stage", sigma), ("predicted bound", _value(rec.get("bound"))),
             ("accounting", rec.get("accounting")), ("why", rec.get("why"))]
    body = [f"<p>The paper's own experiment ({esc(setting)}), as <code>fedbound plan {esc(paper.name)} "
            f"--set ... --json</code> answers it.</p>", "<h4>Recommendation</h4>",
            table(["quantity", "value"], lines), _bound_figure(paper),
            "<h4>The paper's answer and the tight one</h4>",
            table(["quantity", "paper", "tight", "note"],
                  [[r.get("quantity"), _value(r.get("paper")), _value(r.get("tight")), r.get("note")]
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


def _measured_section(paper: Any, found: Sequence[tuple[Path, dict]]) -> str:
    if not found:
        return (f"<p class='muted'>Not measured yet: run <code>fedbound validate {esc(paper.name)} CONFIG "
                f"--out RESULTS_DIR/validate_{esc(paper.name)}</code>.</p>")
    body = []
    for path, doc in found:
        body.append(f"<h4>{esc(path.parent.name)}</h4>")
        lines = _lines(doc)
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


def _figure_claims(paper: Any, found: Sequence[tuple[Path, dict]]) -> str:
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


def _summary(reproduced: Mapping[str, list], measured: Mapping[str, list]) -> str:
    from fedbound.registry import papers

    rows = []
    for name, p in papers().items():
        verdicts = [v for _, doc in reproduced.get(name, []) for v in doc["claims"]]
        held = sum(v["holds"] for v in verdicts)
        rows.append([f"<a href='#paper-{esc(name)}'>{esc(p.short)}</a>",
                     f"{held} of {len(verdicts)} hold" if verdicts else "<span class='muted'>not run</span>",
                     f"{len(measured.get(name, []))} result(s)" if measured.get(name)
                     else "<span class='muted'>not run</span>"])
    return table(["paper", "figure claims reproduced", "predicted vs measured"], rows, raw=True)


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
    reproduced = find_results(results, "verdicts.json")
    measured = find_results(results, "validation.json")
    if not reproduced and not measured:
        raise ConfigError(f"RESULTS_DIR {str(results)!r} holds no fedbound results (no verdicts.json "
                          "of fedbound reproduce, no validation.json of fedbound validate): "
                          "give their --out folder")
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f'<header id="overview"><h1>fedbound report</h1><p class="muted">fedbound {esc(__version__)}, '
            f"{esc(when)}, results from <code>{esc(results)}</code>.</p>",
            "<p>Per paper: the plan (recommendation first, then the paper's answer), predicted against "
            "measured, every claim's status (bound claims checked now, figure claims from "
            "<code>fedbound reproduce</code>) and the errata fedbound found.</p>",
            _summary(reproduced, measured), "</header>"]
    for name, paper in papers().items():
        parts = {
            "plan": ("Plan: recommendation and the paper's answer", _plan_section(paper)),
            "measured": ("Predicted vs measured", _measured_section(paper, measured.get(name, []))),
            "claims": ("Claims", "<h4>Bound claims (the theorems)</h4>" + _bound_claims(paper, points, seed)
                       + "<h4>Figure claims (training on the simulator, the bound's formula, predicted "
                         "vs measured)</h4>"
                       + _figure_claims(paper, reproduced.get(name, []))),
            "errata": ("Errata fedbound found", _errata_section(paper)),
        }
        inner = "".join(section(f"{name}-{key}", *parts[key], css=key) for key in SECTIONS)
        body.append(section(f"paper-{name}", f"{paper.short}: {paper.title}",
                            f"<p class='muted'>{esc(paper.citation)}</p>{inner}", css="paper", level=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page("fedbound report", "".join(body), plotly.offline.get_plotlyjs()), encoding="utf-8")
    return out
