"""Every shipped example, run as shipped, is private as accounted (issue 32): its audit (``fedbound audit
PAPER examples/X.toml``, the default trials, canary and level) is not LEAK.

The default run audits the quick examples (seconds each); ``FEDBOUND_AUDIT_SUITE=full`` (set by ``.ci/run``)
audits every example whose paper has an audit and whose data ships with fedbound, at the default trial count.
The examples that cannot be audited are listed with the reason, and a test keeps that list complete.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from fedbound.registry import names

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FULL = os.environ.get("FEDBOUND_AUDIT_SUITE") == "full"
QUICK = ("audit_nbafl.toml", "audit_adaptive.toml", "audit_udp_client.toml", "nbafl_logistic.toml")
"""Audited in the default run: the audit examples of the model-clipping papers and a paper example."""
NOT_AUDITABLE = {
    "adaptive_s3_plan.toml": "a plan-only setting: no [train] section, nothing is trained",
    "dpfedavg_logistic.toml": "DP-FedAvg is a deploy mechanism (fedbound.deploy), not a registry paper with "
                              "an audit",
    "dpfedavg_mnist.toml": "DP-FedAvg is a deploy mechanism (fedbound.deploy), not a registry paper with an "
                           "audit",
    "dppfl_cifar.toml": "CIFAR-10 is not shipped (its [train] data_path points to the user's copy)",
    "wpfl_cifar.toml": "CIFAR-10 is not shipped (set [train] data_path to the user's copy)",
}


def _paper(path: Path) -> str | None:
    cfg = tomllib.loads(path.read_text())
    if "train" not in cfg:
        return None
    found = [name for name in cfg if name in names("audit")]
    return found[0] if found else None


def _auditable() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.toml") if p.name not in NOT_AUDITABLE)


def test_every_example_is_audited_or_says_why_not():
    every = sorted(p.name for p in EXAMPLES.glob("*.toml"))
    assert set(NOT_AUDITABLE) <= set(every)
    for name in _auditable():
        assert _paper(EXAMPLES / name) is not None, f"{name}: no [train] section or no audited paper"
    assert set(QUICK) <= set(_auditable())


@pytest.mark.slow
@pytest.mark.parametrize("example", _auditable() if FULL else list(QUICK))
def test_example_as_shipped_is_not_leak(example):
    from fedbound.validation.audit import DEFAULT_TRIALS, audit_from_config

    result = audit_from_config(_paper(EXAMPLES / example), EXAMPLES / example, control=False)
    assert result.trials == DEFAULT_TRIALS
    assert not result.verdict.startswith("LEAK"), f"{example}: {result.verdict}"
