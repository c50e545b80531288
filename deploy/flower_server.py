"""The ServerApp: fedbound's :class:`~fedbound.training.engine.Runner` driving Flower's Grid.

Why not a wrapper of Flower's ``FedAvg`` / ``DifferentialPrivacyServerSideFixedClipping``: FedAvg weights
the uploads by ``num-examples`` and samples with its own RNG; the DP wrappers truncate the sampled count
with ``int()``, add less noise when clients drop out, and draw noise from numpy's global RNG.  None of that
is what fedbound's ledger counts.  Here each round is the engine's round, with Flower as the transport:

1. ``Runner.begin_round``: the algorithm's participants (K of N without replacement, drawn from the run's
   seeded stream exactly as ``fedbound train`` draws them), its aggregation weights (uniform where the
   paper's sensitivity needs it), the round's releases, and the budget check: a round that would push the
   budget accountant past eps is never started (the run stops there and says so);
2. one ``train`` message per participant to the SuperNode holding that client (its ``partition-id``), with
   the plan's sigma for it (:mod:`fedbound.deploy.flower_client`); the replies' uploads are aggregated with
   the engine's weights;
3. fewer replies than participants: the round is refused (:class:`RoundRefused`), nothing is aggregated or
   counted, and the last checkpoint stays.  A client that reports a noise std other than the plan's is
   refused the same way;
   A deploy mechanism with a Flower strategy of its own (central DP-FedAvg:
   :mod:`fedbound.deploy.flower_dpfedavg`) aggregates the checked replies with it instead;
4. ``Runner.end_round``: the server's noise (NbAFL's sigma_D) through the algorithm's ``server_update``,
   the ledger's commit (tight accountant: K-of-N without replacement, RDP / analytic Gaussian), metrics,
   CRD's change of T and sigma (UDP), the checkpoint.

A killed or refused run resumes from its checkpoint: the ledger is saved with the round it counted, so no
round is counted twice or missed, and a repeated round re-sends identical uploads (every draw is keyed by
seed, round and client), so repeating it releases nothing new.  Beside fedbound's epsilon, each round's
row carries ``epsilon_flower``: Flower's own ``RdpAccountant`` over the broadcast releases (views of kind
``"broadcast"``), where it applies.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, FedboundError, PrivacyBudgetExceeded

__all__ = ["RoundRefused", "serve", "server_app", "flower_epsilon"]


class RoundRefused(FedboundError):
    """A round that fedbound will not aggregate (missing uploads, wrong noise); the checkpoint stays."""


def flower_epsilon(events: list[list[float]], delta: float) -> float | None:
    """Flower's ``RdpAccountant`` epsilon at ``delta`` over ``events``, each ``[z, sample_size, population,
    hidden]`` (hidden sampling: K of N without replacement with replace-one neighbours; otherwise no
    amplification with add-or-remove-one: the pairs Flower's accountant supports); None without events,
    with a noiseless release, or where Flower's accountant is not installed.  Identical events are composed
    once with their count (dp-accounting's without-replacement RDP costs ~0.5 s per event)."""
    if not events or not all(np.isfinite(e[0]) for e in events):
        return None
    grouped: dict[tuple, int] = {}
    for z, k, n, hidden in events:
        key = (float(z), int(k), int(n), bool(hidden))
        grouped[key] = grouped.get(key, 0) + 1
    return _flower_epsilon(tuple(sorted(grouped.items())), float(delta))


@functools.lru_cache(maxsize=64)
def _flower_epsilon(grouped: tuple, delta: float) -> float | None:
    try:
        from flwr.supercore.privacy_accounting import (
            GaussianPrivacyEvent,
            NeighboringRelation,
            PrivacyConfig,
            SamplingMethod,
        )
        from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant
    except ImportError:  # pragma: no cover - flwr without its accountant
        return None
    hidden, population = grouped[0][0][3], grouped[0][0][2]
    method = SamplingMethod.WITHOUT_REPLACEMENT if hidden else SamplingMethod.NO_AMPLIFICATION
    relation = NeighboringRelation.REPLACE_ONE if hidden else NeighboringRelation.ADD_OR_REMOVE_ONE
    accountant = RdpAccountant(PrivacyConfig(delta, population, relation, method))
    for (z, k, n, _), count in grouped:
        accountant.compose(GaussianPrivacyEvent(z, k, n), count)
    return float(accountant.get_epsilon(delta))


def _node_map(grid: Any, num_clients: int, timeout: float) -> dict[int, int]:
    """fedbound client id -> Flower node id, from each SuperNode's ``partition-id`` (a ``query`` message)."""
    from flwr.app import Message, MessageType, RecordDict

    deadline = time.monotonic() + timeout
    while len(list(grid.get_node_ids())) < num_clients and time.monotonic() < deadline:
        time.sleep(0.5)
    nodes = list(grid.get_node_ids())
    if len(nodes) < num_clients:
        raise ConfigError(f"the federation has {len(nodes)} SuperNodes; the plan has N = {num_clients} "
                          "clients and fedbound flower needs one SuperNode per client (partition-id 0 .. "
                          "N-1)")
    replies = grid.send_and_receive([Message(RecordDict(), dst_node_id=n, message_type=MessageType.QUERY)
                                     for n in nodes], timeout=timeout)
    found: dict[int, int] = {}
    for reply in replies:
        if reply.has_content():
            pid = int(reply.content["node"]["partition-id"])
            if 0 <= pid < num_clients:
                found[pid] = reply.metadata.src_node_id
    missing = sorted(set(range(num_clients)) - set(found))
    if missing:
        more = "..." if len(missing) > 5 else ""
        raise ConfigError(f"no SuperNode answered with partition-id {missing[:5]}{more}"
                          f": start one SuperNode per client with --node-config \"partition-id=I "
                          f"num-partitions={num_clients}\"")
    return found


def _flower_round(grid: Any, runner: Any, participants: np.ndarray, nodes: Mapping[int, int],
                  timeout: float, aggregate: Any = None) -> None:
    """Send the round's train messages, check and aggregate the uploads (module docstring, step 2-3);
    ``aggregate(runner, replies)``: a mechanism's own aggregation of the replies (in participant order,
    :func:`fedbound.deploy.mechanisms.flower_aggregation`) instead of the engine's weighted sum."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    ctx, algorithm, plan = runner.ctx, runner.algorithm, runner.state.plan
    stages = [s for s in (plan.sigma if plan is not None else ()) if s != "server"]
    messages = []
    for i in participants.tolist():
        conf: dict[str, Any] = {"round": ctx.round, "client": i, "private": plan is not None}
        for stage in stages:
            conf[f"sigma.{stage}"] = float(plan.stage_sigma(stage, ctx.round, np.array([i]))[0])
        start = algorithm.start_models(ctx, np.array([i]))[0].detach().cpu().numpy()
        content = RecordDict({"arrays": ArrayRecord([start]), "config": ConfigRecord(conf)})
        messages.append((conf, Message(content, dst_node_id=nodes[i], message_type=MessageType.TRAIN)))
    replies = {}
    errors = []
    for reply in grid.send_and_receive([m for _, m in messages], timeout=timeout):
        if reply.has_error():
            errors.append(reply.error.reason)
        else:
            replies[int(reply.content["metrics"]["client"])] = reply
    missing = [i for i in participants.tolist() if i not in replies]
    if missing:
        why = f" ({errors[0].strip().splitlines()[-1]})" if errors else ""
        raise RoundRefused(f"round {ctx.round + 1}: {len(participants) - len(missing)} of "
                           f"{len(participants)} planned clients replied (missing {missing[:5]}){why}; "
                           "fedbound refuses to aggregate fewer uploads than the ledger counts; "
                           "the checkpoint of the last round is kept: run again to resume")
    uploads = []
    for conf, _ in messages:
        metrics = replies[conf["client"]].content["metrics"]
        for stage in stages:
            added, planned = float(metrics.get(f"sigma.{stage}", 0.0)), conf[f"sigma.{stage}"]
            if not np.isclose(added, planned, rtol=1e-6, atol=0.0):
                raise RoundRefused(f"round {ctx.round + 1}: client {conf['client']} added noise std "
                                   f"{added:g} at stage {stage!r}, the plan says {planned:g}; the round is "
                                   "refused")
            ctx.noise_std.setdefault(stage, []).append(added)
        if "clipped" in metrics:
            ctx.log("clipped", float(metrics["clipped"]))
        arrays = replies[conf["client"]].content["arrays"].to_numpy_ndarrays()
        uploads.append(torch.as_tensor(arrays[0], dtype=runner.options.dtype, device=runner.device))
    if aggregate is not None:
        aggregate(runner, [replies[conf["client"]] for conf, _ in messages])
        return
    runner.aggregate = runner.aggregate + runner.w_t @ torch.stack(uploads)


def _record_flower_epsilon(runner: Any) -> None:
    """Append this round's broadcast releases to Flower's accountant events; log its epsilon."""
    events = runner.state.algo_state.setdefault("flower_rdp_events", [])
    broadcast = [r for r in runner.releases if r.view.kind == "broadcast"]
    for rel in broadcast:
        view = rel.view
        hidden = view.hidden_sampling and view.sample_rate < 1.0
        k = len(runner.ctx.participants)
        events.append([float(rel.z_all[0]), k, runner.state.plan.num_clients, hidden])
    if broadcast:
        eps = flower_epsilon(events, runner.state.plan.delta)
        if eps is not None:
            runner.ctx.log("epsilon_flower", eps)


def serve(grid: Any, cfg: Mapping[str, Any]) -> Any:
    """Run the configured plan over ``grid``; write the run directory; return the TrainRun (module doc)."""
    from fedbound.deploy.flower_client import check_deployable
    from fedbound.deploy.flower_session import check_plan_keys, plan_keys, prepared
    from fedbound.deploy.mechanisms import flower_aggregation
    from fedbound.training import checkpoint as ckpt
    from fedbound.training.engine import Runner
    from fedbound.validation.recipes.runner import build_run, finish_run

    prep = prepared(cfg)
    timeout = float(cfg.get("fedbound.round-timeout", 600.0))
    key = prep.key + ":flower"
    run_dir = ckpt.prepare_run_dir(cfg["fedbound.run-dir"], key)
    built = build_run(prep)
    check_plan_keys(cfg, plan_keys(prep, built.plan))
    check_deployable(built.algorithm)
    nodes = _node_map(grid, prep.num_clients, timeout)
    aggregate = flower_aggregation(prep.algo)
    runner = Runner(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                    options=built.options, test=built.setup.test, run_dir=run_dir, run_key=key)
    stopped = None
    t0 = time.perf_counter()
    try:
        while runner.active:
            try:
                participants = runner.begin_round()
            except PrivacyBudgetExceeded as exc:
                stopped = f"fedbound flower stopped before {exc}"
                break
            _flower_round(grid, runner, participants, nodes, timeout, aggregate)
            runner.update_global()
            if runner.state.plan is not None:
                _record_flower_epsilon(runner)
            runner.record()
    finally:
        runner.bar.close()
    result = runner.result()
    if stopped:
        result.summary.setdefault("warnings", []).append(stopped)
    flower_eps = [r["epsilon_flower"] for r in result.state.rows
                  if r.get("client") is None and r.get("epsilon_flower") is not None]
    result.summary["epsilon_flower"] = flower_eps[-1] if flower_eps else None
    plan = runner.state.plan
    groups = sorted({v.group_name for v in plan.views if v.kind == "broadcast"}) if plan is not None else []
    last = [r for r in result.state.rows if r.get("client") is None]
    if groups and last:  # fedbound's epsilon of the same releases Flower's accountant counts
        result.summary["epsilon_broadcast"] = {g: last[-1].get(f"epsilon_{g}") for g in groups}
    done = finish_run(prep, built, result, Path(run_dir), time.perf_counter() - t0)
    return done


def server_app(defaults: Mapping[str, Any] | None = None) -> Any:
    """The Flower ServerApp: :func:`serve` with ``defaults`` under the run's ``context.run_config``."""
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve(grid, {**(defaults or {}), **context.run_config})

    return app
