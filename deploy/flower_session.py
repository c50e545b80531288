"""What a Flower app of fedbound carries in its run config, and what the server and a client build from it.

The run config (Flower's ``[tool.flwr.app.config]``, flattened to ``context.run_config``) holds

* ``fedbound.paper`` and ``fedbound.config``: the paper and the run's effective configuration (the TOML
  text ``fedbound train`` writes as the run's ``config.toml``): everything the server and every client
  rebuild the run from through the paper's registered recipe;
* ``fedbound.run-dir``: where the server keeps the checkpoint, metrics.csv and summary.json;
  ``fedbound.round-timeout``: seconds the server waits for a round's uploads;
* ``fedbound.reproducible-noise``: false in every app ``fedbound flower`` writes: each party draws its
  noise from the OS CSPRNG (:mod:`fedbound.training.secure_noise`).  True only for a run on Flower's
  simulation engine driven by fedbound (``fedbound flower --run --reproducible-noise``,
  :func:`fedbound.deploy.flower_app.run_app`): every draw then comes from the run seed as in ``fedbound
  train``, and the ServerApp and ClientApp refuse it anywhere else (:func:`reproducible_noise`);
* ``plan.*``: the plan, readable by whoever deploys it: ``plan.T``, ``plan.K``, ``plan.N``, ``plan.C``,
  ``plan.seed`` and one ``plan.sigma-<stage>`` per noise stage (round 1's std; per-client and per-round
  values are in the messages).  The server recomputes the plan from ``fedbound.config`` and refuses to run
  when a ``plan.*`` value was edited away from it (:func:`check_plan_keys`);
* ``flower.privacy.*`` and ``flower.guard``: Flower's own PrivacyConfig of the plan's central releases,
  whose ``max-epsilon`` is the plan's budget, and what Flower's ``would_exceed`` does before a round
  (:mod:`fedbound.deploy.flower_privacy`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ConfigError, ParameterError

__all__ = ["ClientSide", "plan_keys", "check_plan_keys", "run_config", "prepared", "client_side",
           "config_text", "check_deployed_noise", "reproducible_noise", "REPRODUCIBLE_KEY",
           "REPRODUCIBLE_NOTE"]

REPRODUCIBLE_KEY = "fedbound.reproducible-noise"
"""The run config key of the simulation-only reproducible noise (module docstring)."""

REPRODUCIBLE_NOTE = ("noise reproducible from the seed: simulation only, not private against anyone holding "
                     "the config")
"""What a run with reproducible noise says in its summary, progress and report."""


def config_text(prep: Any) -> str:
    """The effective configuration of a prepared run as TOML (what ``fedbound.config`` holds)."""
    from fedbound.training import config as tc

    return tc.dump_toml(prep.sections(), f"effective configuration of a fedbound flower app ({prep.algo})")


@functools.lru_cache(maxsize=4)
def _config_file(text: str) -> str:
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    path = Path(tempfile.gettempdir()) / f"fedbound-flower-{digest}.toml"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return str(path)


def _get(cfg: Mapping[str, Any], key: str) -> Any:
    if key not in cfg:
        raise ConfigError(f"the Flower run config has no {key!r}: write the app with `fedbound flower PAPER "
                          "CONFIG --out APP_DIR`")
    return cfg[key]


def prepared(cfg: Mapping[str, Any]) -> Any:
    """:func:`fedbound.validation.recipes.runner.prepare_run` of the run config's paper and configuration."""

    return _prepared(str(_get(cfg, "fedbound.paper")), str(_get(cfg, "fedbound.config")))


@functools.lru_cache(maxsize=4)
def _prepared(paper: str, text: str) -> Any:
    from fedbound.deploy.mechanisms import mechanism
    from fedbound.validation.recipes.runner import prepare_run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return prepare_run(paper, _config_file(text), paper=mechanism(paper))


def plan_keys(prep: Any, plan: Any) -> dict[str, Any]:
    """The ``plan.*`` entries of the run config for a prepared run and its noise plan (None: not private)."""
    setting, train = prep.setting, prep.train
    keys: dict[str, Any] = {"plan.T": int(prep.rounds), "plan.N": int(prep.num_clients),
                            "plan.K": int(setting.get("K") or prep.num_clients),
                            "plan.seed": int(train["seed"])}
    if setting.get("C") is not None:
        keys["plan.C"] = float(setting["C"])
    if plan is not None:
        keys["plan.T"] = int(plan.rounds)
        keys["plan.eps"], keys["plan.delta"] = float(plan.eps), float(plan.delta)
        for stage in plan.sigma:
            keys[f"plan.sigma-{stage}"] = float(np.max(plan.stage_sigma(stage, 0)))
    return keys


