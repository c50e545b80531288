"""Central DP-FedAvg (McMahan et al. 2018) deployed on Flower (fedbound.deploy.dpfedavg,
fedbound.deploy.flower_dpfedavg): the plan's sigma is what an independent accountant gives; a Flower run
(Flower's DifferentialPrivacyServerSideFixedClipping around FedAvg, its noise from fedbound's source, through
the real ClientApp in this process) and fedbound's simulator agree: same participants and ledger epsilon
every round, noise std on the aggregate equal to the plan; with noise reproducible from the seed (simulation
only) the same losses, with OS-entropy noise losses within the spread of 3 seeds; a missing client refuses
the round; a plan whose noise underflows is refused."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

pytest.importorskip("flwr")

from fedbound.cli import main  # noqa: E402
from fedbound.deploy.dpfedavg import MECHANISM, dpfedavg_sigma  # noqa: E402
from fedbound.deploy.flower_client import STORE_ENV, client_app  # noqa: E402
from fedbound.deploy.flower_dpfedavg import flower_strategy  # noqa: E402
from fedbound.deploy.flower_local import InProcessGrid  # noqa: E402
from fedbound.deploy.flower_server import RoundRefused, serve  # noqa: E402
from fedbound.deploy.flower_session import run_config  # noqa: E402
from fedbound.errors import ConfigError  # noqa: E402
from fedbound.validation.recipes.runner import build_run, prepare_run, train_from_config  # noqa: E402

TINY = """
[dpfedavg]
N = 4
K = 2
T = 3
C = 0.2
eps = 30.0
delta = 0.001

[train]
dataset = "digits"
model = "logreg"
local_steps = 2
lr = 0.5
"""


@pytest.fixture(autouse=True)
def _quiet_flower(tmp_path, monkeypatch):
    logging.getLogger("flwr").setLevel(logging.ERROR)
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "default-client-store"))  # not ~/.fedbound


def _config(tmp_path: Path, text: str = TINY) -> Path:
    path = tmp_path / "dpfedavg.toml"
    path.write_text(text)
    return path


def _rounds(run_dir: Path) -> pd.DataFrame:
    table = pd.read_csv(run_dir / "metrics.csv")
    return table[table.client.isna()].reset_index(drop=True)


def _flower(config: Path, run_dir: Path, seed: int = 0, drop=None, reproducible: bool = False):
    """The plan on Flower in this process, as a simulation (kept uploads next to the run directory)."""
    prep = prepare_run("dpfedavg", config, seed=seed, paper=MECHANISM)
    cfg = run_config(prep, build_run(prep).plan, run_dir, reproducible_noise=reproducible)
    clients = client_app(store=run_dir.with_name(run_dir.name + "-store"), simulation=True)
    with warnings.catch_warnings():  # e.g. the budget notes of the run summary
        warnings.simplefilter("ignore")
        return serve(InProcessGrid(clients, prep.num_clients, cfg, drop=drop), cfg, simulation=True)


def _train(config: Path, run_dir: Path, seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_from_config("dpfedavg", config, out=run_dir, seed=seed, paper=MECHANISM)


def test_sigma_spends_the_budget_under_dp_accounting_k_of_n_without_replacement():
    """sigma K / (2C) is the noise multiplier of the average (replace-one sensitivity 2C/K): dp-accounting's
    RDP of T K-of-N-without-replacement releases at it spends eps (fedbound's orders differ: 1e-2)."""
    import dp_accounting

    setting = {"N": 10, "K": 3, "T": 5, "C": 0.7, "eps": 4.0, "delta": 1e-5}
    sigma = dpfedavg_sigma(setting)
    acc = dp_accounting.rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    event = dp_accounting.SampledWithoutReplacementDpEvent(10, 3, dp_accounting.GaussianDpEvent(
        sigma * 3 / (2 * 0.7)))
    acc.compose(event, 5)
    assert acc.get_epsilon(1e-5) == pytest.approx(4.0, rel=1e-2)
    assert flower_strategy(sigma, 0.7, 3).noise_multiplier == pytest.approx(sigma * 3 / 0.7, rel=1e-12)


def test_sigma_without_sampling_is_the_analytic_gaussian_of_t_releases():
    """K = N: T Gaussian releases of multiplier z are one of multiplier z / sqrt(T); Balle & Wang 2018's
    exact delta(eps) (Thm 8, written out here with scipy) at that multiplier is the plan's delta."""
    setting = {"N": 4, "K": 4, "T": 9, "C": 1.5, "eps": 2.0, "delta": 1e-4}
    z = dpfedavg_sigma(setting) * 4 / (2 * 1.5) / 3.0  # / sqrt(T)
    mu, eps = 1 / z, 2.0
    delta = norm.cdf(mu / 2 - eps / mu) - np.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
    assert delta == pytest.approx(1e-4, rel=1e-6)


def test_k_above_n_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"\[dpfedavg\] K = 5 is outside its valid range: 1 .. N = 4"):
        prepare_run("dpfedavg", _config(tmp_path), ["dpfedavg.K=5"], paper=MECHANISM)
        dpfedavg_sigma({"N": 4, "K": 5, "T": 3, "C": 0.2, "eps": 1.0, "delta": 1e-3})


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory) -> tuple[list[pd.DataFrame], list[pd.DataFrame], dict, list[pd.DataFrame]]:
    """fedbound's simulator and the Flower run of the tiny plan, seeds 0, 1, 2: Flower with noise from the
    seed (reproducible) and with noise from OS entropy (deployed)."""
    tmp = tmp_path_factory.mktemp("dpfedavg")
    config = _config(tmp)
    sim, flower, secure = [], [], []
    for seed in (2, 1, 0):
        _train(config, tmp / f"train{seed}", seed)
        summary = _flower(config, tmp / f"flower{seed}", seed, reproducible=True).summary
        _flower(config, tmp / f"secure{seed}", seed)
        sim.append(_rounds(tmp / f"train{seed}"))
        flower.append(_rounds(tmp / f"flower{seed}"))
        secure.append(_rounds(tmp / f"secure{seed}"))
    return sim, flower, summary, secure  # summary: seed 0's reproducible Flower run


