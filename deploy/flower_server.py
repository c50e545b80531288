"""The ServerApp: fedbound's :class:`~fedbound.training.engine.Runner` driving Flower's Grid.

Why not a wrapper of Flower's ``FedAvg`` / ``DifferentialPrivacyServerSideFixedClipping``: FedAvg weights
the uploads by ``num-examples`` and samples with its own RNG; the DP wrappers truncate the sampled count
with ``int()``, add less noise when clients drop out, and draw noise from numpy's global RNG.  None of that
is what fedbound's ledger counts.  Here each round is the engine's round, with Flower as the transport:

1. ``Runner.begin_round``: the algorithm's participants (K of N without replacement, as ``fedbound train``
   draws them, from the server's secret stream: "Randomness" below), its aggregation weights (uniform where
   the paper's sensitivity needs it), the round's releases, and the budget check of fedbound's ledger: a
   round that would push the budget accountant past eps is never started (the rounds done are written and
   the run stops with PrivacyBudgetExceeded);
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

**Randomness** (docs/guides/flower.md, "Randomness"): the server's noise (NbAFL's sigma_D, DP-FedAvg's
noise through Flower's wrapper) comes from the server's OS CSPRNG
(:class:`fedbound.training.secure_noise.SecureStreams`), and its participant sampling from a secret only
the server holds (:func:`fedbound.deploy.replay.party_secret`, in the run directory): the clients hold the
run seed, so a sample drawn from it would not be hidden from them, as the ledger's amplification by K-of-N
sampling assumes.  The run seed fixes the data split and the initial model.  ``serve(..., simulation=True)``
on Flower's simulation engine may run with ``fedbound.reproducible-noise``: every draw from the run seed,
exactly as ``fedbound train`` (its summary, progress line and warnings say so).

**Resuming.**  A killed or refused run resumes from its checkpoint: the ledger is saved with the round it
counted, so no round is counted twice or missed.  A repeated round asks the same participants (the
secret-keyed sample of that round), each of which re-sends the upload it kept for that request
(:class:`fedbound.deploy.replay.UploadStore`): repeating a round releases no fresh client noise.  The
server's noise of a round is drawn again, but the noised model of an uncounted round never left the
server (the next round's messages go out only after the checkpoint).  Beside fedbound's epsilon, each
round's row carries ``epsilon_flower``: Flower's own ``RdpAccountant`` over the broadcast releases (views
of kind ``"broadcast"``), where it applies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbound.deploy.flower_privacy import flower_epsilon
from fedbound.errors import ConfigError, FedboundError, PrivacyBudgetExceeded

__all__ = ["RoundRefused", "serve", "server_app", "flower_epsilon", "binding_epsilon", "progress_text",
           "not_dp_note"]  # flower_epsilon: fedbound.deploy.flower_privacy's, re-exported


class RoundRefused(FedboundError):
    """A round that fedbound will not aggregate (missing uploads, wrong noise); the checkpoint stays."""


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
    replayed = sum(int(r.content["metrics"].get("replayed", 0)) for r in replies.values())
    if replayed:
        ctx.log("replayed_uploads", replayed)
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


def _flower_before_round(runner: Any, guard: Any, participants: np.ndarray) -> PrivacyBudgetExceeded | None:
    """Flower's guard before the round (:mod:`fedbound.deploy.flower_privacy`): ``would_exceed`` of this
    round's broadcast releases; with ``flower.guard = "stop"`` the stop (returned), else the round is
    flagged in its row (``flower_would_exceed``) and runs if fedbound's ledger allowed it."""
    from fedbound.deploy.flower_privacy import round_events

    plan = runner.state.plan
    if guard is None or plan is None:
        return None
    past = runner.state.algo_state.get("flower_rdp_events", [])
    new = round_events(runner.releases, len(participants), plan.num_clients)
    if not guard.would_exceed(past, new):
        return None
    after = guard.epsilon([*past, *new])
    shown = "-" if after is None else f"{after:.6g}"
    text = (f"round {runner.ctx.round + 1}: Flower's RdpAccountant would exceed its max_epsilon = "
            f"{guard.budget:g} (would_exceed; eps = {shown} after the round, on its RDP bound)")
    if guard.mode == "stop":
        return PrivacyBudgetExceeded(f"{text}; flower.guard = stop")
    runner.ctx.log("flower_would_exceed", 1.0)
    return None


def _record_flower_epsilon(runner: Any, participants: np.ndarray) -> None:
    """Append this round's broadcast releases to Flower's accountant events; log its epsilon."""
    from fedbound.deploy.flower_privacy import round_events

    events = runner.state.algo_state.setdefault("flower_rdp_events", [])
    new = round_events(runner.releases, len(participants), runner.state.plan.num_clients)
    events.extend(new)
    if new:
        eps = flower_epsilon(events, runner.state.plan.delta)
        if eps is not None:
            runner.ctx.log("epsilon_flower", eps)


