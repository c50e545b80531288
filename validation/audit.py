"""``fedbound audit``: what a configured mechanism actually leaks, measured through the real engine.

The privacy reviewer's experiment, for one paper's setting (its ``[PAPER]`` and ``[train]`` sections):

1. the paper's recipe builds the data, the noise plan and the algorithm exactly as ``fedbound train`` does;
   its hooks, called once for round 1, say who participates with which aggregation weight;
2. the *target* is the smallest participating client (the sensitivity ``2C/m`` is about the smallest m); the
   neighbouring dataset D' changes it at the audited ``level`` (``AuditViews.levels``, the paper's own unit
   first):

   * ``record``: one of its records is replaced by a *canary* (``worst``: the largest upload shift the
     sensitivity probe finds, ``fedbound.training.sensitivity.probe``; ``flip``: record 0 with another
     label; ``given``: record 0 replaced by training record ``canary_record``);
   * ``client``: ALL its records are replaced, by a *canary client* (``flip``: every record with another
     label; ``given``: every record a copy of training record ``canary_record``; ``worst``: the largest
     measured upload shift among ``flip`` and the clients made of copies of one probed replacement);
     the ledger then reads each release's sensitivity as the client size ``m`` times the per-record one
     (replacing the ``m`` records one by one moves a release at most ``m`` times as far: the triangle
     inequality; for one clipped full-batch step, ``2 eta C``, attained), so the reported epsilon and
     the assumed sensitivity are those of whole-client neighbours at the plan's noise;
3. ``trials`` runs on D and ``trials`` on D' train together in one engine call: the target's data replicated
   ``2 x trials`` times, each copy a client with its own noise stream, all starting from the same global
   model (round 1: the initial model; with ``rounds = R`` the models of a real run on D), trained and
   noised by the algorithm's own hooks with the plan's sigma (``fedbound.training.sensitivity.
   client_uploads``);
4. each adversary view of the plan (``View``) gets a score per trial: ``upload``/``steps`` views see the
   target's noised uploads (a ``steps`` view's uploads are post-processing of its steps, so the test is
   valid, if weaker); a ``broadcast`` view sees ``p_target x upload`` plus Gaussian noise with the rest of
   the broadcast's std ``sqrt(sigma_server^2 + sum_(j != target) p_j^2 sigma_j^2)`` (the adversary knows
   every other client's data, so only their noise hides the target), and, when the view's sampling is
   hidden (K of N), the target's term is present with probability q.  The score is the projection
   of what the adversary sees on the noise-free shift ``upload(D') - upload(D)``, summed over rounds with
   weights ``1/sigma^2`` (the likelihood-ratio test of two Gaussians), over the first ``max_releases``
   rounds of a view that the adversary sees at most that often (NbAFL's L);
5. ``fedbound.validation.audit_stats`` turns the scores into the epsilon lower bound (Clopper-Pearson, 95 %)
   and the Gaussian-fit estimate; the reported epsilon of each view is the ledger's (tight and paper) for
   the target over the audited rounds, from the original plan.

A positive control (the same audit with every sigma halved) runs unless switched off.  It is *detected* when
its lower bound exceeds the view's tight epsilon: the exact epsilon of the planned noise at the assumed
sensitivity, which half the noise (twice the Gaussian-DP mu) must exceed; an audit that cannot see that lacks
power (too few trials, or a canary far below the assumed sensitivity).  The verdict: ``LEAK`` when a view's
lower bound exceeds its reported epsilon (the accountant that holds the run's budget, ``paper`` or ``tight``),
otherwise ``underpowered`` when no view detects the control, otherwise ``consistent``.  ``noise_scale`` (a
test hook: 0 drops the noise) multiplies every sigma of the nominal audit.
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

__all__ = ["AuditViews", "ViewAudit", "AuditResult", "audit", "audit_from_config", "CANARIES", "LEVELS",
           "MAX_AUDIT_ROUNDS", "MAX_TRIALS"]

CANARIES = ("worst", "flip", "given")
LEVELS = ("record", "client")
"""Neighbouring relations the audit can build: one record of the target replaced, or all of them."""
MAX_TRIALS = 1_000_000
"""Trials per side: memory is about 2 x trials x rounds x n_params x 4 bytes (logged uploads)."""
MAX_AUDIT_ROUNDS = 100


def _same(algorithm: Any) -> Any:
    return algorithm


@dataclass(frozen=True)
class AuditViews:
    """What a paper's audit needs beyond its training recipe (``Paper.audit`` points to one).

    ``prepare(algorithm)``: the algorithm as the audit trains it on replicated copies of one client (e.g.
    without bookkeeping that assumes the original federation); ``doc``: what the audit of this paper tests;
    ``small``: a small configuration (``{section: {key: value}}``) inside the paper's assumptions that audits
    in seconds (the tests over the registry and ``make demo`` run it); ``levels``: the neighbouring
    relations (``LEVELS``) worth auditing for this paper, its own privacy unit first (the default).
    """

    prepare: Callable[[Any], Any] = _same
    doc: str = ""
    small: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    levels: tuple[str, ...] = ("record",)

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
    leak: bool = False
    scores_out: list[float] = field(default_factory=list, repr=False)
    scores_in: list[float] = field(default_factory=list, repr=False)


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
                   canary_record: int | None) -> tuple[Any, float | None]:
    """One record replaced (``Replacement``) and, for ``worst``, the probe's largest measured shift."""
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
    found = probe(prepared, s.model, s.data, s.target, starts, records=probe_records, options=s.options)
    return found.worst, found.max_shift


