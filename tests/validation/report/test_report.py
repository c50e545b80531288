"""``fedbound report``: the page opens in a real headless browser (Debian's Chromium, driven by Playwright)
with no console error, no network request and every section of every registered paper present."""

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbound.cli import app, main
from fedbound.errors import ConfigError
from fedbound.registry import papers
from fedbound.validation.report import SECTIONS, build_report, errata_markdown
from fedbound.validation.reproduce import find, reproduce

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = ("Debian's Chromium is needed at /usr/bin/chromium for the report's browser test: "
           "sudo apt-get install -y chromium (CI: .ci/run installs it); never `playwright install`")


REPO = Path(__file__).resolve().parents[3]
LOGISTIC = str(REPO / "examples" / "nbafl_logistic.toml")


def _cli(*args: str) -> str:
    """The CLI in this process (exit 0 asserted); its standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(a) for a in args]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder as `make demo` leaves it: reproduced figures (training and bound), one validate
    result, and the other kinds the demo writes there: a saved plan, a train run, a sweep and an audit."""
    out = tmp_path_factory.mktemp("results")
    (out / "nbafl_plan.json").write_text(_cli("plan", "nbafl", LOGISTIC, "--json"))
    _cli("train", "nbafl", LOGISTIC, "--set", "T=2", "--out", out / "train_nbafl", "--no-progress")
    _cli("sweep", "nbafl", LOGISTIC, "--vs", "T", "--values", "1,2", "--seeds", "1", "--out",
         out / "sweep_nbafl", "--no-progress")
    _cli("audit", "nbafl", REPO / "examples" / "audit_nbafl.toml", "--trials", "200", "--no-control", "--out",
         out / "audit_nbafl.png")
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


def _cells(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"{selector} tr",
                                     "rows => rows.map(r => [...r.cells].map(c => c.innerText))")


def test_every_result_kind_in_the_folder_is_shown_with_its_binding_epsilon(opened, results):
    """Issue 37: the report left out the audit, Flower and sweep results present in the folder.  The expected
    numbers are read from the files the commands wrote, not from the report's code."""
    page, _, _ = opened
    plan = json.loads((results / "nbafl_plan.json").read_text())
    saved = [r for r in _cells(page, "#nbafl-plan") if r and r[0] == "nbafl_plan.json"]
    assert len(saved) == 1 and saved[0][1] == str(plan["recommendation"]["T"])
    stage = plan["certificate"]["privacy"][0]
    assert f"ε {stage['eps_achieved']:.4g} of {stage['eps_target']:.4g}" in saved[0][5]

    train = json.loads((results / "train_nbafl" / "summary.json").read_text())
    (row,) = [r for r in _cells(page, "#nbafl-runs") if r and r[0] == "train_nbafl"]
    assert row[1] == "fedbound train" and row[2] == f"{train['rounds_done']} of {train['rounds_planned']}"
    assert row[3] == f"{train['final_loss']:.4g}"
    assert row[5].startswith(f"ε {train['epsilon_binding']:.4g} of budget 50 at δ = 0.01 (tight accountant")
    assert row[6] == train["privacy"]

    runs = page.locator("#nbafl-runs").inner_text()
    assert "Sweep sweep_nbafl" in runs and "2 runs (2 settings)" in runs
    settings = [r[0] for r in _cells(page, "#nbafl-runs") if r and r[0].startswith("T = ")]
    assert settings == ["T = 1", "T = 2"]

    audit = json.loads((results / "audit_nbafl.json").read_text())
    text = page.locator("#nbafl-audit").inner_text()
    assert f"audit_nbafl.json: {audit['verdict'].split(':')[0]}" in text and "200 trials per side" in text
    views = {r[0]: r for r in _cells(page, "#nbafl-audit") if r and r[0] in ("uplink", "downlink")}
    for v in audit["views"]:
        assert views[v["view"]][1] == f"{v['epsilon_lower']:.4g}"
        assert views[v["view"]][2] == f"{v['epsilon_reported']:.4g}"
    assert page.locator("#nbafl-audit img").count() == 1

    overview = {r[0]: r for r in _cells(page, "#overview") if r}
    assert overview["NbAFL (Wei et al. 2020)"][3:] == ["1 saved", "1 run(s)", "none", "1 sweep(s)",
                                                      audit["verdict"].split(":")[0]]
    assert "No training run" in page.locator("#udp-runs").inner_text()
    assert "No audit" in page.locator("#udp-audit").inner_text()