def check_plan_keys(cfg: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """ConfigError when a ``plan.*`` value of the run config differs from the plan fedbound computes."""
    for key, want in expected.items():
        if key in cfg and not np.isclose(float(cfg[key]), float(want), rtol=1e-9, atol=0.0):
            raise ConfigError(f"the Flower run config has {key} = {cfg[key]!r}, but the plan fedbound "
                              f"computes for its fedbound.config is {want!r}: change the plan in the "
                              "fedbound config and write the app again "
                              "(fedbound flower PAPER CONFIG --out APP_DIR)")


def run_config(prep: Any, plan: Any, run_dir: str | Path, round_timeout: float = 600.0,
               reproducible_noise: bool = False, flower_guard: str = "report") -> dict[str, Any]:
    """The flat run config of a Flower app for a prepared run (module docstring); a plan whose deployed
    noise would vanish is refused here (:func:`check_deployed_noise`).  With the plan's ``plan.*`` come
    Flower's PrivacyConfig of its central releases and ``flower.guard``
    (:func:`fedbound.deploy.flower_privacy.privacy_config`)."""
    from fedbound.deploy.flower_privacy import privacy_config

    check_deployed_noise(prep, plan)
    return {"fedbound.paper": prep.algo, "fedbound.config": config_text(prep),
            "fedbound.run-dir": str(run_dir), "fedbound.round-timeout": float(round_timeout),
            REPRODUCIBLE_KEY: bool(reproducible_noise), **plan_keys(prep, plan),
            **privacy_config(plan, flower_guard)}


def reproducible_noise(cfg: Mapping[str, Any], simulation: bool, party: str) -> bool:
    """Does the run config ask for reproducible (seeded) noise?  A ConfigError when it does and ``party``
    (``"ServerApp"``, ``"ClientApp"``) was not built for Flower's simulation engine by fedbound: the flag
    comes with the config, the refusal from the party's own code."""
    asked = cfg.get(REPRODUCIBLE_KEY, False)
    asked = asked if isinstance(asked, bool) else str(asked).strip().lower() in ("1", "true", "yes")
    if asked and not simulation:
        raise ConfigError(f"{REPRODUCIBLE_KEY} = true is outside its valid range for this {party}: noise "
                          "reproducible from the seed is for fedbound's runs on Flower's simulation engine "
                          "only (fedbound flower --run --reproducible-noise); a deployed app draws its noise "
                          "from OS entropy: set it to false")
    return bool(asked)


def _stage_cause(prep: Any) -> str:
    """What sets the noise std's scale in the config: the clip norm C, when the section has one."""
    value = prep.setting.get("C")
    if value is None:
        return ""
    return f"; it follows from [{prep.section_name}] C = {float(value):g}: raise C"


def check_deployed_noise(prep: Any, plan: Any) -> None:
    """ParameterError (one line naming the plan's ``plan.sigma-<stage>`` and the config value behind it)
    when a private plan at finite eps would deploy a noise std of 0 where a release needs noise, or a
    positive std below the smallest normal number of the run's dtype (it underflows: C = 5e-324 gives
    sigma = 0 or a subnormal).  Each view (:class:`fedbound.training.plan.View`) must carry noise every
    round: an upload or DP-SGD step every client's std of its stage; a broadcast the server's or every
    client's."""
    if plan is None or not math.isfinite(plan.eps):
        return
    dtype = np.float64 if prep.train.get("dtype") == "float64" else np.float32
    tiny = float(np.finfo(dtype).tiny)

    def refuse(stage: str, value: float) -> None:
        raise ParameterError(f"plan.sigma-{stage}", float(value),
                             f"[{tiny:.4g}, inf) (the smallest normal {np.dtype(dtype).name}) at eps = "
                             f"{plan.eps:g}", hint="noise that vanishes would release the data unprotected "
                             f"while the ledger counts eps{_stage_cause(prep)}")

    for stage in plan.sigma:
        m = plan.stage_matrix(stage)
        under = m[(m > 0) & (m < tiny)]
        if under.size:
            refuse(stage, under[0])
    for view in plan.views:
        own = plan.stage_matrix(view.stage)
        bare = (own < tiny).any(axis=1)
        if view.kind == "broadcast":
            server = plan.stage_matrix("server")[:, 0]
            bare &= server < tiny
            stage = view.stage if own.any() else "server"
        else:
            stage = view.stage
        if bare.any():
            t = int(np.argmax(bare))
            refuse(stage, float(plan.stage_matrix(stage)[t].min()))


@dataclass
class ClientSide:
    """What a client builds from the run config: its data (all partitions; a client trains on its row),
    the model, the algorithm and the engine options.  No noise plan: the sigma's come in each message."""

    prep: Any
    data: Any
    model: Any
    algorithm: Any
    options: Any


def client_side(cfg: Mapping[str, Any]) -> ClientSide:
    """The client's build for a run config (cached: a SuperNode process serves many messages)."""
    return _client_side(str(_get(cfg, "fedbound.paper")), str(_get(cfg, "fedbound.config")))


@functools.lru_cache(maxsize=2)
def _client_side(paper: str, text: str) -> ClientSide:
    from fedbound.training import config as tc

    prep = _prepared(paper, text)
    rec, train = prep.recipe, prep.train
    options = tc.run_options(train)
    setup = tc.build_data(train, prep.num_clients, rec.min_client_size(prep.setting),
                          tc.resolve_device(train["device"]))
    data = setup.data.to(options.device, options.dtype)
    return ClientSide(prep, data, setup.model, rec.algorithm(prep.setting, train, prep.rounds), options)


def _paper_overrides(paper: Any, overrides: list[str]) -> list[str]:
    """The ``--set`` overrides that address the paper's own section (the planner reads only that)."""
    section = paper.config_section
    out = []
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        head, _, tail = key.rpartition(".")
        if (head in ("", section.name)) and tail in section:
            out.append(item)
    return out


