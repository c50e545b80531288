"""``fedbound.validation.audit``: The privacy audit: neighbouring copies of one client trained by the real
engine, an epsilon lower bound per adversary view against the reported epsilon, a positive control; one
module per paper declares its ``AUDIT`` views. Also the sensitivity probe of ``fedbound train`` and the
provable sensitivity's setting.

Modules: ``adaptive``, ``dppfl``, ``nbafl``, ``plot``, ``probe``, ``provable``, ``stats``, ``udp``,
``wpfl``.

``fedbound audit``: what a configured mechanism actually leaks, measured by running it end to end.

The privacy reviewer's experiment, for one paper's setting (its ``[PAPER]`` and ``[train]`` sections):

1. the paper's recipe builds the data, the noise plan and the algorithm exactly as ``fedbound train`` does;
   its hooks, called once for round 1, say who participates with which aggregation weight;
2. the *target* is the smallest participating client; the neighbouring dataset D' changes it at the audited
   ``level`` (``AuditViews.levels``, the paper's own unit first): ``record``: one record replaced by a
   *canary* (``worst``: the largest upload shift found by the search of
   ``fedbound.training.sensitivity.probe(crafted=True)``: label flips, swapped features, crafted large-norm
   outliers along principal, mean, gradient-aligned and random directions with every label, amplified
   records; ``flip``:
   record 0 relabelled; ``given``: record 0 replaced by training record ``canary_record``); ``client``: ALL
   its records replaced (``flip``: all relabelled; ``given``: copies of one record; ``worst``: the largest
   shift among ``flip`` and whole clients made of one searched record), the ledger then reading each
   release's sensitivity as ``m`` times the per-record one (triangle inequality);
3. ``trials`` trials on D and ``trials`` on D' run in one engine call
   (``fedbound.training.sensitivity.federated_trials``): each trial is a copy of round 1's whole federation
   (only the target when no view sees the broadcast) with its own noise streams, run through EVERY hook of
   the algorithm: ``local_update``, ``upload`` (clipping, uplink noise, channel) and ``server_update`` on the
   trial's own aggregate (server noise), all from the same global models (round 1: the initial model;
   with ``rounds = R`` those of a real run on D); nothing is drawn from the plan on the side;
4. each adversary view of the plan gets a likelihood-ratio score per trial: the projection of what it sees
   (``upload``/``steps``: the target's upload; ``broadcast``: the server's output; a view named in
   ``AuditViews.releases``: that ``record_release``) on the noise-free shift ``view(D') - view(D)``,
   weighted by ``1 / std^2`` per round (its planned std), over the first ``max_releases`` rounds; a
   broadcast whose sampling is hidden keeps the target's term in a fraction ``q`` of the trials;
5. ``fedbound.validation.audit.stats`` turns the scores into an epsilon lower bound (Clopper-Pearson, level
   ``1 - ALPHA / views``) and a Gaussian-fit estimate.

Verdict (the run's *reported* epsilon is the ledger's tight epsilon for the design as deployed; the paper's
accountant is shown beside it).  ``LEAK`` when any of: a view's lower bound exceeds its reported epsilon; the
noise measured in a stage is significantly below the plan (``noise_checks``: chi-square confidence interval
on the std ratio, level ``1 - NOISE_ALPHA / stages``; the uplink from the target's uploads, the server from
broadcast minus aggregate, the aggregate's uplink noise against ``sqrt(sum p_j^2 sigma_j^2)``); the
noise-free shift of a view exceeds the sensitivity the ledger assumes (deterministic local training only).
A correct mechanism is called LEAK with probability at most ``ALPHA + NOISE_ALPHA``.  Otherwise
``underpowered`` when the positive control (the same audit with the plan's noise halved, through the same
engine) is not detected in any view (its lower bound at most the tight epsilon), with the smallest epsilon
the audit could have detected and the trials the control would need (``audit_stats.detectable_epsilon``,
``trials_needed``); otherwise ``consistent``.  ``trials="auto"`` doubles the count from ``DEFAULT_TRIALS``
until the control is detected or ``AUTO_TRIALS_LIMIT`` is reached.

Seeds: ``seed`` 0 audits ``[train] seed`` as configured; any other ``seed`` derives a new one for
everything (data split, model init, canary search, trial noise), so audits with different seeds are
independent replicates.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ConfigError, ParameterError

__all__ = ["AuditViews", "ViewAudit", "NoiseCheck", "AuditResult", "audit", "audit_from_config", "CANARIES",
           "LEVELS", "MAX_AUDIT_ROUNDS", "MAX_TRIALS", "DEFAULT_TRIALS", "AUTO_TRIALS_LIMIT", "ALPHA",
           "NOISE_ALPHA"]

CANARIES = ("worst", "flip", "given")
LEVELS = ("record", "client")
"""Neighbouring relations the audit can build: one record of the target replaced, or all of them."""
MAX_TRIALS = 1_000_000
"""Trials per side: memory is about 2 x trials x rounds x n_params x 4 bytes per recorded view."""
MAX_AUDIT_ROUNDS = 100
DEFAULT_TRIALS = 2000
AUTO_TRIALS_LIMIT = 64_000
"""``trials="auto"`` stops raising the trial count here."""
ALPHA = 0.05
"""Lower bounds: a correct mechanism's lower bound exceeds its epsilon in some view with probability <= ALPHA
(Bonferroni over the views)."""
NOISE_ALPHA = 0.001
"""Noise checks: a correct mechanism's noise is called significantly low in some stage with probability
<= NOISE_ALPHA (Bonferroni over the stages)."""


def _same(algorithm: Any) -> Any:
    return algorithm


@dataclass(frozen=True)
class AuditViews:
    """What a paper's audit needs beyond its training recipe (``Paper.audit`` points to one).

    An entry provides:

    * ``prepare(algorithm)``: the algorithm as the audit runs it on copies of round 1's federation (e.g.
      without bookkeeping that assumes the original federation).  It must keep every privacy-relevant hook
      (``local_update``, ``upload``, ``server_update``): the audit runs them end to end;
    * ``doc``: what the audit of this paper tests;
    * ``small``: a configuration (``{section: {key: value}}``) inside the paper's assumptions that audits in
      seconds at the default trial count, with the positive control detected (the tests over the registry,
      the positive-control suite and ``make demo`` run it);
    * ``levels``: the neighbouring relations (``LEVELS``) worth auditing, the paper's own unit first;
    * ``releases``: ``{view name: release name}`` for plan views that see neither the upload nor the
      broadcast: the algorithm hands that release to the audit with
      ``fedbound.training.sensitivity.record_release(ctx, name, clients, values)``;
    * ``release_std``: ``{view name: f(plan, target, rounds) -> (rounds,) std}``, the planned std of the
      Gaussian noise in what such a view sees (default: the view's stage sigma of the target); declared,
      it is also a noise check (the release minus its noise-free value must have that std per coordinate:
      declare it only where the noise is added to the release itself, not e.g. inside local steps).

    The suite ``tests/validation/audit/test_audit_suite.py`` audits ``small`` with the bugs of
    ``tests/_audit.py`` injected into the mechanism (half of each stage's noise via ``RoundContext.sigma``,
    the server's dropped, every clip a no-op via ``clipping.clip_factors``): each must give LEAK, the correct
    mechanism must not.

    Views of kind ``upload``/``steps`` see the target's upload, ``broadcast`` the server's output.  The
    noise-free shift of a view is compared with ``ledger_plan.stage_sensitivity(view.stage)`` of the target
    (times its aggregation weight for a broadcast).
    """

    prepare: Callable[[Any], Any] = _same
    doc: str = ""
    small: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    levels: tuple[str, ...] = ("record",)
    releases: Mapping[str, str] = field(default_factory=dict)
    release_std: Mapping[str, Callable[[Any, int, int], np.ndarray]] = field(default_factory=dict)
    release_sensitivity: Mapping[str, Callable[[Any, int], float]] = field(default_factory=dict)
    """``{view name: f(ledger plan, target) -> sensitivity}`` of a release that is not one stage's (e.g.
    two stages side by side: the root of the sum of their squares); default: the view's stage's."""
    prepare_target: Callable[[Any, int], Any] | None = None
    """``prepare`` for an entry that needs the audited client too (e.g. to send every copy through its
    channel); used instead of ``prepare`` when given."""
    ledger: Callable[[Any], Any] = _same
    """The plan the ledger reads under the audit's replacement relation (default: as planned; a paper
    whose ledger counts add/remove neighbours doubles its sensitivity: replace = remove + add)."""
    shift_checked: bool = True
    """Compare each view's noise-free shift with the sensitivity the ledger assumes (False where a release
    adapts to an earlier noisy release of the same round, e.g. a step taken at a noised model: its
    noise-free shift is not what one release's sensitivity bounds)."""
    checked_releases: Mapping[str, str] = field(default_factory=dict)
    """``{stage: release name}``: check that stage's noise (std: the plan's stage sigma of the target) on
    the residual of the release from the noise-free one on D.  The residual's variance is the noise's plus
    any variation of the release between trials (e.g. Poisson sampling), so the check can miss low noise
    but never flags correct noise."""

    def __post_init__(self) -> None:
        if not self.levels or not set(self.levels) <= set(LEVELS):
            raise ParameterError("AuditViews.levels", self.levels, f"a non-empty subset of {LEVELS}")


