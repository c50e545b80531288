"""``fedbound flower ... --run --deployment local`` (issue 37, items 1-4): the plan on Flower's deployment
engine, a SuperLink and one SuperNode per client as separate processes with TLS, writes the run directory of
``fedbound train`` with the same ledger (eps per round per client: the ledger counts the plan's releases;
the losses differ, the deployed noise is fresh OS entropy), prints each round, and leaves no process behind.

"No process behind" is checked twice: the watchdog's record (every process it saw, its start time) and an
independent scan of every process's command line for the run's folder (every Flower process of the run
names its certificates, logs or app there).

The default run has one small deployment (3 clients, 2 rounds: ~1 min on 2 loaded cores; each ClientApp
call is a new process that imports torch).  The ``FEDBOUND_AUDIT_SUITE=full`` profile (``.ci/run``) adds:
Ctrl-C and SIGTERM in the middle of a run, then the same command resuming it; a SuperNode that dies (a
failed round) without TLS; the pieces started by hand as the guide's "Across machines" section says; and
the shipped example of the issue's "done when" (4 clients)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from fedbound.cli import main  # noqa: E402
from fedbound.deploy.processes import RECORD, alive  # noqa: E402
from fedbound.tests._processes import live_commands  # noqa: E402
from fedbound.tests._validation_configs import CONFIG  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="scans /proc (Linux)")

ROOT = Path(__file__).resolve().parents[1]
FULL = os.environ.get("FEDBOUND_AUDIT_SUITE") == "full"
full_only = pytest.mark.skipif(not FULL, reason="FEDBOUND_AUDIT_SUITE=full (.ci/run): several deployments")

LOGISTIC = (CONFIG.format(dataset="synthetic_logistic").replace("N = 4", "N = 3\nT = 2")
            .replace("synthetic_samples = 240", "synthetic_samples = 180")
            .replace("eval_clients = false", 'eval_clients = true\nnoise = "tight"'))
"""examples/nbafl_logistic.toml with 3 clients, 2 rounds, the tight noise, every client's row every round."""

EPS_COLUMNS = ["round", "client", "epsilon_spent", "epsilon_spent_paper", "participants", "epsilon_uplink",
               "epsilon_downlink", "sigma"]


