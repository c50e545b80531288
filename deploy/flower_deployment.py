"""``fedbound flower PAPER CONFIG --run --deployment local``: the plan on Flower's deployment engine, a
SuperLink and one SuperNode per client, each a separate process on this machine, secured with TLS.

:func:`run_local` writes the app (:func:`fedbound.deploy.flower_app.write_app`) into
``RUN_DIR/deployment/app``, makes the deployment's certificates (:mod:`fedbound.deploy.tls`: a CA of its
own, the SuperLink's certificate for 127.0.0.1, ::1 and localhost), picks free ports, and starts, through
one watchdog (:class:`fedbound.deploy.processes.Supervisor`):

1. ``flower-superlink --ssl-ca-certfile ca.crt --ssl-certfile server.pem --ssl-keyfile server.key --host
   127.0.0.1 --port P --disable-runtime-dependency-installation`` (Flower 1.42: Fleet, Control and
   Runtime APIs over one HTTPS port; the ServerApp runs in a process the SuperLink starts);
2. N times ``flower-supernode --root-certificates ca.crt --superlink 127.0.0.1:P --port Q_i --node-config
   "partition-id=i num-partitions=N"`` (each runs its ClientApps in processes of its own; its Runtime API
   on 127.0.0.1:Q_i, with the same certificate);
3. ``flwr run APP fedbound-local --stream``, the connection ``fedbound-local`` written into the
   deployment's own Flower configuration (``FLWR_HOME=RUN_DIR/deployment/flwr-home``: address, CA).

The ServerApp writes the run directory of ``fedbound flower --run`` (its ledger, metrics, checkpoint, the
server's secret; the clients keep their uploads in ``RUN_DIR/client-store``, through
``$FEDBOUND_FLOWER_STORE``) and one event per round (:mod:`fedbound.deploy.flower_events`), which this
process prints: the round, the binding eps against the budget and the round's time.  When the ServerApp
is done, fails (a refused round, the budget), or a process of the deployment ends before it (a
SuperNode, the SuperLink), or on Ctrl-C or SIGTERM, every process started is stopped, children included
(the watchdog also does it if this process is killed outright); the error is raised here, the run
directory keeps the rounds done, and the same command resumes.  Deployed noise comes from OS entropy on
the party that adds it; reproducible noise is refused here (it is for the simulation engine only).

``insecure=True`` (``--insecure``): no TLS anywhere (Flower's ``--insecure``), for debugging only.
Flower downloads nothing: the SuperLink runs without runtime dependency installation, the apps in this
Python environment (``PATH`` starts with its ``bin`` folder), telemetry and update checks off.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError, PrivacyBudgetExceeded

__all__ = ["run_local", "DEPLOYMENT_DIR", "CONNECTION", "free_ports", "flower_bin", "flower_env",
           "superlink_argv", "supernode_argv", "write_connection", "check_memory", "DEPLOYMENTS"]

DEPLOYMENTS = ("local",)
"""The values of ``--deployment``."""

DEPLOYMENT_DIR = "deployment"
"""Inside the run directory: the app, certificates, logs, Flower's home and the watchdog's record."""

CONNECTION = "fedbound-local"
"""The SuperLink connection's name in the deployment's Flower configuration."""

_MARKER = ".fedbound-deployment"
MIB_PER_CLIENT = 600
"""Memory one client of a local deployment takes at its peak: its SuperNode and SuperExec (~100 MiB each)
and, during a round, its ClientApp process (~320 MiB: torch and fedbound imported, the data built);
measured with 3 clients of the logistic example (the SuperLink, its SuperExec and the ServerApp: ~1 GiB)."""
MIB_BASE = 1024
STARTUP_SECONDS = 120.0
"""How long the SuperLink may take to listen, and the ServerApp to report its first event after the
SuperNodes connected (on top of the round timeout)."""


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports free on ``host`` now (the kernel's ephemeral ports, held open together
    while they are picked, then released for the processes that bind them)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def flower_bin(name: str) -> str:
    """The path of Flower's command ``name`` in this Python environment (else on PATH)."""
    from fedbound.deploy import FLOWER_HINT

    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise ConfigError(f"Flower's command {name!r} is not installed here: {FLOWER_HINT}")
    return found


