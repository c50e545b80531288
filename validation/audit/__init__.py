"""``fedbound.validation.audit``: The privacy audit: neighbouring copies of the worst participant trained by
the real engine with the noise the runs really draw, an epsilon lower bound per adversary view against the
reported epsilon and an epsilon recomputed without the ledger, every participant's noise and sensitivity
checked, a positive control; one module per paper declares its ``AUDIT`` views.  Also the sensitivity probe
of ``fedbound train`` and the provable sensitivity's setting.

Modules: ``adaptive``, ``canaries``, ``dppfl``, ``experiment``, ``federation``, ``independent``, ``nbafl``,
``observe``, ``plot``, ``probe``, ``provable``, ``result``, ``stats``, ``udp``, ``views``, ``wpfl``.

``fedbound audit``: what a configured mechanism actually leaks, measured by running it end to end.

The privacy reviewer's experiment, for one paper's setting (its ``[PAPER]`` and ``[train]`` sections):

1. the paper's recipe builds the data, the noise plan and the algorithm exactly as ``fedbound train`` does;
   its hooks, called once for round 1, say who participates with which aggregation weight; with
   ``rounds = R`` a real run on D gives each round's global model and the plan in force (CRD changes it),
   and the trials use each round's sigma's (``federation``);
2. every participant gets a canary at the audited ``level`` (``AuditViews.levels``, the paper's own unit
   first): the full canary search on the smallest, the search's best crafted records and its own natural
   ones on every other (``canaries``); the *target* is the participant whose canary moves its noise-free
   upload the largest fraction of the sensitivity the ledger assumes for it;
3. ``trials`` trials on D and ``trials`` on D' (``fedbound.training.trials``): each trial a run of round 1's
   federation with its own seed, every hook of the algorithm (local update, upload with its clipping,
   noise and channel, server update on the trial's own aggregate), each round from the real run's global
   model, every draw from the run's own streams; streamed in batches (memory does not grow with the
   trials); local models computed once where local training draws nothing, verified bit for bit against
   full trials; the other participants in law where drawing their noise per trial would cost too much
   (``experiment``);
4. each adversary view of the plan gets a likelihood-ratio score per trial (``observe``): the projection of
   what it sees (the target's upload, the server's output, or a release an entry names) on the noise-free
   shift ``view(D') - view(D)``, weighted by ``1 / std^2`` per round (its planned std), over the first
   ``max_releases`` rounds; a broadcast whose sampling is hidden keeps the target's term in a fraction ``q``
   of the trials;
5. ``stats`` turns the scores into an epsilon lower bound (Clopper-Pearson over thresholds fixed from the
   plan before the trials, level ``1 - ALPHA / views``), Nasr et al. 2023's Gaussian-DP estimate and lower
   bound, and a Gaussian fit; with many participants, Steinke et al. 2023's one-run bound (``experiment``);
6. ``independent`` recomputes the target's epsilon from the plan's sigma's, the rounds, the sampling and the
   replace-one relation with dp-accounting, beside the ledger's.

Verdict (the run's *reported* epsilon is the ledger's tight epsilon for the design as deployed; the paper's
accountant is shown beside it).  ``LEAK`` when any of: a view's lower bound exceeds its reported epsilon;
the ledger reports less than the independent epsilon (``IndependentEpsilon.under_reported``); some noise is
significantly below the plan (``noise_checks``: per stage and client, per stage and round, the server's,
the aggregate's; chi-square intervals on the std ratio of pairs of trials) or its draws are correlated
across rounds, clients or trials (``stream_checks``), at level ``1 - NOISE_ALPHA / checks``; a noise stage's
input moves further between D and D' than the sensitivity the ledger assumes, for any participant's canary
(``shift_checks``: D and D' side by side with one seed, every noise call handing D' the output of D, so a
stage after a noised one is measured given equal earlier releases; random local training: over
``COUPLED_PAIRS`` seeds).  A correct mechanism with a correct ledger is called LEAK with probability at most
``ALPHA + NOISE_ALPHA`` (the shift checks and the independent epsilon are deterministic).  Otherwise
``underpowered`` when the positive control (the same audit with the plan's noise halved, through the same
trials) is not detected in any view (its lower bound at most the independent epsilon), with the smallest
epsilon the audit could have detected and the trials the control would need (``stats.detectable_epsilon``,
``trials_needed``); otherwise ``consistent``.  ``trials="auto"`` doubles the count from ``DEFAULT_TRIALS``
until the control is detected or ``MAX_TRIALS`` is reached.

Seeds: ``seed`` 0 audits ``[train] seed`` as configured; any other ``seed`` derives a new one for
everything (data split, model init, canary search, trial noise), so audits with different seeds are
independent replicates.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ConfigError
from fedbound.validation.audit.experiment import ONE_RUN_DELTA
from fedbound.validation.audit.result import (
    AuditResult,
    NoiseCheck,
    ShiftCheck,
    StreamCheck,
    ViewAudit,
    verdict,
)
from fedbound.validation.audit.views import LEVELS, AuditViews, without

__all__ = ["AuditViews", "ViewAudit", "NoiseCheck", "StreamCheck", "ShiftCheck", "AuditResult", "audit",
           "audit_from_config", "without", "CANARIES", "LEVELS", "MAX_AUDIT_ROUNDS", "MAX_TRIALS",
           "DEFAULT_TRIALS", "AUTO_TRIALS_LIMIT", "ALPHA", "NOISE_ALPHA"]

CANARIES = ("worst", "flip", "given")
MAX_TRIALS = 64_000
"""Trials per side, at most (memory does not grow with them; time does, linearly)."""
AUTO_TRIALS_LIMIT = MAX_TRIALS
"""``trials="auto"`` stops raising the trial count here."""
MAX_AUDIT_ROUNDS = 100
DEFAULT_TRIALS = 2000
ALPHA = 0.05
"""Lower bounds: a correct mechanism's lower bound exceeds its epsilon in some view with probability <= ALPHA
(Bonferroni over the views)."""
NOISE_ALPHA = 0.001
"""Noise and stream checks: a correct mechanism is called significantly low or correlated in some check
with probability <= NOISE_ALPHA (Bonferroni over the checks)."""


def _effective_seed(train_seed: int, seed: int) -> int:
    """``[train] seed`` for ``seed`` 0, else a seed derived from both (module docstring)."""
    from fedbound.training.noise import derive_seed

    return int(train_seed) if seed == 0 else derive_seed(int(train_seed), "audit", int(seed)) & 0x7FFFFFFF


def _trials(trials: int | str, control: bool) -> tuple[int, bool]:
    """(trials per side, auto) after the one-line checks of ``--trials``."""
    if trials == "auto":
        if not control:
            raise ConfigError("--trials = auto needs the halved-noise control (it raises the trials until "
                              "the control is detected): drop --no-control or give a number of trials")
        return DEFAULT_TRIALS, True
    if isinstance(trials, str) or isinstance(trials, bool) or not 4 <= trials <= MAX_TRIALS:
        raise ConfigError(f"--trials = {trials} is outside its valid range integer in [4, {MAX_TRIALS}] or "
                          "auto")
    return int(trials), False


def _view_results(s: Any, views: AuditViews, nominal: Any, reported: dict, independent: dict,
                  shifts: list[ShiftCheck], alpha: float, one_run: dict, one_run_ref: dict
                  ) -> list[ViewAudit]:
    """Per view of the plan: the statistics of the nominal pass (module docstring, steps 5-6)."""
    from fedbound.validation.audit.stats import (
        epsilon_lower_bound_at,
        gaussian_fit,
        gdp_estimate,
        threshold_grid,
    )

    out = []
    for view, sc in zip(s.plan.views, nominal.views, strict=True):
        out_s, in_s = sc.scores_out, sc.scores_in
        grid = threshold_grid(sc.planned_score_std)
        lb = epsilon_lower_bound_at(out_s, in_s, grid, s.plan.delta, alpha)
        gdp = gdp_estimate(out_s, in_s, grid, s.plan.delta, alpha)
        fit = gaussian_fit(out_s, in_s, s.plan.delta)
        tight = reported["tight"].get(view.group_name, 0.0)
        paper = reported.get("paper", {}).get(view.group_name)
        ind = independent.get(view.group_name)
        weight = sc.weight
        sens = weight * (views.release_sensitivity[view.name](s.ledger_plan, s.target)
                         if view.name in views.release_sensitivity
                         else float(s.ledger_plan.stage_sensitivity(view.stage)[s.target]))
        stages = {view.stage} | ({"inner", "outer"} if view.name in views.release_sensitivity else set())
        exceeded = any(c.exceeded for c in shifts if c.client == s.target and c.stage in stages)
        run = one_run.get(view.name)
        out.append(ViewAudit(
            view.name, view.kind, lb.epsilon, tight, paper, tight, fit.mu, fit.epsilon,
            (fit.epsilon_low, fit.epsilon_high), sc.measured_std, float(np.max(sc.std)),
            float(np.linalg.norm(sc.shift, axis=1).max()), sens, lb.false_positives, lb.false_negatives,
            lb.n_out, epsilon_independent=None if ind is None else ind.upper,
            epsilon_independent_low=None if ind is None else ind.lower,
            independent_method="" if ind is None else ind.method,
            under_reported=bool(ind is not None and ind.under_reported(tight)),
            gdp_mu=gdp.mu, gdp_epsilon=gdp.epsilon, gdp_mu_low=gdp.mu_low, gdp_epsilon_low=gdp.epsilon_low,
            one_run_epsilon=None if run is None else run.epsilon,
            one_run_canaries=None if run is None else run.canaries,
            one_run_delta=None if run is None else min(ONE_RUN_DELTA, s.plan.delta),
            one_run_reference=None if run is None or view.group_name not in one_run_ref
            else one_run_ref[view.group_name].upper,
            leak=lb.epsilon > tight, shift_exceeded=exceeded, alpha=alpha, scores_out=out_s.tolist(),
            scores_in=in_s.tolist()))
    return out


def _noise_results(nominal: Any) -> tuple[list[NoiseCheck], list[StreamCheck]]:
    """The noise checks and stream tests of the nominal pass, Bonferroni over all of them."""
    from fedbound.validation.audit.stats import std_ratio_interval

    stats = nominal.noise
    if stats is None:
        return [], []
    tests = stats.stream_tests()
    alpha = NOISE_ALPHA / max(len(stats.sq) + len(tests), 1)
    checks = []
    for (label, kind, key), (total, dof) in sorted(stats.sq.items(), key=lambda kv: str(kv[0])):
        if not dof:
            continue
        low, high, ratio = std_ratio_interval(total, dof, alpha)
        checks.append(NoiseCheck(label, 1.0, ratio, low, high, int(dof), alpha,
                                 client=key if kind == "client" else None,
                                 round=key if kind == "round" else None))
    streams = [StreamCheck(label, relation, t, n, alpha) for label, relation, t, n in tests]
    return checks, streams


def _control(experiment: Any, results: list[ViewAudit], trials: int, s: Any, alpha: float) -> list[ViewAudit]:
    """The halved-noise control's lower bound per view, and the trials it would need."""
    from fedbound.validation.audit.stats import (
        epsilon_lower_bound_at,
        gaussian_fit,
        threshold_grid,
        trials_needed,
    )

    control = experiment.run_pass(trials, 0.5 * experiment.noise_scale, "control", noise=False)
    out = []
    for r, sc in zip(results, control.views, strict=True):
        lb = epsilon_lower_bound_at(sc.scores_out, sc.scores_in, threshold_grid(sc.planned_score_std),
                                    s.plan.delta, alpha)
        mu = gaussian_fit(sc.scores_out, sc.scores_in, s.plan.delta).mu
        out.append(replace(r, control_epsilon_lower=lb.epsilon, control_mu=mu,
                           trials_needed=trials_needed(mu, r.epsilon_claimed, s.plan.delta, alpha)))
    return out


