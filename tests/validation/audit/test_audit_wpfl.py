"""WPFL's audit entry (issue 21): the copies send through the target's subchannel, the ledger is the
Gaussian mechanism's epsilon at sensitivity 2C (an independent Gaussian-DP formula), the correct mechanism is
not called LEAK, and a halved uplink noise is caught by the noise check on the pre-quantization release
(the quantized upload's own residual hides it)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from fedbound.errors import ConfigError
from fedbound.registry import get
from fedbound.tests._accounting_oracles import balle_wang_delta
from fedbound.tests._audit import scaled_noise, small_config
from fedbound.validation.audit import audit_from_config
from fedbound.validation.audit.wpfl import AUDIT


def _gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon at delta of the Gaussian mechanism with sensitivity / std = mu (Balle & Wang 2018's exact
    delta(eps), the tests' oracle), solved by brentq."""
    return optimize.brentq(lambda eps: balle_wang_delta(eps, 1.0 / mu) - delta, 0.0, 50.0)


def _small_algorithm(tmp_path):
    from fedbound.config import load_config
    from fedbound.registry import names
    from fedbound.training import config as tc

    entry = get("wpfl")
    cfg = load_config(small_config(tmp_path, "wpfl"), [entry.config_section, tc.TRAIN_SECTION], [],
                      known_sections=(*names(), "train"))
    setting = {**dict(cfg["wpfl"]), **{k: v for k, v in entry.defaults.items() if cfg["wpfl"].get(k) is None}}
    rec = entry.load("recipe")
    return rec.algorithm(setting, dict(cfg["train"]), rec.rounds(setting))


def test_every_copy_sends_through_the_targets_subchannel(tmp_path):
    algo = _small_algorithm(tmp_path)
    chosen, ber = algo.schedule.clients[0], algo.schedule.uplink_ber[0]
    for target, rate in zip(chosen, ber, strict=True):
        prepared = AUDIT.prepare_target(algo, int(target))
        assert np.array_equal(prepared.uplink_ber(None, np.arange(7)), np.full(7, rate))
        assert prepared.init_client_state(None) == {}
    idle = next(c for c in range(algo.schedule.num_clients) if c not in chosen)
    with pytest.raises(ConfigError, match=f"client {idle} uploads nothing in round 1"):
        AUDIT.prepare_target(algo, idle)
    assert algo.uplink_ber(type("Ctx", (), {"round": 0})(), chosen).tolist() == ber.tolist()  # untouched


def test_correct_upload_is_not_a_leak_and_a_halved_noise_is(tmp_path):
    cfg = small_config(tmp_path, "wpfl")
    correct = audit_from_config("wpfl", cfg, seed=1)
    assert correct.verdict == "consistent", correct.verdict
    (view,) = correct.views
    small = AUDIT.small["wpfl"]
    # one upload (T = 1, q = 1): the Gaussian mechanism with sensitivity 2C at the plan's sigma_DP
    sigma = view.noise_std_planned
    assert view.epsilon_reported_tight == pytest.approx(_gdp_epsilon(2 * small["C"] / sigma, small["delta"]),
                                                        rel=1e-3)
    assert view.epsilon_lower <= view.epsilon_reported_tight < view.control_epsilon_lower
    # one check per participant (both upload in round 1), on the noised model before quantization
    assert [c.stage for c in correct.noise_checks] == ["uplink", "uplink"]
    assert sorted(c.client for c in correct.noise_checks) == sorted(c for c, _, _ in correct.participants)
    assert all(c.ratio_low < 1 < c.ratio_high for c in correct.noise_checks)
    with scaled_noise("uplink", 0.5):
        halved = audit_from_config("wpfl", cfg, seed=1, control=False)
    assert halved.verdict.startswith("LEAK") and "uplink noise (client" in halved.verdict
    assert all(c.ratio_low < 0.5 < c.ratio_high for c in halved.noise_checks)
