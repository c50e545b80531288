"""Issue 33's misses as regression tests: each bug, injected into the mechanism or the ledger as
``tests/_audit.py`` does, must give LEAK in every seed (``FEDBOUND_AUDIT_SUITE=full``, what ``.ci/run``
sets: seeds 0-3; the default run: seed 0), at the default 2,000 trials, without the control (LEAK does not
depend on it).  Each was missed before (e.g. "consistent" in 0/4 seeds for a halved noise on a participant
other than the smallest).  The correct mechanisms stay not LEAK in the same seeds
(``test_audit_suite.py``)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import optimize

from fedbound.tests import _audit as bugs
from fedbound.tests._accounting_oracles import balle_wang_delta
from fedbound.tests._audit import small_config
from fedbound.validation.audit import audit_from_config

FULL = os.environ.get("FEDBOUND_AUDIT_SUITE") == "full"
SEEDS = range(4) if FULL else range(1)
ROUNDS3 = {} if FULL else {"trials": 500}
"""Three-round audits in the default run: 500 trials (the stream tests see a reused draw as a cosine of 1; the
ledger checks are deterministic); the full profile runs the default 2,000."""


def _leaks(paper, cfg, bug, seed, words, **kw):
    with bug():
        result = audit_from_config(paper, cfg, control=False, seed=seed, **kw)
    assert result.verdict.startswith("LEAK"), result.verdict
    assert any(all(w in r for w in words) for r in result.reasons), result.reasons
    return result


def _other_participant(paper, cfg, seed):
    """The largest id among round 1's participants other than the smallest (``federation.round_one`` of
    the audit's seed)."""
    from fedbound.config import load_config
    from fedbound.registry import get, names
    from fedbound.training import config as tc
    from fedbound.validation.audit import _effective_seed, federation

    entry = get(paper)
    c = load_config(cfg, [entry.config_section, tc.TRAIN_SECTION], [], known_sections=(*names(), "train"))
    setting = {**dict(c[paper]), **{k: v for k, v in entry.defaults.items() if c[paper].get(k) is None}}
    train = dict(c["train"])
    train["seed"] = _effective_seed(train["seed"], seed)
    s = federation.round_one(entry.load("recipe"), setting, train, 1)
    return int(max(c for c in s.participants if c != s.target))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("paper", ["udp", "dppfl", "wpfl", "nbafl", "adaptive"])
def test_halved_noise_on_a_participant_other_than_the_smallest(paper, seed, tmp_path):
    cfg = small_config(tmp_path, paper)
    client = _other_participant(paper, cfg, seed)
    result = _leaks(paper, cfg, lambda: bugs.scaled_client_noise(client, 0.5), seed,
                    ["noise", f"client {client})"])
    low = [c for c in result.noise_checks if c.below and c.client is not None and c.client >= 0]
    assert low and {c.client for c in low} == {client} and all(c.ratio_low < 0.5 < c.ratio_high for c in low)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("paper", ["dppfl", "wpfl", "nbafl", "adaptive", "udp"])
def test_clipping_at_twice_the_bound_the_ledger_assumes(paper, seed, tmp_path):
    # the noise-free shift check runs for every paper; DP-PFL's stages are measured given equal earlier
    # releases, WPFL's q = 1 is no sampling
    result = _leaks(paper, small_config(tmp_path, paper), lambda: bugs.scaled_clipping(2.0), seed,
                    ["noise-free shift", "> the sensitivity"])
    assert any(c.exceeded for c in result.shift_checks)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="the examples' audits: FEDBOUND_AUDIT_SUITE=full")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("example", ["audit_dppfl", "audit_wpfl"])