def without(algorithm: Any, **attributes: Any) -> Any:
    """A shallow copy of ``algorithm`` with ``attributes`` set (for ``AuditViews.prepare``)."""
    out = copy.copy(algorithm)
    for name, value in attributes.items():
        setattr(out, name, value)
    return out


@dataclass(frozen=True)
class ViewAudit:
    """One adversary view's result (module docstring)."""

    view: str
    kind: str
    epsilon_lower: float
    epsilon_reported_tight: float
    epsilon_reported_paper: float | None
    epsilon_reported: float
    gaussian_mu: float
    gaussian_epsilon: float
    gaussian_interval: tuple[float, float]
    noise_std_measured: float
    noise_std_planned: float
    shift_measured: float
    sensitivity_assumed: float
    false_positives: int
    false_negatives: int
    held_out: int
    control_epsilon_lower: float | None = None
    control_mu: float | None = None
    leak: bool = False
    shift_exceeded: bool = False
    detectable_epsilon: float | None = None
    """The smallest epsilon (of a Gaussian mechanism) whose expected lower bound at these trials exceeds
    the reported epsilon."""
    trials_needed: int | None = None
    """Trials per side at which the control's expected lower bound exceeds the tight epsilon."""
    alpha: float = ALPHA
    scores_out: list[float] = field(default_factory=list, repr=False)
    scores_in: list[float] = field(default_factory=list, repr=False)

    @property
    def control_detected(self) -> bool:
        return (self.control_epsilon_lower or 0.0) > self.epsilon_reported_tight


