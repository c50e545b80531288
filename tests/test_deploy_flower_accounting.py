"""Flower's own accountant guards the same budget (issue 37, item 6; fedbound.deploy.flower_privacy).

The plan emits Flower's PrivacyConfig of its central (broadcast) releases with ``max_epsilon`` = the budget;
the ServerApp asks Flower's ``RdpAccountant.would_exceed`` before every round.  Expected values come from
elsewhere: the broadcast's noise multiplier from NbAFL (Wei et al. 2020), Lemma 1 and Theorem 1 eq. (24)
(std sqrt(sigma_D^2 + sigma_U^2 / K), sensitivity Delta / K for uniform weights), Flower's epsilon from
dp-accounting's RDP accountant called directly (the library Flower wraps), fedbound's exact epsilon of
the same releases from the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8) solved with scipy,
and the round Flower's guard stops at by brute force over the rounds."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from fedbound.deploy.flower_client import STORE_ENV, client_app  # noqa: E402
from fedbound.deploy.flower_local import InProcessGrid  # noqa: E402
from fedbound.deploy.flower_privacy import (  # noqa: E402
    PREFIX,
    FlowerGuard,
    plan_flower_epsilon,
    plan_note,
    privacy_config,
)
from fedbound.deploy.flower_server import serve  # noqa: E402
from fedbound.deploy.flower_session import run_config  # noqa: E402
from fedbound.errors import ConfigError, PrivacyBudgetExceeded  # noqa: E402
from fedbound.tests.test_deploy_flower import NBAFL, UDP_CRD  # noqa: E402
from fedbound.validation.recipes.runner import build_run, prepare_run  # noqa: E402

DELTA = 0.01


def _plan(tmp_path, k: int, rounds: int, text: str = NBAFL, paper: str = "nbafl"):
    path = tmp_path / f"{paper}_{k}_{rounds}.toml"
    path.write_text(text.replace("K = 3", f"K = {k}").replace("T = 3", f"T = {rounds}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = prepare_run(paper, path)
        return prep, build_run(prep).plan


def _analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact eps of a mu-GDP mechanism at delta (Balle & Wang 2018, Thm 8), by root finding."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2)) - delta

    return brentq(excess, 0.0, mu * mu + 10 * mu + 10, xtol=1e-12)


def _broadcast_z(plan, k: int) -> float:
    """NbAFL's broadcast noise multiplier (module docstring) from the plan's sigma's and sensitivity."""
    up, server = float(plan.sigma["uplink"][0]), float(plan.sigma["server"][0])
    return math.sqrt(server**2 + up**2 / k) / (float(plan.sensitivity["uplink"]) / k)


def _dp_accounting_epsilon(z: float, rounds: int, delta: float, n: int | None = None, k: int | None = None):
    import dp_accounting

    gaussian = dp_accounting.GaussianDpEvent(z)
    if n is None:
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(gaussian, rounds)
    else:
        acc = dp_accounting.rdp.RdpAccountant(
            neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_accounting.SampledWithoutReplacementDpEvent(n, k, gaussian), rounds)
    return acc.get_epsilon(delta)


def test_unsampled_broadcasts_flowers_epsilon_fedbounds_exact_epsilon_and_where_the_guard_stops(tmp_path):
    """K = N = 4, T = 5: the broadcast binds the plan (fedbound's exact eps of it = the budget 60); Flower's
    RDP bound of the same releases is above it, and its guard stops the 5th round, not the 4th."""
    _, plan = _plan(tmp_path, 4, 5)
    keys = privacy_config(plan)
    assert keys == {f"{PREFIX}target-delta": DELTA, f"{PREFIX}population-size": 4,
                    f"{PREFIX}neighboring-relation": "add-or-remove-one",
                    f"{PREFIX}sampling-method": "no-amplification", f"{PREFIX}max-epsilon": 60.0,
                    "flower.guard": "report"}
    z = _broadcast_z(plan, 4)
    flower, ours = plan_flower_epsilon(plan, 4)
    assert flower == pytest.approx(_dp_accounting_epsilon(z, 5, DELTA), rel=1e-9)
    assert ours == pytest.approx(_analytic_gaussian_epsilon(math.sqrt(5) / z, DELTA), rel=1e-6)
    assert ours == pytest.approx(60.0, rel=1e-6) and flower > 60.0 * 1.02  # the RDP conversion's slack
    by_round = [_dp_accounting_epsilon(z, t, DELTA) for t in range(1, 6)]
    first = next(t for t, eps in enumerate(by_round, start=1) if eps > 60.0)
    assert first == 5
    guard = FlowerGuard(keys)
    event = [z, 4, 4, "no-amplification"]
    for t in range(1, 6):
        assert guard.would_exceed([event] * (t - 1), [event]) == (by_round[t - 1] > 60.0)
    note = plan_note(plan, 4)
    assert f"before round {first}" in note and "analytic Gaussian" in note and f"{flower:.4g}" in note