def test_a_reproduced_figure_states_the_binding_epsilon_of_its_runs(opened, results):
    page, _, _ = opened
    verdicts = json.loads((results / "reproduce" / "nbafl" / "fig2" / "verdicts.json").read_text())
    (row,) = [r for r in _cells(page, "#nbafl-claims") if r and r[0] == "fig2" and r[2] == "binding ε"]
    assert row[4].startswith(f"{verdicts['runs']} runs: binding ε ")


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


def _runs_rows(html: str, name: str) -> list[list[str]]:
    """The rows of a paper's runs section in a written report (parsed, no browser)."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.inside, self.rows, self.cell = 0, [], None

        def handle_starttag(self, tag, attrs):
            if tag == "section" and ("id", f"{name}-runs") in attrs:
                self.inside = 1
            elif self.inside and tag == "section":
                self.inside += 1
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag == "td":
                self.cell = ""

        def handle_endtag(self, tag):
            if self.inside and tag == "section":
                self.inside -= 1
            elif self.inside and tag == "td" and self.cell is not None:
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parsed = Rows()
    parsed.feed(html)
    return [r for r in parsed.rows if r]


def test_a_run_with_flowers_accounting_is_a_flower_run_and_shows_flowers_epsilon(results, tmp_path):
    """The classification (``results.scan``): a run directory whose summary carries Flower's accounting is a
    Flower run (simulation; a local deployment leaves deployment/); the sweep a validate trained is not
    listed as a sweep of its own.  (A real Flower run: the full profile's test below.)"""
    from fedbound.validation.report.results import scan, walk

    folder = tmp_path / "results"
    shutil.copytree(results / "train_nbafl", folder / "flower_sim")
    summary = json.loads((folder / "flower_sim" / "summary.json").read_text())
    summary.update(flower_accounting={"epsilon": 1.25}, epsilon_flower=1.25, noise_source="os-entropy")
    (folder / "flower_sim" / "summary.json").write_text(json.dumps(summary))
    shutil.copytree(folder / "flower_sim", folder / "flower_local")
    (folder / "flower_local" / "deployment").mkdir()
    shutil.copytree(results / "sweep_nbafl", folder / "validate_nbafl" / "sweep")
    (folder / "validate_nbafl" / "validation.json").write_text('{"paper": "nbafl", "verdicts": []}')
    found = scan(walk(folder, 1000))
    assert sorted((r.kind, r.path.name) for r in found["nbafl"]) == [("flower", "flower_local"),
                                                                     ("flower", "flower_sim")]
    html = build_report(folder, tmp_path / "r.html", points=1).read_text()
    rows = {r[0]: r for r in _runs_rows(html, "nbafl")}
    assert rows["flower_sim"][1] == "Flower simulation" and rows["flower_local"][1] == "Flower deployment"
    assert rows["flower_sim"][7] == "Flower's RdpAccountant ε 1.25; noise os-entropy"
    trained = [json.loads(p.read_text()) for p in (folder / "validate_nbafl" / "sweep" / "runs").glob(
        "*/summary.json")]
    worst = max(s["epsilon_binding"] / s["eps_budget"] for s in trained)
    assert f"privacy: 2 runs trained, binding ε {worst * 50:.4g} of budget 50" in html


def test_a_damaged_plan_is_refused_and_a_foreign_json_file_is_left_alone(results, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(results / "train_nbafl", folder / "train_nbafl")
    (folder / "notes.json").write_text('{"mine": [1, 2')  # not fedbound's: skipped
    assert build_report(folder, tmp_path / "r.html", points=1).is_file()
    text = (results / "nbafl_plan.json").read_text()
    (folder / "plan.json").write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError, match=r"plan\.json is damaged"):
        build_report(folder, tmp_path / "r.html", points=1)


@pytest.mark.skipif(os.environ.get("FEDBOUND_AUDIT_SUITE") != "full",
                    reason="a Flower run starts Ray (~30 s): FEDBOUND_AUDIT_SUITE=full (.ci/run sets it); "
                           "the default run checks the classification above")
def test_a_real_flower_run_is_in_the_report(tmp_path):
    _cli("flower", "nbafl", LOGISTIC, "--set", "T=1", "--run", "--out", tmp_path / "results" / "flower_nbafl")
    summary = json.loads((tmp_path / "results" / "flower_nbafl" / "summary.json").read_text())
    html = build_report(tmp_path / "results", tmp_path / "r.html", points=1).read_text()
    (row,) = [r for r in _runs_rows(html, "nbafl") if r[0] == "flower_nbafl"]
    assert row[1] == "Flower simulation" and row[2] == "1 of 1"
    assert row[5].startswith(f"ε {summary['epsilon_binding']:.4g} of budget 50")
    assert row[7].startswith(f"Flower's RdpAccountant ε {summary['epsilon_flower']:.4g}")
