"""The documentation site as a reader gets it: ``mkdocs build --strict`` (what ``make docs`` runs) into a
scratch folder, once, then read as HTML and, for what only a browser can tell, in Debian's Chromium with
every request to another host refused.

* it works offline: no page loads a script, stylesheet or font from another host, and NbAFL's formulas are
  typeset by the MathJax the site carries (docs hook ``copy_mathjax``, from the pinned
  ``django-static-mathjax``);
* markdown renders as meant: no list run into its paragraph as " - ", no raw Sphinx role (``:class:`X```) in
  the API reference, no CLI help box cut at its right edge or with its text elided;
* no internal ids ("seed 002", "spec 002 F4") in a page, a CLI output or a message: the paper is cited by
  name.

The notebook page is built without executing it (``FEDBOUND_DOCS_EXECUTE_NOTEBOOK=false``; ``make docs``
executes it): the checks here are about markup, and it saves a kernel start.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import html
import http.server
import io
import os
import re
import subprocess
import sys
import threading
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# An internal handle of fedbound's notes on a paper, never what a reader can look up.
JARGON = re.compile(r"\b[Ss]eeds?[ /_-]?0\d\d\b|\b[Ss]pecs?[ /_-]?0\d\d\b|\b[Ss]pec (?:[A-Z]{1,2}\d+|TV\d|§)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "FEDBOUND_DOCS_EXECUTE_NOTEBOOK": "false"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def pages(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): p.read_text() for p in sorted(site.rglob("*.html"))
            if not p.relative_to(site).as_posix().startswith("javascripts/")}


class Resources(HTMLParser):
    """What a page makes the browser fetch: scripts, stylesheets, fonts, images, frames."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.urls.append((tag, a["src"]))
        if tag == "link" and a.get("href") and set((a.get("rel") or "").split()) & {
                "stylesheet", "preconnect", "preload", "modulepreload", "dns-prefetch", "icon", "manifest"}:
            self.urls.append((f"link rel={a.get('rel')}", a["href"]))


REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)


def test_no_page_loads_anything_from_another_host(site):
    remote = []
    for name, text in pages(site).items():
        parser = Resources()
        parser.feed(text)
        assert parser.urls, f"{name} loads nothing at all: the parser missed its tags"
        remote += [(name, tag, url) for tag, url in parser.urls if REMOTE.match(url)]
    assert not remote, remote[:10]
    for css in site.rglob("*.css"):
        found = re.findall(r"(?:url\(\s*['\"]?|@import\s+['\"])((?:https?:)?//[^'\")\s]+)", css.read_text())
        assert not found, (css.relative_to(site), found[:5])