def _cli(args: list[str], **kw) -> subprocess.Popen:
    """``fedbound ARGS`` as its own process (the deployment installs signal handlers: not in pytest's)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "fedbound.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=kw.get("cwd", ROOT))


def _running_under(folder: Path) -> list[str]:
    """Command lines of live processes that name ``folder`` (an independent scan of /proc)."""
    mark = str(folder.resolve())
    return [cmd[:200] for cmd in live_commands().values() if mark in cmd]


def _nothing_left(run_dir: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while (_running_under(run_dir) or alive(run_dir / "deployment")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running_under(run_dir) == []
    assert alive(run_dir / "deployment") == []
    seen = [json.loads(line)["cmd"] for line in (run_dir / "deployment" / RECORD).read_text().splitlines()]
    assert any("flower-superlink" in c for c in seen) and any("flower-supernode" in c for c in seen)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _ledger(run_dir: Path) -> pd.DataFrame:
    table = pd.read_csv(run_dir / "metrics.csv")
    return table[[c for c in EPS_COLUMNS if c in table]].sort_values(["round", "client"], na_position="first")


def _same_ledger(flower: Path, train: Path) -> None:
    a, b = _ledger(flower), _ledger(train)
    assert len(a) == len(b) and list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True)
    la, lb = pd.read_csv(flower / "metrics.csv"), pd.read_csv(train / "metrics.csv")
    assert (la["loss"] - lb["loss"]).abs().max() > 1e-7  # fresh noise: not the seed's


def _train(config: Path, out: Path, *sets: str) -> None:
    args = ["train", "nbafl", str(config), *[x for s in sets for x in ("--set", s)], "--out", str(out),
            "--no-progress", "--json"]
    assert main(args) == 0


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "flower-events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _wait_for_round(proc: subprocess.Popen, run_dir: Path, round_: int, seconds: float = 400.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if any(e.get("event") == "round" and e["round"] >= round_ for e in _events(run_dir)):
            return
        time.sleep(0.5)
    raise AssertionError(f"round {round_} never came (exit {proc.poll()})")


def test_a_local_deployment_writes_fedbound_trains_ledger_and_leaves_nothing_running(tmp_path, capsys):
    config = tmp_path / "logistic.toml"
    config.write_text(LOGISTIC)
    _train(config, tmp_path / "train")
    capsys.readouterr()
    run_dir = tmp_path / "deployed"
    proc = _cli(["flower", "nbafl", str(config), "--run", "--deployment", "local", "--out", str(run_dir),
                 "--round-timeout", "300", "--json"])
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["rounds_done"] == 2 and summary["noise_source"] == "os-entropy"
    assert summary["deployment"]["tls"] is True and summary["deployment"]["supernodes"] == 3
    _same_ledger(run_dir, tmp_path / "train")
    _nothing_left(run_dir)
    seen = [json.loads(x) for x in (run_dir / "deployment" / RECORD).read_text().splitlines()]
    link = next(e["cmd"] for e in seen if e["name"] == "superlink")
    nodes = [e["cmd"] for e in seen if (e["name"] or "").startswith("supernode-")]
    assert "--ssl-certfile" in link and "--insecure" not in link and len(nodes) == 3
    assert all("--root-certificates" in c and "--insecure" not in c for c in nodes)
    assert sorted(int(c.split("partition-id=")[1].split()[0]) for c in nodes) == [0, 1, 2]
    assert len({e["pid"] for e in seen}) >= 1 + 3 + 1  # SuperLink, SuperNodes, flwr run: separate processes
    rounds = [e for e in _events(run_dir) if e["event"] == "round"]
    assert [e["round"] for e in rounds] == [1, 2] and all(e["seconds"] > 0 for e in rounds)
    assert rounds[-1]["epsilon"] == pytest.approx(summary["epsilon_spent"]) and rounds[-1]["budget"] == 50.0


def test_progress_lines_name_the_round_the_binding_eps_and_the_time(tmp_path):
    """What a deployment prints per round (the ServerApp's events file, as the deployment reads it)."""
    from fedbound.deploy.flower_events import read_events, round_line, write_event

    text = "loss=0.7 eps=20/50 (tight, binding) noise: OS entropy"
    write_event(tmp_path, {"event": "round", "round": 2, "rounds": 5, "seconds": 12.25,
                           "epsilon": float("nan"), "text": text})
    (tmp_path / "flower-events.jsonl").open("a").write('{"event": "done"')  # a line still being written
    events, offset = read_events(tmp_path)
    assert len(events) == 1 and events[0]["epsilon"] is None  # strict JSON: no NaN
    assert round_line(events[0]) == ("round 2/5: loss=0.7 eps=20/50 (tight, binding) noise: OS entropy  "
                                     "[12.2 s/round]")
    assert read_events(tmp_path, offset) == ([], offset)


@full_only
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_every_process_and_the_same_command_resumes(tmp_path, capsys, how):
    config = tmp_path / "logistic.toml"
    config.write_text(LOGISTIC.replace("T = 2", "T = 3"))
    _train(config, tmp_path / "train")
    capsys.readouterr()
    run_dir = tmp_path / "deployed"
    args = ["flower", "nbafl", str(config), "--run", "--deployment", "local", "--out", str(run_dir),
            "--round-timeout", "300"]
    proc = _cli(args)
    try:
        _wait_for_round(proc, run_dir, 1)
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (130 if how == "SIGINT" else 143), err[-2000:]
    assert "every process of the deployment was stopped" in err and "Traceback" not in err
    _nothing_left(run_dir)
    proc = _cli([*args, "--json"])
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["rounds_done"] == 3 and summary["resumed_from_round"] >= 1
    _same_ledger(run_dir, tmp_path / "train")
    _nothing_left(run_dir)


@full_only
def test_a_supernode_that_dies_fails_the_run_in_one_line_and_stops_the_rest(tmp_path):
    config = tmp_path / "logistic.toml"
    config.write_text(LOGISTIC.replace("T = 2", "T = 4"))
    run_dir = tmp_path / "deployed"
    proc = _cli(["flower", "nbafl", str(config), "--run", "--deployment", "local", "--insecure", "--out",
                 str(run_dir), "--round-timeout", "300"])
    try:
        _wait_for_round(proc, run_dir, 1)
        seen = [json.loads(x) for x in (run_dir / "deployment" / RECORD).read_text().splitlines()]
        os.kill(next(e["pid"] for e in seen if e["name"] == "supernode-1"), signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err[-2000:]
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1 and "supernode-1 exited" in lines[0] and "resume" in lines[0]
    assert "INSECURE" in err  # the deployment said it runs without TLS
    _nothing_left(run_dir)


@full_only
def test_across_machines_the_documented_commands_run_the_plan(tmp_path, capsys):
    """The guide's "Across machines" section, on one machine with separate processes and explicit ports:
    certificates for the SuperLink's address, the SuperLink, one SuperNode per client, then flwr run."""
    from fedbound.deploy.flower_deployment import flower_bin, flower_env, free_ports
    from fedbound.deploy.processes import Supervisor

    config = tmp_path / "logistic.toml"
    config.write_text(LOGISTIC)
    app, run_dir = tmp_path / "app", tmp_path / "run"
    assert main(["flower", "nbafl", str(config), "--out", str(app), "--json"]) == 0
    _train(config, tmp_path / "train")
    capsys.readouterr()
    certs = tmp_path / "certs"
    link_port, *node_ports = free_ports(4)
    env = flower_env(tmp_path / "flwr-home", tmp_path / "client-store")
    (tmp_path / "flwr-home").mkdir()
    (tmp_path / "flwr-home" / "config.toml").write_text(  # the guide's ~/.flwr/config.toml
        f'[superlink]\ndefault = "mylink"\n\n[superlink.mylink]\naddress = "127.0.0.1:{link_port}"\n'
        f'root-certificates = "{certs / "ca.crt"}"\n')
    with Supervisor(tmp_path / "processes") as sup:
        sup.start("tls", [sys.executable, "-m", "fedbound.deploy.tls", str(certs), "127.0.0.1"], env,
                  tmp_path / "tls.log")
        deadline = time.monotonic() + 60
        while "tls" not in sup.exited() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sup.exited().get("tls") == 0
        sup.start("superlink", [flower_bin("flower-superlink"), "--ssl-ca-certfile", certs / "ca.crt",
                                "--ssl-certfile", certs / "server.pem", "--ssl-keyfile", certs / "server.key",
                                "--host", "127.0.0.1", "--port", str(link_port),
                                "--disable-runtime-dependency-installation"], env, tmp_path / "link.log")
        deadline = time.monotonic() + 120  # the guide: start the SuperLink, see it listen, then the rest
        while not _listening(link_port) and time.monotonic() < deadline:
            assert "superlink" not in sup.exited(), (tmp_path / "link.log").read_text()[-2000:]
            time.sleep(0.3)
        for i, port in enumerate(node_ports):
            sup.start(f"node{i}", [flower_bin("flower-supernode"), "--root-certificates", certs / "ca.crt",
                                   "--superlink", f"127.0.0.1:{link_port}", "--port", str(port),
                                   "--node-config", f"partition-id={i} num-partitions=3"], env,
                      tmp_path / f"node{i}.log")
        sup.start("run", [flower_bin("flwr"), "run", str(app), "mylink", "--stream", "--run-config",
                          f'fedbound.run-dir="{run_dir}"'], env, tmp_path / "run.log")
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and not any(e["event"] in ("done", "error")
                                                      for e in _events(run_dir)):
            assert set(sup.exited()) <= {"tls", "run"}, sup.exited()
            if "run" in sup.exited():  # flwr run --stream returns when the run has ended
                deadline = min(deadline, time.monotonic() + 15)
            time.sleep(1.0)
        outcome = [e for e in _events(run_dir) if e["event"] in ("done", "error")]
    assert outcome and outcome[-1]["event"] == "done", outcome
    assert "fedbound round 2/2" in (tmp_path / "run.log").read_text()  # progress through flwr run --stream
    _same_ledger(run_dir, tmp_path / "train")
    assert alive(tmp_path / "processes") == []


@full_only
def test_done_when_the_shipped_logistic_example_deploys_with_train_s_ledger(tmp_path, capsys):
    """Issue 37's "done when": ``fedbound flower nbafl examples/nbafl_logistic.toml --set T=2 --run
    --deployment local`` on separate processes, none left, its ledger ``fedbound train``'s."""
    example = ROOT / "examples" / "nbafl_logistic.toml"
    _train(example, tmp_path / "train", "T=2", "train.eval_clients=true")
    capsys.readouterr()
    run_dir = tmp_path / "deployed"
    proc = _cli(["flower", "nbafl", str(example), "--set", "T=2", "--set", "train.eval_clients=true", "--run",
                 "--deployment", "local", "--out", str(run_dir)])
    out, err = proc.communicate(timeout=1200)
    assert proc.returncode == 0, err[-3000:]
    assert "round 2/2" in err and "s/round" in err
    _same_ledger(run_dir, tmp_path / "train")
    _nothing_left(run_dir)


def test_a_local_deployment_too_big_for_the_memory_is_refused_before_anything_starts():
    """2 SuperNode-side processes and a ClientApp per client: 50 clients need more than 17 GiB."""
    from fedbound.deploy.flower_deployment import MIB_BASE, MIB_PER_CLIENT, check_memory
    from fedbound.errors import ConfigError

    check_memory(4, available=MIB_BASE + 4 * MIB_PER_CLIENT)
    with pytest.raises(ConfigError, match=r"N = 50 clients is outside this machine's valid range.*"
                                          r"Across machines"):
        check_memory(50, available=17 * 1024)