@dataclass(frozen=True)
class NoiseCheck:
    """Measured over planned noise std of one stage: the ratio and its two-sided chi-square interval at
    level ``1 - alpha`` (``below``: the interval's top under 1)."""

    stage: str
    planned: float
    measured: float
    ratio_low: float
    ratio_high: float
    dof: int
    alpha: float

    @property
    def below(self) -> bool:
        return self.ratio_high < 1.0


@dataclass(frozen=True)
class AuditResult:
    """The audit of one configured mechanism: per view, the verdict and how it was obtained."""

    paper: str
    verdict: str
    views: tuple[ViewAudit, ...]
    trials: int
    rounds: int
    canary: str
    target_client: int
    target_record: int | None
    delta: float
    budget_accountant: str
    control: bool
    noise_scale: float
    wall_time_s: float
    notes: tuple[str, ...] = ()
    level: str = "record"
    noise_checks: tuple[NoiseCheck, ...] = ()
    reasons: tuple[str, ...] = ()
    seed: int = 0
    natural_shift: float | None = None
    """The canary search's largest shift among natural records (flips and swaps), beside the chosen one's."""
    stages: tuple[str, ...] = ()
    """The plan's stages that add noise in the audited rounds."""
    train_seed: int | None = None
    """The ``[train] seed`` the audited run used (data split, model init; module docstring, Seeds)."""

    def to_dict(self, scores: bool = False) -> dict[str, Any]:
        out = asdict(self)
        for v in out["views"]:
            if not scores:
                v.pop("scores_out"), v.pop("scores_in")
        return out


