"""The HTML skeleton of ``fedbound report``: style, page frame and small escaping helpers.

Everything the page needs is inline (styles, plotly.js from the installed plotly package, figures as data
URIs), so it opens with no network.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["page", "table", "section", "image", "esc"]

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 0 1.5em 4em; color: #1d2330; line-height: 1.45; }
h1 { margin-top: 1em; } h2 { border-bottom: 2px solid #d7dce5; padding-bottom: .2em; margin-top: 2.2em; }
h3 { margin-top: 1.6em; color: #2c3e66; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { border: 1px solid #d7dce5; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #f1f4f9; }
.holds { color: #1d7a35; font-weight: 600; } .fails { color: #b5561b; font-weight: 600; }
.bad { color: #b3261e; font-weight: 700; } .muted { color: #667085; }
nav a { margin-right: 1em; } figure { margin: 1em 0; } img { max-width: 100%; }
code { background: #f1f4f9; padding: 0 .2em; border-radius: 3px; }
.verdict { font-family: ui-monospace, monospace; font-size: .85em; white-space: pre-wrap; }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, raw: bool = False) -> str:
    """An HTML table; cells are escaped unless ``raw`` (then they are HTML already)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    cell = (lambda v: str(v)) if raw else esc
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def section(id_: str, title: str, body: str, css: str, level: int = 3) -> str:
    return f'<section id="{esc(id_)}" class="{esc(css)}"><h{level}>{esc(title)}</h{level}>{body}</section>'


def image(path: Path, alt: str) -> str:
    """A PNG embedded as a data URI."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}"></figure>'


def page(title: str, body: str, plotly_js: str) -> str:
    # "</script" inside the library would close the tag early; plotly.js does not contain it, guard anyway
    script = plotly_js.replace("</script", "<\\/script")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style>"
            f'<script type="text/javascript">{script}</script></head>'
            f"<body>{body}</body></html>\n")
