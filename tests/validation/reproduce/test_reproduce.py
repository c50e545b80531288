"""``fedbound reproduce``: every registered figure target, well-formed and run at its tiny size.

The verdicts themselves are not asserted at tiny size (two seeds of one or two rounds decide nothing); the
files, their contents and the verdict format are."""

import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from fedbound.cli import app
from fedbound.registry import papers
from fedbound.tests._reproduce_helpers import check_files, tiny_results
from fedbound.validation.reproduce import Target, Uncovered, reproduce, specs, targets, toml_text

TARGETS = [t for t in targets() if isinstance(t, Target)]
IDS = [f"{t.paper}-{t.figure}" for t in TARGETS]
LINE = re.compile(r"^(?P<paper>\w+) (?P<fig>\S+): (?P<id>\S+) (holds in \d+/\d+ seeds, effect size \S+ "
                  r"\(95 % interval [^)]+\)|does not hold \(in \d+/\d+ seeds\), effect size \S+ \(95 % "
                  r"interval [^)]+\); mean \w+: .+): .+$")


@pytest.mark.parametrize("name", list(papers()))
def test_every_paper_has_a_reproducible_figure(name):
    entries = targets(name)
    assert any(isinstance(t, Target) for t in entries), f"{name}: no figure target"
    assert all(t.paper == name for t in entries)
    figures = [t.figure for t in entries if isinstance(t, Target)]
    assert len(figures) == len(set(figures))
    assert all(u.reason for u in entries if isinstance(u, Uncovered))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_claims_name_the_labels_and_cases_of_their_target(target):
    labels = set(target.labels)
    for claim in target.claims:
        named = {claim.x} - {None} | set(claim.where) | set(claim.case) | set(claim.other)
        named |= {k for a in claim.among for k in a}
        assert named <= labels, f"{claim.id} names {named - labels}, labels are {labels}"
        for wanted in (claim.case, claim.other, *claim.among):
            if wanted:
                assert any(all(c.labels.get(k) == v for k, v in wanted.items()) for c in target.cases), \
                    f"{claim.id}: no case has {wanted}"
    assert target.x == "round" or target.x in labels


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_every_scale_is_a_valid_sweep(target, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    for scale in ("tiny", "demo"):
        runs = specs(target, config, scale)
        assert len(runs) == len(target.cases) * target.scale(scale).seeds
        assert len({r.key for r in runs}) == len(runs), f"{scale}: two cases make the same run"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Every target at its tiny size, in one sweep (runs of equal shape batch across figures)."""
    return tiny_results(TARGETS, tmp_path_factory.mktemp("reproduce"))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_every_target_runs_tiny_and_writes_its_files(tiny, target):
    out, results = tiny
    result = results[(target.paper, target.figure)]
    doc = check_files(result, target)
    table = pd.read_csv(result.files["csv"])
    assert {"key", "seed", "round", *target.labels, target.metric} <= set(table.columns)
    assert table["key"].nunique() == len(target.cases) * target.tiny.seeds
    assert [c["id"] for c in doc["claims"]] == [c.id for c in target.claims]
    lines = result.lines()
    # the paper's own mechanism: where it runs past its budget (the paper-reproduction mode) a last line and
    # verdicts.json say what the runs really spend
    assert doc["privacy"] == result.privacy
    if result.privacy is not None:
        assert lines.pop() == f"{target.paper} {target.figure}: {result.privacy}"
        assert result.privacy.startswith("paper reproduction ([train] paper_reproduction = true): ")
        assert "not (ε, δ)-DP at the stated budget" in result.privacy
    assert len(lines) == len(target.claims)
    for line, claim in zip(lines, target.claims, strict=True):
        m = LINE.match(line)
        assert m, line
        assert (m["paper"], m["fig"], m["id"]) == (target.paper, target.figure, claim.id)


def test_a_second_run_resumes_every_finished_run(tiny):
    out, results = tiny
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs" / "runs").iterdir()}
    again = reproduce(TARGETS[0], out, scale="tiny")[0]
    after = {p.name: p.stat().st_mtime_ns for p in (out / "runs" / "runs").iterdir()}
    assert before == after
    first = results[(TARGETS[0].paper, TARGETS[0].figure)]
    assert again.lines() == first.lines()


runner = CliRunner()


def test_list_names_every_claim_and_what_is_not_covered():
    res = runner.invoke(app, ["reproduce", "--list", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["targets"]
    covered = {(r["paper"], r["figure"], r["claim"], r["kind"]) for r in rows if r["covered"]}
    assert covered == {(t.paper, t.figure, claim, t.kind) for t in targets() if not isinstance(t, Uncovered)
                       for claim, _ in t.statements()}
    assert {(t.paper, t.figure, c.id, "training") for t in TARGETS for c in t.claims} <= covered
    assert {r["kind"] for r in rows if r["covered"]} == {"training", "bound", "predicted vs measured"}
    assert all(r["seconds"] > 0 for r in rows if r["covered"])
    assert {(r["paper"], r["figure"]) for r in rows if not r["covered"]} == {
        (u.paper, u.figure) for u in targets() if isinstance(u, Uncovered)}


@pytest.mark.parametrize("args, message", [
    (["reproduce", "nbafl", "fig99"], "figure 'fig99' is outside its valid range"),
    (["reproduce", "nbafl"], "needs PAPER FIGURE"),
    (["reproduce", "nbafl", "fig2", "udp"], "needs PAPER FIGURE"),
    (["reproduce", "nbafll", "fig2"], "did you mean 'nbafl'"),
    (["reproduce", "nbafl", "fig2", "--scale", "huge"], "--scale 'huge' is outside its valid range"),
    (["reproduce", "nbafl", "fig2", "--seeds", "0"], "--seeds"),
])
def test_bad_requests_are_one_line_errors(args, message, tmp_path):
    from fedbound.cli import main

    res = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert res.exit_code != 0
    assert main([*args, "--out", str(tmp_path)]) == 2
    assert message in str(res.exception) or message in res.output


def test_paper_scale_without_the_data_says_what_to_get(tmp_path, monkeypatch, capsys):
    from fedbound.cli import main

    monkeypatch.setenv("FEDBOUND_DATA_DIR", str(tmp_path / "empty"))
    assert main(["reproduce", "nbafl", "fig2", "--scale", "paper", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs the full MNIST: fedbound data mnist" in err


def test_paper_scale_names_the_missing_file(tmp_path):
    res = runner.invoke(app, ["reproduce", "nbafl", "fig2", "--scale", "paper", "--data", str(tmp_path),
                              "--out", str(tmp_path / "out")])
    assert res.exit_code != 0
    assert "missing train-images-idx3-ubyte" in str(res.exception)