def test_clipping_at_twice_the_bound_on_the_examples(example, seed):
    paper = example.split("_")[1]
    _leaks(paper, f"examples/{example}.toml", lambda: bugs.scaled_clipping(2.0), seed,
           ["noise-free shift", "> the sensitivity"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("paper", ["nbafl", "adaptive", "wpfl"])
def test_a_ledger_that_reads_sigma_as_one_and_a_half_times_larger(paper, seed, tmp_path):
    result = _leaks(paper, small_config(tmp_path, paper), lambda: bugs.ledger_reads_sigma_times(1.5), seed,
                    ["the ledger reports epsilon", "spend"])
    for v in result.views:
        if v.under_reported:  # the control is judged against what the plan spends, not the ledger's word
            assert v.epsilon_claimed == v.epsilon_independent > 1.2 * v.epsilon_reported_tight


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_a_ledger_that_skips_one_of_three_rounds(seed, tmp_path):
    result = _leaks("nbafl", small_config(tmp_path, "nbafl"), lambda: bugs.ledger_skips_round(1), seed,
                    ["downlink: the ledger reports epsilon"], rounds=3, **ROUNDS3)
    down = next(v for v in result.views if v.kind == "broadcast")
    # three broadcasts at z: one Gaussian with 1/z^2 summed (the ledger counted two)
    z = next(e for e in result.views if e.kind == "broadcast")
    assert down.epsilon_independent > down.epsilon_reported_tight and z.under_reported


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="--trials auto runs up to 8,000 trials: the full profile")
@pytest.mark.parametrize("seed", SEEDS)
def test_auto_raises_the_trials_when_the_ledger_under_reports(seed, tmp_path):
    # WPFL's small setting: the control is not detected at 2,000 trials against the plan's epsilon 3, but it
    # was against the under-reported 1.74, so auto stopped at once
    with bugs.ledger_reads_sigma_times(1.5):
        result = audit_from_config("wpfl", small_config(tmp_path, "wpfl"), trials="auto", seed=seed)
    v = result.views[0]
    assert result.verdict.startswith("LEAK") and v.epsilon_reported_tight < v.control_epsilon_lower
    assert v.control_detected == (v.control_epsilon_lower > v.epsilon_independent)
    if result.trials == 2000:
        assert v.control_detected
    else:
        assert any(n.startswith("--trials auto:") for n in result.notes)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("paper", "bug", "words"), [
    ("nbafl", lambda: bugs.noise_ignores_round("server"), ["server noise: draws correlated across rounds"]),
    ("nbafl", bugs.stream_ignores_round, ["draws correlated across rounds"]),
    ("udp", bugs.stream_ignores_round, ["uplink noise: draws correlated across rounds"]),
])
def test_noise_reused_across_rounds(paper, bug, words, seed, tmp_path):
    # the trials draw from the production streams, so a stream that ignores the round shows
    cfg = small_config(tmp_path, paper, **({"udp": {"T": 3}} if paper == "udp" else {}))
    result = _leaks(paper, cfg, bug, seed, words, rounds=3, **ROUNDS3)
    assert any(c.correlated and c.relation == "rounds" for c in result.stream_checks)


def _crd(tmp_path):
    # every round discounts (zeta above any loss change): sigma recomputed each round from the budget left
    return small_config(tmp_path, "udp", udp={"T": 10, "crd": True, "zeta": 100.0, "beta": 0.9})


def _gaussian_epsilon(inv_z2: float, delta: float) -> float:
    return optimize.brentq(lambda eps: balle_wang_delta(eps, 1.0 / math.sqrt(inv_z2)) - delta, 0.0, 60.0)


def test_crd_audits_each_rounds_sigma_and_reports_what_training_spends(tmp_path):
    from fedbound.registry import get
    from fedbound.training.engine import run
    from fedbound.validation.audit import federation

    cfg = _crd(tmp_path)
    result = audit_from_config("udp", cfg, rounds=3, trials=400, control=False)
    assert not result.verdict.startswith("LEAK")
    # the run the audit follows, trained by the engine alone: its sigma per round and its own ledger
    entry = get("udp")
    from fedbound.config import load_config
    from fedbound.training import config as tc

    c = load_config(cfg, [entry.config_section, tc.TRAIN_SECTION], [], known_sections=("udp", "train"))
    setting = {**dict(c["udp"]), **{k: v for k, v in entry.defaults.items() if c["udp"].get(k) is None}}
    s = federation.round_one(entry.load("recipe"), setting, dict(c["train"]), 3)
    res = run(s.algorithm, s.model, s.data, plan=s.plan, options=s.options, stop_after=3)
    rows = res.metrics[res.metrics["client"].isna()].sort_values("round")
    sigmas = rows["sigma_uplink"].to_numpy()[:3]
    assert sigmas[0] > sigmas[1] > sigmas[2]  # CRD lowered sigma every round
    sens = float(s.plan.stage_sensitivity("uplink")[result.target_client])
    spent = _gaussian_epsilon(float(np.sum((sens / sigmas) ** 2)), s.plan.delta)
    up = result.views[0]
    assert up.epsilon_reported_tight == pytest.approx(spent, rel=1e-6)  # not the initial sigma's
    assert up.epsilon_independent == pytest.approx(spent, rel=1e-6)
    assert float(rows["epsilon_spent"].to_numpy()[2]) == pytest.approx(spent, rel=1e-6)
    # the trials add each round's sigma: the measured noise per round matches it
    per_round = [c for c in result.noise_checks if c.round is not None]
    assert len(per_round) == 3 and all(c.ratio_low < 1 < c.ratio_high for c in per_round)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("bug", "words"), [
    (lambda: bugs.scaled_noise_in_round("uplink", 2, 0.5), ["uplink noise (round 3)"]),
    (bugs.ledger_keeps_first_plan, ["uplink: the ledger reports epsilon"]),
])
def test_crd_bugs(bug, words, seed, tmp_path):
    _leaks("udp", _crd(tmp_path), bug, seed, words, rounds=3, **ROUNDS3)
