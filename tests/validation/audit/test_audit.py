"""`fedbound audit` at CI size: nominal audits never report LEAK, the halved-noise control is detected, a
dropped noise is flagged, NbAFL's multi-step weak-prox training leaks, a provable run is consistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbound.cli import main
from fedbound.registry import get, names
from fedbound.tests._audit import small_config
from fedbound.validation.audit import audit_from_config

AUDITED = names("audit")


_config = small_config


def test_the_audited_papers_are_the_registered_ones_with_an_audit():
    assert set(AUDITED) == {n for n in names("train") if get(n).audit is not None}
    assert {"nbafl", "udp", "adaptive"} <= set(AUDITED)


@pytest.mark.parametrize("paper", AUDITED)
def test_nominal_audit_never_leaks(paper, tmp_path):
    result = audit_from_config(paper, _config(tmp_path, paper), trials=400, control=False, seed=1)
    assert not result.verdict.startswith("LEAK")
    for v in result.views:
        assert v.epsilon_lower <= v.epsilon_reported
        assert v.noise_std_measured == pytest.approx(v.noise_std_planned, rel=0.05)
        assert v.shift_measured <= v.sensitivity_assumed * (1 + 1e-4)


def test_provable_nbafl_is_consistent_and_its_control_is_detected(tmp_path):
    result = audit_from_config("nbafl", _config(tmp_path, "nbafl"), trials=1000, seed=0)
    assert result.verdict == "consistent"
    up = next(v for v in result.views if v.kind == "upload")
    assert up.control_epsilon_lower > up.epsilon_reported_tight > up.epsilon_lower
    # one clipped step: the canary moves the upload by exactly the provable sensitivity 2 eta C_g / m
    assert up.shift_measured == pytest.approx(2 * 0.5 * 0.2 / 50, rel=1e-3)


def test_dropped_noise_is_flagged(tmp_path):
    result = audit_from_config("udp", _config(tmp_path, "udp"), trials=300, control=False, noise_scale=0.0)
    assert result.verdict.startswith("LEAK") and any(r.startswith("uplink noise (client ") and "std 0-0" in r
                                                           for r in result.reasons)
    assert result.views[0].noise_std_measured == 0.0


def test_weak_prox_multistep_nbafl_leaks_past_2C_over_m(tmp_path):
    # the finding of docs/papers/nbafl.md: 10 local steps with mu = 0.01 move the clipped upload further
    # than eq. (6)'s 2C/m, and the audit's lower bound exceeds the epsilon the run reports
    cfg = _config(tmp_path, "nbafl", nbafl={"sensitivity": "paper", "eps": 2.0}, train={"local_steps": 10})
    result = audit_from_config("nbafl", cfg, trials=600, control=False)
    up = next(v for v in result.views if v.kind == "upload")
    assert up.shift_measured > 2.5 * up.sensitivity_assumed
    assert result.verdict.startswith("LEAK") and up.epsilon_lower > up.epsilon_reported


def test_cli_json_figure_and_errors(tmp_path, capsys):
    cfg = _config(tmp_path, "udp")
    out = tmp_path / "fig" / "audit.png"
    assert main(["audit", "udp", str(cfg), "--trials", "60", "--no-control", "--canary", "flip", "--json",
                 "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["paper"] == "udp" and doc["trials"] == 60 and doc["canary"] == "flip"
    assert {Path(f).suffix for f in doc["files"]} == {".png", ".svg", ".json"}
    scores = json.loads(out.with_suffix(".json").read_text())["views"][0]
    assert len(scores["scores_out"]) == len(scores["scores_in"]) == 60
    assert main(["audit", "udp", str(cfg), "--trials", "60", "--no-control"]) == 0
    assert "verdict:" in capsys.readouterr().out
    # refused in one line before any work: past the maximum (memory no longer grows with the trials, time
    # does), and auto without the control it raises the trials for
    for args, words in ((["--trials", "2"], "--trials = 2"), (["--trials", "many"], "--trials = 'many'"),
                        (["--trials", "64001"], "--trials = 64001 is outside its valid range"),
                        (["--trials", "auto"], "--trials = auto needs the halved-noise control"),
                        (["--canary", "loud"], "--canary = 'loud'"),
                        (["--rounds", "9"], "--rounds = 9"), (["--canary", "given", "--canary-record", "-1"],
                                                              "--canary-record = -1")):
        assert main(["audit", "udp", str(cfg), "--no-control", *args]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1
    no_audit = [n for n in names("train") if n not in AUDITED]
    if no_audit:
        assert main(["audit", no_audit[0], str(cfg)]) == 2
        assert "has no audit" in capsys.readouterr().err


def test_two_rounds_with_a_given_canary(tmp_path):
    cfg = _config(tmp_path, "nbafl")
    one = audit_from_config("nbafl", cfg, trials=100, canary="given", control=False)
    two = audit_from_config("nbafl", cfg, trials=100, canary="given", rounds=2, control=False)
    assert two.rounds == 2 and not two.verdict.startswith("LEAK")
    down = {r.rounds: next(v for v in r.views if v.kind == "broadcast") for r in (one, two)}
    # the broadcast is released every round: two rounds report more epsilon; the uplink is seen L = 1 times
    assert down[2].epsilon_reported_tight > down[1].epsilon_reported_tight
    assert two.views[0].epsilon_reported_tight == pytest.approx(one.views[0].epsilon_reported_tight)
