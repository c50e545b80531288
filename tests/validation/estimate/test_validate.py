"""``fedbound validate``: NbAFL's bound against training on the synthetic convex tasks (exact constants),
the output files and verdict format, the calibration and verdict logic, and bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fedbound.cli import main
from fedbound.registry import papers
from fedbound.tests._validation_configs import TASKS, write_config
from fedbound.validation.estimate import entry
from fedbound.validation.estimate import validate as vd


@pytest.fixture(scope="module", params=TASKS)
def result(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    return vd.validate("nbafl", write_config(folder, request.param), "T", "1,2,4", 2, folder / "out",
                       rounds=3, cache=None, progress=False)


def test_nbafl_theorem2_holds_at_every_point_with_exact_constants(result):
    """Seed 002, Theorem 2 (eq. (14)) on a convex task whose constants are exact
    (tests/validation/estimate/test_estimate.py): the measured E[F(w_T)] - F* must lie below h(T) at every T
    of the sweep."""
    holds = result.verdicts["holds"]
    assert holds["status"] == "holds", holds["text"]
    bound = np.asarray(result.bound["paper"], dtype=float)
    mean = np.array([p["mean"] for p in result.measured])
    assert np.all(np.isfinite(bound)) and np.all(mean <= bound)


def test_files_and_their_contents(result):
    table = pd.read_csv(result.files["csv"])
    runs = table[table["kind"] == "run"]
    assert len(runs) == 3 * 2 and set(runs["T"]) == {1.0, 2.0, 4.0} and set(runs["seed"]) == {0, 1}
    assert (runs["gap"] >= -1e-9).all()
    for kind in ("bound_paper", "bound_tight", "calibrated"):
        assert len(table[table["kind"] == kind]) == 3
    data = json.loads(open(result.files["json"]).read())
    assert {"holds", "optimum", "rank", "calibrated"} == set(data["verdicts"])
    assert data["constants"]["convex"] is True
    assert set(data["constants"]["f_star_by_seed"]) == {"0", "1"}
    for suffix in ("png", "svg"):
        with open(result.files[suffix], "rb") as fh:
            assert len(fh.read()) > 1000


def test_every_verdict_is_one_line(result):
    for verdict in result.verdicts.values():
        assert verdict["text"] and "\n" not in verdict["text"]
    opt = result.verdicts["optimum"]
    assert opt["measured"] in opt["plateau"]


def test_calibration_recovers_two_scale_factors_and_predicts_held_out_points():
    x = np.arange(1.0, 9.0)
    terms = {"optimisation": np.exp(-0.3 * x), "noise": 0.01 * x**2}
    measured = 2.0 * terms["optimisation"] + 0.5 * terms["noise"]
    cal = vd.calibrate(terms, measured)
    assert cal["factors"] == pytest.approx({"optimisation": 2.0, "noise": 0.5}, rel=1e-9)
    assert cal["held_out"] == [1, 3, 5, 7] and cal["held_out_error"] < 1e-9


def test_calibration_says_when_the_bound_is_undefined():
    terms = {"optimisation": np.full(4, np.nan), "noise": np.full(4, np.nan)}
    cal = vd.calibrate(terms, np.ones(4))
    assert cal["factors"] is None and cal["held_out_error"] is None and "not enough" in cal["message"]


def _points(means, se=0.01):
    return [{"mean": m, "se": se, "ci_low": m - 2 * se, "ci_high": m + 2 * se} for m in means]


def test_a_violation_names_the_theorem_and_the_point():
    x = np.array([1.0, 2.0, 4.0])
    cal = vd.calibrate({"a": np.ones(3), "b": x}, np.array([1.0, 0.5, 0.8]))
    out = vd.verdicts("T", x, _points([1.0, 0.5, 0.8]), np.array([2.0, 0.3, 1.0]), cal, "Thm X, eq. (9)", [],
                      True)
    assert out["holds"]["status"] == "violated"
    assert "T = 2" in out["holds"]["text"] and "Thm X, eq. (9)" in out["holds"]["text"]
    assert "bug or an erratum" in out["holds"]["text"]
    assert out["optimum"]["measured"] == 2.0 and out["optimum"]["predicted"] == 2.0
    assert out["rank"]["spearman"] == pytest.approx(1.0)


def test_an_inapplicable_bound_says_why():
    x = np.array([1.0, 2.0, 3.0])
    cal = vd.calibrate({"a": np.full(3, np.nan), "b": np.full(3, np.nan)}, np.ones(3))
    out = vd.verdicts("T", x, _points([1.0, 0.9, 0.8]), np.full(3, np.nan), cal, "Thm", ["needs 0 < P < 1"],
                      False)
    assert out["holds"] == {"status": "not applicable", "violations": [],
                            "text": "the premises fail at the measured constants: needs 0 < P < 1"}
    assert out["optimum"]["predicted"] is None and out["rank"]["spearman"] is None


@pytest.mark.parametrize("name", [n for n, p in papers().items() if p.validation is not None])
def test_every_validation_entry_evaluates_its_bound_at_the_paper_example(name):
    paper = papers()[name]
    spec = entry(paper)
    setting = paper.load_setting(None, [f"{k}={v}" for k, v in paper.example.items()]).values
    assert set(spec.constants) - set(spec.internal) <= {f["key"] for f in paper.keys()}
    assert not set(spec.internal) & {f["key"] for f in paper.keys()}
    for vs in spec.sweeps:
        values = np.asarray(spec.default_values[vs], dtype=float)
        for method in ("paper", "tight"):
            at = {"T": 10, **dict.fromkeys(spec.internal, 1.0),  # measured only, never configured
                  **{k: v for k, v in setting.items() if k != vs}}
            terms = spec.terms(at, vs, values, method)
            assert "optimisation" in terms and 1 <= len(terms) <= 2  # calibration fits one factor per term
            total = sum(terms.values())
            assert total.shape == values.shape
            if vs == "T":
                assert np.isfinite(total).all() and (total > 0).all()


@pytest.mark.parametrize("args, needle", [
    (["--vs", "bogus"], "--vs"),
    (["--values", ""], "--values"),
    (["--values", "5,abc"], "--values"),
    (["--values", "-1"], "--values"),
    (["--seeds", "0"], "--seeds"),
    (["--executor", "slurm"], "--executor"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, capsys, args, needle):
    cfg = write_config(tmp_path, "synthetic_ridge")
    assert main(["validate", "nbafl", str(cfg), "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_shape_disagreement_names_the_term_responsible_with_its_numbers():
    """DP-PFL's demo shape at hand-made numbers: the optimisation term falls with the measurement, the error
    term rises more, so the bound rises while the gap falls (Spearman -1): the error term is responsible."""
    x = np.array([2.0, 5.0, 10.0, 20.0, 40.0])
    terms = {"optimisation": np.array([2.15, 1.76, 1.26, 0.65, 0.17]),
             "error": np.array([1.30, 3.00, 5.27, 8.22, 10.82])}
    bound = terms["optimisation"] + terms["error"]
    measured = [1.12, 0.79, 0.45, 0.13, 0.0018]
    cal = vd.calibrate(terms, np.array(measured))
    out = vd.verdicts("T", x, _points(measured), bound, cal, "Thm", [], True, terms)
    rank = out["rank"]
    assert rank["spearman"] == pytest.approx(-1.0)
    assert rank["responsible"]["term"] == "error"
    error = rank["responsible"]["terms"]["error"]
    assert error == {"first": 1.30, "last": 10.82, "spearman": pytest.approx(-1.0)}
    text = rank["text"]
    for part in ("bound rises from 3.45 to 10.99", "measured gap falls from 1.12 to 0.0018",
                 "responsible is the bound's error term, which rises from 1.3 to 10.82",
                 "optimisation term falls from 2.15 to 0.17"):
        assert part in text, part
    agree = vd.verdicts("T", x, _points(measured[::-1]), bound, cal, "Thm", [], True, terms)
    assert agree["rank"]["spearman"] == pytest.approx(1.0) and "responsible" not in agree["rank"]


def test_every_failed_premise_is_named():
    x = np.array([1.0, 2.0, 3.0])
    cal = vd.calibrate({"a": np.full(3, np.nan)}, np.ones(3))
    out = vd.verdicts("T", x, _points([1.0, 0.9, 0.8]), np.full(3, np.nan), cal, "Thm",
                      ["needs 0 < P < 1", "needs mu > 2"], False)
    assert out["holds"]["text"] == ("the premises fail at the measured constants: needs 0 < P < 1; "
                                    "needs mu > 2")


def test_a_premise_the_config_decides_is_reported_without_measuring_constants(tmp_path):
    """DP-PFL's Theorem 3 (bound = "nonconvex") bounds a gradient norm, not the measured gap: validate says
    so, evaluates no bound and measures only F* (an estimate of every constant would be wasted work)."""
    from pathlib import Path

    from fedbound.validation.estimate import entry
    from fedbound.validation.estimate.validate import validate

    example = Path(__file__).resolve().parents[3] / "examples" / "dppfl_ridge.toml"
    result = validate("dppfl", example, vs="T", values="1,2,3", seeds=1, out=tmp_path, rounds=2,
                      overrides=['bound="nonconvex"'], cache=None, progress=False)
    assert result.verdicts["holds"]["status"] == "not applicable"
    assert "Theorem 3, eq. (32) bounds the average squared gradient norm" in result.verdicts["holds"]["text"]
    assert result.estimation.constants == {}  # nothing measured but F* (Theta is not a config key here)
    assert set(result.estimation.quantities) == {"initial_gap"}
    assert all(v is None or not np.isfinite(v) for v in result.bound["paper"])
    assert [p["seeds"] for p in result.measured] == [1, 1, 1]  # the gaps are still measured
    assert entry(papers()["dppfl"]).applies({"bound": "convex"}) == []