def flower_env(flwr_home: Path, store: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every Flower process of the deployment (module docstring)."""
    env = dict(os.environ if base is None else base)
    env.update({"PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
                "FLWR_HOME": str(flwr_home), "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
                "FEDBOUND_FLOWER_STORE": str(store), "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
                "MKL_NUM_THREADS": env.get("MKL_NUM_THREADS", "1")})
    return env


def _tls_args(certs: Any) -> list[str]:
    return [] if certs is None else ["--ssl-ca-certfile", str(certs.ca), "--ssl-certfile", str(certs.cert),
                                     "--ssl-keyfile", str(certs.key)]


def superlink_argv(port: int, certs: Any, host: str = "127.0.0.1") -> list[str]:
    """The SuperLink's command line (``certs``: :class:`fedbound.deploy.tls.Certificates`, None:
    ``--insecure``)."""
    return [flower_bin("flower-superlink"), *(["--insecure"] if certs is None else _tls_args(certs)),
            "--host", host, "--port", str(port), "--disable-runtime-dependency-installation"]


def supernode_argv(superlink: str, partition: int, partitions: int, port: int, certs: Any) -> list[str]:
    """SuperNode ``partition``'s command line: it connects to ``superlink`` (``host:port``) and serves
    its ClientApps on 127.0.0.1:``port``."""
    security = ["--insecure"] if certs is None else ["--root-certificates", str(certs.ca), *_tls_args(certs)]
    return [flower_bin("flower-supernode"), *security, "--superlink", superlink, "--port", str(port),
            "--node-config", f"partition-id={partition} num-partitions={partitions}"]


def write_connection(flwr_home: Path, address: str, ca: Path | None, name: str = CONNECTION) -> Path:
    """Flower's configuration (``FLWR_HOME/config.toml``) with one SuperLink connection, the default."""
    import json

    flwr_home.mkdir(parents=True, exist_ok=True)
    lines = ["[superlink]", f"default = {json.dumps(name)}", "", f"[superlink.{name}]",
             f"address = {json.dumps(address)}"]
    lines += ["insecure = true"] if ca is None else [f"root-certificates = {json.dumps(str(ca))}"]
    path = flwr_home / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _available_mib() -> float | None:
    """Memory available to new processes now (Linux ``MemAvailable``), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(n: int, available: float | None = None) -> None:
    """ConfigError when a local deployment of ``n`` clients would need more memory than is available
    (:data:`MIB_PER_CLIENT` per client, :data:`MIB_BASE` for the SuperLink side)."""
    free = _available_mib() if available is None else available
    need = MIB_BASE + MIB_PER_CLIENT * n
    if free is not None and need > free:
        raise ConfigError(f"--deployment local with N = {n} clients is outside this machine's valid range: "
                          f"{n} SuperNodes and their ClientApps need about {need / 1024:.1f} GiB "
                          f"({MIB_PER_CLIENT} MiB per client), {free / 1024:.1f} GiB is available; run the "
                          "SuperNodes on several machines (docs/guides/flower.md, \"Across machines\") or on "
                          "Flower's simulation engine (--run without --deployment)")


def _fresh_folder(folder: Path) -> None:
    """An empty deployment folder (one this module made before is emptied; anything else refused)."""
    if folder.exists():
        if not (folder / _MARKER).is_file():
            raise ConfigError(f"{str(folder)!r} exists and was not made by fedbound flower --deployment: "
                              "move it away or choose another --out")
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / _MARKER).write_text("made by fedbound flower --deployment local; emptied at each start\n")


def _tail(path: Path, lines: int = 1) -> str:
    try:
        text = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-400:]


def _wait_listening(port: int, sup: Any, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "superlink" in sup.exited():
            raise ConfigError(f"the SuperLink exited before it listened on port {port}: {_tail(log)} "
                              f"(log: {log})")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise ConfigError(f"the SuperLink did not listen on 127.0.0.1:{port} within {timeout:g} s (log: {log})")


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def _outcome_error(event: dict[str, Any], run_dir: Path, folder: Path) -> Exception:
    """The ServerApp's error event as the exception it was (one line)."""
    import json

    from fedbound.deploy.flower_server import RoundRefused

    message = " ".join(str(event.get("message", "")).split()) or event.get("type", "error")
    kind = event.get("type")
    if kind == "PrivacyBudgetExceeded":
        error = PrivacyBudgetExceeded(message)
        try:
            error.summary = json.loads((run_dir / "summary.json").read_text())
        except (OSError, ValueError):
            error.summary = None
        return error
    if kind == "RoundRefused":
        return RoundRefused(message)
    if kind in ("ConfigError", "ParameterError", "DomainError", "UnsupportedError", "CheckpointError"):
        return ConfigError(message)
    return ConfigError(f"the ServerApp stopped: {kind}: {message} (logs: {folder})")


