"""Deployed randomness of ``fedbound flower`` (issue "Private in practice"): every noise from OS entropy on
the party that adds it, nothing of it recoverable from what another party holds, reproducible noise only in
simulation, a repeated round releasing nothing new, and no deployed noise of 0.

Each recovery test runs the attack that worked against the seeded scheme (regenerate the draw from the run
seed in the config) twice: against the noise-reproducible run (the seeded scheme, still available in
simulation) it recovers the noise to float rounding, so the test can fail; against the deployed run it
leaves the full noise (a residual of sqrt(2) sigma: the guess is independent noise)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from fedbound.cli import main  # noqa: E402
from fedbound.deploy.flower_client import STORE_ENV, client_app, client_update  # noqa: E402
from fedbound.deploy.flower_local import InProcessGrid  # noqa: E402
from fedbound.deploy.flower_server import RoundRefused, serve  # noqa: E402
from fedbound.deploy.flower_session import REPRODUCIBLE_NOTE, client_side, run_config  # noqa: E402
from fedbound.errors import ConfigError, ParameterError  # noqa: E402
from fedbound.tests.test_deploy_flower import NBAFL, die_before_checkpoint  # noqa: E402
from fedbound.training.noise import Streams  # noqa: E402
from fedbound.validation.recipes.runner import build_run, prepare_run  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def _client_store(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "default-client-store"))  # never ~/.fedbound


class RecordingGrid(InProcessGrid):
    """The in-process Grid, recording every train request and reply: ``asked[(round, client)]`` the start
    model, ``uploads[(round, client)]`` the upload (the last, for a repeated round)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked: dict[tuple[int, int], np.ndarray] = {}
        self.uploads: dict[tuple[int, int], np.ndarray] = {}
        self.rounds: dict[int, list[int]] = {}

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        round_ = None
        for msg in messages:
            conf = msg.content.get("config")
            if conf is not None:
                round_ = int(conf["round"])
                self.asked[(round_, int(conf["client"]))] = msg.content["arrays"].to_numpy_ndarrays()[0]
                self.rounds.setdefault(round_, []).append(int(conf["client"]))
        replies = list(super().send_and_receive(messages, timeout=timeout))
        for reply in replies:
            if round_ is not None and reply.has_content():
                client = int(reply.content["metrics"]["client"])
                self.uploads[(round_, client)] = reply.content["arrays"].to_numpy_ndarrays()[0]
        return replies


