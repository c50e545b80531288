"""MkDocs hook: the parts of the site that are computed, never typed.

A page asks for generated content with one HTML comment on a line of its own; the hook replaces it while the
site builds (``mkdocs build --strict``), so what the site shows is what the code answers today:

* ``<!-- fedbound:run ARGS -->``: the output of ``fedbound ARGS``, run in-process (the getting-started plan);
* ``<!-- fedbound:theorems PAPER -->``: every theorem the paper's registry entry declares, rendered from its
  sympy expression (``Theorem.latex()``) with its source in the paper and its conditions;
* ``<!-- fedbound:verdicts PAPER -->``: the paper's lines of the ``fedbound reproduce --all`` run kept in
  docs/reproduce_demo.md (that page names the date, machine and command of the run);
* ``<!-- fedbound:cli -->``: the ``--help`` of every command and sub-command of the Typer app;
* ``<!-- fedbound:measured -->``: the measurements that ``docs/measure.py`` wrote into docs/measured/*.json,
  each with its date, machine and command.

A directive whose input is missing fails the build (a KeyError or a message), it never leaves a gap.

Two more passes: a Sphinx role left in a docstring (``:class:`X```) becomes code, linked when the page
documents ``X`` (:func:`sphinx_roles`); and MathJax is copied into the built site from the pinned package of
the ``docs`` extra (:func:`copy_mathjax`), so no page loads anything from another host.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

from mkdocs.plugins import event_priority

DOCS = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"^<!-- fedbound:(\w+)\s*(.*?)\s*-->$", re.M)


def run_cli(args: list[str], columns: int = 110) -> str:
    """``fedbound ARGS`` in this process; its stdout and stderr as one text (rich renders at ``columns``)."""
    import os

    from fedbound.cli import main

    out = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(args)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    if code not in (0, None):
        raise RuntimeError(f"fedbound {shlex.join(args)} exited with {code}:\n{out.getvalue()}")
    return out.getvalue().rstrip()


def _fence(text: str, lang: str = "text") -> str:
    return f"```{lang}\n{text}\n```"


def theorems(name: str) -> str:
    """Every theorem of a paper as display math, with its source, meaning and conditions."""
    from fedbound.registry import get, resolve

    paper = get(name)
    module = resolve(paper.theorems)
    out = [f"Rendered from `{paper.theorems}` (`THEOREMS`, {len(module.THEOREMS)} entries): the sympy "
           "expressions fedbound evaluates, not a transcription."]
    for key, theorem in module.THEOREMS.items():
        out.append(f"\n**`{key}`**: {_escape(f'{theorem.doc} ({theorem.source})')}\n")
        out.append(f"$$\n{theorem.latex()}\n$$")
        conditions = [_escape(f"{c.name} ({c.severity}): {c.message}") for c in theorem.conditions("paper")]
        if conditions:
            out.append("\n" + "\n".join(f"- {c}" for c in conditions))
    return "\n".join(out)


def _escape(text: str) -> str:
    """Plain text as markdown: the characters markdown would read as markup escaped."""
    import html

    return re.sub(r"([*_|`\\])", r"\\\1", html.escape(text, quote=False))


def verdicts(name: str) -> str:
    """The paper's verdict lines from docs/reproduce_demo.md."""
    page = (DOCS / "reproduce_demo.md").read_text()
    lines = [line for line in page.splitlines() if line.startswith((f"{name} fig", f"{name} table"))]
    if not lines:
        raise KeyError(f"docs/reproduce_demo.md has no verdict line of {name}")
    head = page.split("\n\n")[1].splitlines()[0]
    link = "[the `fedbound reproduce --all` run at demo size](../reproduce_demo.md)"
    return f"From {link} ({head.rstrip(':')}...):\n\n" + _fence("\n".join(lines))


def cli_reference() -> str:
    """``--help`` of every command, sub-command groups expanded, in the app's order."""
    import click
    import typer

    from fedbound.cli import app

    out: list[str] = []

    def walk(command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=path[-1], parent=parent)
        if len(path) > 1:
            heading = f"{'#' * min(len(path), 4)} `{' '.join(path)}`"
            out.append(f"{heading}\n\n" + _fence(_plain_help(command, ctx)))
        if hasattr(command, "list_commands"):  # a group (Typer's groups are not click.Group subclasses)
            for sub in command.list_commands(ctx):
                walk(command.get_command(ctx, sub), [*path, sub], ctx)

    walk(typer.main.get_command(app), ["fedbound"], None)
    return "\n\n".join(out)


# The CLI reference's help boxes are drawn this wide: a code block of Material's content column holds about 84
# monospace characters next to both sidebars, so a 100-column box was cut off at its right edge.
HELP_COLUMNS = 80