def test_flower_and_the_simulator_count_the_same_rounds_with_the_planned_noise(three_seeds):
    sim, flower, summary, secure = three_seeds
    sigma = dpfedavg_sigma({"N": 4, "K": 2, "T": 3, "C": 0.2, "eps": 30.0, "delta": 0.001})
    d = summary["n_params"]
    for a, b in zip(flower, sim, strict=True):
        assert len(a) == len(b) == 3
        for col in ("participants", "epsilon_spent"):
            np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
        assert a["epsilon_spent"].iloc[-1] <= 30.0 < a["epsilon_spent"].iloc[-1] * (1 + 1e-6)
        for run in (a, b):  # the std each side added (the simulator's in float32)
            np.testing.assert_allclose(run["sigma_server"], sigma, rtol=1e-6)
    for runs in (flower, sim, secure):  # std measured on the aggregate: 9 rounds x d coordinates, 6 s.e.
        measured = np.sqrt(np.mean(np.concatenate([r["noise_std_measured"].to_numpy() ** 2 for r in runs])))
        assert measured == pytest.approx(sigma, rel=6 / np.sqrt(2 * 9 * d))
    for a, b in zip(secure, sim, strict=True):
        np.testing.assert_array_equal(a["epsilon_spent"].to_numpy(), b["epsilon_spent"].to_numpy())
    assert summary["epsilon_flower"] is not None


def test_loss_curves_agree(three_seeds):
    """Reproducible noise: Flower's wrapper adds the simulator's very draws (float32 summation order).
    OS-entropy noise: other draws, so other losses from the first noised round on (the noise std is checked
    above)."""
    sim, flower, _, secure = three_seeds
    for a, b, c in zip(flower, sim, secure, strict=True):
        np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
        assert (np.abs(c["loss"] - a["loss"]) > 1e-4).all()


def test_a_missing_client_refuses_the_round_and_the_rerun_adds_the_same_noise(tmp_path, three_seeds):
    """(c) fewer than K replies: refused before Flower's wrapper averages fewer updates; the rerun resumes,
    and Flower's noise, seeded per round from the run seed, makes it the uninterrupted run's numbers."""
    config = _config(tmp_path)
    whole = three_seeds[1][-1]  # seed 0, uninterrupted, reproducible
    asked: list[int] = []

    def drop(round_: int, client: int) -> bool:  # the first client asked in round 2 never replies
        if round_ == 1:
            asked.append(client)
        return round_ == 1 and client == asked[0]

    with pytest.raises(RoundRefused, match="round 2: 1 of 2 planned clients replied"):
        _flower(config, tmp_path / "cut", drop=drop, reproducible=True)
    _flower(config, tmp_path / "cut", reproducible=True)
    cut = _rounds(tmp_path / "cut")
    np.testing.assert_array_equal(cut["epsilon_spent"], whole["epsilon_spent"])
    np.testing.assert_allclose(cut["loss"], whole["loss"], rtol=1e-6)


