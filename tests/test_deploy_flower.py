"""fedbound flower (fedbound.deploy): a plan run through Flower's ClientApp / ServerApp code with noise
reproducible from the seed (simulation only) gives the numbers of ``fedbound train``; refused and killed
rounds resume without counting a round twice.

These tests use :class:`fedbound.deploy.flower_local.InProcessGrid` (Flower's ClientApp called in this
process); tests/test_deploy_flower_sim.py runs the same app on Flower's Ray simulation engine, and
tests/test_deploy_flower_privacy.py checks the deployed randomness (OS entropy, kept uploads)."""

from __future__ import annotations

import contextlib
import json
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("flwr")

from fedbound.cli import main  # noqa: E402
from fedbound.deploy.flower_client import STORE_ENV, client_app, client_update  # noqa: E402
from fedbound.deploy.flower_local import InProcessGrid  # noqa: E402
from fedbound.deploy.flower_server import RoundRefused, flower_epsilon, serve  # noqa: E402
from fedbound.deploy.flower_session import client_side, run_config  # noqa: E402
from fedbound.errors import ConfigError  # noqa: E402
from fedbound.validation.recipes.runner import build_run, prepare_run, train_from_config  # noqa: E402

NBAFL = """
[nbafl]
N = 4
m = 40
C = 20.0
K = 3
eps = 60.0
delta = 0.01
L = 1
T = 3
Theta = 2.0
l = 0.1
beta = 1.0
rho = 1.0
B = 1.0
mu = 4.0
sensitivity = "paper"

[train]
dataset = "digits"
model = "logreg"
local_steps = 2
lr = 0.2
probe_records = 0
noise = "tight"
"""

UDP_CRD = """
[udp]
N = 5
m = 30
K = 3
T = 6
eps = 8.0
delta = 0.001
eta = 0.5
C = 1.0
crd = true
beta = 0.8
zeta = 0.02

[train]
dataset = "digits"
model = "logreg"
samples_per_client = 30
paper_reproduction = true  # the paper's moments accountant binds (eq. (10) spends more exactly)
"""


@contextlib.contextmanager
def _quiet():
    """Runs' warnings (budget notes) are not what these tests check."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(autouse=True)
def _client_store(tmp_path, monkeypatch):
    """Clients built without a store keep their uploads under this test's folder, not in ~/.fedbound."""
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "default-client-store"))