def _config(tmp_path: Path, text: str = NBAFL, name: str = "nbafl") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _serve(paper: str, config: Path, run_dir: Path, *, overrides=(), reproducible=False, lose=None,
           drop=None, mechanism=None):
    """The plan served in this process as a simulation; returns (run, grid, cfg)."""
    prep = prepare_run(paper, config, list(overrides), paper=mechanism)
    cfg = run_config(prep, build_run(prep).plan, run_dir, reproducible_noise=reproducible)
    clients = client_app(store=run_dir.with_name(run_dir.name + "-store"), simulation=True)
    grid = RecordingGrid(clients, prep.num_clients, cfg, lose=lose, drop=drop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = serve(grid, cfg, simulation=True)
    return run, grid, cfg


def _rounds(run_dir: Path):
    import pandas as pd

    table = pd.read_csv(run_dir / "metrics.csv")
    return table[table.client.isna()].reset_index(drop=True)


def _residual(noise: np.ndarray, guess: np.ndarray, sigma: float) -> float:
    """RMS of what the attacker's guess leaves of the noise, in units of sigma."""
    return float(np.sqrt(np.mean((noise.astype(np.float64) - guess.astype(np.float64)) ** 2)) / sigma)


# (a) two runs of one app and seed add different noise ---------------------------------------------------

def test_two_runs_of_one_app_and_seed_add_different_uplink_noise(tmp_path):
    """Same config, same seed, two run directories (a completed run's own directory would only resume it):
    every client asked in round 1 of both runs starts from the same model (the seed's), uploads noise of the
    plan's std, and not the same noise."""
    config = _config(tmp_path)
    _, one, cfg = _serve("nbafl", config, tmp_path / "one")
    _, two, _ = _serve("nbafl", config, tmp_path / "two")
    side = client_side(cfg)
    sigma = float(cfg["plan.sigma-uplink"])
    both = sorted(set(one.rounds[0]) & set(two.rounds[0]))  # K = 3 of 4: at least 2 in common
    assert len(both) >= 2
    for client in both:
        np.testing.assert_array_equal(one.asked[(0, client)], two.asked[(0, client)])
        clean, _ = client_update(side, 0, client, torch.as_tensor(one.asked[(0, client)]), {"uplink": 0.0})
        a, b = (g.uploads[(0, client)] - clean.numpy() for g in (one, two))
        d = a.size
        for noise in (a, b):
            assert np.std(noise) == pytest.approx(sigma, rel=6 / np.sqrt(2 * d))
        assert _residual(a, b, sigma) == pytest.approx(np.sqrt(2), rel=0.2)  # independent draws


# (b) what the server holds does not give a client's noise; what a client holds does not give the server's --

@pytest.mark.parametrize("reproducible", [True, False], ids=["seeded-scheme", "deployed"])
def test_the_server_cannot_recover_a_clients_uplink_noise(tmp_path, reproducible):
    """The server holds the run config (seed included), the request (start model, sigma) and the reply.
    The attack: regenerate the client's draw from the seed (``Streams(seed)``, the stream ``("uplink",
    round)`` of the client) and subtract it.  Seeded scheme: residual < 1e-6 sigma (recovered); deployed:
    the whole noise remains (residual sqrt(2) sigma), and two answers to identical requests from two fresh
    client processes differ: the noise is no function of anything the server holds."""
    config = _config(tmp_path)
    prep = prepare_run("nbafl", config)
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "run", reproducible_noise=reproducible)
    side = client_side(cfg)
    sigma = float(cfg["plan.sigma-uplink"]) * 40.0  # well above float32 rounding of the model
    start = torch.zeros(side.model.n_params)
    streams = Streams(side.options.seed) if reproducible else None
    upload, _ = client_update(side, 1, 2, start, {"uplink": sigma}, streams=streams)
    clean, _ = client_update(side, 1, 2, start, {"uplink": 0.0})
    noise = (upload - clean).numpy()
    seeded = Streams(int(cfg["plan.seed"])).normal(("uplink", 1), [2], (side.model.n_params,))
    guess = sigma * seeded[0].numpy()
    if reproducible:
        assert _residual(noise, guess, sigma) < 1e-6
        return
    assert _residual(noise, guess, sigma) == pytest.approx(np.sqrt(2), rel=0.25)  # 650 draws: 9 s.e.
    again, _ = client_update(side, 1, 2, start, {"uplink": sigma})
    assert _residual(noise, (again - clean).numpy(), sigma) == pytest.approx(np.sqrt(2), rel=0.25)


@pytest.mark.parametrize("reproducible", [True, False], ids=["seeded-scheme", "deployed"])
def test_a_client_cannot_recover_the_servers_noise(tmp_path, monkeypatch, reproducible):
    """NbAFL with all 4 clients and T = 5 > L N: the server adds sigma_D (the tight counterpart of Theorem 1,
    eq. (10)).  A
    client holds the run config (seed included) and the broadcast models; the attack regenerates the server
    stream ``("server", round)`` from the seed.  The noise the server added is recorded at its source."""
    from fedbound.training.nbafl import NbAFL

    added: list[tuple[int, np.ndarray]] = []
    update = NbAFL.server_update

    def recorded(self, ctx, aggregate):
        out = update(self, ctx, aggregate)
        added.append((ctx.round, (out - aggregate).numpy()))
        return out

    monkeypatch.setattr(NbAFL, "server_update", recorded)
    _, _, cfg = _serve("nbafl", _config(tmp_path), tmp_path / "run", overrides=["nbafl.K=4", "nbafl.T=5"],
                       reproducible=reproducible)
    sigma = float(cfg["plan.sigma-server"])
    assert sigma > 0 and len(added) == 5
    seed, d = int(cfg["plan.seed"]), added[0][1].size
    for round_, noise in added:
        guess = sigma * Streams(seed).normal(("server", round_), [-1], (d,))[0].numpy()
        residual = _residual(noise, guess, sigma)
        assert residual < 1e-5 if reproducible else residual == pytest.approx(np.sqrt(2), rel=0.25)