def _flower_summary(summary: dict[str, Any], rows: list[dict[str, Any]], guard: Any, plan: Any) -> None:
    """Flower's accounting beside fedbound's in the summary: its PrivacyConfig and guard, its epsilon of
    the broadcast, fedbound's of the same releases, the difference explained, the rounds its guard flagged."""
    from fedbound.deploy.flower_privacy import PREFIX, difference

    if guard is None:
        summary["flower_accounting"] = {"privacy_config": None, "note": (
            "no central release: every release is a client's own upload or local step, which Flower's "
            "central accountant does not count; fedbound's ledger guards the budget")}
        return
    flagged = [int(r["round"]) for r in rows if r.get("flower_would_exceed")]
    groups = sorted({v.group_name for v in plan.views if v.kind == "broadcast"})
    ours = max((rows[-1].get(f"epsilon_{g}") or 0.0 for g in groups), default=None) if rows else None
    method = guard.keys.get(f"{PREFIX}sampling-method")
    info = {"privacy_config": {k.removeprefix(PREFIX): v for k, v in guard.keys.items()},
            "guard": guard.mode, "epsilon": summary.get("epsilon_flower"),
            "epsilon_fedbound_same_releases": ours, "would_exceed_rounds": flagged,
            "difference": difference(ours, summary.get("epsilon_flower"), method)}
    summary["flower_accounting"] = info
    if flagged and info["epsilon"] is not None and ours is not None:
        summary.setdefault("warnings", []).append(
            f"Flower's RdpAccountant (max_epsilon = {guard.budget:g}) would have stopped round {flagged[0]} "
            f"(would_exceed): its eps of the broadcast is {info['epsilon']:.4g} where fedbound's for the "
            f"same releases is {ours:.4g}; {info['difference']}; the budget binds on fedbound's tight "
            "accountant (--flower-guard stop: Flower's guard binds too)")


def binding_epsilon(values: Mapping[str, Any], binding_accountant: str) -> tuple[float | None, str,
                                                                                float | None, str]:
    """``(binding eps, its label, the other eps, its label)`` of a metrics row or summary: the budget binds
    on ``binding_accountant`` (the plan's: the tight accountant, or the paper's in a paper-reproduction
    run); the other is shown beside it (the paper's claim, or the exact eps)."""
    tight, paper = values.get("epsilon_spent"), values.get("epsilon_spent_paper")
    if binding_accountant == "paper":
        return paper, "the paper's accountant (paper reproduction)", tight, "exact (tight accountant)"
    return tight, "tight accountant", paper, "the paper's claim (its own accountant)"


def not_dp_note(values: Mapping[str, Any], plan: Any) -> str | None:
    """In a run whose budget binds on the paper's accountant (paper reproduction): "not (ε, δ)-DP at the
    stated budget: exact ε = X" once the exact (tight) eps exceeds the budget; None otherwise."""
    exact = values.get("epsilon_spent")
    if plan is None or plan.binding_accountant != "paper" or exact is None or exact <= plan.eps * (1 + 1e-9):
        return None
    return f"not (ε, δ)-DP at the stated budget: exact ε = {exact:.4g}"


def progress_text(row: Mapping[str, Any], plan: Any, reproducible: bool) -> str:
    """The progress line of a Flower round: loss, the binding eps against the budget, the paper's claim
    beside it (in a paper reproduction: the exact eps, and that the run is not DP at the stated budget once
    it exceeds it), and where the noise came from."""
    parts = [f"loss={row['loss']:.4f}"] if row.get("loss") is not None else []
    if plan is not None:
        binding, _, other, other_label = binding_epsilon(row, plan.binding_accountant)
        if binding is not None:
            parts.append(f"eps={binding:.4g}/{plan.eps:g} ({plan.binding_accountant}, binding)")
        if other is not None:
            name = "exact" if plan.binding_accountant == "paper" else "paper's claim"
            parts.append(f"{name}={other:.4g}")
        note = not_dp_note(row, plan)
        if note:
            parts.append(f"[{note}]")
    parts.append("noise: " + ("REPRODUCIBLE from the seed (simulation only)" if reproducible
                              else "OS entropy"))
    return " ".join(parts)


class _FlowerBar:
    """The Runner's progress bar, its postfix written by the ServerApp only (:func:`progress_text`): the
    engine's own ``loss=... eps=...`` line is dropped, so the bar never shows an unlabelled eps."""

    def __init__(self, bar: Any) -> None:
        object.__setattr__(self, "_bar", bar)

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        return None

    def show(self, text: str) -> None:
        self._bar.set_postfix_str(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bar, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._bar, name, value)