def test_formulas_are_typeset_by_the_bundled_mathjax(site):
    page = (site / "papers" / "nbafl" / "index.html").read_text()
    assert len(re.findall(r'class="arithmatex"', page)) >= 20  # NbAFL's theorems, rendered from sympy
    scripts = re.findall(r'<script src="([^"]+)"', page)
    mathjax = [s for s in scripts if "mathjax" in s.lower() and not s.endswith("mathjax-config.js")]
    assert mathjax == ["../../javascripts/mathjax/tex-mml-chtml.js"], scripts
    bundle = site / "javascripts" / "mathjax"
    assert (bundle / "tex-mml-chtml.js").stat().st_size > 500_000
    fonts = list((bundle / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert len(fonts) >= 20  # the CommonHTML fonts it loads by relative path
    assert (bundle / "input" / "tex" / "extensions").is_dir()  # \boldsymbol & co. are loaded on demand


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_lists_are_lists_not_run_on_paragraphs(site):
    run_on = []
    for name, text in pages(site).items():
        for _, block in re.findall(r"<(p|li|td)>(.*?)</\1>", text, re.S):
            lines = _text(re.sub(r"<pre.*?</pre>", "", block, flags=re.S)).splitlines()[1:]
            run_on += [(name, line[:60]) for line in lines if re.match(r"\s*(?:[-*+]|\d{1,2}\.) \S", line)]
    assert not run_on, run_on
    flower = (site / "guides" / "flower" / "index.html").read_text()
    assert re.search(r"What runs where\.</strong></p>\s*<ul>", flower)


def test_api_reference_has_no_raw_sphinx_roles(site):
    api = (site / "reference" / "api" / "index.html").read_text()
    everything = "\n".join([*pages(site).values(), (site / "search" / "search_index.json").read_text()])
    assert not re.findall(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj):(?:<code>|`)", everything)
    # a role whose target the page documents became a link to it
    assert re.search(r'<a href="#fedbound\.[\w.]+"><code>[\w.]+</code></a>', api)


def test_cli_help_boxes_are_whole(site):
    import importlib.util  # the docs hook is a file of the repository, not an installed module

    path = REPO / "docs" / "hooks" / "fedbound_docs.py"
    spec = importlib.util.spec_from_file_location("fedbound_docs", path)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    HELP_COLUMNS = hook.HELP_COLUMNS
    cli = (site / "reference" / "cli" / "index.html").read_text()
    boxes = [_text(b) for b in re.findall(r"<pre[^>]*>(.*?)</pre>", cli, re.S)]
    assert len(boxes) >= 17  # every command (sub-commands too)
    for box in boxes:
        assert "…" not in box, box[:300]  # rich elides what does not fit its column
        assert max(len(line) for line in box.splitlines()) <= HELP_COLUMNS, box[:300]
    text = "\n".join(boxes)
    assert "PAPER_CONFIG_flower" in text and "Show this message and exit." in text


def test_no_internal_ids_in_the_site(site):
    found = []
    for name, text in pages(site).items():
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        assert title and not JARGON.search(title.group(1)), (name, title)
        for m in JARGON.finditer(_text(text)):
            found.append((name, m.group(0)))
    assert not found, found[:20]


@pytest.mark.parametrize("args", [
    ["papers"],
    ["plan", "nbafl", "examples/nbafl_mnist.toml"],
    ["plan", "udp", "examples/udp_mnist.toml"],
    ["plan", "adaptive", "examples/adaptive_s3_plan.toml"],
    ["plan", "dppfl", "examples/dppfl_mnist.toml"],
    ["plan", "wpfl", "examples/wpfl_mnist.toml"],
    ["plan", "nbafl", "examples/nbafl_mnist.toml", "--json"],
    ["claims", "wpfl"],
    ["reproduce", "--list"],
])
def test_no_internal_ids_in_cli_output(args, monkeypatch):
    from fedbound.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "200")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(args)
    assert code in (0, None), printed.getvalue()[-2000:]
    assert len(printed.getvalue()) > 100
    assert not JARGON.findall(printed.getvalue()), JARGON.findall(printed.getvalue())


def test_flower_guide_states_what_the_plan_deploys(monkeypatch):
    """The Flower guide's rounds of the MNIST example are the plan's recommendation today (they once said
    T* = 5 long after the plan moved to 50)."""
    import json

    from fedbound.cli import main

    text = (REPO / "docs" / "guides" / "flower.md").read_text()
    stated = re.search(r"The example's plan deploys T = (\d+) rounds of all (\d+) clients", text)
    assert stated and "T* = 5" not in text
    monkeypatch.chdir(REPO)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["plan", "nbafl", "examples/nbafl_mnist.toml", "--json"]) in (0, None)
    plan = json.loads(printed.getvalue())["recommendation"]
    clients = tomllib.loads((REPO / "examples" / "nbafl_mnist.toml").read_text())["nbafl"]["N"]
    assert plan["K"] in (None, clients)  # every client every round
    assert (plan["T"], clients) == (int(stated.group(1)), int(stated.group(2)))


def _strings(path: Path):
    """The string literals of a module that are not docstrings (a bare string statement is one)."""
    tree = ast.parse(path.read_text())
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node.lineno, node.value


def test_no_internal_ids_in_messages_and_labels():
    """Every string the code can print (messages, labels, sources, help): docstrings may keep the ids of
    fedbound's notes unless the API reference renders them (checked on the site above)."""
    folders = {Path(v).parts[0] for v in tomllib.loads((REPO / "pyproject.toml").read_text())
               ["tool"]["setuptools"]["package-dir"].values()} - {"tests"}
    found = [(path.relative_to(REPO).as_posix(), line, m.group(0))
             for folder in sorted(folders) for path in sorted((REPO / folder).rglob("*.py"))
             for line, value in _strings(path) for m in JARGON.finditer(value)]
    assert len(folders) >= 5 and not found, found


def _extras_in(text: str) -> list[str]:
    found = re.findall(r"pip install (?:--[\w-]+ )*-e\s+'\.\[([\w,]+)\]'", text)
    assert found, "no `pip install -e '.[...]'` line"
    return [sorted(f.split(",")) for f in found]


def test_readme_getting_started_and_makefile_name_the_same_extras():
    """One source: the Makefile's install line; README and Getting started quote it, and Getting started
    says what each extra of pyproject.toml is for."""
    make = _extras_in((REPO / "Makefile").read_text())[0]
    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert set(make) <= declared
    readme = (REPO / "README.md").read_text()
    start = (REPO / "docs" / "getting-started.md").read_text()
    assert _extras_in(readme) == [make] and _extras_in(start) == [make]
    described = re.search(r"The extras: (.*?)\n\n", start, re.S).group(1)
    assert {e for e in declared if f"`{e}`" not in described} == set()
    for text in (readme, start):  # what `make test` needs beyond Python
        assert "apt-get install -y chromium" in text


def test_site_renders_offline_in_a_browser(site):
    """Chromium, every request to another host refused: every formula of NbAFL's page typeset by MathJax
    (no error node), nothing asked of another host, and the CLI reference's boxes fit their column."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (as root; .ci/run does it in CI)")
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    refused, loaded = [], []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})

                def route(r):
                    if r.request.url.startswith(base):
                        loaded.append(r.request.url)
                        r.continue_()
                    else:
                        refused.append(r.request.url)
                        r.abort()

                page.route("**/*", route)
                page.goto(base + "/papers/nbafl/")
                page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise",
                                       timeout=30_000)
                page.evaluate("MathJax.startup.promise")
                total = page.locator(".arithmatex").count()
                untypeset = page.evaluate("Array.from(document.querySelectorAll('.arithmatex'))"
                                          ".filter(e => !e.querySelector('mjx-container')).length")
                errors = page.locator("mjx-merror").count()
                page.goto(base + "/reference/cli/")
                overflowing = page.evaluate("Array.from(document.querySelectorAll('.md-typeset pre > code'))"
                                            ".filter(c => c.scrollWidth > c.clientWidth + 1).length")
                boxes = page.locator(".md-typeset pre > code").count()
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert total >= 20 and untypeset == 0 and errors == 0, (total, untypeset, errors)
    assert any(u.endswith(".woff") for u in loaded)  # MathJax's fonts came from the site
    assert refused == []
    assert boxes >= 17 and overflowing == 0, (boxes, overflowing)
