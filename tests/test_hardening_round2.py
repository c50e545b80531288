"""Issue 26's reported examples (items 1, 2, 6, 9, 11) as regression tests: aliases through one resolver,
one seed in validate, errors that name the input the user typed, no self-contradictions, and the explorer's
4xx answers."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedbound import registry
from fedbound.cli import main
from fedbound.config import Field, Section, load_config
from fedbound.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _error_line(capsys, argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert "Traceback" not in err
    return lines[0]


# ---- item 1: one alias resolver -------------------------------------------------------------------------

@pytest.mark.parametrize("paper, config, override, key, value", [
    ("adaptive", "adaptive_mnist.toml", "B=5.0", "C", 5.0),
    ("wpfl", "wpfl_mnist.toml", "T0=20", "T", 20),
    ("wpfl", "wpfl_mnist.toml", "eps_Q=1.0", "eps", 1.0),
    ("wpfl", "wpfl_mnist.toml", "delta_Q=0.001", "delta", 0.001),
    ("udp", "udp_ridge.toml", "U=4", "N", 4),
    ("dppfl", "dppfl_ridge.toml", "U=4", "N", 4),
])
def test_an_alias_with_set_reaches_its_key(paper, config, override, key, value):
    """``--set ALIAS=V`` (plan and train load the section the same way) sets the key, with a note."""
    entry = registry.get(paper)
    setting = entry.load_setting(EXAMPLES / config, [override])
    assert setting.values[key] == value
    assert any("alias" in n for n in setting.notes)
    assert setting.given == (key,)


def test_the_reported_alias_commands_plan(capsys):
    for argv in (["plan", "adaptive", EXAMPLES / "adaptive_mnist.toml", "--set", "B=5.0"],
                 ["plan", "wpfl", EXAMPLES / "wpfl_mnist.toml", "--set", "T0=20"],
                 ["plan", "wpfl", EXAMPLES / "wpfl_mnist.toml", "--set", "eps_Q=1.0", "--set",
                  "delta_Q=0.001"]):
        capsys.readouterr()
        assert main([str(a) for a in argv] + ["--json"]) == 0, capsys.readouterr().err
        plan = json.loads(capsys.readouterr().out)
        assert any("alias" in w for w in plan["warnings"])


def test_train_accepts_an_alias_up_front():
    """``fedbound train udp examples/udp_ridge.toml --set T=2 --set U=4`` (a raw KeyError before): the run
    is prepared (config, rounds, clients) with N = 4, nothing trained."""
    from fedbound.validation.recipes.runner import prepare_run

    run = prepare_run("udp", EXAMPLES / "udp_ridge.toml", ["T=2", "U=4"])
    assert run.setting["N"] == 4 and run.num_clients == 4 and run.rounds == 2


def test_alias_and_key_with_different_values_is_one_line(capsys, tmp_path):
    line = _error_line(capsys, ["plan", "wpfl", EXAMPLES / "wpfl_mnist.toml", "--set", "T0=20", "--set",
                                "T=30"])
    assert "T0" in line and "T=30" in line
    cfg = tmp_path / "both.toml"
    cfg.write_text("[wpfl]\nT = 10\nT0 = 20\n")
    with pytest.raises(ConfigError, match="sets both T0 = 20 and T = 10"):
        registry.get("wpfl").load_setting(cfg)
    # the same value twice is not a contradiction
    section = Section("s", (Field("T", int, low=1),), aliases={"T0": "T"})
    assert load_config(None, [section], ["T0=20", "T=20"])["s"]["T"] == 20


def test_an_alias_overrides_the_files_key():
    """The file says T = 30 (wpfl_mnist.toml sets T); ``--set T0=20`` replaces it (not a contradiction)."""
    setting = registry.get("wpfl").load_setting(EXAMPLES / "wpfl_mnist.toml", ["T0=20"])
    assert setting.values["T"] == 20


def test_the_explorer_takes_an_alias():
    from fedbound.explorer import api

    paper = registry.get("wpfl")
    assert api.overrides(paper, {"T0": 20}) == ["T0=20"]
    with pytest.raises(api.BadInput) as exc:
        api.overrides(paper, {"T0": 0.5})
    assert exc.value.parameter == "T0" and "T0 = 0.5" in str(exc.value)


# ---- item 2: one seed ----------------------------------------------------------------------------------

def test_one_seed_has_no_interval_not_a_crash():
    from fedbound.validation.estimate.validate import measured_points

    frame = pd.DataFrame({"T": [1.0, 2.0], "seed": [0, 0], "gap": [0.5, 0.4]})
    points = measured_points(frame, "T")
    assert [p["se"] for p in points] == [None, None]
    assert [(p["ci_low"], p["ci_high"]) for p in points] == [(None, None), (None, None)]
    json.dumps(points, allow_nan=False)


def test_validate_with_one_seed(capsys, tmp_path):
    """The reported command: the JSON holds null intervals and the table says n/a."""
    argv = ["validate", "udp", str(EXAMPLES / "udp_ridge.toml"), "--vs", "T", "--values", "1,2", "--seeds",
            "1", "--rounds", "2", "--out", str(tmp_path / "v"), "--no-progress", "--cache",
            str(tmp_path / "c")]
    assert main(argv + ["--json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert [p["se"] for p in out["measured"]] == [None, None]
    assert main(argv) == 0
    assert "n/a" in capsys.readouterr().out


# ---- item 9: intervals stay in range, sweep warns as train does, one truth about required keys -----------

def test_an_interval_never_leaves_its_quantitys_range():
    """Two seeds: the Student-t half-width (12.7 x se) takes a non-negative gap below 0 and a correlation
    above 1; clipped to the range, the interval keeps the mean and stays inside."""
    from scipy import stats

    from fedbound.validation.estimate.validate import measured_points
    from fedbound.validation.reproduce.claims import mean_interval

    gaps = np.array([0.05, 1.0])
    half = stats.t.ppf(0.975, 1) * gaps.std(ddof=1) / math.sqrt(2)
    assert gaps.mean() - half < 0  # the unclipped interval leaves [0, inf)
    p = measured_points(pd.DataFrame({"T": [1, 1], "gap": gaps}), "T")[0]
    assert p["ci_low"] == 0.0 and p["ci_high"] == pytest.approx(gaps.mean() + half)
    rhos = np.array([0.4, 1.0])
    mean, low, high = mean_interval(rhos, low=-1.0, high=1.0)
    assert mean == pytest.approx(0.7) and high == 1.0 and low == pytest.approx(-1.0)
    assert mean_interval(rhos)[2] > 1  # the unclipped interval was 1.18-like: above 1


def test_validate_figure_spearman_interval_is_a_correlation():
    from fedbound.validation.reproduce.validate import shape_verdict

    x = np.array([1.0, 2.0, 3.0, 4.0])
    bound = np.array([4.0, 3.0, 2.0, 1.0])
    runs = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "T": list(x) * 2,
                         "gap": [4.0, 3.0, 2.0, 1.0, 4.0, 3.5, 1.0, 2.0]})
    verdict = shape_verdict("c", "agree", "T", x, bound, runs)
    assert -1.0 <= verdict.low <= verdict.high <= 1.0


@pytest.mark.parametrize("name", registry.names())
def test_papers_json_and_the_config_agree_on_required_keys(name):
    """A key ``fedbound papers --json`` lists as not required is not required by the config either (DP-PFL's
    N has a documented default of 30)."""
    paper = registry.get(name)
    section = paper.config_section
    for key in paper.keys():
        if key["type"] == "alias":
            continue
        f = section.field(key["key"])
        config_requires = f.default is registry.resolve("fedbound.config:REQUIRED") and not f.optional
        assert config_requires == key["required"], key


def test_dppfl_plans_without_n(capsys):
    capsys.readouterr()
    assert main(["plan", "dppfl", "--set", "eps=4.0", "--set", "delta=0.001", "--set", "T=50", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "N" in plan["assumed"]


def test_sweep_warns_when_the_noise_under_delivers(capsys, tmp_path):
    """examples/nbafl_logistic.toml with the paper's sigma: the tight accountant spends eps = 165.9 of a
    budget of 50.  The run is refused (a failed run of the sweep, exit 1); in the paper-reproduction mode it
    runs and sweep says so, as train does (its JSON under "warnings", its table as warning lines)."""
    argv = ["sweep", "nbafl", str(EXAMPLES / "nbafl_logistic.toml"), "--vs", "T", "--values", "2", "--set",
            'train.noise="paper"', "--no-progress"]
    capsys.readouterr()
    assert main(argv + ["--out", str(tmp_path / "refused")]) == 1
    assert "exact eps = 165.9 > budget 50" in capsys.readouterr().err
    argv += ["--set", "train.paper_reproduction=true", "--out", str(tmp_path / "sw")]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (texts,) = out["warnings"].values()
    assert any(t.startswith("not (ε, δ)-DP at the stated budget: exact ε = 165.9 > 50") for t in texts)
    assert out["final"][0]["privacy"].startswith("not (ε, δ)-DP")
    assert main(argv) == 0  # resumed: nothing trains again
    printed = capsys.readouterr()
    assert "not (ε, δ)-DP at the stated budget" in printed.out + printed.err
    assert "NOT DP at budget" in printed.out


# ---- item 6: the message names the input ---------------------------------------------------------------

@pytest.mark.parametrize("argv, named, derived", [
    (["plan", "adaptive", "adaptive_mnist.toml", "--set", "mu=1e-308"], "mu = 1e-308", "lambda2"),
    (["plan", "udp", "udp_mnist.toml", "--set", "eps_clients=0"], "eps_clients = '0'", "eps = 0.0"),
    (["plan", "udp", "udp_mnist.toml", "--set", "sizes=0"], "sizes = '0'", "n = 0.0"),
    (["schedule", "wpfl", "wpfl_mnist.toml", "--set", "C=1e-308"], "C = 1e-308", "delta_Q = 0.001"),
    (["plan", "dppfl", "dppfl_ridge.toml", "--set", "L=1e-308"], "L = 1e-308", "overflows"),  # by the fuzz
])
def test_a_failed_derived_check_names_the_input(capsys, argv, named, derived):
    argv = [EXAMPLES / a if a.endswith(".toml") else a for a in argv]
    line = _error_line(capsys, argv)
    assert line.startswith(f"error: {named}"), line
    assert derived in line  # the derived quantity is still said, after the input
    assert "for this setting" in line or "it plans" in line  # and what would work


def test_the_working_range_is_a_working_range(capsys):
    """The edge reported for L (DP-PFL) plans, and the value 10x beyond it fails the same way."""
    ridge = EXAMPLES / "dppfl_ridge.toml"
    line = _error_line(capsys, ["plan", "dppfl", ridge, "--set", "L=1e-308"])
    edge = float(line.split("L >= ")[1].split()[0])
    assert 1e-308 < edge < 1
    assert main(["plan", "dppfl", str(ridge), "--set", f"L={edge!r}", "--json"]) == 0
    capsys.readouterr()
    _error_line(capsys, ["plan", "dppfl", ridge, "--set", f"L={edge / 10!r}"])


def test_an_out_of_range_input_is_refused_before_planning(capsys):
    """PADPFL's C = 1e308 (sigma = inf before): refused by its registered range, naming C and the range."""
    line = _error_line(capsys, ["plan", "adaptive", EXAMPLES / "adaptive_mnist.toml", "--set", "C=1e308"])
    assert "C = 1e+308 is outside its valid range" in line, line


