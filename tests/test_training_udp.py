"""``fedbound train udp`` with the calibrations of fedbound.bounds.udp.noise and CRD given as a policy."""

from __future__ import annotations

import numpy as np
import pytest

from fedbound.bounds import udp
from fedbound.errors import ConfigError, PrivacyBudgetExceeded
from fedbound.tests.test_training_cli import TINY_UDP
from fedbound.validation.recipes.runner import train_from_config
from fedbound.validation.recipes.udp import udp_plan


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "udp.toml"
    path.write_text(TINY_UDP)
    return path


@pytest.mark.parametrize("method", ["paper", "corrected", "numeric", "numeric_release", "tight"])
def test_every_calibration_trains_within_its_budget_or_is_refused(cfg, tmp_path, method):
    """Within the budget under exact accounting, or refused before training; the refused ones run in the
    paper-reproduction mode within the paper's accountant, saying they are not (eps, delta)-DP."""
    setting = [f"calibration={method!r}".replace("'", '"')]
    try:
        done = train_from_config("udp", cfg, setting, out=tmp_path / method)
    except PrivacyBudgetExceeded as exc:
        assert method != "tight" and "refused before training" in str(exc)
        done = train_from_config("udp", cfg, [*setting, "train.paper_reproduction=true"],
                                 out=tmp_path / method)
        assert done.summary["privacy"].startswith("not (ε, δ)-DP at the stated budget")
        assert done.summary["epsilon_spent_paper"] <= 8.0 * (1 + 1e-9)
    else:
        assert done.summary["epsilon_spent"] <= 8.0 * (1 + 1e-9)
    assert done.summary["rounds_done"] == 3
    assert done.plan.info["calibration"] == method


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
    assert done.summary["epsilon_spent"] <= 8.0 * (1 + 1e-9)  # tight sigma: CRD keeps the inverse variance


def test_crd_cut_short_between_evaluations_still_evaluates_its_final_model(cfg, tmp_path):
    done = train_from_config("udp", cfg, ["crd=true", "zeta=1e9", "T=14", "beta=0.5", "train.eval_every=5"],
                             out=tmp_path / "crd_eval")
    last = done.summary["rounds_done"]
    assert last % 5 != 0  # CRD stops between two scheduled evaluations: the case under test
    rows = [r for r in done.result.state.rows if r["client"] is None]
    assert rows[-1]["round"] == last
    assert rows[-1].get("loss") is not None and np.isfinite(rows[-1]["loss"])
    assert done.summary["final_loss"] == pytest.approx(rows[-1]["loss"])
    assert all(r.get("loss") is None for r in rows[:-1] if r["round"] % 5)


def test_per_client_budgets_are_refused_for_training(cfg):
    with pytest.raises(ConfigError, match="eps_clients"):
        train_from_config("udp", cfg, ['eps_clients="2,4"'])


# --- Lei's decaying noise (seed 003 Sec. 5; spec 003 Sec. 3.10) ---------------------------------------------


def test_lei_multipliers_by_hand():
    """T = 10, decay 0.5: k = 0.05, multipliers 1, .95, ..., and sum 1/m^2 = 1 + 1.108 + 1.235 + 1.384
    + 1.5625 + 1.778 = 8.07 <= 10, while the next (1/0.7^2 = 2.04) would pass 10: six rounds."""
    from fedbound.validation.recipes.udp import lei_multipliers

    np.testing.assert_allclose(lei_multipliers(10, 0.5), [1.0, 0.95, 0.9, 0.85, 0.8, 0.75], rtol=1e-12)
    # a decay near 0 is original UDP (any decay > 0 overspends by a little in round T); a huge one reaches
    # the floor 0.01 at once (1 + 1e4 > T)
    assert len(lei_multipliers(7, 1e-14)) == 7
    np.testing.assert_allclose(lei_multipliers(50, 100.0), [1.0])


