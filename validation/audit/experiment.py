"""How an audit runs its trials (``fedbound.training.trials`` does the running): the noise-free pair, the
fast paths and their bit-for-bit verification, the nominal pass (scores, noise, streams), the halved-noise
control, the coupled shift check of every participant and the one-run experiment.

Trial ``k`` on D has the seed ``trial_seeds(seed, "nominal out", k)``, on D' ``"nominal in"`` (the control:
``"control ..."``): every trial is a run of its own.  Every participant trains in every trial, unless drawing
the other participants' noise per trial would cost more than ``OTHERS_DRAW_BUDGET`` normals: then the
trials train the target alone (no broadcast) or put the others in law (a broadcast; local training
deterministic), and every participant's noise and streams are read from ``VERIFY_TRIALS`` trials per side
run in full (each participant's whole release, ``d`` draws per round, a precise check at that size).  With
a fast path those full trials are also compared with it bit for bit (``fedbound.training.trials.verify``);
a mismatch drops the fast path (a note says so).

One-run (Steinke, Nasr & Jagielski 2023): ONE run of the federation in which every participant carries its
own canary (the search's, ``fedbound.validation.audit.canaries``) with probability 1/2; each participant's
own release is scored as a view's trial is; reported for runs with at least ``ONE_RUN_CANARIES`` canaries.
Its bound carries ``2 m delta`` (m canaries), vacuous at the papers' delta = 0.01 for m >= 50, so it is taken
at ``ONE_RUN_DELTA`` (beside the plan's epsilon at that delta, which a correct mechanism cannot exceed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fedbound.training.noise import derive_seed
from fedbound.validation.audit.observe import NoiseSource, NoiseStats, ViewScores

__all__ = ["Experiment", "Pass", "coupled_checks", "VERIFY_TRIALS", "COUPLED_PAIRS", "ONE_RUN_CANARIES",
           "ONE_RUN_DELTA"]

VERIFY_TRIALS = 2
"""Trials per side run in full beside a fast path, or to read every participant's noise."""
COUPLED_PAIRS = 8
"""Coupled (D, D') pairs per participant when local training is random (1 when it is deterministic)."""
ONE_RUN_CANARIES = 32
"""Fewest canaries (participants) for the one-run estimate."""
ONE_RUN_DELTA = 1e-5
"""The delta of the one-run bound (at most the plan's)."""


@dataclass
class Pass:
    """One pass of trials: per view its :class:`ViewScores`, and (nominal) the noise statistics."""

    trials: int
    scale: float
    views: list[ViewScores]
    noise: NoiseStats | None


@dataclass(frozen=True)
class _Mode:
    """How a pass runs its bulk trials: the setup (everyone or the target alone), the cached local models,
    the others in law, and the full trials (None: the bulk has every participant)."""

    setup: Any
    cache: Any
    in_law: str | None
    full: Any


def _np(t: Any) -> np.ndarray:
    return t.double().numpy()


def _run(setup: Any, changes: list, seeds: list, **kw: Any) -> Any:
    from fedbound.training.trials import run_trials

    return run_trials(setup, changes, seeds, **kw)


def _first(iterator: Any) -> Any:
    return next(iter(iterator))[1]


def _uploads(runs: Any) -> Any:
    return runs.client_uploads if runs.client_uploads is not None else runs.uploads[:, :, None]


def _release(runs: Any, name: str) -> Any:
    if name in runs.client_releases:
        return runs.client_releases[name]
    return runs.releases[name][:, :, None] if name in runs.releases else None