def audit(paper: str, setting: Mapping[str, Any], train: Mapping[str, Any], *,
          trials: int | str = DEFAULT_TRIALS, canary: str = "worst", rounds: int = 1, control: bool = True,
          noise_scale: float = 1.0, probe_records: int = 8, canary_record: int | None = None, seed: int = 0,
          level: str | None = None) -> AuditResult:
    """The audit of ``paper`` on its validated ``setting`` and ``[train]`` table (module docstring);
    ``level`` None: the paper's own privacy unit (``AuditViews.levels[0]``); ``trials``: per side, or
    ``"auto"``; ``noise_scale`` (a test hook) multiplies every sigma of the plan the trials run with."""
    from fedbound.registry import get
    from fedbound.training.noise import derive_seed
    from fedbound.validation.audit import canaries as canary_mod
    from fedbound.validation.audit import federation as fed
    from fedbound.validation.audit.experiment import Experiment, coupled_checks
    from fedbound.validation.audit.independent import independent_epsilons
    from fedbound.validation.audit.stats import detectable_epsilon

    entry = get(paper, "audit")
    rec, views = entry.load("recipe"), entry.load("audit")
    trials, auto = _trials(trials, control)
    level = views.levels[0] if level is None else level
    if level not in views.levels:
        raise ConfigError(f"--level = {level!r} is outside its valid range one of {', '.join(views.levels)} "
                          f"(the neighbouring relations {entry.short} is audited for)")
    if canary not in CANARIES:
        raise ConfigError(f"--canary = {canary!r} is outside its valid range one of {', '.join(CANARIES)}")
    if not (math.isfinite(noise_scale) and noise_scale >= 0):
        raise ConfigError(f"noise_scale = {noise_scale} is outside its valid range [0, inf)")
    if not train["private"]:
        raise ConfigError("audit: [train] private = false trains without noise; there is nothing to audit")
    t0 = time.perf_counter()
    total_rounds = rec.rounds(setting)
    if not 1 <= rounds <= min(total_rounds, MAX_AUDIT_ROUNDS):
        raise ConfigError(f"--rounds = {rounds} is outside its valid range integer in "
                          f"[1, {min(total_rounds, MAX_AUDIT_ROUNDS)}] (the setting's T, at most "
                          f"{MAX_AUDIT_ROUNDS})")
    base = _effective_seed(train["seed"], seed)
    train = {**train, "seed": base}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = fed.round_one(rec, setting, train, rounds)
        starts, plans = fed.trajectory(s, rounds)
        s.round_plans = plans
        s.plan = fed.realized_plan(plans, rounds)
        s.ledger_plans = tuple(fed.at_level(views.ledger(p), level, s.data.sizes) for p in plans)
        s.ledger_plan = fed.at_level(views.ledger(s.plan), level, s.data.sizes)

        def prepare(client: int) -> Any:
            return views.prepared(s.algorithm, client)

        found_all, found = canary_mod.search(canary, level, s, prepare, starts, probe_records, canary_record,
                                             derive_seed(base, "audit", "canary") & 0x7FFFFFFF,
                                             s.plan.views[0].stage)
        chosen = canary_mod.worst(found_all)
        s.target, change = chosen.client, chosen.change
        reported = fed.reported(s.ledger_plans, s.participants, s.weights, rounds, s.target)
        independent = independent_epsilons(s.ledger_plan, s.target, s.participants, s.weights, rounds)
        experiment = Experiment(s, views, prepare(s.target), change, starts, rounds, base, noise_scale)
        shifts = [ShiftCheck(*c) for c in coupled_checks(s, found_all, prepare, starts, base, noise_scale,
                                                         experiment.deterministic)]
        one_run = experiment.one_run(found_all, noise_scale)
        one_run_ref = independent_epsilons(replace(s.ledger_plan, delta=min(ONE_RUN_DELTA, s.plan.delta)),
                                           s.target, s.participants, s.weights, rounds) if one_run else {}
        alpha = ALPHA / len(s.plan.views)
        while True:
            nominal = experiment.run_pass(trials, noise_scale, "nominal", noise=True)
            results = _view_results(s, views, nominal, reported, independent, shifts, alpha, one_run,
                                    one_run_ref)
            if control:
                results = _control(experiment, results, trials, s, alpha)
            if not (auto and control) or any(v.control_detected for v in results) or trials >= MAX_TRIALS:
                break
            trials = min(MAX_TRIALS, 2 * trials)
        checks, streams = _noise_results(nominal)
        results = [replace(v, detectable_epsilon=_finite(detectable_epsilon(trials, v.epsilon_reported,
                                                                             s.plan.delta, v.alpha)))
                   for v in results]
    notes = list(dict.fromkeys(str(w.message) for w in caught)) + experiment.notes
    if auto:
        notes.append(f"--trials auto: {trials} trials per side" + (
            "" if any(v.control_detected for v in results) else
            f", the limit {MAX_TRIALS}, without detecting the control"))
    word, reasons = verdict(results, checks, streams, shifts, control, MAX_TRIALS)
    record = None if isinstance(change, tuple) else change.index  # None: the whole client
    natural = None if found is None or found.natural is None else found.natural_shift
    return AuditResult(entry.name, word, tuple(results), int(trials), rounds, canary, s.target, record,
                       s.plan.delta, s.plan.binding_accountant, control, noise_scale,
                       time.perf_counter() - t0, tuple(notes), level, tuple(checks), tuple(reasons), seed,
                       natural,
                       tuple(st for st in s.plan.sigma if np.any(s.plan.stage_matrix(st)[:rounds] > 0)),
                       base, tuple(streams), tuple(shifts),
                       tuple((c.client, c.shift, c.sensitivity) for c in found_all),
                       experiment.describe(trials))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def audit_from_config(paper: str, config: str | Path | None, overrides: Iterable[str] = (), **kw: Any
                      ) -> AuditResult:
    """:func:`audit` on ``config``'s ``[PAPER]`` and ``[train]`` sections (with ``--set`` overrides)."""
    from fedbound.config import load_config
    from fedbound.registry import get, names
    from fedbound.training import config as tc

    entry = get(paper, "audit")
    section = entry.config_section
    cfg = load_config(config, [section, tc.TRAIN_SECTION], list(overrides),
                      known_sections=(*names(), "train"))
    setting = dict(cfg[section.name])
    setting.update({k: v for k, v in entry.defaults.items() if setting.get(k) is None})
    return audit(entry.name, setting, dict(cfg["train"]), **kw)