def _client_canary(kind: str, s: _Setup, prepared: Any, starts: Any, probe_records: int,
                   canary_record: int | None) -> tuple[Any, float | None]:
    """Every record of the target replaced (a tuple of ``Replacement``; module docstring) and, for
    ``worst``, the largest measured shift among the candidates."""
    from fedbound.training.sensitivity import Replacement, label_flips, probe, shifts

    n = int(s.data.sizes[s.target])
    xs, ys = s.data.x[s.target, :n].cpu().numpy(), s.data.y[s.target, :n].cpu().numpy()
    flips = tuple(Replacement(i, xs[i], label_flips(ys[i].item(), _classes(s))[0]) for i in range(n))

    def everywhere(one: Any) -> tuple:
        return tuple(Replacement(i, one.x, one.y) for i in range(n))

    if kind == "flip":
        return flips, None
    if kind == "given":
        return everywhere(_record_canary(kind, s, prepared, starts, probe_records, canary_record)[0]), None
    found = probe(prepared, s.model, s.data, s.target, starts, records=probe_records, options=s.options)
    candidates = [flips, *(everywhere(r) for r in found.replacements)]
    moved = shifts(prepared, s.model, s.data, s.target, candidates, starts, options=s.options).max(axis=0)
    return candidates[int(np.argmax(moved))], float(moved.max())


_CANARIES = {"record": _record_canary, "client": _client_canary}


def _classes(s: _Setup) -> int:
    return s.model.n_outputs if s.model.loss != "squared" else 1


def _canary(kind: str, s: _Setup, prepared: Any, starts: Any, probe_records: int, canary_record: int | None,
            level: str = "record") -> tuple[Any, float | None]:
    """D''s change of the target at ``level`` (module docstring) and, for ``worst``, its measured shift."""
    return _CANARIES[level](kind, s, prepared, starts, probe_records, canary_record)


def _at_level(plan: Any, level: str, sizes: np.ndarray) -> Any:
    """The plan the ledger reads at ``level``: as planned (record), or with every stage's per-record
    sensitivity times the client's size (client; module docstring)."""
    if level == "record":
        return plan
    return replace(plan, sensitivity={stage: plan.stage_sensitivity(stage) * np.asarray(sizes, np.float64)
                                      for stage in plan.sensitivity})


def _replicated_plan(plan: Any, target: int, copies: int, scale: float) -> Any:
    """The plan's sigma's for ``copies`` copies of client ``target`` (times ``scale``).  What the copies
    spend is not this plan's business (the audit reports the original plan's epsilon): one view, no budget."""
    from fedbound.training.plan import NoisePlan, View

    sigma = {stage: np.repeat((plan.stage_matrix(stage)[:, target] * scale)[:, None], copies, axis=1)
             for stage in plan.sigma}
    sens = {stage: float(plan.stage_sensitivity(stage)[target]) for stage in plan.sensitivity}
    stage = next(st for st in plan.sigma if st in sens)
    return NoisePlan(rounds=plan.rounds, num_clients=copies, sigma=sigma, sensitivity=sens, eps=math.inf,
                     delta=plan.delta, views=(View("copies", "upload", stage=stage),),
                     budget_accountant="tight", paper_accountant="none",
                     source="audit copies of " + plan.source)


