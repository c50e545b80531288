"""``fedbound flower``: a plan as a Flower app directory, and that app run on Flower's simulation engine.

:func:`flower` is the command itself (``fedbound flower PAPER CONFIG``; the CLI only prints what it
returns): the plan through the paper's recipe, then the app written (:func:`write_app`) or run
(:func:`run_app`).

:func:`write_app` writes ``APP_DIR/pyproject.toml`` (``[tool.flwr.app.components]`` naming the ServerApp and
ClientApp of :mod:`fedbound.deploy`; ``[tool.flwr.app.config]`` holding the run config of
:mod:`fedbound.deploy.flower_session`: the plan's T, K, N, C, sigma per stage, seed, and the effective
fedbound configuration), ``APP_DIR/fedbound_app/{server_app,client_app}.py`` and ``APP_DIR/fedbound.toml``
(the same configuration, to read).  ``flwr run APP_DIR`` runs it.

:func:`run_app` runs the same ServerApp and ClientApp in this process on Flower's simulation runtime (Ray
backend: the only one flwr 1.42 ships) with one virtual SuperNode per client, and returns the run
directory's summary (the same files as ``fedbound train``: metrics.csv, summary.json, config.toml).  It
builds the ServerApp and ClientApp with ``simulation=True``: the one place a run config may ask for
noise reproducible from the seed (``fedbound.reproducible-noise``, ``--reproducible-noise``); the clients
keep their uploads under ``RUN_DIR/client-store`` (:data:`CLIENT_STORE`).
``flwr run`` in 1.42 submits to a SuperLink (it starts a detached local one for simulations) and returns
before the run ends; running in-process instead is what lets ``fedbound flower --run`` report the run,
raise its errors and leave no server behind.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError

__all__ = ["APP_MARKER", "CLIENT_STORE", "write_app", "run_app", "require_flower", "flower"]

APP_MARKER = ".fedbound-flower-app"
"""File that marks a folder as written by ``fedbound flower`` (only such a folder is written again)."""

CLIENT_STORE = "client-store"
"""The simulated clients' kept uploads, inside the run directory (:mod:`fedbound.deploy.replay`)."""

_SERVER = '''"""ServerApp of this fedbound plan: fedbound's engine and ledger over Flower's Grid
(fedbound.deploy.flower_server)."""

from fedbound.deploy.flower_server import server_app

app = server_app()
'''

_CLIENT = '''"""ClientApp of this fedbound plan: the paper's local update and noised upload
(fedbound.deploy.flower_client)."""

from fedbound.deploy.flower_client import client_app

app = client_app()
'''