def _simulation_grid(grid: Any) -> bool:
    """Is ``grid`` the Grid of a simulation (Flower's in-memory simulation Grid, or fedbound's
    :class:`~fedbound.deploy.flower_local.InProcessGrid`)?"""
    if getattr(type(grid), "fedbound_simulation", False) is True:
        return True
    try:
        from flwr.superlink.grid import InMemoryGrid
    except ImportError:  # pragma: no cover - flwr without its simulation grid
        return False
    return isinstance(grid, InMemoryGrid)


def serve(grid: Any, cfg: Mapping[str, Any], *, simulation: bool = False, progress: bool = False) -> Any:
    """Run the configured plan over ``grid``; write the run directory; return the TrainRun (module doc).
    Each round and the outcome (done, or the error that stopped the run) also go to the run's events file
    and Flower's log (:mod:`fedbound.deploy.flower_events`)."""
    from fedbound.deploy.flower_events import write_event

    target = cfg.get("fedbound.run-dir")
    try:
        done = _serve(grid, cfg, simulation=simulation, progress=progress)
    except BaseException as exc:
        if target:
            write_event(target, {"event": "error", "type": type(exc).__name__, "message": str(exc)})
        raise
    if target:
        write_event(target, {"event": "done", "rounds_done": done.summary.get("rounds_done")})
    return done


def _serve(grid: Any, cfg: Mapping[str, Any], *, simulation: bool = False, progress: bool = False) -> Any:
    """:func:`serve` without its outcome event.

    ``simulation``: the caller drives Flower's simulation engine (``run_app``, tests): only then, and only
    on a simulation Grid, may the run config ask for reproducible noise.  ``progress``: a progress bar on
    stderr (binding eps against the budget, the paper's claim beside it, the noise source).  A round the
    budget cannot afford is never started: the rounds done are written to the run directory, then
    PrivacyBudgetExceeded is raised (its ``summary``: the run's summary)."""
    from fedbound.deploy.flower_client import check_deployable
    from fedbound.deploy.flower_session import (
        REPRODUCIBLE_NOTE,
        check_deployed_noise,
        check_plan_keys,
        plan_keys,
        prepared,
        reproducible_noise,
    )
    from fedbound.deploy.mechanisms import flower_aggregation
    from fedbound.deploy.replay import party_secret
    from fedbound.training import checkpoint as ckpt
    from fedbound.training.engine import Runner
    from fedbound.training.secure_noise import SecureStreams
    from fedbound.validation.recipes.runner import build_run, finish_run

    seeded = reproducible_noise(cfg, simulation and _simulation_grid(grid), "ServerApp")
    prep = prepared(cfg)
    timeout = float(cfg.get("fedbound.round-timeout", 600.0))
    key = prep.key + (":flower:reproducible" if seeded else ":flower")
    run_dir = ckpt.prepare_run_dir(cfg["fedbound.run-dir"], key)
    built = build_run(prep, progress)
    check_plan_keys(cfg, plan_keys(prep, built.plan))
    guard = _flower_guard(cfg, built.plan)
    check_deployed_noise(prep, built.plan)
    check_deployable(built.algorithm)
    nodes = _node_map(grid, prep.num_clients, timeout)
    aggregate = flower_aggregation(prep.algo)
    runner = Runner(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                    options=built.options, test=built.setup.test, run_dir=run_dir, run_key=key)
    if not seeded:  # after the initial model (the run seed's): the server's noise and participant sample
        runner.streams = SecureStreams(built.options.seed, runner.device, party_secret(run_dir, key))
    runner.bar = _FlowerBar(runner.bar)
    plan = runner.state.plan
    stopped = None
    t0 = time.perf_counter()
    checked = runner.state.plan
    try:
        while runner.active:
            started = time.perf_counter()
            if runner.state.plan is not checked:  # CRD (UDP) changed sigma: no vanishing noise either
                check_deployed_noise(prep, checked := runner.state.plan)
            try:
                participants = runner.begin_round()
            except PrivacyBudgetExceeded as exc:
                stopped = exc
                break
            stopped = _flower_before_round(runner, guard, participants)
            if stopped is not None:
                break
            _flower_round(grid, runner, participants, nodes, timeout, aggregate)
            runner.update_global()
            if runner.state.plan is not None:
                _record_flower_epsilon(runner, participants)
            runner.record()
            rows = [r for r in runner.state.rows if r.get("client") is None]
            text = progress_text(rows[-1], runner.state.plan, seeded)
            runner.bar.show(text)
            _round_event(run_dir, rows[-1], runner, text, time.perf_counter() - started, not simulation)
    finally:
        runner.bar.close()
    result = runner.result()
    summary = result.summary
    summary["noise_source"] = "run seed (reproducible: simulation only)" if seeded else "os-entropy"
    if plan is not None:  # the binding eps against the budget, the other accountant's beside it, labelled
        binding, label, other, other_label = binding_epsilon(summary, plan.binding_accountant)
        summary["epsilon_binding_detail"] = {"value": binding, "budget": plan.eps, "delta": plan.delta,
                                             "accountant": label, "beside": other, "beside_is": other_label}
    note = not_dp_note(summary, plan)
    if note and not any(note.split(":")[0] in w for w in summary.get("warnings", [])):
        summary.setdefault("warnings", []).insert(0, note)
    if seeded:
        summary.setdefault("warnings", []).insert(0, REPRODUCIBLE_NOTE)
    if stopped is not None:
        summary.setdefault("warnings", []).append(f"fedbound flower stopped before {stopped}")
    flower_eps = [r["epsilon_flower"] for r in result.state.rows
                  if r.get("client") is None and r.get("epsilon_flower") is not None]
    summary["epsilon_flower"] = flower_eps[-1] if flower_eps else None
    groups = sorted({v.group_name for v in plan.views if v.kind == "broadcast"}) if plan is not None else []
    last = [r for r in result.state.rows if r.get("client") is None]
    if groups and last:  # fedbound's epsilon of the same releases Flower's accountant counts
        summary["epsilon_broadcast"] = {g: last[-1].get(f"epsilon_{g}") for g in groups}
    if plan is not None:
        _flower_summary(summary, last, guard, plan)
    done = finish_run(prep, built, result, Path(run_dir), time.perf_counter() - t0)
    if stopped is not None:
        s = done.summary
        error = PrivacyBudgetExceeded(f"fedbound flower stopped before {stopped}; {s['rounds_done']} of "
                                      f"{s['rounds_planned']} rounds were run and are in {run_dir}")
        error.summary = done.summary
        raise error
    return done


