"""The explorer page in a real browser: Debian's Chromium driven by Playwright against a live ``fedbound
serve`` on a free port.

Never skipped: without /usr/bin/chromium the tests fail and say how to install it (.ci/run does it in CI).
Parametrised over fedbound.registry (papers are picked by what their entries declare, never by name).
"""

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlparse

import pytest

from fedbound import registry
from fedbound.cli import main

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
PLANNERS = [n for n in registry.names("plan") if n in registry.names("plot")]
OPTIMISED_T = [n for n in PLANNERS if "eps" in registry.get(n).example and "T" not in registry.get(n).example]
"""Papers whose example leaves T to the optimiser (the recommendation's T is then T*) and sets eps."""
INPUTS = "[...document.querySelectorAll('#form [data-key]')].map(i => [i.id, i.value])"


@pytest.fixture(scope="module")
def server():
    """``fedbound serve --port 0`` (any free port, the default bind address); yields its URL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", "serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        seen, line = [], ""
        for line in proc.stdout:  # the first line that says where it listens (a warning may come before)
            seen.append(line)
            if "fedbound explorer on " in line:
                break
        assert "fedbound explorer on http://127.0.0.1:" in line, "".join(seen)
        yield line.split(" on ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"the explorer's browser tests need Debian's Chromium at {CHROMIUM}: install it with "
                    "`apt-get install -y chromium` (as root; .ci/run does this in CI)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM))
        yield b
        b.close()


@dataclass
class Page:
    """A browser tab that records console errors and every request that would leave 127.0.0.1 (those are
    aborted)."""

    tab: object
    url: str
    errors: list = field(default_factory=list)
    outside: list = field(default_factory=list)

    def open(self, query: str = "") -> None:
        self.tab.goto(f"{self.url}{'?' + query if query else ''}")
        self.wait(0)

    def wait(self, before: int) -> None:
        """Until the page finished an update after ``before`` updates."""
        self.tab.wait_for_function(
            "n => Number(document.body.dataset.updates) > n && document.body.dataset.state !== 'busy'",
            arg=before, timeout=TIMEOUT_MS)

    def updates(self) -> int:
        return int(self.tab.evaluate("document.body.dataset.updates"))

    def text(self, selector: str) -> str:
        return self.tab.locator(selector).inner_text()

    def chart(self) -> list:
        return self.tab.evaluate("document.getElementById('chart').data.map(t => t.y)")

    def query(self) -> dict:
        return dict(parse_qsl(urlparse(self.tab.url).query))

    def slide(self, key: str, position: int) -> None:
        before = self.updates()
        self.tab.locator(f"#slider-{key}").fill(str(position))
        self.wait(before)


@pytest.fixture(scope="module")
def context(browser):
    """One browser context for the module (its HTTP cache keeps plotly.js between tests); every request
    that would leave 127.0.0.1 is aborted and recorded in ``context.outside``."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside = []

    def route(r):
        url = r.request.url
        if urlparse(url).hostname == "127.0.0.1" or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    ctx.route("**/*", route)
    yield ctx, outside
    ctx.close()


@pytest.fixture
def page(context, server):
    ctx, outside = context
    tab = ctx.new_page()
    outside.clear()
    p = Page(tab, server, outside=outside)
    tab.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: p.errors.append(str(e)))
    yield p
    tab.close()


@pytest.mark.parametrize("name", PLANNERS)
def test_page_loads_with_no_console_error_and_no_request_leaving_the_machine(page, name):
    page.open(f"paper={name}")
    assert page.tab.evaluate("document.body.dataset.state") == "ready", page.text("#error")
    assert page.errors == [] and page.outside == []
    paper = registry.get(name)
    assert paper.short in page.text("#citation")
    assert page.text("#rec-T").strip().isdigit()
    assert any(y is not None for trace in page.chart() for y in trace)
    keys = [k["key"] for k in paper.keys() if k["type"] != "alias"]
    assert page.tab.locator("#form input[type=text], #form select").count() == len(keys)