def require_flower() -> None:
    """ConfigError with the one-line install hint when flwr is missing."""
    import importlib.util

    from fedbound.deploy import FLOWER_HINT

    if importlib.util.find_spec("flwr") is None:
        raise ConfigError(FLOWER_HINT)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _check_out(folder: Path, marker: str) -> None:
    """Refuse, before any work, a --out that is empty, a file, a foreign non-empty folder or unwritable."""
    if not str(folder).strip():
        raise ConfigError("--out = '' names no folder: give the app directory to create")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {str(folder)!r} is an existing file, not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / marker).is_file():
        raise ConfigError(f"--out {str(folder)!r} is a non-empty folder fedbound flower did not write: "
                          "choose an empty or new folder (fedbound never overwrites files it did not write)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / marker).write_text("written by fedbound flower\n")
    except OSError as exc:
        raise ConfigError(f"--out {str(folder)!r} cannot be written: {exc.strerror}") from None


def write_app(cfg: dict[str, Any], app_dir: str | Path) -> Path:
    """Write the Flower app of run config ``cfg`` (:func:`fedbound.deploy.flower_session.run_config`); a
    config asking for reproducible noise is refused (a written app draws its noise from OS entropy)."""
    from fedbound.deploy.flower_session import REPRODUCIBLE_KEY

    if cfg.get(REPRODUCIBLE_KEY):
        raise ConfigError("--reproducible-noise is outside its valid range without --run: noise reproducible "
                          "from the seed is for fedbound's runs on Flower's simulation engine only; a "
                          "written app draws its noise from OS entropy")
    app_dir = Path(app_dir)
    _check_out(app_dir, APP_MARKER)
    name = f"fedbound-{cfg['fedbound.paper']}-app"
    lines = [
        "# A fedbound plan as a Flower app (fedbound flower). Run it: flwr run .",
        "# The plan.* values are what the ServerApp checks against the plan fedbound computes from",
        "# fedbound.config; change the plan there (or in the fedbound config) and write the app again.",
        "[build-system]", 'requires = ["hatchling"]', 'build-backend = "hatchling.build"', "",
        "[project]", f'name = "{name}"', 'version = "1.0.0"',
        'description = "fedbound plan deployed on Flower: fedbound\'s engine and privacy ledger"',
        "# fedbound[train,flower] must be installed where the SuperLink and SuperNodes run: Flower",
        "# installs an app's dependencies from a package index into a fresh environment per run",
        "# (it skips flwr itself).",
        'dependencies = ["flwr[simulation]>=1.42,<1.43"]', "",
        "[tool.hatch.build.targets.wheel]", 'packages = ["fedbound_app"]', "",
        "[tool.flwr.app]", 'publisher = "fedbound"', "",
        "[tool.flwr.app.components]", 'serverapp = "fedbound_app.server_app:app"',
        'clientapp = "fedbound_app.client_app:app"', "",
        "[tool.flwr.app.config]",
    ]
    lines += [f'"{key}" = {_toml(value)}' for key, value in cfg.items()]
    package = app_dir / "fedbound_app"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text('"""A fedbound plan as a Flower app."""\n')
    (package / "server_app.py").write_text(_SERVER)
    (package / "client_app.py").write_text(_CLIENT)
    (app_dir / "pyproject.toml").write_text("\n".join(lines) + "\n")
    (app_dir / "fedbound.toml").write_text(cfg["fedbound.config"])
    return app_dir


def run_app(cfg: dict[str, Any], supernodes: int | None = None, cpus_per_client: float = 1.0,
            verbose: bool = False, progress: bool = False) -> dict[str, Any]:
    """Run the app of ``cfg`` on Flower's simulation runtime in this process; the run's summary.json
    (module docstring; ``progress``: the ServerApp's progress bar on stderr).  A stop before a round the
    budget cannot afford raises PrivacyBudgetExceeded after writing the run directory."""
    from fedbound.deploy.flower_server import serve
    from fedbound.training import checkpoint as ckpt

    require_flower()
    import flwr.simulation
    from flwr.app import Context
    from flwr.clientapp import ClientApp  # noqa: F401  (imported for a clear error before Ray starts)
    from flwr.serverapp import Grid, ServerApp

    from fedbound.deploy.flower_client import client_app

    n = int(cfg["plan.N"])
    supernodes = n if supernodes is None else int(supernodes)
    if supernodes != n:
        raise ConfigError(f"--supernodes = {supernodes} is outside its valid range: the plan has N = {n} "
                          f"clients and fedbound flower runs one SuperNode per client (--supernodes {n})")
    run_dir = Path(cfg["fedbound.run-dir"])
    ckpt.prepare_run_dir(run_dir, "fedbound flower")  # a bad --out fails now, before Ray starts
    outcome: dict[str, Any] = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            outcome["run"] = serve(grid, {**cfg, **context.run_config}, simulation=True, progress=progress)
        except BaseException as exc:  # re-raised below, outside Flower's thread
            outcome["error"] = exc

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    backend = {"client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0},
               "init_args": {"logging_level": logging.ERROR, "log_to_driver": verbose,
                             "include_dashboard": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # run_simulation's deprecation notice: see the module docstring
        logging.getLogger("flwr").setLevel(logging.INFO if verbose else logging.ERROR)
        clients = client_app(cfg, store=run_dir.resolve() / CLIENT_STORE, simulation=True)
        flwr.simulation.run_simulation(server_app=server, client_app=clients, num_supernodes=n,
                                       backend_config=backend, verbose_logging=verbose)
    if "error" in outcome:
        raise outcome["error"]
    if "run" not in outcome:
        raise ConfigError("the Flower simulation ended without running the ServerApp "
                          "(run again with --verbose)")
    return outcome["run"].summary


ROUND_TIMEOUT_RANGE = (1.0, 7 * 86400.0)
"""Valid ``--round-timeout`` seconds: a second to a week."""


def _check_options(paper: str, out: str | None, run: bool, design: str | None, round_timeout: float,
                   reproducible_noise: bool, deployment: str | None, insecure: bool,
                   flower_guard: str = "report") -> None:
    """The options' one-line refusals that need no plan (issue 36: nothing nonsensical is written into an
    app)."""
    import math

    from fedbound.deploy.flower_deployment import DEPLOYMENTS
    from fedbound.deploy.flower_privacy import GUARDS
    from fedbound.deploy.mechanisms import mechanism
    from fedbound.errors import ParameterError
    from fedbound.paths import out_folder
    from fedbound.validation.recipes.runner import DESIGNS

    low, high = ROUND_TIMEOUT_RANGE
    try:
        seconds = float(round_timeout)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and low <= seconds <= high):
        raise ParameterError("--round-timeout", round_timeout, f"[{low:g}, {high:g}] seconds")
    if flower_guard not in GUARDS:
        raise ConfigError(f"--flower-guard = {flower_guard!r} is outside its valid range: one of "
                          f"{', '.join(GUARDS)}")
    if design is not None and design not in DESIGNS:
        raise ConfigError(f"--design = {design!r} is outside its valid range: one of {', '.join(DESIGNS)}")
    if design == "recommended" and mechanism(paper) is not None:
        raise ConfigError(f"--design = 'recommended' is outside its valid range for {paper}: a deploy "
                          "mechanism without fedbound's planner; give T and K in its config section")
    if out is not None:
        out_folder("--out", out)
    if reproducible_noise and not run:
        raise ConfigError("--reproducible-noise is outside its valid range without --run: noise reproducible "
                          "from the seed is for fedbound's runs on Flower's simulation engine only; a "
                          "written app draws its noise from OS entropy")
    if deployment is not None:
        if deployment not in DEPLOYMENTS:
            raise ConfigError(f"--deployment = {deployment!r} is outside its valid range: one of "
                              f"{', '.join(DEPLOYMENTS)}")
        if not run:
            raise ConfigError(f"--deployment = {deployment!r} is outside its valid range without --run: it "
                              "says where --run runs the app (without --run, fedbound flower writes the "
                              "app, to deploy with flwr run)")
        if reproducible_noise:
            raise ConfigError("--reproducible-noise is outside its valid range with --deployment: a "
                              "deployment draws every noise from OS entropy (reproducible noise is for "
                              "Flower's simulation engine: --run without --deployment)")
    elif insecure:
        raise ConfigError("--insecure is outside its valid range without --deployment local: only a "
                          "deployment has connections to secure")


def _check_supernodes(supernodes: int | None, n: int) -> None:
    if supernodes is not None and supernodes != n:
        from fedbound.errors import ParameterError

        raise ParameterError("--supernodes", supernodes, f"{{{n}}}",
                             hint=f"the plan has N = {n} clients and fedbound flower runs one SuperNode per "
                                  f"client (--supernodes {n}, or leave it out)")


def flower(paper: str, config: str | Path, overrides: list[str] | tuple[str, ...] = (), *,
           out: str | None = None, run: bool = False, supernodes: int | None = None,
           design: str | None = None, seed: int | None = None, round_timeout: float = 600.0,
           reproducible_noise: bool = False, progress: bool = False, verbose: bool = False,
           deployment: str | None = None, insecure: bool = False, flower_guard: str = "report"
           ) -> dict[str, Any]:
    """``fedbound flower PAPER CONFIG``: write PAPER's plan on CONFIG as a Flower app (``out``: the app
    directory, default ``flower_<paper>_<config stem>``) and return ``{"app_dir", "plan", "warnings"}``; or,
    with ``run``, run it on Flower's simulation engine (``out``: the run directory, default
    ``runs/<paper>_<config stem>_flower``) and return its summary (with ``app_plan``: the app's
    ``plan.*``).  ``deployment="local"``: run it instead on Flower's deployment engine, a SuperLink and
    one SuperNode per client as separate processes secured with TLS (``insecure``: without TLS;
    :mod:`fedbound.deploy.flower_deployment`).  ``flower_guard``: what Flower's own accountant does when
    its ``would_exceed`` says a round would exceed the budget (``"report"``, ``"stop"``;
    :mod:`fedbound.deploy.flower_privacy`); the app's warnings say beforehand where it would.
    ``reproducible_noise``: every draw from the run seed, as
    ``fedbound train`` (``run`` on the simulation engine only).  Errors are the CLI's, raised."""
    from fedbound.deploy.flower_session import run_config
    from fedbound.deploy.mechanisms import deployable_names, lookup, mechanism, not_deployed
    from fedbound.validation.recipes.runner import build_run, prepare_run

    lookup(paper)
    require_flower()
    _check_options(paper, out, run, design, round_timeout, reproducible_noise, deployment, insecure,
                   flower_guard)
    stem = Path(config).stem
    target = Path(out) if out is not None else (Path("runs") / f"{paper}_{stem}_flower" if run
                                                else Path(f"flower_{paper}_{stem}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = prepare_run(paper, config, list(overrides), seed=seed, paper=mechanism(paper),
                           design="paper" if mechanism(paper) is not None else design)
        _check_supernodes(supernodes, int(prep.num_clients))
        why = not_deployed(paper)
        if why is not None:  # after the options' own checks: a bad option is named first
            raise ConfigError(f"PAPER = {paper!r} is outside fedbound flower's valid range (one of "
                              f"{', '.join(deployable_names())}): {why}")
        plan = build_run(prep).plan
    run_dir = (target if run else Path("runs") / f"{paper}_{stem}_flower").resolve()
    cfg = run_config(prep, plan, run_dir, float(round_timeout), reproducible_noise, flower_guard)
    keys = {k: v for k, v in cfg.items() if k.startswith("plan.")}
    if not run:
        from fedbound.deploy.flower_privacy import plan_note

        written = write_app(cfg, target)
        note = plan_note(plan, int(cfg["plan.K"]))
        return {"app_dir": str(written), "plan": keys, "noise_source": "os-entropy",
                "flower_privacy": {k: v for k, v in cfg.items() if k.startswith("flower.")},
                "warnings": [note] if note else []}
    if deployment is not None:
        from fedbound.deploy.flower_deployment import run_local

        return {**run_local(cfg, insecure=insecure, progress=progress), "app_plan": keys}
    return {**run_app(cfg, supernodes, verbose=verbose, progress=progress), "app_plan": keys}