class Experiment:
    """The trials of one audit (module docstring) on the target ``s.target`` with neighbour ``change``."""

    def __init__(self, s: Any, views: Any, prepared: Any, change: Any, starts: Any, rounds: int, seed: int,
                 noise_scale: float) -> None:
        from fedbound.training.trials import TrialSetup, local_cache

        self.s, self.entry_views, self.change, self.rounds, self.seed = s, views, change, rounds, seed
        self.noise_scale = noise_scale
        plan = s.plan
        self.broadcast = any(v.kind == "broadcast" and v.name not in views.releases for v in plan.views)
        self.setup = TrialSetup(prepared, s.model, s.data, s.target, s.participants, s.weights, starts, plan,
                                s.options, self.broadcast)
        self.cache = local_cache(self.setup, {1: change}, seed, plan)
        cached = {} if self.cache is None else {"cache": self.cache, "change_keys": [None, 1]}
        self.clean = _first(_run(replace(self.setup, plan=None), [None, change], [seed, seed],
                                 keep_clients=True, **cached))
        self.notes: list[str] = []
        self._modes: dict[tuple, _Mode] = {}

    @property
    def deterministic(self) -> bool:
        """Does local training draw nothing (its models computed once)?"""
        return self.cache is not None

    # --- how the bulk runs --------------------------------------------------------------------------------
    def _over_budget(self, trials: int) -> bool:
        from fedbound.training.trials import OTHERS_DRAW_BUDGET

        setup = self.setup
        return (setup.width - 1) * setup.model.n_params * self.rounds * 2 * trials > OTHERS_DRAW_BUDGET

    def mode(self, trials: int, cheap: bool = False) -> _Mode:
        """The bulk of a pass of ``trials`` per side (module docstring; ``cheap``: the others in law or
        the target alone whatever the cost, for a pass without noise checks), verified once per kind."""
        from fedbound.training.trials import trial_seeds, verify

        over = (cheap or self._over_budget(trials)) and self.setup.width > 1
        cache = self.cache
        in_law = None
        setup = self.setup
        if over and self.broadcast and cache is not None:
            in_law = next(v.stage for v in self.s.plan.views
                          if v.kind == "broadcast" and v.name not in self.entry_views.releases)
        elif over and not self.broadcast:
            setup = replace(self.setup, everyone=False)
        key = (over, in_law, setup.everyone)
        if key in self._modes:
            return self._modes[key]
        k = VERIFY_TRIALS
        changes = [None] * k + [self.change] * k
        seeds = trial_seeds(self.seed, "nominal out", 0, k) + trial_seeds(self.seed, "nominal in", 0, k)
        full = None
        if cache is not None:
            full, why = verify(setup, changes, seeds, cache, [None] * k + [1] * k, in_law, self.noise_scale)
            if why is not None:
                self.notes.append(f"fast path dropped: {why}; every trial runs in full")
                cache, full = None, None
                if in_law is not None:
                    in_law, setup = None, self.setup
        need_others = in_law is not None or not setup.everyone
        if need_others and (full is None or not setup.everyone):  # every participant's noise, in full
            full = _first(_run(self.setup, changes, seeds, scale=self.noise_scale, keep_clients=True,
                               batch=2 * k))
        mode = _Mode(setup, cache, in_law, full if need_others else None)
        self._modes[key] = mode
        return mode

    def describe(self, trials: int) -> str:
        """How the bulk of ``trials`` per side ran (for the result)."""
        mode = self.mode(trials)
        parts = ["local models computed once, verified bit for bit against full trials"
                 if mode.cache is not None else "every trial trained in full"]
        if mode.in_law is not None:
            parts.append("the other participants' noise in the aggregate drawn in law; their noise "
                         "checked on full trials")
        elif not mode.setup.everyone:
            parts.append("the target trained alone; every participant's noise checked on full trials")
        return "; ".join(parts)

    # --- views and noise sources ----------------------------------------------------------------------
    def view_scores(self, scale: float) -> list[ViewScores]:
        """One :class:`ViewScores` per view of the plan (``observe``'s module docstring)."""
        s, views, clean, rounds = self.s, self.entry_views, self.clean, self.rounds
        plan, target = s.plan, s.target
        out = []
        for view in plan.views:
            seen = rounds if view.max_releases is None else min(rounds, int(view.max_releases))
            own = plan.stage_matrix(view.stage)[:seen, target] * scale
            if view.name in views.releases:
                name = views.releases[view.name]
                std = (np.asarray(views.release_std[view.name](plan, target, seen), np.float64) * scale
                       if view.name in views.release_std else own)
                out.append(ViewScores(lambda r, n=name: r.releases[n], _np(clean.releases[name][:seen, 0]),
                                      _np(clean.releases[name][:seen, 1]), std))
            elif view.kind != "broadcast":
                out.append(ViewScores(lambda r: r.uploads, _np(clean.uploads[:seen, 0]),
                                      _np(clean.uploads[:seen, 1]), own))
            else:
                w = float(s.weights[s.participants == target][0])
                server = np.array([plan.stage_sigma("server", t)[0] for t in range(seen)]) * scale
                up = np.array([plan.stage_sigma(view.stage, t)[s.participants] for t in range(seen)]) * scale
                std = np.sqrt(server**2 + (s.weights**2 * up**2).sum(axis=1))
                hidden = view.sample_rate if view.hidden_sampling and view.sample_rate < 1 else None
                out.append(ViewScores(lambda r: r.broadcasts, _np(clean.broadcasts[:seen, 0]),
                                      _np(clean.broadcasts[:seen, 1]), std, w, hidden,
                                      _np(clean.uploads[:seen, 0])))
        return out

    def sources(self, clients: tuple[int, ...]) -> list[NoiseSource]:
        """The noise sources of releases that hold ``clients`` (in the order of the runs' client axis), all
        against the plan's std (``observe``'s module docstring); the aggregate and the server's only when
        ``clients`` are every participant of a broadcast."""
        s, views, rounds = self.s, self.entry_views, self.rounds
        plan, part = s.plan, s.participants
        ids = np.array(clients, dtype=np.int64)
        out: list[NoiseSource] = []

        def sig(stage: str) -> np.ndarray:
            return np.array([plan.stage_sigma(stage, t, ids) for t in range(rounds)])

        seen = set()
        for view in plan.views:
            if view.name in views.releases or view.kind == "steps" or view.stage in seen:
                continue
            seen.add(view.stage)
            out.append(NoiseSource(view.stage, _uploads, sig(view.stage), clients))
        for stage, name in views.checked_releases.items():
            out.append(NoiseSource(stage, lambda r, n=name: _release(r, n), sig(stage), clients))
        for view in plan.views:
            if view.name in views.releases and view.name in views.release_std:
                name = views.releases[view.name]
                sigma = np.stack([np.asarray(views.release_std[view.name](plan, c, rounds), np.float64)
                                  for c in clients], axis=1)
                out.append(NoiseSource(f"{view.name} (release)", lambda r, n=name: _release(r, n), sigma,
                                       clients))
        if self.broadcast and len(clients) == len(part):
            stage = next(v.stage for v in plan.views
                         if v.kind == "broadcast" and v.name not in views.releases)
            up = np.array([plan.stage_sigma(stage, t)[part] for t in range(rounds)])
            agg = np.sqrt((s.weights**2 * up**2).sum(axis=1))[:, None]
            out.append(NoiseSource(f"{stage} (aggregate)", lambda r: r.aggregates[:, :, None], agg, (-1,)))
        if self.broadcast:
            server = np.array([plan.stage_sigma("server", t)[0] for t in range(rounds)])[:, None]
            out.append(NoiseSource("server", lambda r: (r.broadcasts - r.aggregates)[:, :, None], server,
                                   (-1,)))
        return [src for src in out if np.all(src.sigma > 0)]

    # --- passes ---------------------------------------------------------------------------------------
    def run_pass(self, trials: int, scale: float, kind: str, noise: bool) -> Pass:
        """``trials`` per side under the plan's sigma's times ``scale`` (``kind``: "nominal" or "control"):
        every view's scores and (``noise``) the noise statistics."""
        from fedbound.training.trials import trial_seeds

        mode = self.mode(trials, cheap=not noise)
        changes = [None] * trials + [self.change] * trials
        seeds = (trial_seeds(self.seed, f"{kind} out", 0, trials)
                 + trial_seeds(self.seed, f"{kind} in", 0, trials))
        keys = [None] * trials + [1] * trials
        scores = self.view_scores(scale)
        stats = NoiseStats() if noise else None
        part = tuple(int(c) for c in self.s.participants)
        every = mode.full is None
        bulk_clients = part if every else (self.s.target,)
        bulk = self.sources(bulk_clients) if noise else []
        if noise and not every and mode.in_law is not None:  # the server's noise is still in every trial
            bulk += [src for src in self.sources(part) if src.label == "server"]
            bulk = [src for src in bulk if not src.label.endswith("(aggregate)")]
        rng = np.random.default_rng(derive_seed(self.seed, "audit", kind, "presence"))
        keep = noise and every and len(part) > 1
        for lo, runs in _run(mode.setup, changes, seeds, scale=scale, keep_clients=keep,
                             cache=mode.cache, change_keys=keys if mode.cache is not None else None,
                             others_in_law=mode.in_law, salt=derive_seed(self.seed, kind)):
            sides = np.arange(lo, lo + runs.uploads.shape[1]) >= trials
            for v in scores:
                v.add(runs, sides, rng)
            if stats is not None:
                for src in bulk:
                    stats.add(src, runs, np.flatnonzero(~sides))
        if stats is not None and not every:
            others = [src for src in self.sources(part) if src.clients != (-1,)]
            rows = np.arange(VERIFY_TRIALS)
            for src in others:
                stats.add(src, mode.full, rows)
        return Pass(trials, scale, scores, stats)

    # --- one run --------------------------------------------------------------------------------------
    def one_run(self, canaries: list, scale: float) -> dict[str, Any]:
        """Per view each participant releases on its own (its upload, a named release), the one-run lower
        bound (module docstring); empty below ``ONE_RUN_CANARIES`` participants."""
        from fedbound.training.trials import trial_seeds
        from fedbound.validation.audit.stats import one_run_epsilon

        s, views, rounds = self.s, self.entry_views, self.rounds
        if len(s.participants) < ONE_RUN_CANARIES:
            return {}
        setup = replace(self.setup, broadcast=False, everyone=True)
        rng = np.random.default_rng(derive_seed(self.seed, "one run", "coins"))
        included = rng.random(len(s.participants)) < 0.5
        by_client = {c.client: c.change for c in canaries}
        all_in = {int(c): by_client[int(c)] for c in s.participants}
        mine = {int(c): by_client[int(c)] for c, inc in zip(s.participants, included, strict=True) if inc}
        seed = trial_seeds(self.seed, "one run", 0, 1)[0]
        clean = _first(_run(replace(setup, plan=None), [None, all_in], [seed, seed], keep_clients=True))
        run = _first(_run(setup, [mine], [seed], scale=scale, keep_clients=True))
        out = {}
        for view in s.plan.views:
            if view.kind == "broadcast" and view.name not in views.releases:
                continue
            if view.name in views.releases:
                name = views.releases[view.name]
                y, c0 = run.client_releases.get(name), clean.client_releases.get(name)
                if y is None:
                    continue
            else:
                y, c0 = run.client_uploads, clean.client_uploads
            seen = rounds if view.max_releases is None else min(rounds, int(view.max_releases))
            y, out0, in0 = _np(y[:seen, 0]), _np(c0[:seen, 0]), _np(c0[:seen, 1])
            std = np.array([s.plan.stage_sigma(view.stage, t)[s.participants] for t in range(seen)]) * scale
            w = np.where(std > 0, 1.0 / np.maximum(std, 1e-300) ** 2, 0.0)
            scores = np.sum(np.einsum("tjd,tjd->tj", y - out0, in0 - out0) * w, axis=0)
            out[view.name] = one_run_epsilon(scores, included, min(ONE_RUN_DELTA, s.plan.delta),
                                             0.05 / len(s.plan.views))
        return out


def coupled_checks(s: Any, canaries: list, prepare: Any, starts: Any, seed: int, scale: float,
                   deterministic: bool) -> list[tuple[str, int, float, float, int]]:
    """``(stage, client, largest shift, sensitivity, calls)`` per noise stage the ledger gives a sensitivity
    and per participant, from ``fedbound.training.trials.coupled_shifts`` on its canary."""
    from fedbound.training.trials import TrialSetup, coupled_shifts, trial_seeds

    pairs = 1 if deterministic else COUPLED_PAIRS
    seeds = trial_seeds(seed, "coupled", 0, pairs)
    out = []
    for c in canaries:
        setup = TrialSetup(prepare(c.client), s.model, s.data, c.client, s.participants, s.weights, starts,
                           s.plan, s.options, False, False)
        for stage, values in coupled_shifts(setup, c.change, seeds, scale).items():
            if stage in s.ledger_plan.sensitivity and len(values):
                out.append((stage, c.client, float(values.max()),
                            float(s.ledger_plan.stage_sensitivity(stage)[c.client]), len(values)))
    return out