def test_a_plan_short_of_noise_is_stopped_by_the_ledger_before_the_budget(tmp_path, monkeypatch):
    """(d) with 0.9 sigma the third round would exceed eps = 30: the check before training refuses the
    setting in one line (issue 32); run anyway ([train] paper_reproduction: DP-FedAvg has no paper
    accountant, so the tight one still binds), the ledger (not mocked) stops the Flower run after round 2,
    with no more than eps spent, and says so (PrivacyBudgetExceeded)."""
    import fedbound.deploy.dpfedavg as mech
    from fedbound.errors import PrivacyBudgetExceeded

    calibrated = mech.dpfedavg_sigma
    monkeypatch.setattr(mech, "dpfedavg_sigma", lambda setting: 0.9 * calibrated(setting))
    with pytest.raises(PrivacyBudgetExceeded, match="refused before training: .* exact eps = 3"):
        _flower(_config(tmp_path), tmp_path / "refused")
    with pytest.raises(PrivacyBudgetExceeded, match="fedbound flower stopped before round 3.*2 of 3 rounds"):
        _flower(_config(tmp_path, TINY + "paper_reproduction = true\n"), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["rounds_done"] == 2
    assert _rounds(tmp_path / "run")["epsilon_spent"].iloc[-1] <= 30.0


def test_without_noise_flowers_fedavg_averages_uniformly_as_the_engine(tmp_path):
    """(b) clients of unequal size (Dirichlet split), [train] private = false: Flower's FedAvg, weighting by
    fedbound's uniform key instead of num-examples, gives the engine's losses (float32 order; weighting by
    size would move them by 3e-3 relative)."""
    config = _config(tmp_path)
    sets = ["train.private=false", 'train.partition="dirichlet"']
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = train_from_config("dpfedavg", config, sets, out=tmp_path / "train", paper=MECHANISM)
        prep = prepare_run("dpfedavg", config, sets, paper=MECHANISM)
        cfg = run_config(prep, None, tmp_path / "flower", reproducible_noise=True)  # the seed's K of N
        serve(InProcessGrid(client_app(store=tmp_path / "store", simulation=True), prep.num_clients, cfg),
              cfg, simulation=True)
    assert ref.summary["client_sizes_min"] < ref.summary["client_sizes_max"]
    np.testing.assert_allclose(_rounds(tmp_path / "flower")["loss"], _rounds(tmp_path / "train")["loss"],
                               rtol=1e-6)  # float32 summation order


def test_cli_writes_the_dpfedavg_app_with_flowers_noise_multiplier(tmp_path, capsys):
    config = _config(tmp_path)
    assert main(["flower", "dpfedavg", str(config), "--out", str(tmp_path / "app"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plan"]["plan.K"] == 2 and out["plan"]["plan.N"] == 4
    assert out["plan"]["plan.sigma-server"] == pytest.approx(
        dpfedavg_sigma({"N": 4, "K": 2, "T": 3, "C": 0.2, "eps": 30.0, "delta": 0.001}), rel=1e-12)
    assert (tmp_path / "app" / "pyproject.toml").is_file()
    assert main(["flower", "dpfedavg", str(config), "--design", "recommended",
                 "--out", str(tmp_path / "x")]) == 2
    assert "deploy mechanism without fedbound's planner" in capsys.readouterr().err


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.floats(0.05, 5.0), st.integers(0, 2**31 - 1))
def test_upload_clips_the_update_not_the_model(k, d, clip, seed):
    """McMahan et al. 2018, Alg. 1: the upload is w + Delta / max(1, ||Delta|| / C), Delta = w_i - w."""
    from types import SimpleNamespace

    from fedbound.training.dpfedavg import DPFedAvg
    from fedbound.training.local import LocalSGD

    gen = torch.Generator().manual_seed(seed)
    start = 3.0 * torch.randn(d, generator=gen, dtype=torch.float64)
    local = start + torch.randn(k, d, generator=gen, dtype=torch.float64)
    ctx = SimpleNamespace(global_params=start, log=lambda name, value: None)
    up = DPFedAvg(1, clip, LocalSGD(), k).upload(ctx, np.arange(k), local)
    for row, loc in zip(up, local, strict=True):
        delta = (loc - start).numpy()
        want = start.numpy() + delta * min(1.0, clip / np.linalg.norm(delta))
        np.testing.assert_allclose(row.numpy(), want, rtol=1e-12, atol=1e-12)
