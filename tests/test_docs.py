"""Docs that cannot rot: every ``bash`` and ``python`` block of README.md, the getting-started page and the
guides runs here, in order, page by page, in a scratch folder that sees the repository's ``examples/``.

A ``fedbound`` command runs in-process through :func:`fedbound.cli.main` and must exit 0.  An HTML comment
right before a block steers it (docs/about.md): ``<!-- docs-test: ARGS -->`` appends ARGS to each of its
``fedbound`` commands (a tiny size: the page shows the real command);
``<!-- docs-test: illustrative REASON -->`` skips it, and the few such blocks are listed and counted below.
A ``text`` block after ``<!-- docs-test: output -->`` is an excerpt of what the block before it prints: each
of its lines but ``...`` must appear in that output.  A ``python`` block runs with ``exec`` in the
page's namespace, so later blocks may use earlier names.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/getting-started.md", *sorted(p.relative_to(REPO).as_posix()
                                                         for p in (REPO / "docs" / "guides").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- docs-test: (?P<note>.*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
MAX_ILLUSTRATIVE = 8


@dataclass
class Block:
    page: str
    lang: str
    body: str
    note: str | None

    @property
    def illustrative(self) -> bool:
        return bool(self.note) and self.note.startswith("illustrative")


def blocks(page: str) -> list[Block]:
    text = (REPO / page).read_text()
    return [Block(page, m["lang"], m["body"], m["note"]) for m in BLOCK.finditer(text)
            if m["lang"] in ("bash", "python") or m["note"] == "output"]


def commands(body: str) -> list[list[str]]:
    """The shell lines of a block as argument lists, comments dropped (``#`` outside quotes ends a line)."""
    out = []
    for line in body.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def _run_fedbound(words: list[str], extra: list[str]) -> str:
    """``fedbound ARGS`` in-process; what it printed."""
    from fedbound.cli import main

    printed = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        warnings.simplefilter("ignore")
        code = main([*words[1:], *extra])
    assert code in (0, None), f"`{shlex.join(words + extra)}` exited with {code}:\n{printed.getvalue()}"
    return printed.getvalue()


def test_every_page_has_runnable_blocks_and_few_illustrative_ones():
    every = [b for page in PAGES for b in blocks(page)]
    illustrative = [b for b in every if b.illustrative]
    assert len(every) - len(illustrative) >= 20
    assert len(illustrative) <= MAX_ILLUSTRATIVE, [(b.page, b.note) for b in illustrative]
    for b in illustrative:  # each says why it cannot run
        assert len(b.note.split()) >= 3, (b.page, b.note)


def test_readme_keeps_the_two_commands_and_stays_short():
    text = (REPO / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    assert len(text) <= 8000, len(text)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, tmp_path, monkeypatch):
    for name in ("examples", "docs"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "110")
    namespace: dict = {"__name__": "__docs__"}
    ran, printed = 0, ""
    for block in blocks(page):
        if block.illustrative:
            continue
        if block.note == "output":
            for line in block.body.splitlines():
                assert line.strip() == "..." or line in printed, f"{page}: {line!r} is not in the output"
            continue
        if block.lang == "python":
            exec(compile(block.body, f"{page} (python block)", "exec"), namespace)  # noqa: S102
            ran += 1
            continue
        extra = shlex.split(block.note) if block.note else []
        printed = ""
        for words in commands(block.body):
            if words[0] == "make":
                continue  # README's `make` targets are the demo and the suite this test belongs to
            assert words[0] == "fedbound", f"{page}: a docs command must be fedbound or make: {words}"
            printed += _run_fedbound(words, extra)
            ran += 1
    assert ran > 0, f"{page} ran nothing"
