"""Issue 23, item 9: the bound-vs-T figure (``/api/curve``, the same data ``fedbound plot`` draws) shows the
plan's recommended design: its T marked, the deployed-noise curve through it at the plan's bound, Theta drawn
where the paper has one.  The expected T and bound come from the planner run separately here."""

from __future__ import annotations

import pytest

from fedbound.commands.papers import build_plan
from fedbound.explorer.api import curve_json as _curve
from fedbound.registry import get


def curve_json(name: str, body: dict, vs: str) -> dict:
    return _curve(name, {**get(name).example, **body}, vs)


def _deployed_at(curve: dict, T: int) -> float:
    (dep,) = [c for c in curve["curves"] if c["label"].startswith("deployed noise")]
    assert T in dep["x"], (T, dep["x"][:5], dep["x"][-5:])
    return dep["y"][dep["x"].index(T)]


def _plan(name: str, body: dict):
    sets = [f"{k}={v}" for k, v in {**get(name).example, **body}.items() if v is not None]
    return build_plan(name, None, sets).recommendation


@pytest.mark.parametrize(("name", "body"), [
    ("udp", {"T": 40}),  # a T the user sets: held, marked and drawn
    ("udp", {}),
    ("nbafl", {"eps": 6.0}),
])
def test_curve_marks_the_recommended_T_on_the_deployed_noise_curve(name, body):
    curve = curve_json(name, body, "T")
    rec = _plan(name, body)
    assert curve["recommended"] == {"T": rec.T, "bound": pytest.approx(rec.bound, rel=1e-12)}
    assert _deployed_at(curve, rec.T) == pytest.approx(rec.bound, rel=1e-9)
    near = pytest.approx(rec.bound, rel=1e-9)
    marks = [p for p in curve["points"] if p["x"] == [rec.T] and p["y"][0] == near]
    assert marks, curve["points"]
    assert any("Theta" in h["label"] for h in curve["hlines"])


def test_nbafl_at_eps_6_marks_the_plans_T_not_only_the_papers_T_star():
    curve = curve_json("nbafl", {"eps": 6.0}, "T")
    assert curve["recommended"]["T"] == 50 == _plan("nbafl", {"eps": 6.0}).T
    assert any(n["text"] == "recommended T=50" for n in curve["notes"])
    assert any(n["text"] == "T*=5" for n in curve["notes"])  # the paper's T* stays, beside it


@pytest.mark.parametrize(("name", "body"), [("dppfl", {}), ("dppfl", {"T": None})])
def test_dppfl_curve_draws_the_recommended_design(name, body):
    curve = curve_json(name, body, "T")
    rec = _plan(name, body)
    assert curve["recommended"]["T"] == rec.T
    assert _deployed_at(curve, rec.T) == pytest.approx(rec.bound, rel=1e-9)
    assert any(h["label"].startswith("vacuous above") for h in curve["hlines"])


def test_adaptive_curve_draws_the_recommended_design():
    curve = curve_json("adaptive", {}, "T")
    rec = _plan("adaptive", {})
    assert curve["recommended"]["T"] == rec.T
    assert _deployed_at(curve, rec.T) == pytest.approx(rec.bound, rel=1e-9)
    assert any("Theta" in h["label"] for h in curve["hlines"])


def test_wpfl_figures_are_drawn_at_the_recommended_sigma():
    from fedbound.registry import get as paper

    rec = _plan("wpfl", {})
    T0 = int(paper("wpfl").example["T"])  # WPFL's axis is T0, uploads per client (held: the setting's)
    curve = curve_json("wpfl", {}, "T")
    assert curve["recommended"]["T"] == rec.T  # rounds the schedule takes for T0 uploads each
    assert _deployed_at(curve, T0) == pytest.approx(rec.bound, rel=1e-9)
    assert any(p["label"] == f"recommended T0 = {T0} ({rec.T} rounds)" for p in curve["points"])
    lam = curve_json("wpfl", {}, "lam")
    assert f"sigma_DP = {rec.sigma['uplink']:.3g}" in lam["title"]


def test_report_draws_the_same_figure_with_the_recommended_design():
    from fedbound.validation.report import _bound_figure

    html = _bound_figure(get("nbafl"))
    rec = _plan("nbafl", {})
    assert 'id="nbafl-bound-T"' in html and f"recommended T={rec.T}" in html and "deployed noise" in html
    assert "(vacuous above)" in html and ("Θ" in html or "\\u0398" in html)
