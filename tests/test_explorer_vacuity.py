"""Issue 37, the explorer: every paper opens on an informative setting on the figure that marks the
recommended design, and a vacuous recommendation says what to change (``/api/vacuity``).

Whether a plan is vacuous is read from the CLI's own plan (``build_plan``, the code path of ``fedbound
plan``), never from the explorer's answer; a suggested threshold is checked against a brute-force scan.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fastapi.testclient import TestClient

from fedbound import registry
from fedbound.commands.papers import build_plan
from fedbound.explorer import api
from fedbound.explorer.app import create_app

PLANNERS = list(registry.names("plan"))
EXPLORED = [n for n in PLANNERS if registry.get(n).explore]
"""Papers whose own experiment the explorer does not open on (their registry entry says what it changes)."""


def _vacuous(name: str, values: dict) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = build_plan(name, None, [f"{k}={api._toml_literal(v)}" for k, v in values.items()
                                       if v is not None])
    return str(plan.recommendation.why).startswith("VACUOUS")


def test_three_papers_open_off_their_own_experiment():
    """The issue's three: PADPFL, DP-PFL and WPFL opened on a vacuous recommendation."""
    assert sorted(EXPLORED) == ["adaptive", "dppfl", "wpfl"]


@pytest.mark.parametrize("name", PLANNERS)
def test_every_paper_opens_on_an_informative_setting_that_a_small_move_of_eps_keeps(name):
    start = api.form_json(name)["start"]
    for factor in (0.8, 1.0, 1.25):  # a small move of the eps slider either way
        assert not _vacuous(name, {**start, "eps": start["eps"] * factor}), (name, factor)


@pytest.mark.parametrize("name", EXPLORED)
def test_the_start_differs_from_the_experiment_where_that_is_vacuous(name):
    form = api.form_json(name)
    assert _vacuous(name, form["example"])
    changed = {k for k in {**form["example"], **form["start"]}
               if form["example"].get(k) != form["start"].get(k)}
    assert changed == set(registry.get(name).explore)


@pytest.mark.parametrize("name", [n for n in PLANNERS if "T" in registry.get(n).load("plots")])
def test_the_first_figure_is_the_bound_against_T_with_the_recommended_design_marked(name):
    """WPFL's page opened on Phi against lambda, a figure without the recommended design."""
    form = api.form_json(name)
    assert form["start_vs"] == "T"
    curve = api.curve_json(name, form["start"], "T")
    marks = [p["label"] for p in curve["points"]] + [n["text"] for n in curve["notes"]]
    assert any(str(m).startswith("recommended") for m in marks), marks


def test_an_informative_setting_is_not_vacuous():
    assert api.vacuity_json("nbafl", api.form_json("nbafl")["start"]) == {"paper": "nbafl", "vacuous": False}


def test_nbafl_below_its_eps_threshold_names_each_lever_and_its_threshold():
    """At eps = 2 NbAFL's bound is vacuous for every design.  Each suggested change, planned by the CLI, is
    informative; the eps threshold lies within 12 % above the first informative eps of a dense scan (the
    bisection's 2 % and the outward rounding to two digits)."""
    start = {**api.form_json("nbafl")["start"], "eps": 2.0}
    answer = api.vacuity_json("nbafl", start)
    assert answer["vacuous"] and answer["complete"], answer
    to = {c["key"]: c["to"] for c in answer["changes"]}
    assert set(to) == {"eps", "m", "N", "C"}, answer["text"]
    assert to["eps"] > 2 and to["m"] > 100 and to["N"] > 50 and to["C"] < 20
    for key, value in to.items():
        assert not _vacuous("nbafl", {**start, key: value}), (key, value)
    grid = np.round(np.arange(2.0, 2.6, 0.02), 4)
    first = next(float(e) for e in grid if not _vacuous("nbafl", {**start, "eps": float(e)}))
    assert first <= to["eps"] <= first * 1.12, (first, to["eps"])
    assert f"raise eps from 2 to {to['eps']:.4g} or more" in answer["text"]


def test_dppfl_experiment_needs_the_convex_bound_and_says_what_does_not_help():
    """DP-PFL's experiment (Theorem 3, T = 50): vacuous at every eps; the convex bound (Theorem 2) is
    informative."""
    example = api.form_json("dppfl")["example"]
    answer = api.vacuity_json("dppfl", example)
    assert [c["key"] for c in answer["changes"]] == ["bound"]
    assert not _vacuous("dppfl", {**example, "bound": "convex"})
    tried = {c["key"]: c["tried"] for c in answer["not_enough"]}
    assert tried["eps"] == pytest.approx(400.0) and _vacuous("dppfl", {**example, "eps": 400.0})
    assert "set bound = convex" in answer["text"]
    assert "raising eps (still vacuous at eps = 400)" in answer["text"]


def test_wpfl_experiment_is_fixed_only_by_the_start_settings_changes_together():
    example = api.form_json("wpfl")["example"]
    answer = api.vacuity_json("wpfl", example)
    assert answer["complete"] and len(answer["changes"]) == 1, answer["text"]
    assert answer["changes"][0]["to"] == {"C": 0.01, "D0": 1000.0}
    assert not _vacuous("wpfl", {**example, "C": 0.01, "D0": 1000.0})
    assert {c["key"] for c in answer["not_enough"]} == {"C", "eps", "T", "D0"}
    for c in answer["not_enough"]:
        assert _vacuous("wpfl", {**example, c["key"]: c["tried"]}), c


def test_the_route_answers_and_refuses_bad_input_in_one_line():
    with TestClient(create_app()) as client:
        ok = client.post("/api/vacuity/adaptive", json=api.form_json("adaptive")["start"])
        assert ok.status_code == 200 and ok.json()["vacuous"] is False
        bad = client.post("/api/vacuity/adaptive", json={"eps": -1})
        assert bad.status_code == 422 and bad.json()["parameter"] == "eps"
        assert "\n" not in bad.json()["detail"]
        assert client.post("/api/vacuity/nope", json={}).status_code == 404