@pytest.mark.parametrize("name", OPTIMISED_T)
def test_moving_the_eps_slider_changes_T_star_and_the_curve(page, name):
    page.open(f"paper={name}")
    T, curve, eps = page.text("#rec-T"), page.chart(), page.tab.input_value("#in-eps")
    page.slide("eps", 1000)  # the top of the log slider: 100 times the example's eps
    assert float(page.tab.input_value("#in-eps")) == pytest.approx(100 * float(eps), rel=1e-2)
    assert page.text("#rec-T") != T
    assert page.chart() != curve
    assert page.query()["eps"] == page.tab.input_value("#in-eps")
    assert page.errors == [] and page.outside == []


def test_a_bad_value_shows_the_error_next_to_the_field(page):
    name = OPTIMISED_T[0]
    page.open(f"paper={name}")
    before = page.updates()
    page.tab.fill("#in-eps", "-1")
    page.wait(before)
    message = page.text("#err-eps")
    assert "eps" in message and "-1" in message and "valid range" in message
    assert "invalid" in page.tab.get_attribute("#field-eps", "class")
    assert page.text("#error") == ""
    before = page.updates()
    page.tab.fill("#in-eps", str(registry.get(name).example["eps"]))
    page.wait(before)
    assert page.text("#err-eps") == "" and page.tab.evaluate("document.body.dataset.state") == "ready"


def test_the_url_round_trips_the_state(page, context):
    name = OPTIMISED_T[-1]
    paper = registry.get(name)
    plots = list(paper.load("plots"))
    variant = paper.variants()[0] if paper.variants() else "paper"
    example = dict(paper.example)
    query = "&".join([f"paper={name}", f"vs={plots[-1]}", f"variant={variant}",
                      *(f"{k}={v}" for k, v in example.items() if k != "eps"), f"eps={2 * example['eps']}"])
    page.open(query)
    assert page.tab.input_value("#vs") == plots[-1] and page.tab.input_value("#variant") == variant
    assert float(page.tab.input_value("#in-eps")) == 2 * example["eps"]
    page.slide("eps", 300)
    state = page.query()
    assert state["paper"] == name and state["vs"] == plots[-1] and state["variant"] == variant
    inputs = page.tab.evaluate(INPUTS)
    shown = (page.text("#rec-T"), page.chart())

    again = context[0].new_page()
    try:
        again.goto(page.tab.url)
        again.wait_for_function("document.body.dataset.state === 'ready'", timeout=TIMEOUT_MS)
        assert again.evaluate(INPUTS) == inputs
        assert again.input_value("#vs") == plots[-1] and again.input_value("#variant") == variant
        assert (again.locator("#rec-T").inner_text(),
                again.evaluate("document.getElementById('chart').data.map(t => t.y)")) == shown
        assert dict(parse_qsl(urlparse(again.url).query)) == state
    finally:
        again.close()