@dataclass
class _Setup:
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
    """The plan the ledger reads at the audited level (:func:`_at_level`)."""


def _round_one(rec: Any, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> _Setup:
    """Data, plan, algorithm (the recipe's) and the participants/weights its hooks give in round 1."""
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
    return _Setup(algorithm, setup.model, setup.data, setup.dataset, plan, options, target, participants,
                  weights)


def _trajectory(s: _Setup, rounds: int) -> Any:
    """``(rounds, d)``: the initial model, then the global models of a real run on D (rounds 1..R-1)."""
    import tempfile

    import torch

    from fedbound.training.engine import run
    from fedbound.training.noise import Streams

    init = s.model.init(Streams(s.options.seed, s.options.device).generator("init"), s.options.dtype)
    models = [init]
    if rounds > 1:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in range(1, rounds):
                res = run(s.algorithm, s.model, s.data, plan=s.plan, options=s.options, run_dir=tmp,
                          run_key="audit", stop_after=t, init_params=init)
                models.append(res.params.detach().clone())
    return torch.stack(models)


def _record_canary(kind: str, s: _Setup, prepared: Any, starts: Any, probe_records: int,
                   canary_record: int | None, seed: int) -> tuple[Any, Any]:
    """One record replaced (``Replacement``) and, for ``worst``, the search's result."""
    from fedbound.training.sensitivity import Replacement, label_flips, probe

    x0 = s.data.x[s.target, 0].cpu().numpy()
    y0 = s.data.y[s.target, 0].cpu().item()
    if kind == "flip":
        return Replacement(0, x0, label_flips(y0, _classes(s))[0]), None
    if kind == "given":
        n = len(s.dataset.y_train)
        j = n - 1 if canary_record is None else int(canary_record)
        if not 0 <= j < n:
            raise ConfigError(f"--canary-record = {j} is outside its valid range integer in [0, {n - 1}]")
        return Replacement(0, np.asarray(s.dataset.x_train[j]), s.dataset.y_train[j].item()), None
    found = probe(prepared, s.model, s.data, s.target, starts, records=probe_records, options=s.options,
                  crafted=True, seed=seed)
    return found.worst, found


def _client_canary(kind: str, s: _Setup, prepared: Any, starts: Any, probe_records: int,
                   canary_record: int | None, seed: int) -> tuple[Any, Any]:
    """Every record of the target replaced (a tuple of ``Replacement``; module docstring) and, for
    ``worst``, the search's result (also: mirrored clients, every record ``-s x_i`` with one label)."""
    from fedbound.training.sensitivity import Replacement, label_flips, probe, shifts

    n = int(s.data.sizes[s.target])
    xs, ys = s.data.x[s.target, :n].cpu().numpy(), s.data.y[s.target, :n].cpu().numpy()
    flips = tuple(Replacement(i, xs[i], label_flips(ys[i].item(), _classes(s))[0]) for i in range(n))

    def everywhere(one: Any) -> tuple:
        return tuple(Replacement(i, one.x, one.y) for i in range(n))

    if kind == "flip":
        return flips, None
    if kind == "given":
        one = _record_canary(kind, s, prepared, starts, probe_records, canary_record, seed)[0]
        return everywhere(one), None
    found = probe(prepared, s.model, s.data, s.target, starts, records=probe_records, options=s.options,
                  crafted=True, seed=seed)
    mirrored = [tuple(Replacement(i, -scale * xs[i], y) for i in range(n))
                for scale in (1.0, 10.0) for y in _labels(ys, _classes(s))]
    candidates = [flips, *mirrored, *(everywhere(r) for r in found.replacements)]
    moved = shifts(prepared, s.model, s.data, s.target, candidates, starts, options=s.options).max(axis=0)
    return candidates[int(np.argmax(moved))], found


def _labels(ys: np.ndarray, classes: int) -> list:
    """Labels a crafted client's records all take: each class, or the natural extremes (regression)."""
    return list(range(classes)) if classes > 1 else [float(ys.max()), float(ys.min())]


_CANARIES = {"record": _record_canary, "client": _client_canary}


def _classes(s: _Setup) -> int:
    return s.model.n_outputs if s.model.loss != "squared" else 1


def _at_level(plan: Any, level: str, sizes: np.ndarray) -> Any:
    """The plan the ledger reads at ``level``: as planned (record), or with every stage's per-record
    sensitivity times the client's size (client; module docstring)."""
    if level == "record":
        return plan
    return replace(plan, sensitivity={stage: plan.stage_sensitivity(stage) * np.asarray(sizes, np.float64)
                                      for stage in plan.sensitivity})


def _reported(plan: Any, participants: np.ndarray, weights: np.ndarray, rounds: int, target: int
              ) -> dict[str, dict[str, float]]:
    """Per view group: the ledger's epsilon of the target after ``rounds`` rounds (tight, paper)."""
    from fedbound.training.privacy import PrivacyLedger

    ledger = PrivacyLedger(plan)
    for t in range(rounds):
        ledger.commit(ledger.releases(t, participants, weights))
    eps = ledger.epsilons()
    return {kind: {group: float(v[target]) for group, v in groups.items()} for kind, groups in eps.items()}


@dataclass
class _Observed:
    """One view's observations: noisy ``(rounds, 2 trials, d)``, noise-free on D and D' ``(rounds, d)``,
    the planned std per round of the noise in it, the target's weight in it."""

    noisy: Any
    clean_out: Any
    clean_in: Any
    std: np.ndarray
    weight: float


def _observe(view: Any, views: AuditViews, s: _Setup, runs: Any, clean: Any, rounds: int, scale: float
             ) -> _Observed:
    """What ``view``'s adversary sees (module docstring, step 4) and its planned noise std."""
    plan, target = s.plan, s.target
    own = plan.stage_matrix(view.stage)[:rounds, target] * scale
    if view.name in views.releases:
        name = views.releases[view.name]
        std = (views.release_std[view.name](plan, target, rounds) * scale if view.name in views.release_std
               else own)
        return _Observed(runs.releases[name], clean.releases[name][:, 0], clean.releases[name][:, 1],
                         np.asarray(std, np.float64), 1.0)
    if view.kind != "broadcast":
        return _Observed(runs.uploads, clean.uploads[:, 0], clean.uploads[:, 1], own, 1.0)
    w = float(s.weights[s.participants == target][0])
    server = np.array([plan.stage_sigma("server", t)[0] for t in range(rounds)]) * scale
    uplink = np.array([plan.stage_sigma(view.stage, t)[s.participants] for t in range(rounds)]) * scale
    std = np.sqrt(server**2 + (s.weights**2 * uplink**2).sum(axis=1))
    return _Observed(runs.broadcasts, clean.broadcasts[:, 0], clean.broadcasts[:, 1], std, w)


def _scores(centred: Any, shift: Any, std: np.ndarray) -> np.ndarray:
    """Likelihood-ratio scores: ``sum_t <centred_t, shift_t> / std_t^2`` per trial."""
    weights = np.where(std > 0, 1.0 / np.maximum(std, 1e-300) ** 2, 1.0)
    proj = np.einsum("tkd,td->tk", centred, shift)
    return (proj * weights[:, None]).sum(axis=0)


def _view_audit(view: Any, views: AuditViews, s: _Setup, runs: Any, clean: Any, rounds: int, scale: float,
                reported: dict, rng: np.random.Generator, alpha: float, deterministic: bool) -> ViewAudit:
    from fedbound.validation.audit.stats import epsilon_lower_bound, gaussian_fit

    if view.max_releases is not None and rounds > view.max_releases:  # the adversary sees that many rounds
        rounds = int(view.max_releases)
        runs, clean = runs.first_rounds(rounds), clean.first_rounds(rounds)
    obs = _observe(view, views, s, runs, clean, rounds, scale)
    shift = (obs.clean_in - obs.clean_out).double().numpy()
    centred = (obs.noisy - obs.clean_out[:, None, :]).double().numpy()
    trials = centred.shape[1] // 2
    if view.kind == "broadcast" and view.hidden_sampling and view.sample_rate < 1:
        # the target sits out a fraction 1 - q of the trials: its term (noise and shift) is then absent
        u_centred = (runs.uploads - clean.uploads[:, :1]).double().numpy()
        absent = rng.random(centred.shape[:2]) >= view.sample_rate
        centred = centred - np.where(absent[:, :, None], obs.weight * u_centred, 0.0)
    scores = _scores(centred, shift, obs.std)
    out_s, in_s = scores[:trials], scores[trials:]
    measured = float(centred[:, :trials].std())
    tight = reported["tight"].get(view.group_name, 0.0)
    paper = reported.get("paper", {}).get(view.group_name)
    lb = epsilon_lower_bound(out_s, in_s, s.plan.delta, alpha=alpha)
    fit = gaussian_fit(out_s, in_s, s.plan.delta)
    sens = obs.weight * (views.release_sensitivity[view.name](s.ledger_plan, s.target)
                         if view.name in views.release_sensitivity
                         else float(s.ledger_plan.stage_sensitivity(view.stage)[s.target]))
    shift_norm = float(np.linalg.norm(shift, axis=1).max())
    exceeded = deterministic and shift_norm > sens * (1 + 1e-4) + 1e-9
    return ViewAudit(view.name, view.kind, lb.epsilon, tight, paper, tight, fit.mu, fit.epsilon,
                     (fit.epsilon_low, fit.epsilon_high), measured, float(obs.std.max()), shift_norm, sens,
                     lb.false_positives, lb.false_negatives, lb.n_out, leak=lb.epsilon > tight,
                     shift_exceeded=bool(exceeded), alpha=alpha, scores_out=out_s.tolist(),
                     scores_in=in_s.tolist())


def _noise_checks(views: AuditViews, s: _Setup, runs: Any, clean: Any, rounds: int, scale: float
                  ) -> list[NoiseCheck]:
    """The measured noise of each stage against the plan (module docstring), on the trials on D."""
    from fedbound.validation.audit.stats import std_ratio_interval

    plan, target = s.plan, s.target
    trials = runs.uploads.shape[1] // 2
    found: dict[str, tuple[Any, np.ndarray]] = {}
    for stage, name in views.checked_releases.items():
        if name in runs.releases:  # an algorithm variant may not make it (nothing to check)
            found[stage] = (runs.releases[name] - clean.releases[name][:, :1],
                            plan.stage_matrix(stage)[:rounds, target] * scale)
    for view in plan.views:
        if view.name in views.releases:
            if view.name in views.release_std:  # declared: the release is noised with exactly that std
                name = views.releases[view.name]
                found.setdefault(f"{view.name} (release)", (
                    runs.releases[name] - clean.releases[name][:, :1],
                    np.asarray(views.release_std[view.name](plan, target, rounds), np.float64) * scale))
            continue
        if view.kind == "steps":
            continue
        if view.kind != "broadcast":
            found.setdefault(view.stage, (runs.uploads - clean.uploads[:, :1],
                                          plan.stage_matrix(view.stage)[:rounds, target] * scale))
            continue
        sig = np.array([plan.stage_sigma(view.stage, t)[s.participants] * scale for t in range(rounds)])
        found.setdefault(f"{view.stage} (aggregate)", (runs.aggregates - clean.aggregates[:, :1],
                                                       np.sqrt((s.weights**2 * sig**2).sum(axis=1))))
        server = (runs.broadcasts - runs.aggregates) - (clean.broadcasts - clean.aggregates)[:, :1]
        found.setdefault("server", (server, np.array([plan.stage_sigma("server", t)[0]
                                                      for t in range(rounds)]) * scale))
    live = {k: v for k, v in found.items() if np.all(v[1] > 0)}
    checks = []
    for stage, (residual, std) in live.items():
        z = residual[:, :trials].double().numpy() / std[:, None, None]
        low, high, ratio = std_ratio_interval(float(np.sum(z**2)), z.size, NOISE_ALPHA / len(live))
        checks.append(NoiseCheck(stage, float(std.max()), ratio * float(std.max()), low, high, int(z.size),
                                 NOISE_ALPHA / len(live)))
    return checks


def _deterministic(algorithm: Any) -> bool:
    """Is local training free of sampling (so that the noise-free shift is THE shift)?"""
    local = getattr(algorithm, "local", None)
    return not getattr(local, "batch_size", None) and getattr(local, "sample_rate", None) is None


def _run_pair(s: _Setup, prepared: Any, change: Any, starts: Any, trials: int, scale: float, seed: int,
              broadcast: bool) -> tuple[Any, Any]:
    """``trials`` trials on D then ``trials`` on D' under the plan's sigma x ``scale``, and the noise-free
    pair (D, D'), through :func:`federated_trials`."""
    from fedbound.training.sensitivity import federated_trials

    opts = replace(s.options, seed=seed)
    kw = dict(broadcast=broadcast, options=opts)
    runs = federated_trials(prepared, s.model, s.data, s.target, s.participants, s.weights,
                            [None] * trials + [change] * trials, starts, plan=s.plan, scale=scale, **kw)
    clean = federated_trials(prepared, s.model, s.data, s.target, s.participants, s.weights, [None, change],
                             starts, **kw)
    return runs, clean


def _audit_at(s: _Setup, views: AuditViews, prepared: Any, change: Any, starts: Any, trials: int,
              rounds: int, noise_scale: float, control: bool, reported: dict, seed: int
              ) -> tuple[list[ViewAudit], list[NoiseCheck]]:
    from fedbound.training.noise import derive_seed
    from fedbound.validation.audit.stats import trials_needed

    broadcast = any(v.kind == "broadcast" and v.name not in views.releases for v in s.plan.views)
    alpha = ALPHA / len(s.plan.views)
    deterministic = _deterministic(prepared) and views.shift_checked
    rng = np.random.default_rng(derive_seed(seed, "audit", "presence"))
    runs, clean = _run_pair(s, prepared, change, starts, trials, noise_scale,
                            derive_seed(seed, "audit", "nominal") & 0x7FFFFFFF, broadcast)
    results = [_view_audit(v, views, s, runs, clean, rounds, noise_scale, reported, rng, alpha, deterministic)
               for v in s.plan.views]
    checks = _noise_checks(views, s, runs, clean, rounds, 1.0)  # against the plan the ledger reads
    if control:
        runs, clean = _run_pair(s, prepared, change, starts, trials, 0.5 * noise_scale,
                                derive_seed(seed, "audit", "control") & 0x7FFFFFFF, broadcast)
        ctrl = [_view_audit(v, views, s, runs, clean, rounds, 0.5 * noise_scale, reported, rng, alpha,
                            deterministic) for v in s.plan.views]
        results = [replace(r, control_epsilon_lower=c.epsilon_lower, control_mu=c.gaussian_mu,
                           trials_needed=trials_needed(c.gaussian_mu, r.epsilon_reported_tight, s.plan.delta,
                                                       alpha))
                   for r, c in zip(results, ctrl, strict=True)]
    return results, checks


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _effective_seed(train_seed: int, seed: int) -> int:
    """``[train] seed`` for ``seed`` 0, else a seed derived from both (module docstring)."""
    from fedbound.training.noise import derive_seed

    return int(train_seed) if seed == 0 else derive_seed(int(train_seed), "audit", int(seed)) & 0x7FFFFFFF


def audit(paper: str, setting: Mapping[str, Any], train: Mapping[str, Any], *,
          trials: int | str = DEFAULT_TRIALS, canary: str = "worst", rounds: int = 1, control: bool = True,
          noise_scale: float = 1.0, probe_records: int = 8, canary_record: int | None = None, seed: int = 0,
          level: str | None = None          ) -> AuditResult:
    """The audit of ``paper`` on its validated ``setting`` and ``[train]`` table (module docstring);
    ``level`` None: the paper's own privacy unit (``AuditViews.levels[0]``); ``trials``: per side, or
    ``"auto"``; ``noise_scale`` (a test hook) multiplies every sigma of the plan the trials run with."""
    from fedbound.registry import get
    from fedbound.training.noise import derive_seed
    from fedbound.validation.audit.stats import detectable_epsilon

    entry = get(paper, "audit")
    rec, views = entry.load("recipe"), entry.load("audit")
    auto = trials == "auto"
    if auto:
        trials = DEFAULT_TRIALS
    if isinstance(trials, str) or not 4 <= trials <= MAX_TRIALS:
        raise ConfigError(f"--trials = {trials} is outside its valid range integer in [4, {MAX_TRIALS}] "
                          "or auto")
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
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = _round_one(rec, setting, train, rounds)
        s.ledger_plan = _at_level(views.ledger(s.plan), level, s.data.sizes)
        prepared = (views.prepare(s.algorithm) if views.prepare_target is None
                    else views.prepare_target(s.algorithm, s.target))
        starts = _trajectory(s, rounds)
        change, found = _CANARIES[level](canary, s, prepared, starts, probe_records, canary_record,
                                         derive_seed(base, "audit", "canary") & 0x7FFFFFFF)
        reported = _reported(s.ledger_plan, s.participants, s.weights, rounds, s.target)
        while True:
            results, checks = _audit_at(s, views, prepared, change, starts, trials, rounds, noise_scale,
                                        control, reported, base)
            detected = any(v.control_detected for v in results)
            if not (auto and control) or detected or trials >= AUTO_TRIALS_LIMIT:
                break
            trials = min(AUTO_TRIALS_LIMIT, 2 * trials)
        results = [replace(v, detectable_epsilon=_finite(detectable_epsilon(trials, v.epsilon_reported,
                                                                             s.plan.delta, v.alpha)))
                   for v in results]
    notes += list(dict.fromkeys(str(w.message) for w in caught))
    if auto:
        notes.append(f"--trials auto: {trials} trials per side" + (
            "" if any(v.control_detected for v in results) else
            f", the limit {AUTO_TRIALS_LIMIT}, without detecting the control"))
    verdict, reasons = _verdict(results, checks, control)
    record = None if isinstance(change, tuple) else change.index  # None: the whole client
    natural = None if found is None or found.natural is None else found.natural_shift
    return AuditResult(entry.name, verdict, tuple(results), int(trials), rounds, canary, s.target, record,
                       s.plan.delta, s.plan.binding_accountant, control, noise_scale,
                       time.perf_counter() - t0, tuple(notes), level, tuple(checks), tuple(reasons), seed,
                       natural,
                       tuple(st for st in s.plan.sigma if np.any(s.plan.stage_matrix(st)[:rounds] > 0)),
                       base)


def _verdict(views: list[ViewAudit], checks: list[NoiseCheck], control: bool) -> tuple[str, list[str]]:
    """LEAK / underpowered / consistent and why (module docstring)."""
    reasons = [f"{v.view}: lower bound {v.epsilon_lower:.3g} > reported epsilon {v.epsilon_reported:.3g}"
               for v in views if v.leak]
    reasons += [f"{v.view}: noise-free shift {v.shift_measured:.4g} > the sensitivity "
                f"{v.sensitivity_assumed:.4g} the ledger assumes" for v in views if v.shift_exceeded]
    reasons += [f"{c.stage} noise: std {c.ratio_low:.3g}-{c.ratio_high:.3g} x the plan's "
                f"({100 * (1 - c.alpha):.4g} % interval)" for c in checks if c.below]
    if reasons:
        return "LEAK: " + "; ".join(reasons), reasons
    if control and not any(v.control_detected for v in views):
        best = min(views, key=lambda v: v.trials_needed or math.inf)
        need = "more than " + str(MAX_TRIALS) if best.trials_needed is None else str(best.trials_needed)
        smallest = ", ".join(f"{v.view} {v.detectable_epsilon or math.inf:.3g}" for v in views)
        return "underpowered", [
            "the halved-noise control is not detected in any view; smallest epsilon detectable at these "
            f"trials: {smallest}; the control needs about {need} trials per side ({best.view}; "
            "--trials auto)"]
    return "consistent", []


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