@pytest.mark.parametrize("reproducible", [True, False], ids=["seeded-scheme", "deployed"])
def test_a_client_cannot_recover_dp_fedavgs_central_noise(tmp_path, monkeypatch, reproducible):
    """DP-FedAvg's noise, added by Flower's own wrapper: its draws are recorded where the wrapper takes them
    (fedbound's source, never numpy's global RNG, which is seeded here to show it plays no part); the
    attack regenerates the engine's stream ``("server", round)`` from the seed."""
    import fedbound.deploy.flower_dpfedavg as fd
    from fedbound.deploy.dpfedavg import MECHANISM

    draws: list[np.ndarray] = []
    make = fd.flower_strategy

    def recording(sigma, clip, k, draw=None):
        strategy = make(sigma, clip, k, draw)
        inner = strategy.draw
        strategy.draw = lambda shape, dtype: draws.append(inner(shape, dtype)) or draws[-1]
        return strategy

    def no_global_rng(*args, **kwargs):
        raise AssertionError("numpy's global RNG was used for noise")

    monkeypatch.setattr(fd, "flower_strategy", recording)
    monkeypatch.setattr(np.random, "normal", no_global_rng)
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    _, grid, cfg = _serve("dpfedavg", EXAMPLES / "dpfedavg_logistic.toml", tmp_path / "run",
                          reproducible=reproducible, mechanism=MECHANISM)
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    assert len(draws) == int(cfg["plan.T"])
    seed, d = int(cfg["plan.seed"]), draws[0].size
    guesses = [Streams(seed).normal(("server", r), [-1], (d,))[0].numpy() for r in range(len(draws))]
    residual = _residual(np.concatenate(draws), np.concatenate(guesses), 1.0)  # 4 rounds x 10 parameters
    assert residual < 1e-6 if reproducible else residual > 0.5  # sqrt(2) expected; < 0.5: P < 1e-12
    if not reproducible:  # participants: from the server's secret, not from the seed the clients hold
        from fedbound.training.participation import uniform_subset

        seeded = [list(uniform_subset(Streams(seed).numpy("participation", r), 6, 3)) for r in grid.rounds]
        asked = [sorted(grid.rounds[r]) for r in sorted(grid.rounds)]
        assert asked != seeded  # all 4 rounds equal by chance: (1/20)^4


def test_participants_come_from_the_servers_secret(tmp_path):
    """The secret in the run directory (owner-only) keys the K-of-N sample: recomputed from it, the
    participants of every round; a repeated run directory keeps it."""
    from fedbound.deploy.dpfedavg import MECHANISM
    from fedbound.deploy.replay import SECRET_FILE
    from fedbound.training.participation import uniform_subset
    from fedbound.training.secure_noise import SecureStreams

    _, grid, cfg = _serve("dpfedavg", EXAMPLES / "dpfedavg_logistic.toml", tmp_path / "run",
                          mechanism=MECHANISM)
    path = tmp_path / "run" / SECRET_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    secret = bytes.fromhex(path.read_text().split()[1])
    streams = SecureStreams(int(cfg["plan.seed"]), secret=secret)
    for round_, clients in grid.rounds.items():
        assert sorted(clients) == list(uniform_subset(streams.numpy("participation", round_), 6, 3))


# (c) reproducible noise: in simulation only ---------------------------------------------------------

class DeployedGrid(InProcessGrid):
    """The in-process Grid standing in for a deployment's (not a simulation Grid)."""

    fedbound_simulation = False