@pytest.mark.parametrize("T,decay", [(3, 0.5), (40, 0.5), (40, 1.0), (200, 0.3), (25, 3.0)])
def test_lei_spends_at_most_and_nearly_what_original_udp_spends(T, decay):
    from fedbound.validation.recipes.udp import LEI_FLOOR, lei_multipliers

    m = lei_multipliers(T, decay)
    spent = np.sum(m**-2.0)
    assert spent <= T * (1 + 1e-12)
    nxt = max(1.0 - decay / T * len(m), LEI_FLOOR)
    assert spent + nxt**-2.0 > T  # stops only when the next round would overspend
    assert np.all(np.diff(m) <= 0) and m[0] == 1.0


PAPER_SIGMA = ('train.noise="paper"', "train.paper_reproduction=true")
"""The paper's sigma (eq. (10)): its moments accountant binds only in the paper-reproduction mode."""


def _lei_run(cfg, tmp_path, *extra):
    return train_from_config("udp", cfg, ["lei=true", "T=12", *extra], out=tmp_path / "lei")


def test_lei_ledger_matches_the_papers_moments_accountant(cfg, tmp_path):
    """epsilon_spent_paper = Delta sqrt(2 q ln(1/delta) sum_t sigma_t^-2) (eq. (16), the inverse of eq. (25)),
    computed here from the plan's sigmas: at most the budget, and close to it."""
    done = _lei_run(cfg, tmp_path, *PAPER_SIGMA)
    plan = done.plan
    sigma = plan.sigma["uplink"][:, 0]
    assert plan.rounds == len(sigma) == done.summary["rounds_done"] < 12
    np.testing.assert_allclose(sigma / sigma[0], [1 - 0.5 / 12 * t for t in range(len(sigma))], rtol=1e-12)
    sens = 2 * 0.5 * 1.0 / 30  # 2 eta C / |D_i|, eq. (13)
    want = sens * np.sqrt(2 * (4 / 6) * np.log(1 / 1e-3) * np.sum(sigma**-2.0))
    assert done.summary["epsilon_spent_paper"] == pytest.approx(want, rel=1e-9)
    original = train_from_config("udp", cfg, ["T=12", *PAPER_SIGMA], out=tmp_path / "original")
    assert original.summary["epsilon_spent_paper"] == pytest.approx(8.0, rel=1e-9)
    assert 0.9 * 8.0 < want <= 8.0 * (1 + 1e-9)
    assert original.summary["epsilon_spent"] >= done.summary["epsilon_spent"]


def test_lei_tight_ledger_matches_dp_accounting(cfg, tmp_path):
    """K = N (every client uploads every round): the tight column is the composition of the Gaussian releases
    sigma_t / Delta, checked against dp-accounting's privacy-loss-distribution accountant."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    done = _lei_run(cfg, tmp_path, "K=6")
    sigma = done.plan.sigma["uplink"][:, 0]
    sens = 2 * 0.5 * 1.0 / 30
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(s / sens) for s in sigma]))
    assert done.summary["epsilon_spent"] == pytest.approx(acc.get_epsilon(1e-3), rel=2e-3)


@pytest.mark.parametrize("private", ["true", "false"])
def test_lei_and_crd_together_are_refused(cfg, private):
    with pytest.raises(ConfigError, match="lei = true and crd = true"):
        train_from_config("udp", cfg, ["lei=true", "crd=true", f"train.private={private}"])


def test_batched_lei_runs_equal_solo_runs():
    from fedbound.tests.test_training_batched import _assert_same_run, _jobs, _solo
    from fedbound.training.multirun import run_batch

    variants = [("train.model=logreg", "lei=true", f"T={T}", f"train.seed={seed}")
                for T, seed in ((4, 0), (6, 1))]
    results = run_batch(_jobs("udp", variants))
    for batched, job in zip(results, _jobs("udp", variants), strict=True):
        _assert_same_run(batched, _solo(job))
    assert [r.summary["rounds_done"] for r in results] == [2, 4]  # 1 + 1/.875^2 + 1/.75^2 > 4; 6: see above