def test_k_of_n_broadcasts_are_sampled_without_replacement_with_replace_one_neighbours(tmp_path):
    _, plan = _plan(tmp_path, 3, 3)
    keys = privacy_config(plan)
    assert (keys[f"{PREFIX}sampling-method"], keys[f"{PREFIX}neighboring-relation"]) == \
        ("without-replacement", "replace-one")
    z = _broadcast_z(plan, 3)
    flower, ours = plan_flower_epsilon(plan, 3)
    assert flower == pytest.approx(_dp_accounting_epsilon(z, 3, DELTA, n=4, k=3), rel=1e-9)
    assert ours <= 60.0 * (1 + 1e-9)
    assert flower == pytest.approx(ours, rel=1e-6)  # the same RDP of sampling without replacement


def test_a_mechanism_without_central_releases_emits_no_privacy_config(tmp_path):
    _, plan = _plan(tmp_path, 3, 3, UDP_CRD.replace("crd = true", "crd = false"), "udp")
    assert [v.kind for v in plan.views] == ["upload"]
    assert privacy_config(plan) == {}
    assert plan_note(plan, 3) is None
    with pytest.raises(ConfigError, match="--flower-guard = 'maybe'"):
        privacy_config(plan, "maybe")


def _serve(tmp_path, monkeypatch, guard: str, edit: dict | None = None, name: str = ""):
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    prep, plan = _plan(tmp_path, 4, 5)
    run_dir = tmp_path / f"run-{name or guard}"
    cfg = run_config(prep, plan, run_dir, flower_guard=guard)
    cfg.update(edit or {})
    grid = InProcessGrid(client_app(store=tmp_path / f"store-{name or guard}", simulation=True), 4, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serve(grid, cfg, simulation=True), run_dir


def test_flowers_guard_reports_by_default_and_stops_the_run_when_asked(tmp_path, monkeypatch):
    done, run_dir = _serve(tmp_path, monkeypatch, "report")
    rows = pd.read_csv(run_dir / "metrics.csv")
    rows = rows[rows.client.isna()]
    assert len(rows) == 5 and rows["epsilon_spent"].iloc[-1] <= 60.0 * (1 + 1e-9)
    assert rows["flower_would_exceed"].fillna(0).tolist() == [0, 0, 0, 0, 1]
    assert rows["epsilon_flower"].iloc[-1] > 60.0 >= rows["epsilon_flower"].iloc[-2]
    info = done.summary["flower_accounting"]
    assert info["would_exceed_rounds"] == [5] and info["guard"] == "report"
    assert info["epsilon"] == pytest.approx(rows["epsilon_flower"].iloc[-1])
    assert info["epsilon_fedbound_same_releases"] == pytest.approx(rows["epsilon_downlink"].iloc[-1])
    assert any("would have stopped round 5" in w for w in done.summary["warnings"])
    with pytest.raises(PrivacyBudgetExceeded, match="Flower's RdpAccountant would exceed") as info:
        _serve(tmp_path, monkeypatch, "stop")
    assert info.value.summary["rounds_done"] == 4
    assert np.isfinite(info.value.summary["epsilon_flower"])
    with pytest.raises(ConfigError, match="flower.privacy.max-epsilon = 600.0"):
        _serve(tmp_path, monkeypatch, "report", {f"{PREFIX}max-epsilon": 600.0}, name="edited")