def test_reproducible_noise_is_refused_outside_the_simulation_engine(tmp_path, capsys):
    config = _config(tmp_path)
    prep = prepare_run("nbafl", config)
    plan = build_run(prep).plan
    cfg = run_config(prep, plan, tmp_path / "run", reproducible_noise=True)
    refused = "fedbound.reproducible-noise = true is outside its valid range for this ServerApp"
    with pytest.raises(ConfigError, match=refused):  # a deployment's Grid, even if the caller says simulation
        serve(DeployedGrid(client_app(simulation=True), 4, cfg), cfg, simulation=True)
    with pytest.raises(ConfigError, match=refused):  # the ServerApp of a written app
        serve(InProcessGrid(client_app(simulation=True), 4, cfg), cfg)
    with pytest.raises(RoundRefused, match="outside its valid range for this ClientApp"):  # a written client
        serve(InProcessGrid(client_app(), 4, cfg), cfg, simulation=True)
    from fedbound.deploy.flower_app import write_app

    with pytest.raises(ConfigError, match="--reproducible-noise is outside its valid range without --run"):
        write_app(cfg, tmp_path / "app")
    assert main(["flower", "nbafl", str(config), "--reproducible-noise", "--out", str(tmp_path / "app")]) == 2
    assert "--reproducible-noise is outside its valid range without --run" in capsys.readouterr().err
    assert not (tmp_path / "app").exists()
    written = run_config(prep, plan, tmp_path / "run")
    assert written["fedbound.reproducible-noise"] is False  # what every written app carries


def _run_in_process(monkeypatch):
    """``fedbound flower --run`` with Flower's Ray engine replaced by the in-process Grid (the CLI's and
    run_app's own code around it)."""
    import fedbound.deploy.flower_app as fa

    def run_app(cfg, supernodes=None, cpus_per_client=1.0, verbose=False, progress=False):
        store = Path(cfg["fedbound.run-dir"]) / fa.CLIENT_STORE
        grid = InProcessGrid(client_app(cfg, store=store, simulation=True), int(cfg["plan.N"]), cfg)
        return serve(grid, cfg, simulation=True, progress=progress).summary

    monkeypatch.setattr(fa, "run_app", run_app)


@pytest.mark.parametrize("reproducible", [True, False], ids=["reproducible", "deployed"])
def test_the_run_says_where_its_noise_came_from_and_which_eps_binds(tmp_path, monkeypatch, capsys,
                                                                      reproducible):
    """Summary, progress line and the printed report: the binding eps against the budget, the paper's claim
    beside it, and (with --reproducible-noise) that the noise is reproducible from the seed."""
    _run_in_process(monkeypatch)
    config = _config(tmp_path)
    extra = ["--reproducible-noise"] if reproducible else []
    assert main(["flower", "nbafl", str(config), "--run", "--out", str(tmp_path / "run"), *extra]) == 0
    out, err = capsys.readouterr()
    assert "binding: tight accountant" in out and "the paper's claim" in out
    assert "eps=" in err and "/60 (tight, binding)" in err and "paper's claim=" in err  # the progress bar
    assert "eps_paper=" not in err  # the engine's unlabelled line never shows
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["epsilon_binding"] == summary["epsilon_spent"]
    assert summary["epsilon_binding_detail"] == {"value": summary["epsilon_spent"], "budget": 60.0,
                                                 "delta": 0.01, "accountant": "tight accountant",
                                                 "beside": summary["epsilon_spent_paper"],
                                                 "beside_is": "the paper's claim (its own accountant)"}
    if reproducible:
        assert REPRODUCIBLE_NOTE in " ".join(out.split()) and REPRODUCIBLE_NOTE in summary["warnings"]
        assert "REPRODUCIBLE from the seed" in err
    else:
        assert summary["noise_source"] == "os-entropy" and REPRODUCIBLE_NOTE not in summary["warnings"]
        assert "noise: OS entropy" in err


