"""``fedbound train udp`` with the calibrations of fedbound.bounds.udp.noise and CRD given as a policy."""

from __future__ import annotations

import numpy as np
import pytest

from fedbound.bounds import udp
from fedbound.errors import ConfigError
from fedbound.tests.test_training_cli import TINY_UDP
from fedbound.validation.runner import train_from_config
from fedbound.validation.train_udp import udp_plan


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "udp.toml"
    path.write_text(TINY_UDP)
    return path


@pytest.mark.parametrize("method", ["paper", "corrected", "numeric", "numeric_release", "tight"])
def test_every_calibration_trains_within_its_budget(cfg, tmp_path, method):
    done = train_from_config("udp", cfg, [f"calibration={method!r}".replace("'", '"')], out=tmp_path / method)
    assert done.summary["rounds_done"] == 3
    plan = done.plan
    assert plan.info["calibration"] == method
    spent = done.summary["epsilon_spent_paper" if plan.budget_accountant == "paper" else "epsilon_spent"]
    assert spent <= 8.0 * (1 + 1e-9)


def test_plan_sigmas_come_from_the_noise_function():
    setting = {"N": 50, "K": 30, "T": 200, "eps": 8.0, "delta": 1e-3, "eta": 0.002, "C": 20.0, "m": 800}
    sizes = np.full(50, 800)
    for method in ("paper", "corrected", "numeric"):
        plan = udp_plan({**setting, "calibration": method}, sizes)
        want = udp.noise({**setting, "sizes": sizes}, 200, method)["uplink"]
        np.testing.assert_allclose(plan.sigma["uplink"][0], want, rtol=1e-12)
        assert plan.budget_accountant == "paper"
    corrected = udp_plan({**setting, "calibration": "corrected"}, sizes)
    assert corrected.sigma["uplink"][0, 0] == pytest.approx(0.0006283254287, rel=1e-9)


def test_crd_policy_reaches_the_simulator(cfg, tmp_path):
    done = train_from_config("udp", cfg, ["crd=true", "zeta=1e9", "T=12", "beta=0.5"], out=tmp_path / "crd")
    discounts = done.summary["crd_discounts"]
    assert discounts[0] == [1, 6]  # floor(0.5 (12 - 0)) + 0, recorded after round 0
    assert done.summary["rounds_done"] < 12
    assert done.summary["epsilon_spent_paper"] <= 8.0 * (1 + 1e-9)


def test_per_client_budgets_are_refused_for_training(cfg):
    with pytest.raises(ConfigError, match="eps_clients"):
        train_from_config("udp", cfg, ['eps_clients="2,4"'])