def test_copy_as_command_and_as_config_plan_what_the_page_shows(page, tmp_path, capsys):
    import json

    name = OPTIMISED_T[0]
    page.open(f"paper={name}")
    page.slide("eps", 700)
    page.tab.click("#copy-command")
    command = page.text("#copied")
    argv = shlex.split(command)
    assert argv[:3] == ["fedbound", "plan", name]
    capsys.readouterr()
    assert main([*argv[1:], "--json"]) == 0
    by_command = json.loads(capsys.readouterr().out)
    assert str(by_command["recommendation"]["T"]) == page.text("#rec-T")
    page.tab.click("#copy-config")
    config = tmp_path / "design.toml"
    config.write_text(page.text("#copied"))
    assert main(["plan", name, str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_command


def test_the_claims_table_links_counterexamples_to_their_settings(page):
    from fedbound.explorer.api import counterexample_links

    with_links = [n for n in registry.names("claims") if n in PLANNERS
                  and any(q for per in counterexample_links(n) for q in per)]
    name = min(with_links, key=lambda n: len(registry.get(n).all_claims()))
    page.open(f"paper={name}")
    page.tab.click("#claims-box summary")
    page.tab.wait_for_function("document.getElementById('claims').dataset.state === 'ready'",
                               timeout=TIMEOUT_MS)
    assert page.tab.locator("#claims tr").count() == len(registry.get(name).all_claims()) + 1
    link = page.tab.locator("#claims a").first
    target = dict(parse_qsl(link.get_attribute("href").lstrip("?")))
    with page.tab.expect_navigation():
        link.click()
    page.wait(0)
    assert page.tab.input_value("#variant") == target["variant"]
    for key in set(target) - {"paper", "variant"}:
        assert float(page.tab.input_value(f"#in-{key}")) == float(target[key])
    assert page.errors == [] or all("422" in e for e in page.errors)


def test_the_bound_figure_notes_do_not_overlap(page):
    """Issue 23: the notes on the bound-vs-T figure ("T* = ..", "recommended T = ..") keep clear of each
    other and of the chart's edges; DP-PFL's example puts three T* = 1 notes on one point (the offsets come
    from fedbound.validation.reproduce.plots.figure_data, the same code path for every paper)."""
    page.open("paper=dppfl")
    assert page.tab.evaluate("document.body.dataset.state") == "ready", page.text("#error")
    boxes = page.tab.evaluate(
        "[...document.querySelectorAll('#chart .annotation')].filter(a => a.textContent.trim())"
        ".map(a => { const r = a.getBoundingClientRect(); return [a.textContent, r.left, r.top, r.right, "
        "r.bottom]; })")
    frame = page.tab.evaluate("(() => { const r = document.querySelector('#chart .main-svg')"
                              ".getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()")
    assert sum("T* =" in b[0] for b in boxes) >= 3, boxes
    for name, x0, y0, x1, y1 in boxes:
        inside = (x0 >= frame[0] - 0.5 and y0 >= frame[1] - 0.5
                  and x1 <= frame[2] + 0.5 and y1 <= frame[3] + 0.5)
        assert inside, (name, (x0, y0, x1, y1), frame)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            overlap_w = min(a[3], b[3]) - max(a[1], b[1])
            overlap_h = min(a[4], b[4]) - max(a[2], b[2])
            assert overlap_w <= 0.5 or overlap_h <= 0.5, (a, b)


@pytest.mark.parametrize("name", PLANNERS)
def test_every_paper_opens_informative_on_the_figure_that_marks_the_recommended_design(page, name):
    """Issue 37: three papers opened on a VACUOUS recommendation, WPFL on a figure without the recommended
    design.  A paper opened off its own experiment says so and names the keys it changed."""
    page.open(f"paper={name}")
    assert page.tab.evaluate("document.body.dataset.state") == "ready", page.text("#error")
    assert page.tab.locator("#vacuity").is_hidden()
    assert page.tab.input_value("#vs") == "T"
    paper = registry.get(name)
    assert page.tab.locator("#start-note").is_visible() == bool(paper.explore)
    for key in paper.explore:
        assert f"{key} " in page.text("#start-text")


def test_a_vacuous_recommendation_says_what_to_change_and_a_click_applies_it(page):
    name = "adaptive"  # PADPFL's own experiment (C = 20 at eps = 5) is vacuous
    page.open(f"paper={name}")
    before = page.updates()
    page.tab.click("#load-example")
    page.wait(before)
    assert page.tab.locator("#vacuity").is_visible()
    assert float(page.tab.input_value("#in-C")) == registry.get(name).example["C"]
    page.tab.wait_for_function("document.getElementById('vacuity').dataset.state === 'ready'",
                               timeout=TIMEOUT_MS)
    assert "To get an informative recommendation" in page.text("#vacuity-text")
    assert "raise eps from 5 to" in page.text("#vacuity-text")
    before = page.updates()
    page.tab.locator("#vacuity-changes button").first.click()
    page.wait(before)
    assert page.tab.locator("#vacuity").is_hidden()
    assert float(page.tab.input_value("#in-eps")) > 5
    assert page.errors == [] and page.outside == []