def test_an_error_that_names_the_input_is_kept():
    from fedbound.errors import ParameterError
    from fedbound.planning import blame_input

    paper = registry.get("nbafl")

    def run(values):
        raise ParameterError("eps", values["eps"], "(0, 1)")

    with pytest.raises(ParameterError, match=r"^eps = 7 is outside its valid range \(0, 1\)$"):
        blame_input(paper, {**paper.example, "eps": 7}, run, ["eps"])


# ---- item 11: the explorer's 4xx -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from fedbound.explorer.app import create_app

    with TestClient(create_app()) as c:
        yield c


@pytest.mark.parametrize("request_kw, says", [
    ({"json": {"K": None}}, "K"),
    ({"json": [[1, 2], [3]]}, "must be a JSON object"),
    ({"json": {"K": [[1]]}}, "K = [[1]]"),
    ({"content": b"{not json", "headers": {"Content-Type": "application/json"}}, "must be a JSON object"),
    ({"content": b"eps=6", "headers": {"Content-Type": "text/plain"}}, "must be a JSON object"),
])
def test_a_malformed_body_is_named(client, request_kw, says):
    for route in ("/api/plan/nbafl", "/api/curve/nbafl?vs=T"):
        r = client.post(route, **request_kw)
        assert 400 <= r.status_code < 500, r.text
        detail = r.json()["detail"]
        assert says in detail and "\n" not in detail, detail


@pytest.mark.parametrize("method, url, status", [
    ("get", "/api/nope", 404), ("post", "/api/plan", 404), ("get", "/api/plan/nbafl", 405),
    ("delete", "/api/papers", 405),
])
def test_an_unknown_route_lists_the_routes(client, method, url, status):
    r = getattr(client, method)(url)
    assert r.status_code == status
    assert "POST /api/plan/{paper}" in r.json()["detail"] and r.json()["parameter"] is None