def _config(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _flower(paper: str, config: Path, run_dir: Path, drop=None, overrides=(), reproducible=True, lose=None):
    """The plan served over the in-process Grid, as a simulation (its clients keep their uploads next to
    the run directory, so a rerun finds them); ``reproducible``: noise from the seed, as fedbound train."""
    prep = prepare_run(paper, config, overrides)
    cfg = run_config(prep, build_run(prep).plan, run_dir, reproducible_noise=reproducible)
    clients = client_app(store=run_dir.with_name(run_dir.name + "-store"), simulation=True)
    grid = InProcessGrid(clients, prep.num_clients, cfg, drop=drop, lose=lose)
    return serve(grid, cfg, simulation=True), cfg


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny NbAFL plan run through Flower without interruption: (config, run directory)."""
    tmp = tmp_path_factory.mktemp("whole")
    config = _config(tmp, NBAFL, "nbafl")
    with _quiet():
        _flower("nbafl", config, tmp / "run")
    return config, tmp / "run"


def die_before_checkpoint(monkeypatch, round_: int):
    """Make a run die (KeyboardInterrupt) after the ledger counted round ``round_`` (1-based), before its
    checkpoint; returns the function that undoes it."""
    from fedbound.training import checkpoint as ckpt

    save = ckpt.save

    def dies(run_dir, key, state):
        if state.round == round_:
            raise KeyboardInterrupt
        return save(run_dir, key, state)

    monkeypatch.setattr(ckpt, "save", dies)
    return lambda: monkeypatch.setattr(ckpt, "save", save)


def _rounds(run_dir: Path) -> pd.DataFrame:
    table = pd.read_csv(run_dir / "metrics.csv")
    return table[table.client.isna()].reset_index(drop=True)


@pytest.mark.parametrize("paper, text, overrides", [("nbafl", NBAFL, []),
                                                     ("nbafl", NBAFL, ["nbafl.K=4", "nbafl.T=5"]),
                                                     ("udp", UDP_CRD, [])],
                         ids=["nbafl-K3of4", "nbafl-all4-server-noise", "udp-crd"])
def test_flower_run_gives_the_numbers_of_fedbound_train(tmp_path, paper, text, overrides):
    """Same plan, same seed, reproducible noise: the engine's batched run and the Flower run (one message
    per client) agree on every round's participants, noise std, ledger epsilon (exactly) and loss (float32
    summation order); the run says its noise is reproducible from the seed."""
    config = _config(tmp_path, text, paper)
    with _quiet():
        ref = train_from_config(paper, config, overrides, out=tmp_path / "train")
    with _quiet():
        run, _ = _flower(paper, config, tmp_path / "flower", overrides=overrides)
    a, b = _rounds(tmp_path / "flower"), _rounds(tmp_path / "train")
    assert len(a) == len(b) == ref.summary["rounds_done"] >= 3
    if overrides:  # all 4 clients, T = 5 > L N = 4: the server adds sigma_D (tight counterpart of eq. (10))
        assert (a["sigma_server"] > 0).all()
    for col in ("participants", "epsilon_spent", "epsilon_spent_paper", "sigma_uplink", "sigma_server",
                "sigma"):
        if col not in b:
            continue
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
    assert (a["loss"].diff().dropna() != 0).all()  # training moved the model
    summary = json.loads((tmp_path / "flower" / "summary.json").read_text())
    assert summary["epsilon_spent"] == ref.summary["epsilon_spent"]
    assert summary["noise_source"].startswith("run seed")
    assert summary["warnings"][0] == ("noise reproducible from the seed: simulation only, not private "
                                      "against anyone holding the config")
    assert summary.get("crd_discounts") == ref.summary.get("crd_discounts")
    if paper == "udp":
        assert summary["rounds_done"] < 6  # CRD cut T through the run, on the Flower side too
    elif not overrides:  # the K-of-N broadcast: fedbound's RDP accountant and Flower's (dp-accounting) agree
        assert summary["epsilon_flower"] == pytest.approx(summary["epsilon_broadcast"]["downlink"], rel=1e-4)


def test_uploads_carry_the_planned_noise_std(tmp_path):
    """The upload minus the same client's noiseless upload has the plan's std (sampling error of 650
    draws: 5 standard errors) and mean ~0; the client reports the std it added."""
    config = _config(tmp_path, NBAFL, "nbafl")
    prep = prepare_run("nbafl", config)
    plan = build_run(prep).plan
    cfg = run_config(prep, plan, tmp_path / "unused")
    side = client_side(cfg)
    start = torch.zeros(side.model.n_params)
    sigma = float(plan.stage_sigma("uplink", 0)[0]) * 40.0  # large enough to dominate float32 rounding
    noisy, metrics = client_update(side, 0, 2, start, {"uplink": sigma})
    clean, _ = client_update(side, 0, 2, start, {"uplink": 0.0})
    noise = (noisy - clean).double().numpy()
    d = noise.size
    assert abs(noise.std(ddof=1) - sigma) < 5 * sigma / np.sqrt(2 * (d - 1))
    assert abs(noise.mean()) < 5 * sigma / np.sqrt(d)
    assert metrics["sigma.uplink"] == pytest.approx(sigma)
    other, _ = client_update(side, 1, 2, start, {"uplink": sigma})  # another round: fresh draws
    assert not torch.equal(other, noisy)


def test_a_round_with_a_missing_upload_is_refused_and_the_rerun_resumes(tmp_path, whole):
    config, whole_dir = whole
    with pytest.raises(RoundRefused, match="round 2: 2 of 3 planned clients replied"):
        _flower("nbafl", config, tmp_path / "cut", drop=lambda round_, client: round_ == 1 and client == 2)
    assert not (tmp_path / "cut" / "metrics.csv").exists()
    with _quiet():
        run, _ = _flower("nbafl", config, tmp_path / "cut")
    assert run.summary["resumed_from_round"] == 1
    a, b = _rounds(tmp_path / "cut"), _rounds(whole_dir)
    assert a["round"].tolist() == [1, 2, 3]  # no round twice, none missing
    np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
    np.testing.assert_array_equal(a["loss"], b["loss"])


def test_a_run_killed_after_the_ledger_counted_a_round_resumes_from_the_checkpoint(tmp_path, monkeypatch,
                                                                                     whole):
    """Killed between the ledger's commit of round 2 and its checkpoint: the rerun counts round 2 once."""
    config, whole_dir = whole
    revive = die_before_checkpoint(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        _flower("nbafl", config, tmp_path / "killed")
    revive()
    with _quiet():
        run, _ = _flower("nbafl", config, tmp_path / "killed")
    assert run.summary["resumed_from_round"] == 1
    a, b = _rounds(tmp_path / "killed"), _rounds(whole_dir)
    assert a["round"].tolist() == [1, 2, 3]
    np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
    np.testing.assert_array_equal(a["epsilon_flower"], b["epsilon_flower"])


def test_the_run_stops_before_a_round_that_would_exceed_the_budget(tmp_path, monkeypatch):
    """The ledger's check before round 3 refuses it: round 3 is never sent, the two rounds done are written,
    and the run ends with PrivacyBudgetExceeded (the CLI: one line, exit code 2)."""
    from fedbound.errors import PrivacyBudgetExceeded
    from fedbound.training.privacy import PrivacyLedger

    check = PrivacyLedger.check_budget
    asked: list[int] = []

    def budget_spent_at_round_3(self, releases, round_):
        if round_ == 2:
            raise PrivacyBudgetExceeded("round 3 would spend eps = 61 > budget 60")
        return check(self, releases, round_)

    monkeypatch.setattr(PrivacyLedger, "check_budget", budget_spent_at_round_3)
    with _quiet(), pytest.raises(PrivacyBudgetExceeded, match="stopped before round 3 would "
                                              r"spend eps = 61 > budget 60; 2 of 3 rounds were run") as err:
        _flower("nbafl", _config(tmp_path, NBAFL, "nbafl"), tmp_path / "run",
                drop=lambda round_, client: asked.append(round_) and False)
    assert sorted(set(asked)) == [0, 1]  # no message of round 3 left the server
    assert err.value.summary["rounds_done"] == 2
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["rounds_done"] == 2
    assert _rounds(tmp_path / "run")["round"].tolist() == [1, 2]


def test_an_edited_plan_in_the_run_config_is_refused(tmp_path):
    config = _config(tmp_path, NBAFL, "nbafl")
    prep = prepare_run("nbafl", config)
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "run")
    cfg["plan.sigma-uplink"] *= 0.5
    with pytest.raises(ConfigError, match="plan.sigma-uplink"):
        serve(InProcessGrid(client_app(), 4, cfg), cfg)


