"""The audited federation: the recipe's data, plan and algorithm, round 1's participants, the real run's
trajectory on D (global models and the plan in force each round), and what the ledger reports.

A plan can change mid-run (UDP's CRD recomputes sigma after every round, seed 003 Alg. 2): the trajectory
records the plan the engine holds at each audited round, :func:`realized_plan` puts each round's sigma's
into one plan (what the trials add and the independent epsilon counts), and :func:`reported` replays the
ledger exactly as the engine drives it (``ledger.plan`` set to each round's plan before its releases).
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["Setup", "round_one", "trajectory", "realized_plan", "at_level", "reported"]


@dataclass
class Setup:
    """What an audit runs: the algorithm, model, data (and dataset), the plan (as realized over the audited
    rounds), run options, the target, round 1's participants and weights, the plan the ledger reads at the
    audited level, and each round's plans (as the engine held them; the ledger's at the level)."""

    algorithm: Any
    model: Any
    data: Any
    dataset: Any
    plan: Any
    options: Any
    target: int
    participants: np.ndarray
    weights: np.ndarray
    ledger_plan: Any = None
    round_plans: tuple = ()
    ledger_plans: tuple = ()


def round_one(rec: Any, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> Setup:
    """Data, plan, algorithm (the recipe's) and the participants/weights its hooks give in round 1; the
    target is the smallest participant until the canary search picks one."""
    from fedbound.training import config as tc
    from fedbound.training.engine import RoundContext, RunState
    from fedbound.training.noise import Streams

    setup = tc.build_data(train, rec.num_clients(setting), rec.min_client_size(setting),
                          tc.resolve_device(train["device"]))
    plan = rec.plan(setting, train, setup.client_sizes, rec.rounds(setting))
    algorithm = rec.algorithm(setting, train, rec.rounds(setting))
    options = tc.run_options(train)
    streams = Streams(options.seed, options.device)
    init = setup.model.init(streams.generator("init"), options.dtype)
    state = RunState(round=0, rounds=rounds, global_params=init, plan=plan)
    ctx = RoundContext(0, state, setup.model, setup.data, streams, options, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        participants = np.asarray(algorithm.participants(ctx), dtype=np.int64)
        weights = np.asarray(algorithm.aggregation_weights(ctx, participants), dtype=np.float64)
    if not len(participants):
        raise ConfigError("audit: nobody participates in round 1 of this setting")
    sizes = setup.client_sizes[participants]
    target = int(participants[int(np.argmin(sizes))])
    return Setup(algorithm, setup.model, setup.data, setup.dataset, plan, options, target, participants,
                 weights)


def trajectory(s: Setup, rounds: int) -> tuple[Any, tuple]:
    """``(rounds, d)`` starts (the initial model, then the global models of a real run on D) and the plan the
    engine holds in each of those rounds."""
    import torch

    from fedbound.training.engine import run
    from fedbound.training.noise import Streams

    init = s.model.init(Streams(s.options.seed, s.options.device).generator("init"), s.options.dtype)
    models, plans = [init], [s.plan]
    if rounds > 1:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in range(1, rounds):
                res = run(s.algorithm, s.model, s.data, plan=s.plan, options=s.options, run_dir=tmp,
                          run_key="audit", stop_after=t, init_params=init)
                if res.state.round < t:
                    raise ConfigError(f"--rounds = {rounds} is outside its valid range: the run on D stops "
                                      f"after {res.state.round} round(s) (its T as the run decides it)")
                models.append(res.params.detach().clone())
                plans.append(res.state.plan)
    return torch.stack(models), tuple(plans)


def realized_plan(plans: tuple, rounds: int) -> Any:
    """One plan whose round ``t < rounds`` sigma's are those of ``plans[t]`` (module docstring)."""
    base = plans[0]
    if all(p is base for p in plans):
        return base
    sigma = {}
    for stage in base.sigma:
        matrix = base.stage_matrix(stage)
        for t in range(min(rounds, base.rounds)):
            matrix[t] = plans[t].stage_sigma(stage, t)
        sigma[stage] = matrix
    return replace(base, sigma=sigma)


def at_level(plan: Any, level: str, sizes: np.ndarray) -> Any:
    """The plan the ledger reads at ``level``: as planned (record), or with every stage's per-record
    sensitivity times the client's size (client: the whole client replaced, by the triangle inequality)."""
    if level == "record":
        return plan
    return replace(plan, sensitivity={stage: plan.stage_sensitivity(stage) * np.asarray(sizes, np.float64)
                                      for stage in plan.sensitivity})


def reported(ledger_plans: tuple, participants: np.ndarray, weights: np.ndarray, rounds: int, target: int
             ) -> dict[str, dict[str, float]]:
    """Per view group: the ledger's epsilon of the target after ``rounds`` rounds (tight, paper), the ledger
    driven as the engine drives it (module docstring)."""
    from fedbound.training.privacy import PrivacyLedger

    ledger = PrivacyLedger(ledger_plans[0])
    for t in range(rounds):
        ledger.plan = ledger_plans[min(t, len(ledger_plans) - 1)]
        ledger.commit(ledger.releases(t, participants, weights))
    eps = ledger.epsilons()
    return {kind: {group: float(v[target]) for group, v in groups.items()} for kind, groups in eps.items()}