def _plain_help(command, ctx) -> str:
    """What ``--help`` prints (Typer prints it through rich and returns nothing), without colour codes."""
    import os

    buffer = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        with contextlib.redirect_stdout(buffer):
            text = command.get_help(ctx)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    text = re.sub(r"\x1b\[[0-9;]*m", "", (text or "") + buffer.getvalue())
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def measured() -> str:
    """One section per docs/measured/*.json: what was run, when, where, and its numbers."""
    files = sorted((DOCS / "measured").glob("*.json"))
    if not files:
        raise KeyError("docs/measured/ has no measurement: run `python docs/measure.py`")
    out = []
    for path in files:
        record = json.loads(path.read_text())
        machine = record["machine"]
        out.append(f"## {record['title']}\n")
        out.append(f"*Measured {record['date']} by `{record['command']}` on {machine['cpus']} CPU cores "
                   f"({machine['processor']}, Python {machine['python']}, load average "
                   f"{machine['load_at_start']:.1f} at the start).*\n")
        out.append(record["what"] + "\n")
        out.append("| quantity | value |\n|---|---|")
        out.extend(f"| {k} | {v} |" for k, v in record["numbers"].items())
        out.append("")
    return "\n".join(out)


def expand(markdown: str) -> str:
    """Replace every directive of a page by its generated content."""
    def one(match: re.Match) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "run":
            return _fence(f"$ fedbound {arg}\n" + run_cli(shlex.split(arg)))
        if kind == "theorems":
            return theorems(arg)
        if kind == "verdicts":
            return verdicts(arg)
        if kind == "cli":
            return cli_reference()
        if kind == "measured":
            return measured()
        raise KeyError(f"unknown docs directive fedbound:{kind}")

    return DIRECTIVE.sub(one, markdown)


API_SOURCE = DOCS.parent / ".cache" / "api_src"


def api_source_tree() -> Path:
    """A tree in which ``fedbound/X`` is the folder that pyproject.toml's package-dir maps ``fedbound.X`` to
    (symlinks), so mkdocstrings reads the API statically, without importing (it knows no package-dir)."""
    import shutil
    import tomllib

    mapping = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(API_SOURCE, ignore_errors=True)
    root = API_SOURCE / "fedbound"
    root.mkdir(parents=True)
    for entry in (DOCS.parent / "fedbound").iterdir():
        (root / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        parts = package.split(".")
        if len(parts) == 2 and not (root / parts[1]).exists():
            (root / parts[1]).symlink_to(DOCS.parent / folder)
    return API_SOURCE


@event_priority(100)  # before mkdocstrings reads its paths in its own config event
def on_config(config):
    api_source_tree()
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' hook signature)
    return expand(markdown)


# A Sphinx cross-reference role left in a docstring: mkdocstrings renders `:class:`X`` as
# ":class:<code>X</code>"
ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const):<code>(~?)([^<]*)</code>")


def sphinx_roles(html: str) -> str:
    """Each role as its code, linked to the object's entry when the page documents it (``~`` shows the last
    dotted part only, as in Sphinx)."""
    ids = set(re.findall(r'id="([^"]+)"', html))

    def one(match: re.Match) -> str:
        target = match.group(2).strip().removesuffix("()")
        shown = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
        code = f"<code>{shown}</code>"
        return f'<a href="#{target}">{code}</a>' if target in ids else code

    return ROLE.sub(one, html)


def on_page_content(html: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' hook signature)
    return sphinx_roles(html)


MATHJAX_SKIP = ("output/svg", "output/svg.js")  # the site renders with CommonHTML (tex-mml-chtml.js)


def copy_mathjax(site_dir: Path) -> Path:
    """MathJax's es5 build from the pinned ``django-static-mathjax`` wheel into ``site/javascripts/mathjax``:
    the combined ``tex-mml-chtml.js`` and what it loads on demand (TeX extensions, CommonHTML fonts, menu),
    so formulas render with no network.  The other combined builds (SVG, full, speech) are left out."""
    import shutil

    try:
        import mathjax
    except ImportError as error:
        raise RuntimeError("the docs need MathJax from the docs extra: pip install -e '.[docs]'") from error
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(site_dir) / "javascripts" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)

    def skip(folder: str, names: list[str]) -> list[str]:
        relative = Path(folder).relative_to(source)
        return [n for n in names if (relative / n).as_posix() in MATHJAX_SKIP
                or (relative == Path(".") and n.endswith(".js") and n != "tex-mml-chtml.js")]

    shutil.copytree(source, target, ignore=skip)
    return target


def on_post_build(config) -> None:
    copy_mathjax(config["site_dir"])
