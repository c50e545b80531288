"""`fedbound audit --level client` at CI size: every record of the target replaced by a canary client.
UDP's nominal client-level audit never reports LEAK, its halved-noise control is detected, a dropped noise is
flagged, its record-level epsilon does not hold for a whole client, and an unsupported level is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fedbound.cli import main
from fedbound.errors import ParameterError
from fedbound.registry import get, names
from fedbound.tests._audit import small_config
from fedbound.training.federation import ClientData
from fedbound.training.sensitivity import Replacement, neighbours
from fedbound.validation.audit import AuditViews, audit_from_config

CLIENT = [n for n in names("audit") if "client" in get(n).load("audit").levels]
RECORD_ONLY = [n for n in names("audit") if "client" not in get(n).load("audit").levels]


_config = small_config


def test_the_user_level_paper_has_a_client_level_audit():
    assert "udp" in CLIENT
    # every audit's default is the paper's own unit, and UDP's proof of Theorem 1 is record-level
    assert all(get(n).load("audit").levels[0] == "record" for n in names("audit"))


def test_audit_views_accept_only_known_levels():
    for bad in ((), ("user",), ("record", "household")):
        with pytest.raises(ParameterError, match="AuditViews.levels"):
            AuditViews(levels=bad)


def test_a_client_neighbour_replaces_every_record():
    data = ClientData(torch.zeros((2, 3, 2)), torch.zeros((2, 3)), torch.ones((2, 3), dtype=torch.bool),
                      np.array([3, 3]))
    canary = tuple(Replacement(i, np.array([1.0, 2.0]), 1) for i in range(3))
    out = neighbours(data, 1, [None, canary, Replacement(2, np.array([5.0, 5.0]), 1)])
    assert out.x[0].abs().sum() == 0 and out.y[0].sum() == 0
    assert torch.equal(out.x[1], torch.tensor([[1.0, 2.0]] * 3)) and out.y[1].tolist() == [1, 1, 1]
    assert out.y[2].tolist() == [0, 0, 1] and out.x[2, :2].abs().sum() == 0


@pytest.mark.parametrize("paper", CLIENT)
def test_nominal_client_level_audit_never_leaks(paper, tmp_path):
    cfg = _config(tmp_path, paper)
    record = audit_from_config(paper, cfg, trials=60, canary="flip", control=False, seed=1)
    result = audit_from_config(paper, cfg, trials=400, level="client", control=False, seed=1)
    assert result.level == "client" and result.target_record is None
    assert not result.verdict.startswith("LEAK")
    for v, r in zip(result.views, record.views, strict=True):
        assert v.epsilon_lower <= v.epsilon_reported
        assert v.noise_std_measured == pytest.approx(v.noise_std_planned, rel=0.05)
        # the client-level sensitivity is m times the per-record one; the canary client stays below it
        m = get(paper).load("audit").small[paper]["m"]
        assert v.sensitivity_assumed == pytest.approx(m * r.sensitivity_assumed)
        assert r.shift_measured < v.shift_measured <= v.sensitivity_assumed * (1 + 1e-4)
        assert v.epsilon_reported > r.epsilon_reported


def test_udp_record_level_epsilon_does_not_protect_a_whole_client(tmp_path):
    # eps = 3 per record (eq. (13)'s 2 eta C/m): replacing the whole client is seen with eps >= 3.9
    cfg = _config(tmp_path, "udp")
    result = audit_from_config("udp", cfg, trials=400, level="client", control=False, seed=1)
    assert result.views[0].epsilon_lower > 3.0 * 1.25
    assert result.views[0].sensitivity_assumed == pytest.approx(2 * 0.5 * 0.1)  # 2 eta C


def test_udp_client_level_control_is_detected(tmp_path):
    # five records per client, eps = 0.4 per record: the client-level tight eps is 1.33; the canary client
    # moves the upload by 0.075 of the 2 eta C = 0.1 assumed, and half the noise is visible at a few
    # thousand trials: --trials auto raises the count from 2,000 until the control is detected
    cfg = _config(tmp_path, "udp", udp={"m": 5, "eps": 0.4})
    result = audit_from_config("udp", cfg, trials="auto", level="client", seed=1)
    assert result.verdict == "consistent" and 2000 <= result.trials <= 16000
    assert any(n.startswith("--trials auto:") for n in result.notes)
    v = result.views[0]
    assert v.control_epsilon_lower > v.epsilon_reported_tight > v.epsilon_lower
    assert 0.5 * v.sensitivity_assumed < v.shift_measured <= v.sensitivity_assumed


@pytest.mark.parametrize("paper", CLIENT)
def test_dropped_noise_is_flagged_at_client_level(paper, tmp_path):
    cfg = _config(tmp_path, paper, **{paper: {"m": 5, "eps": 0.4}})
    result = audit_from_config(paper, cfg, trials=300, level="client", control=False, noise_scale=0.0)
    assert result.verdict.startswith("LEAK") and any(r.startswith("uplink noise (client ") and "std 0-0" in r
                                                           for r in result.reasons)
    assert result.views[0].noise_std_measured == 0.0


def test_cli_level_option_and_its_errors(tmp_path, capsys):
    cfg = _config(tmp_path, "udp")
    assert main(["audit", "udp", str(cfg), "--trials", "40", "--no-control", "--level", "client",
                 "--canary", "given", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["level"] == "client" and doc["target_record"] is None and doc["canary"] == "given"
    assert main(["audit", "udp", str(cfg), "--trials", "40", "--no-control", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["level"] == "record" and doc["target_record"] is not None  # the paper's own unit
    assert main(["audit", "udp", str(cfg), "--no-control", "--level", "user"]) == 2
    err = capsys.readouterr().err
    assert "--level = 'user'" in err and "record, client" in err and len(err.strip().splitlines()) == 1
    for paper in RECORD_ONLY:
        assert main(["audit", paper, str(_config(tmp_path, paper)), "--trials", "40", "--level", "client"]
                    ) == 2
        err = capsys.readouterr().err
        assert "--level = 'client'" in err and "one of record " in err and len(err.strip().splitlines()) == 1
