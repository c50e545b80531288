"""``fedbound report``: the page opens in a real headless browser (Debian's Chromium, driven by Playwright)
with no console error, no network request and every section of every registered paper present."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbound.cli import app, main
from fedbound.registry import papers
from fedbound.validation.report import SECTIONS, build_report, errata_markdown
from fedbound.validation.reproduce import find, reproduce

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = ("Debian's Chromium is needed at /usr/bin/chromium for the report's browser test: "
           "sudo apt-get install -y chromium (CI: .ci/run installs it); never `playwright install`")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder as `make demo` leaves it: reproduced figures (training and bound) and one validate
    result."""
    out = tmp_path_factory.mktemp("results")
    reproduce([find("nbafl", "fig2"), find("nbafl", "fig7"), find("udp", "fig2")], out / "reproduce",
              scale="tiny")
    measured = out / "validate_nbafl"
    measured.mkdir()
    shutil.copy(out / "reproduce" / "nbafl" / "fig2" / "nbafl_fig2.png", measured / "validation.png")
    (measured / "validation.json").write_text(json.dumps(
        {"paper": "nbafl", "verdicts": ["the bound holds at every point of the sweep (test line)"]}))
    return out


@pytest.fixture(scope="module")
def report(results):
    return build_report(results, results / "report.html", points=1)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(INSTALL)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package playwright is needed (the dev extra: pip install -e '.[dev]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def opened(browser, report):
    """The report loaded offline: the page, its console errors and every request that left the file."""
    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    url = report.resolve().as_uri()

    def gate(route):
        if route.request.url == url or route.request.url.startswith("data:"):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    page.route("**/*", gate)
    page.goto(url)
    page.wait_for_load_state("load")
    yield page, errors, requests
    page.close()


def test_page_loads_offline_without_console_errors(opened):
    page, errors, requests = opened
    assert errors == []
    assert requests == []
    external = page.eval_on_selector_all(
        "script[src], link[href], img[src], iframe[src]",
        "els => els.map(e => e.getAttribute('src') || e.getAttribute('href'))")
    assert [e for e in external if not e.startswith(("data:", "#"))] == []


@pytest.mark.parametrize("name", list(papers()))
def test_every_paper_shows_every_section(opened, name):
    page, _, _ = opened
    assert page.locator(f"#paper-{name}").is_visible()
    for key in SECTIONS:
        box = page.locator(f"#{name}-{key}")
        assert box.is_visible(), f"{name}: section {key} missing"
        assert box.inner_text().strip()
    claims = page.locator(f"#{name}-claims").inner_text()
    assert "Bound claims" in claims and "Figure claims" in claims


def test_reproduced_figure_is_interactive_and_verdicts_are_shown(opened):
    page, _, _ = opened
    assert page.locator("#fig-nbafl-fig2 .main-svg").count() >= 1  # plotly drew it
    claims = page.locator("#nbafl-claims").inner_text()
    assert "F2a" in claims and "(tiny)" in claims
    assert "not run" in page.locator("#udp-claims").inner_text()
    for paper, figure, claim in (("nbafl", "fig7", "S15a"), ("udp", "fig2", "P4")):  # bound figures
        assert page.locator(f"#fig-{paper}-{figure} .main-svg").count() >= 1
        text = page.locator(f"#{paper}-claims").inner_text()
        assert "bound" in text and f"{claim} holds at" in text
    measured = page.locator("#nbafl-measured")
    assert "test line" in measured.inner_text()
    assert measured.locator("img").count() == 1
    assert "Not measured yet" in page.locator("#udp-measured").inner_text()


def test_plan_is_the_registry_planners_answer(opened):
    page, _, _ = opened
    text = page.locator("#nbafl-plan").inner_text()
    assert "Recommendation" in text and "The paper's answer and the tight one" in text


@pytest.mark.parametrize("name", list(papers()))
def test_errata_come_from_the_papers_page(name):
    text = errata_markdown(name)
    assert text is not None and "errat" in text.lower()


@pytest.mark.parametrize("name", list(papers()))
def test_errata_render_as_tables_with_whole_rows_and_no_nested_heading(name):
    """Every row of a page's errata table has as many cells as its header (a bare |D_i| would split one), and
    the section carries no heading of its own (the report's section heading is the only one)."""
    from html.parser import HTMLParser

    from fedbound.validation.report import _errata_section

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.tags = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            if tag == "tr":
                self.rows.append(0)
            elif tag in ("td", "th"):
                self.rows[-1] += 1

    parsed = Rows()
    parsed.feed(_errata_section(papers()[name]))
    assert not {"h1", "h2", "h3", "h4"} & set(parsed.tags)
    assert len(set(parsed.rows)) <= 1, parsed.rows


def test_a_missing_results_folder_is_a_one_line_error(tmp_path):
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code != 0 and "is not a folder" in str(res.exception)
    assert main(["report", str(tmp_path / "nope")]) == 2


def test_a_folder_without_results_is_refused_at_once(tmp_path, capsys):
    """issue 26: `report EMPTY_DIR` planned every paper for minutes to write a page with no results."""
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "holds no fedbound results" in err and not (tmp_path / "empty" / "report.html").exists()


def test_a_huge_folder_is_refused_not_walked(tmp_path, monkeypatch):
    """`report /` must not walk the whole disk: past MAX_FILES entries the folder is refused."""
    import fedbound.validation.report as report_mod
    from fedbound.errors import ConfigError

    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("x")
    monkeypatch.setattr(report_mod, "MAX_FILES", 3)
    with pytest.raises(ConfigError, match="more than 3 files"):
        report_mod.find_results(tmp_path, "verdicts.json")