def test_clients_refuse_to_upload_without_their_planned_noise(tmp_path):
    config = _config(tmp_path, NBAFL, "nbafl")
    prep = prepare_run("nbafl", config)
    side = client_side(run_config(prep, build_run(prep).plan, tmp_path / "run"))
    with pytest.raises(ConfigError, match="no sigma for noise stage 'uplink'"):
        client_update(side, 0, 0, torch.zeros(side.model.n_params), {})
    with pytest.raises(ConfigError, match="client = 4 is outside its valid range"):
        client_update(side, 0, 4, torch.zeros(side.model.n_params), {"uplink": 0.1})


def test_flower_epsilon_is_the_rdp_accountant_of_dp_accounting():
    """One unsampled Gaussian release per round: Flower's accountant equals dp-accounting's RDP of the same
    composed event (an independent call of the library Flower wraps)."""
    import dp_accounting

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(2.0), 3)
    assert flower_epsilon([[2.0, 4, 4, False]] * 3, 1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)
    assert flower_epsilon([], 1e-5) is None


def test_cli_writes_the_app_and_refuses_a_foreign_folder(tmp_path, capsys):
    config = _config(tmp_path, NBAFL, "nbafl")
    app = tmp_path / "app"
    assert main(["flower", "nbafl", str(config), "--out", str(app), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    project = tomllib.loads((app / "pyproject.toml").read_text())
    flwr_app = project["tool"]["flwr"]["app"]
    assert flwr_app["components"] == {"serverapp": "fedbound_app.server_app:app",
                                      "clientapp": "fedbound_app.client_app:app"}
    cfg = flwr_app["config"]
    assert {k: cfg[k] for k in out["plan"]} == out["plan"]
    assert (cfg["plan.T"], cfg["plan.K"], cfg["plan.N"], cfg["plan.C"]) == (3, 3, 4, 20.0)
    assert cfg["fedbound.config"] == (app / "fedbound.toml").read_text()
    for name in ("server_app.py", "client_app.py"):
        assert "app = " in (app / "fedbound_app" / name).read_text()
    assert main(["flower", "nbafl", str(config), "--out", str(app), "--json"]) == 0  # its own folder again
    capsys.readouterr()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["flower", "nbafl", str(config), "--out", str(foreign)]) == 2
    assert "non-empty folder fedbound flower did not write" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    assert main(["flower", "nbafl", str(config), "--out", str(foreign / "notes.txt")]) == 2
    assert "existing file" in capsys.readouterr().err
    for run in ([], ["--run"]):
        assert main(["flower", "nbafl", str(config), "--out", "", *run]) == 2
        assert "--out = '' is outside its valid range" in capsys.readouterr().err


def test_cli_without_flower_prints_the_install_hint(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "flwr" else real(name, *a))
    config = _config(tmp_path, NBAFL, "nbafl")
    assert main(["flower", "nbafl", str(config), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: fedbound flower needs Flower: install the flower extra: "
                   "pip install 'fedbound[flower]'")
    assert not (tmp_path / "a").exists()


def test_no_layer_imports_the_deploy_bridge():
    """DESIGN.md: deploy/ sits on top: accounting, bounds, scheduling, training, validation never
    import it."""
    import ast

    root = Path(__file__).resolve().parents[1]
    bad = []
    for layer in ("accounting", "bounds", "scheduling", "training", "validation"):
        for path in sorted((root / layer).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                bad += [f"{path.name} imports {n}" for n in names if n.startswith("fedbound.deploy")]
    assert not bad, bad


def test_dppfl_runs_on_flower_and_wpfl_is_refused(tmp_path):
    """DP-PFL (inner and outer DP-SGD stages, noise keyed per local step) gives fedbound train's numbers
    on Flower; WPFL, whose clients start from per-client models the server keeps, is refused."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    sets = ["dppfl.T=2", "train.probe_records=0"]
    train_from_config("dppfl", examples / "dppfl_ridge.toml", sets, out=tmp_path / "train")
    prep = prepare_run("dppfl", examples / "dppfl_ridge.toml", sets)
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "flower", reproducible_noise=True)
    assert {"plan.sigma-inner", "plan.sigma-outer"} <= set(cfg)
    serve(InProcessGrid(client_app(simulation=True), prep.num_clients, cfg), cfg, simulation=True)
    a, b = _rounds(tmp_path / "flower"), _rounds(tmp_path / "train")
    np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
    wpfl = prepare_run("wpfl", examples / "wpfl_ridge.toml")
    cfg = run_config(wpfl, build_run(wpfl).plan, tmp_path / "wpfl")
    with pytest.raises(ConfigError, match="wpfl keeps per-client state on the server"):
        serve(InProcessGrid(client_app(), wpfl.num_clients, cfg), cfg)


def test_fedbound_flower_wpfl_says_in_one_line_why_it_is_not_deployed(tmp_path, capsys):
    """The stated reason (issue 37, item 5): WPFL's bit errors over assigned subchannels, which Flower's
    transport does not have, and its per-client state; nothing is written."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    for run in ([], ["--run"]):
        assert main(["flower", "wpfl", str(examples / "wpfl_ridge.toml"), "--out", str(tmp_path / "w"),
                     *run]) == 2
        err = capsys.readouterr().err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "PAPER = 'wpfl' is outside fedbound flower's valid range" in lines[0]
        assert "subchannel" in lines[0] and "bit errors" in lines[0] and "fedbound train wpfl" in lines[0]
        assert not (tmp_path / "w").exists()
    assert main(["flower", "wpfl", str(examples / "wpfl_ridge.toml"), "--round-timeout", "0"]) == 2
    assert "--round-timeout" in capsys.readouterr().err  # a bad option is named first