def _flower_guard(cfg: Mapping[str, Any], plan: Any) -> Any:
    """Flower's guard of the run (:class:`fedbound.deploy.flower_privacy.FlowerGuard`) from the PrivacyConfig
    the plan emits, after checking the run config's ``flower.privacy.*`` against it (an edited value is
    refused, like a ``plan.*``); None for a plan without central releases."""
    from fedbound.deploy.flower_privacy import GUARD_KEY, PREFIX, FlowerGuard, privacy_config

    expected = privacy_config(plan, str(cfg.get(GUARD_KEY, "report")))
    for key, want in expected.items():
        if key.startswith(PREFIX) and key in cfg and str(cfg[key]) != str(want) and not (
                isinstance(want, float) and np.isclose(float(cfg[key]), want, rtol=1e-9, atol=0.0)):
            raise ConfigError(f"the Flower run config has {key} = {cfg[key]!r}, but the PrivacyConfig of the "
                              f"plan fedbound computes is {want!r}: Flower's accountant must count the "
                              "releases the plan makes; write the app again (fedbound flower PAPER CONFIG "
                              "--out APP_DIR)")
    return FlowerGuard(expected) if expected else None


def _round_event(run_dir: Path, row: Mapping[str, Any], runner: Any, text: str, seconds: float,
                 flower_log: bool) -> None:
    """The round's event (its number, the labelled progress line, the binding eps against the budget,
    its wall time) into the events file and, deployed (``flower_log``), Flower's log, which ``flwr run
    --stream`` shows (:mod:`fedbound.deploy.flower_events`); a simulation has its progress bar."""
    from fedbound.deploy.flower_events import log_round, write_event

    plan = runner.state.plan
    binding = None if plan is None else binding_epsilon(row, plan.binding_accountant)[0]
    event = {"event": "round", "round": int(row["round"]), "rounds": int(runner.state.rounds),
             "seconds": float(seconds), "text": text, "epsilon": binding,
             "budget": None if plan is None else float(plan.eps),
             "accountant": None if plan is None else plan.binding_accountant,
             "epsilon_flower": row.get("epsilon_flower")}
    write_event(run_dir, event)
    if flower_log:
        log_round(event)


def server_app(defaults: Mapping[str, Any] | None = None, *, simulation: bool = False) -> Any:
    """The Flower ServerApp: :func:`serve` with ``defaults`` under the run's ``context.run_config``
    (``simulation``: as :func:`serve`'s; an app ``fedbound flower`` writes has False)."""
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve(grid, {**(defaults or {}), **context.run_config}, simulation=simulation)

    return app