def run_local(cfg: dict[str, Any], *, insecure: bool = False, progress: bool = True,
              startup_timeout: float = STARTUP_SECONDS) -> dict[str, Any]:
    """Run the app of run config ``cfg`` on a local deployment (module docstring); its run directory's
    summary.  Raises what stopped it (PrivacyBudgetExceeded, RoundRefused, ConfigError); KeyboardInterrupt
    and :class:`~fedbound.deploy.processes.Terminated` pass through, once every process is stopped."""
    import json

    from fedbound.deploy.flower_app import CLIENT_STORE, write_app
    from fedbound.deploy.flower_events import EVENTS_FILE, read_events, round_line
    from fedbound.deploy.processes import Supervisor, signals_raise
    from fedbound.deploy.tls import make_certificates
    from fedbound.training import checkpoint as ckpt

    if cfg.get("fedbound.reproducible-noise"):
        raise ConfigError("--reproducible-noise is outside its valid range with --deployment: a deployment "
                          "draws every noise from OS entropy (reproducible noise is for Flower's "
                          "simulation engine, fedbound flower --run without --deployment)")
    n = int(cfg["plan.N"])
    check_memory(n)
    run_dir = Path(cfg["fedbound.run-dir"])
    ckpt.prepare_run_dir(run_dir, "fedbound flower")
    folder = run_dir / DEPLOYMENT_DIR
    _fresh_folder(folder)
    app = write_app(cfg, folder / "app")
    certs = None if insecure else make_certificates(folder / "certs")
    flwr_home = folder / "flwr-home"
    link_port, *node_ports = free_ports(1 + n)
    address = f"127.0.0.1:{link_port}"
    write_connection(flwr_home, address, None if certs is None else certs.ca)
    env = flower_env(flwr_home, (run_dir / CLIENT_STORE).resolve())
    events_file = run_dir / EVENTS_FILE
    offset = events_file.stat().st_size if events_file.is_file() else 0  # a resumed run: only what is new
    outcome: dict[str, Any] | None = None
    with signals_raise(), Supervisor(folder) as sup:
        sup.start("superlink", superlink_argv(link_port, certs), env, folder / "superlink.log")
        _wait_listening(link_port, sup, folder / "superlink.log", startup_timeout)
        for i, port in enumerate(node_ports):
            sup.start(f"supernode-{i}", supernode_argv(address, i, n, port, certs), env,
                      folder / f"supernode-{i}.log")
        _say(progress, f"fedbound flower: local deployment, SuperLink {address} "
                       f"({'INSECURE: no TLS' if certs is None else 'TLS'}), {n} SuperNodes; logs and "
                       f"certificates in {folder}")
        sup.start("flwr-run", [flower_bin("flwr"), "run", str(app), CONNECTION, "--stream"], env,
                  folder / "flwr-run.log")
        patience = float(cfg.get("fedbound.round-timeout", 600.0)) + startup_timeout
        last = time.monotonic()
        ended_at: float | None = None
        while outcome is None:
            events, offset = read_events(run_dir, offset)
            for event in events:
                last = time.monotonic()
                if event.get("event") == "round":
                    _say(progress, round_line(event))
                elif event.get("event") in ("done", "error"):
                    outcome = event
            if outcome is not None:
                break
            exited = sup.exited()
            for name, code in sorted(exited.items()):
                if name != "flwr-run":
                    log = folder / f"{name}.log"
                    raise ConfigError(f"the deployment's {name} exited with code {code} before the run "
                                      f"ended: {_tail(log)} (log: {log}); the run directory keeps the "
                                      "rounds done: run the same command again to resume")
            if "flwr-run" in exited:
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > 10.0:  # its last events had time to arrive
                    log = folder / "flwr-run.log"
                    raise ConfigError(f"flwr run ended (code {exited['flwr-run']}) without the ServerApp's "
                                      f"outcome: {_tail(log, 2)} (log: {log})")
            if time.monotonic() - last > patience:
                raise ConfigError(f"the deployment reported nothing for {patience:g} s (round timeout + "
                                  f"{startup_timeout:g} s start-up): stopped; logs in {folder}")
            time.sleep(0.25)
    if outcome.get("event") == "error":
        raise _outcome_error(outcome, run_dir, folder)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["deployment"] = {"kind": "local", "superlink": address, "supernodes": n,
                             "tls": certs is not None, "folder": str(folder)}
    return summary