def _reported(plan: Any, participants: np.ndarray, weights: np.ndarray, rounds: int, target: int
              ) -> dict[str, dict[str, float]]:
    """Per view group: the ledger's epsilon of the target after ``rounds`` rounds (tight, paper)."""
    from fedbound.training.privacy import PrivacyLedger

    ledger = PrivacyLedger(plan)
    for t in range(rounds):
        ledger.commit(ledger.releases(t, participants, weights))
    eps = ledger.epsilons()
    return {kind: {group: float(v[target]) for group, v in groups.items()} for kind, groups in eps.items()}


def _scores(uploads: Any, mean_out: Any, shift: Any, sigmas: np.ndarray) -> np.ndarray:
    """Likelihood-ratio scores: ``sum_t <u_t - mean_out_t, shift_t> / sigma_t^2`` per trial."""
    weights = np.where(sigmas > 0, 1.0 / np.maximum(sigmas, 1e-300) ** 2, 1.0)
    centred = (uploads - mean_out[:, None, :]).double().numpy()
    proj = np.einsum("tkd,td->tk", centred, shift.double().numpy())
    return (proj * weights[:, None]).sum(axis=0)


def _view_noise(plan: Any, view: Any, participants: np.ndarray, weights: np.ndarray, target: int,
                rounds: int, scale: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Per round: the view's own noise std on the target's term and the rest of the noise; the weight."""
    own = plan.stage_matrix(view.stage)[:rounds, target] * scale
    if view.kind != "broadcast":
        return own, np.zeros(rounds), 1.0
    w = dict(zip(participants.tolist(), weights.tolist(), strict=True))[target]
    others = participants != target
    rest = []
    for t in range(rounds):
        server = float(plan.stage_sigma("server", t)[0]) * scale
        sig = plan.stage_sigma(view.stage, t)[participants] * scale
        rest.append(math.sqrt(server**2 + float(np.sum(weights[others] ** 2 * sig[others] ** 2))))
    return own, np.asarray(rest), float(w)


def _audit_once(s: _Setup, prepared: Any, replacement: Any, starts: Any, trials: int, scale: float,
                seed: int) -> dict[str, Any]:
    """Uploads of ``trials`` copies on D and on D' under the plan with sigma x ``scale``, plus noise-free."""
    from fedbound.training.sensitivity import client_uploads, neighbours

    data = neighbours(s.data, s.target, [None] * trials + [replacement] * trials)
    plan = _replicated_plan(s.plan, s.target, 2 * trials, scale)
    noisy = client_uploads(prepared, s.model, data, starts, plan=plan, options=s.options)
    clean = client_uploads(prepared, s.model, neighbours(s.data, s.target, [None, replacement]), starts,
                           options=s.options)
    return {"out": noisy[:, :trials], "in": noisy[:, trials:], "clean_out": clean[:, 0],
            "clean_in": clean[:, 1]}


def _view_audit(view: Any, s: _Setup, runs: dict[str, Any], rounds: int, scale: float, reported: dict,
                rng: np.random.Generator, budget: str) -> ViewAudit:
    from fedbound.validation.audit_stats import epsilon_lower_bound, gaussian_fit

    if view.max_releases is not None and rounds > view.max_releases:  # the adversary sees that many rounds
        rounds = int(view.max_releases)
        runs = {k: v[:rounds] for k, v in runs.items()}
    own, rest, w = _view_noise(s.plan, view, s.participants, s.weights, s.target, rounds, scale)
    shift = runs["clean_in"] - runs["clean_out"]
    trials = runs["out"].shape[1]
    if view.kind == "broadcast":
        total = np.sqrt((w * own) ** 2 + rest**2)
        q = view.sample_rate if view.hidden_sampling else 1.0
        sides = {}
        for side in ("out", "in"):
            present = rng.random((rounds, trials)) < q
            centred_upload = (runs[side] - runs["clean_out"][:, None, :]).numpy()
            term = np.where(present[:, :, None], w * centred_upload, 0.0)
            extra = rng.standard_normal(term.shape) * rest[:, None, None]
            centred = term + extra
            sides[side] = np.einsum("tkd,td->tk", centred, w * shift.double().numpy())
            sides[side] = (sides[side] / np.where(total > 0, total, 1.0)[:, None] ** 2).sum(axis=0)
        out_s, in_s = sides["out"], sides["in"]
        planned = float(total.max())
    else:
        out_s = _scores(runs["out"], runs["clean_out"], shift, own)
        in_s = _scores(runs["in"], runs["clean_out"], shift, own)
        planned = float(own.max())
    residual = (runs["out"] - runs["clean_out"][:, None, :]).double()
    measured = float(residual.std()) if view.kind != "broadcast" else float(
        math.sqrt(float(residual.var()) * w**2 + float((rest**2).max())))
    group = view.group_name
    tight = reported["tight"].get(group, 0.0)
    paper = reported.get("paper", {}).get(group)
    rep = paper if (budget == "paper" and paper is not None) else tight
    lb = epsilon_lower_bound(out_s, in_s, s.plan.delta)
    fit = gaussian_fit(out_s, in_s, s.plan.delta)
    sens = float(s.ledger_plan.stage_sensitivity(view.stage)[s.target])
    shift_norm = float(np.linalg.norm(shift.double().numpy(), axis=1).max())
    return ViewAudit(view.name, view.kind, lb.epsilon, tight, paper, rep, fit.mu, fit.epsilon,
                     (fit.epsilon_low, fit.epsilon_high), measured, planned, w * shift_norm, w * sens,
                     lb.false_positives, lb.false_negatives, lb.n_out, leak=lb.epsilon > rep,
                     scores_out=out_s.tolist(), scores_in=in_s.tolist())


def audit(paper: str, setting: Mapping[str, Any], train: Mapping[str, Any], *, trials: int = 2000,
          canary: str = "worst", rounds: int = 1, control: bool = True, noise_scale: float = 1.0,
          probe_records: int = 8, canary_record: int | None = None, seed: int = 0, level: str | None = None
          ) -> AuditResult:
    """The audit of ``paper`` on its validated ``setting`` and ``[train]`` table (module docstring);
    ``level`` None: the paper's own privacy unit (``AuditViews.levels[0]``)."""
    from fedbound.registry import get

    entry = get(paper, "audit")
    rec, views = entry.load("recipe"), entry.load("audit")
    if not 4 <= trials <= MAX_TRIALS:
        raise ConfigError(f"--trials = {trials} is outside its valid range integer in [4, {MAX_TRIALS}]")
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
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = _round_one(rec, setting, train, rounds)
        s.ledger_plan = _at_level(s.plan, level, s.data.sizes)
        prepared = views.prepare(s.algorithm)
        starts = _trajectory(s, rounds)
        replacement, _ = _canary(canary, s, prepared, starts, probe_records, canary_record, level)
        reported = _reported(s.ledger_plan, s.participants, s.weights, rounds, s.target)
        rng = np.random.default_rng(seed)
        nominal = _audit_once(s, prepared, replacement, starts, trials, noise_scale, seed)
        results = [_view_audit(v, s, nominal, rounds, noise_scale, reported, rng, s.plan.budget_accountant)
                   for v in s.plan.views]
        if control:
            halved = _audit_once(s, prepared, replacement, starts, trials, 0.5 * noise_scale, seed)
            ctrl = [_view_audit(v, s, halved, rounds, 0.5 * noise_scale, reported, rng,
                                s.plan.budget_accountant) for v in s.plan.views]
            results = [_with_control(r, c) for r, c in zip(results, ctrl, strict=True)]
    notes += list(dict.fromkeys(str(w.message) for w in caught))
    verdict = _verdict(results, control)
    record = None if isinstance(replacement, tuple) else replacement.index  # None: the whole client
    return AuditResult(entry.name, verdict, tuple(results), trials, rounds, canary, s.target, record,
                       s.plan.delta, s.plan.budget_accountant, control, noise_scale, time.perf_counter() - t0,
                       tuple(notes), level)


def _with_control(nominal: ViewAudit, halved: ViewAudit) -> ViewAudit:
    return replace(nominal, control_epsilon_lower=halved.epsilon_lower)


def _verdict(views: list[ViewAudit], control: bool) -> str:
    """LEAK / underpowered / consistent (module docstring)."""
    if any(v.leak for v in views):
        return "LEAK: lower bound above the reported epsilon"
    if control and not any((v.control_epsilon_lower or 0.0) > v.epsilon_reported_tight for v in views):
        return "underpowered"
    return "consistent"


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