def test_the_python_api_is_the_cli(tmp_path, monkeypatch, capsys):
    """``fedbound.deploy.flower_app.flower`` is what the CLI runs: same plan written, same refusals."""
    from fedbound.deploy.flower_app import flower

    config = _config(tmp_path)
    assert main(["flower", "nbafl", str(config), "--out", str(tmp_path / "cli"), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = flower("nbafl", config, out=str(tmp_path / "api"))
    assert api["plan"] == cli["plan"] and api["noise_source"] == cli["noise_source"] == "os-entropy"
    with pytest.raises(ConfigError, match="--reproducible-noise is outside its valid range without --run"):
        flower("nbafl", config, out=str(tmp_path / "x"), reproducible_noise=True)
    _run_in_process(monkeypatch)
    summary = flower("nbafl", config, out=str(tmp_path / "run"), run=True, reproducible_noise=True)
    assert summary["rounds_done"] == 3 and summary["warnings"][0] == REPRODUCIBLE_NOTE
    assert summary["app_plan"] == cli["plan"]


# (d) a repeated round releases nothing new --------------------------------------------------------------

def test_a_round_repeated_after_a_crash_resends_the_kept_uploads(tmp_path, monkeypatch):
    """The server dies after the ledger counted round 2 but before its checkpoint: round 2's uploads were
    released to it.  The rerun resumes at round 2, asks the same participants (its secret's sample) with
    the same model, and every one of them re-sends the bytes it kept: no fresh noise, round 2 counted once."""
    config = _config(tmp_path)
    revive = die_before_checkpoint(monkeypatch, 2)
    prep = prepare_run("nbafl", config)
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "run")
    store = tmp_path / "store"
    first = RecordingGrid(client_app(store=store, simulation=True), 4, cfg)
    with pytest.raises(KeyboardInterrupt):
        serve(first, cfg, simulation=True)
    revive()
    again = RecordingGrid(client_app(store=store, simulation=True), 4, cfg)  # restarted SuperNodes too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = serve(again, cfg, simulation=True)
    assert run.summary["resumed_from_round"] == 1
    assert sorted(again.rounds) == [1, 2] and sorted(again.rounds[1]) == sorted(first.rounds[1])
    for client in first.rounds[1]:
        np.testing.assert_array_equal(again.asked[(1, client)], first.asked[(1, client)])
        assert again.uploads[(1, client)].tobytes() == first.uploads[(1, client)].tobytes()
    rows = _rounds(tmp_path / "run")
    assert rows["round"].tolist() == [1, 2, 3]
    assert rows.set_index("round").loc[2, "replayed_uploads"] == 3


def test_a_lost_reply_is_resent_not_recomputed(tmp_path):
    """Client 2's round-1 reply is lost after it computed (and kept) it: the round is refused; the rerun's
    round 1 gets every participant's kept upload, the lost one included."""
    config = _config(tmp_path)
    prep = prepare_run("nbafl", config, ["nbafl.K=4"])
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "run")
    store = tmp_path / "store"
    first = RecordingGrid(client_app(store=store, simulation=True), 4, cfg,
                          lose=lambda round_, client: (round_, client) == (0, 2))
    with pytest.raises(RoundRefused, match=r"round 1: 3 of 4 planned clients replied \(missing \[2\]\)"):
        serve(first, cfg, simulation=True)
    again = RecordingGrid(client_app(store=store, simulation=True), 4, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serve(again, cfg, simulation=True)
    rows = _rounds(tmp_path / "run").set_index("round")
    assert rows.loc[1, "replayed_uploads"] == 4
    for client in (0, 1, 3):
        assert again.uploads[(0, client)].tobytes() == first.uploads[(0, client)].tobytes()


def test_the_client_store_refuses_another_request_for_an_answered_round(tmp_path):
    """The ClientApp (restarted: a new object on the same store) answers the same request with the same
    bytes, refuses another model for an answered round, and a round older than its newest (whose full
    upload it no longer keeps) too."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    config = _config(tmp_path)
    prep = prepare_run("nbafl", config)
    cfg = run_config(prep, build_run(prep).plan, tmp_path / "run")
    d = client_side(cfg).model.n_params
    sigma = float(cfg["plan.sigma-uplink"])

    def ask(round_: int, start: np.ndarray):
        grid = InProcessGrid(client_app(store=tmp_path / "store"), 4, cfg)
        conf = ConfigRecord({"round": round_, "client": 1, "private": True, "sigma.uplink": sigma})
        msg = Message(RecordDict({"arrays": ArrayRecord([start]), "config": conf}), dst_node_id=1001,
                      message_type=MessageType.TRAIN)
        return grid.send_and_receive([msg])[0]

    zero, one = np.zeros(d, np.float32), np.full(d, 0.01, np.float32)
    a, b = ask(0, zero), ask(0, zero)
    assert a.content["arrays"].to_numpy_ndarrays()[0].tobytes() == b.content["arrays"].to_numpy_ndarrays()[
        0].tobytes()
    assert (a.content["metrics"]["replayed"], b.content["metrics"]["replayed"]) == (0, 1)
    assert "client 1 already answered round 1 of this run for another request" in ask(0, one).error.reason
    assert ask(1, one).has_content()  # the next round
    assert "already answered round 1" in ask(0, zero).error.reason  # its upload is gone, the refusal stays
    kept = sorted(p.name for p in (tmp_path / "store").rglob("round-*"))
    assert kept == ["round-000000.answered", "round-000001.npz"]


# no deployed noise of 0 ------------------------------------------------------------------------------

def test_a_deployed_noise_of_zero_is_refused_on_every_path(tmp_path, capsys):
    """C = 5e-324 makes DP-FedAvg's sigma underflow to 0: refused in one line naming plan.sigma-server and
    C, when the app is written, before --run starts Flower, in the API, by a ServerApp whose app was edited
    to it, and by a client sent a subnormal std."""
    from fedbound.deploy.dpfedavg import MECHANISM

    config = EXAMPLES / "dpfedavg_logistic.toml"
    line = (r"plan.sigma-server = 0.0 is outside its valid range \[1.175e-38, inf\) \(the smallest normal "
            r"float32\) at eps = 20; .* \[dpfedavg\] C = 4.94066e-324: raise C")
    for extra in ([], ["--run"]):
        assert main(["flower", "dpfedavg", str(config), "--set", "C=5e-324", "--out", str(tmp_path / "x"),
                     *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and re.search(line, err)
        assert not (tmp_path / "x").exists()
    prep = prepare_run("dpfedavg", config, ["C=5e-324"], paper=MECHANISM)
    with pytest.raises(ParameterError, match=line):
        run_config(prep, build_run(prep).plan, tmp_path / "run")
    good = prepare_run("dpfedavg", config, paper=MECHANISM)
    cfg = run_config(good, build_run(good).plan, tmp_path / "run")
    cfg["fedbound.config"] = cfg["fedbound.config"].replace("C = 0.5", "C = 5e-324")
    cfg["plan.C"], cfg["plan.sigma-server"] = 5e-324, 0.0
    with pytest.raises(ParameterError, match=line):
        serve(InProcessGrid(client_app(), 6, cfg), cfg)
    side = client_side(run_config(prepare_run("nbafl", _config(tmp_path)), None, tmp_path / "r"))
    with pytest.raises(ConfigError, match=r"sigma.uplink = 1e-40 is outside its valid range: 0 or "
                                          r"\[1.175e-38, inf\)"):
        client_update(side, 0, 0, torch.zeros(side.model.n_params), {"uplink": 1e-40})


def test_progress_line_names_the_binding_eps_and_a_paper_reproduction():
    """Tight budget: the binding eps against the budget, the paper's claim beside it.  A budget binding on
    the paper's accountant (paper reproduction): the exact eps beside it and, once it exceeds the budget,
    "not (ε, δ)-DP at the stated budget"."""
    from types import SimpleNamespace

    from fedbound.deploy.flower_server import progress_text

    row = {"loss": 0.5, "epsilon_spent": 131.15, "epsilon_spent_paper": 50.0}
    paper = progress_text(row, SimpleNamespace(binding_accountant="paper", eps=50.0), False)
    assert paper == ("loss=0.5000 eps=50/50 (paper, binding) exact=131.2 [not (ε, δ)-DP at the stated "
                     "budget: exact ε = 131.2] noise: OS entropy")
    tight = progress_text({**row, "epsilon_spent": 49.0},
                          SimpleNamespace(binding_accountant="tight", eps=50.0), True)
    assert tight == ("loss=0.5000 eps=49/50 (tight, binding) paper's claim=50 noise: REPRODUCIBLE from the "
                     "seed (simulation only)")
