"""Long runs say how long they will take after their first round, run or batch of trials
(fedbound.training.eta), once, on stderr: a fake clock and injected round times, no timed asserts; the
commands' stdout (--json) stays one JSON document."""

from __future__ import annotations

import io
import json
import re

import pytest

from fedbound.cli import main
from fedbound.training import eta
from fedbound.training.eta import Estimate, duration, timed_bar


class Clock:
    """Returns the given times one after another (the last one from then on)."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


@pytest.mark.parametrize("seconds, text", [(0, "0.0 s"), (3.44, "3.4 s"), (9.94, "9.9 s"), (45.4, "45 s"),
                                           (60, "1 min"), (200, "3 min 20 s"), (3600, "1 h"),
                                           (7500, "2 h 5 min"), (-1, "0.0 s")])
def test_duration_reads_as_a_person_would_say_it(seconds, text):
    assert duration(seconds) == text


def test_the_first_rounds_pace_times_the_rounds_left_said_once():
    said = []
    # 1 of 50 rounds in 3.4 s: 170 s in all, 166.6 s (2 min 47 s) left
    est = Estimate("nbafl", "round", 50, write=said.append, clock=Clock(100.0, 103.4, 200.0))
    est.step(1)
    est.step(2)  # said once only
    assert said == ["nbafl: about 2 min 47 s left (1 of 50 rounds took 3.4 s)"]


def test_a_rounds_own_time_and_a_note():
    said = []
    est = Estimate("fedbound audit udp", "trial", 4000, note=" at 1,000 trials per side", write=said.append,
                   clock=Clock(0.0))
    est.add(500)
    assert said == [] and est.said  # the fake clock says no time passed: nothing worth saying, and once
    est = Estimate("fedbound flower", "round", 10, write=said.append, clock=Clock(0.0))
    est.step(1, 12.0)  # a round of 12 s: 120 s in all, 108 s left
    assert said == ["fedbound flower: about 1 min 48 s left (1 of 10 rounds took 12 s)"]
    est = Estimate("audit", "trial", 4000, note=" (auto may raise it)", write=said.append, clock=Clock(0, 30))
    est.add(500)
    est.add(500)
    assert said[1:] == ["audit: about 3 min 30 s left (500 of 4,000 trials took 30 s) (auto may raise it)"]


@pytest.mark.parametrize("total, done, elapsed", [(50, 1, 0.1), (5, 5, 100.0), (5, 0, 10.0), (5, 1, 0.0)])
def test_short_finished_or_not_started_runs_say_nothing(total, done, elapsed):
    # 5 s in all is under MIN_SECONDS; the last round leaves nothing to estimate; nothing done yet
    assert Estimate("x", "round", total).line(done, elapsed) is None


def test_disabled_says_nothing():
    said = []
    Estimate("x", "round", 50, enabled=False, write=said.append, clock=Clock(0, 100)).step(1)
    assert said == []


def test_timed_bar_counts_from_where_a_resumed_run_started():
    said, stream = [], io.StringIO()
    from tqdm import tqdm

    bar = tqdm(total=10, initial=4, file=stream)
    timed = timed_bar(bar, "udp", "round", initial=4, write=said.append, clock=Clock(0.0, 15.0))
    timed.total = 10  # attributes pass through to the bar (the engine sets total)
    timed.update(1)  # round 5 of 10, the first of 6 this session: 15 s each, 75 s left
    timed.update(1)
    timed.close()
    assert bar.total == 10 and bar.n == 6
    assert said == ["udp: about 1 min 15 s left (1 of 6 rounds took 15 s)"]


def test_flower_deployment_says_it_after_the_first_round_event(capsys, monkeypatch):
    from fedbound.deploy.flower_deployment import _say_round

    event = {"round": 3, "rounds": 12, "seconds": 6.0, "text": "eps=1/2"}
    got = _say_round(True, event, None)  # resumed at round 3: 10 rounds this session, 60 s, 54 s left
    _say_round(True, {**event, "round": 4}, got)
    err = capsys.readouterr().err.splitlines()
    assert err == ["round 3/12: eps=1/2  [6.0 s/round]",
                   "fedbound flower: about 54 s left (1 of 10 rounds took 6.0 s)",
                   "round 4/12: eps=1/2  [6.0 s/round]"]
    _say_round(False, event, None)
    assert capsys.readouterr().err == ""


def test_sweep_bar_says_it_after_the_first_rounds(capsys, monkeypatch):
    """The sweep's bar counts rounds over its planned runs (heartbeats polled): the estimate comes once,
    at the first rounds seen, never again."""
    from fedbound.validation.sweep.executors import _Progress

    monkeypatch.setattr(eta, "MIN_SECONDS", 0.0)
    progress = _Progress(total=2, done=0, enabled=True)
    progress.planned = {"a": 4, "b": 4}
    for seen in (0, 2, 5, 8):
        monkeypatch.setattr(progress, "_rounds", lambda seen=seen: seen)
        progress.refresh()
    progress.close()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "left" in ln]
    assert len(lines) == 1 and re.fullmatch(r"sweep: about .+ left \(2 of 8 rounds took .+\)", lines[0])


def test_train_says_it_on_stderr_and_json_stays_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(eta, "MIN_SECONDS", 0.0)  # a run of seconds says it too
    from fedbound.tests.test_training_cli import TINY_NBAFL

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(TINY_NBAFL)
    assert main(["train", "nbafl", str(cfg), "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    said = [ln for ln in re.split(r"[\r\n]", err) if " left (" in ln]
    assert len(said) == 1 and re.fullmatch(r"nbafl: about .+ left \(1 of 3 rounds took .+\)", said[0])
    assert " left (" not in out
    assert main(["train", "nbafl", str(cfg), "--out", str(tmp_path / "b"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds_done"] == 3


def test_audit_says_it_on_stderr_and_json_stays_json(tmp_path, capsys, monkeypatch):
    from fedbound.tests._audit import small_config

    monkeypatch.setattr(eta, "MIN_SECONDS", 0.0)
    cfg = small_config(tmp_path, "udp")
    assert main(["audit", "udp", str(cfg), "--trials", "40", "--canary", "flip", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["trials"] == 40
    # the nominal pass and the control, 2 x 40 trials each: said after the first batch of trials
    said = [ln for ln in err.splitlines() if " left (" in ln]
    assert len(said) == 1, err
    done = int(re.fullmatch(r"fedbound audit udp: about .+ left \((\d+) of 160 trials took .+\)", said[0])[1])
    assert 0 < done < 160


@pytest.mark.parametrize(("batch", "label"), [("--batch", "the first 2 runs: 2 of 5 rounds"),
                                              ("--no-batch", "2 of 2 rounds of the first run")])
def test_a_sweep_of_one_group_says_it_after_its_first_round(batch, label, tmp_path, capsys, monkeypatch):
    """T = 2 and T = 3: batched, one group of 5 rounds in all, said after the first round of both runs (2 of
    5 rounds); alone, one group per run, said after the first run (its 2 rounds)."""
    from fedbound.tests.test_training_cli import TINY_NBAFL

    monkeypatch.setattr(eta, "MIN_SECONDS", 0.0)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(TINY_NBAFL)
    assert main(["sweep", "nbafl", str(cfg), "--vs", "T", "--values", "2,3", "--seeds", "1", batch,
                 "--out", str(tmp_path / "sw")]) == 0
    said = [ln for ln in re.split(r"[\r\n]", capsys.readouterr().err) if " left (" in ln]
    assert len(said) == 1
    assert re.fullmatch(rf"sweep: about .+ left \({label} took .+\)", said[0]), said
