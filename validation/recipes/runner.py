"""``fedbound train``: from a config to a finished, resumable training run.

This is where prediction meets the simulator.  The noise formulas live in ``fedbound.bounds`` (per paper) and
``fedbound.accounting``; ``fedbound.training`` only receives their numbers as a
:class:`~fedbound.training.plan.NoisePlan`.

Each paper's registry entry (fedbound.registry) points to its *recipe*, ``RECIPE = Recipe(...)`` in
``fedbound.validation.recipes.<paper>``: how many clients and rounds the setting means, the noise plan (from
the paper's ``noise`` function, paper or tight), and the algorithm object.  The setting section is the
paper's registered ``[<paper>]`` section.  :func:`recipe` looks the paper up, so adding an algorithm never
edits this file.

:func:`train_from_config` is the whole of ``fedbound train``: load ``[ALGO]`` + ``[train]``, build the data,
the plan and the algorithm, run (resuming from ``out``'s checkpoint), write the run directory.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.config import Section, load_config
from fedbound.errors import ConfigError

__all__ = ["Recipe", "recipe", "implemented", "capture", "run_key", "TrainRun", "PreparedRun", "BuiltRun",
           "prepare_run", "build_run", "finish_run", "train_from_config"]

Setting = Mapping[str, Any]


def _rounds_from_T(setting: Setting) -> int:
    return int(setting["T"])


def _no_minimum(setting: Setting) -> int | None:
    return None


def _no_summary(setting: Setting) -> dict[str, Any]:
    return {}


def _adopt_nothing(setting: dict, recommendation: Any) -> dict[str, Any]:
    return {}


def _setting_as_is(setting: Setting, train: Setting) -> dict[str, Any]:
    return dict(setting)


@dataclass(frozen=True)
class Recipe:
    """What ``fedbound train ALGO`` needs to know about one algorithm.

    ``plan(setting, train, client_sizes, rounds)`` returns the NoisePlan (it is only called when
    ``[train] private = true``); ``algorithm(setting, train, rounds)`` the training.Algorithm;
    ``min_client_size(setting)`` the smallest client the setting allows (e.g. NbAFL's m), or None;
    ``summary(setting)`` extra entries for the run summary (e.g. where T came from); ``adopt(setting,
    recommendation)`` puts the plan's other design values (e.g. PADPFL's mu and p) into the setting where the
    config leaves them open, and returns where each came from (``--design recommended``).
    ``planner_setting(setting, train)``: the setting the paper's planner reads for the mechanism the run
    deploys (e.g. the provable sensitivity of NbAFL's configured local training), default the setting as
    it is.  ``section`` is optional: the paper's registered section is used.  ``noise_methods``: what
    ``[train] noise`` may name for this paper (its ``noise`` function's methods).
    """

    num_clients: Callable[[Setting], int]
    plan: Callable[..., Any]
    algorithm: Callable[..., Any]
    section: Section | None = None
    noise_methods: tuple[str, ...] = ("paper", "tight")
    rounds: Callable[[Setting], int] = _rounds_from_T
    min_client_size: Callable[[Setting], int | None] = _no_minimum
    summary: Callable[[Setting], dict[str, Any]] = _no_summary
    adopt: Callable[[dict, Any], dict[str, Any]] = _adopt_nothing
    planner_setting: Callable[[Setting, Setting], dict[str, Any]] = _setting_as_is
    doc: str = field(default="", compare=False)


def implemented() -> tuple[str, ...]:
    """The papers ``fedbound train`` can run (those whose registry entry has a recipe)."""
    from fedbound.registry import names

    return names("train")


def recipe(algo: str) -> Recipe:
    """The recipe of paper ``algo``; ConfigError for an unknown paper or one without a recipe."""
    from fedbound.registry import get

    return get(algo, "train").load("recipe")


def capture_warnings(fn: Callable[..., Any], *args: Any, notes: list[str]) -> Any:
    """``fn(*args)``, its warnings appended to ``notes`` (deduplicated) instead of shown."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args)
    for w in caught:
        text = str(w.message)
        if text not in notes:
            notes.append(text)
    return value


def capture(fn: Callable[..., Any], *args: Any, notes: list[str]) -> float:
    """``fn(*args)`` as a float, its warnings appended to ``notes`` (deduplicated)."""
    return float(capture_warnings(fn, *args, notes=notes))


def run_key(algo: str, sections: Mapping[str, Mapping[str, Any]]) -> str:
    """A fingerprint of everything that changes a run's numbers (guards checkpoint resumption)."""
    from fedbound import __version__

    text = json.dumps({"algo": algo, "sections": sections, "version": __version__}, sort_keys=True,
                      default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass
class TrainRun:
    """What ``fedbound train`` reports: the engine result, the plan, the run directory and a summary."""

    result: Any
    plan: Any
    run_dir: Path
    summary: dict
    files: dict


def _probe(short: str, algorithm: Any, setup: Any, plan: Any, options: Any, train: Mapping[str, Any],
           params: Any, label: str) -> list[tuple[dict, list[str]]]:
    """:mod:`fedbound.validation.audit.probe` at ``params`` (None: the run's initial model); [] when it does
    not apply."""
    from fedbound.training.noise import Streams
    from fedbound.validation.audit.probe import probe_sensitivity

    if plan is None or not train.get("probe_records", 4) or not getattr(algorithm, "sensitivity_probe",
                                                                       False):
        return []
    if params is None:
        params = setup.model.init(Streams(options.seed, options.device).generator("init"), options.dtype)
    entry, found = probe_sensitivity(short, algorithm, setup.model, setup.data, plan, options,
                                     params.unsqueeze(0), label, train.get("probe_records", 4))
    return [(entry, found)] if entry else []


@dataclass
class PreparedRun:
    """A run's effective configuration, validated, before anything is built: the paper, its recipe, the
    ``[PAPER]`` setting and ``[train]`` tables after overrides, aliases and defaults, the rounds to train
    and :attr:`key` (:func:`run_key` of all of it; it names the run in checkpoints and sweeps)."""

    algo: str
    config: str | Path
    paper: Any
    recipe: Recipe
    setting: dict
    train: dict
    rounds: int
    num_clients: int
    assumed: tuple[str, ...]
    notes: list[str]
    key: str
    design: dict = field(default_factory=dict)
    """Where every design value (T, K, noise) came from: config, recommended by plan, the paper's formula."""

    @property
    def section_name(self) -> str:
        return self.paper.config_section.name

    def sections(self) -> dict[str, dict]:
        """The effective ``[PAPER]`` and ``[train]`` tables (what ``config.toml`` of the run holds)."""
        return {self.section_name: self.setting, "train": self.train}


@dataclass
class BuiltRun:
    """What the engine needs for a prepared run: data and model (``setup``), noise plan, algorithm, and
    ``budget``: what the plan spends over its rounds (``fedbound.training.budget.PlanCheck``; None without
    a plan)."""

    setup: Any
    plan: Any
    algorithm: Any
    options: Any
    budget: Any = None


def prepare_run(algo: str, config: str | Path, overrides: Iterable[str] = (), *, seed: int | None = None,
                device: str | None = None, design: str | None = None, paper: Any = None) -> PreparedRun:
    """Load and validate ``[ALGO]`` + ``[train]`` of ``config`` with ``overrides`` (``--set`` style), the
    paper's defaults for unset setting keys, the rounds to train and the run key; builds nothing.
    ``paper``: an object with a registry paper's ``config_section``, ``defaults`` and ``load("recipe")``
    for a mechanism outside the registry (``fedbound.deploy.mechanisms``); default the registry's ``algo``."""
    from fedbound.registry import get, names
    from fedbound.training import config as tc

    paper = get(algo, "train") if paper is None else paper
    rec = paper.load("recipe")
    section = paper.config_section
    extra = list(overrides)
    if seed is not None:
        extra.append(f"train.seed={seed}")
    if device is not None:
        extra.append(f"train.device={json.dumps(device)}")
    with warnings.catch_warnings(record=True) as caught:  # alias notes go into the summary
        warnings.simplefilter("always")
        cfg = load_config(config, [section, tc.TRAIN_SECTION], extra,
                          known_sections=(*names(), section.name, "train"))
    setting, train = dict(cfg[section.name]), dict(cfg["train"])
    assumed = tuple(k for k in paper.defaults if setting.get(k) is None)
    setting.update({k: paper.defaults[k] for k in assumed})
    if train["noise"] not in rec.noise_methods:
        raise ConfigError(f"[train] noise = {train['noise']!r} is outside its valid range for {paper.short}: "
                          f"one of {', '.join(rec.noise_methods)}")
    given_T = setting.get("T")
    if isinstance(given_T, float) and not given_T.is_integer():
        raise ConfigError(f"[{section.name}] T = {given_T!r} is outside its valid range for training: a "
                          "whole number of rounds (integer)")
    design_info: dict[str, Any] = {}
    if design is None:  # the plan's design when the config leaves T open, else the config's
        design = "recommended" if given_T is None else "paper"
    if design not in DESIGNS:
        raise ConfigError(f"--design = {design!r} is outside its valid range: one of {', '.join(DESIGNS)}")
    if design == "recommended":
        rounds, design_info = _recommended(paper, setting, train, given_T)
    else:
        rounds = rec.rounds(setting)
        design_info = {"design": "paper", "T": {"value": rounds, "source": "config" if given_T is not None
                                                else "the paper's formula (its optimal T)"},
                       "noise": {"value": train["noise"], "source": "config ([train] noise)"}}
    tc.check_rounds(f"[{section.name}] T", rounds)
    n_clients = rec.num_clients(setting)
    key = run_key(algo, {section.name: setting, "train": train, "rounds": {"T": rounds}})
    return PreparedRun(algo, config, paper, rec, setting, train, rounds, n_clients, assumed,
                       list(dict.fromkeys(str(w.message) for w in caught)), key, design_info)


DESIGNS = ("recommended", "paper")
"""``fedbound train --design``: the plan's recommendation, or the paper's own formulas (and the config)."""


def _recommended(paper: Any, setting: dict, train: dict, given_T: Any) -> tuple[int, dict[str, Any]]:
    """The registered planner's recommendation as the run's design: its T (unless the config sets T), its K
    (unless the config sets K), and the noise method of its accountant ("tight"); ``setting`` and ``train``
    are updated in place.  Returns the rounds and where every design value came from."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deployed = paper.load("recipe").planner_setting(setting, train)  # the mechanism this run deploys
        plan = paper.load("planner")({k: v for k, v in deployed.items() if v is not None}, "paper")
    r = plan.recommendation
    info: dict[str, Any] = {"design": "recommended", "bound": r.bound, "accounting": r.accounting}
    if "K" in setting:
        if setting.get("K") is None and r.K is not None:
            setting["K"] = int(r.K)
            info["K"] = {"value": int(r.K), "source": "recommended by plan"}
        else:
            info["K"] = {"value": setting.get("K"), "source": "config" if setting.get("K") is not None
                         else "config (unset: every client each round)"}
    # a T the config sets is held; the rounds a T means are the recipe's (WPFL's T is uploads per client)
    T_design = int(given_T) if given_T is not None else int(r.T)
    if "T" in setting:
        setting["T"] = T_design
        rounds = int(paper.load("recipe").rounds(setting))
    else:
        rounds = T_design
    info["T"] = {"value": T_design, "source": "recommended by plan" if given_T is None else "config"}
    if rounds != T_design:
        info["T"]["rounds"] = rounds
        info["T"]["source"] += f" ({rounds} rounds: the recipe's reading of T = {T_design})"
    if T_design != int(r.T):  # the planner chose another T: its bound and sigma are not this run's
        info.update(bound=None, note=f"the plan recommends T = {r.T}; the config's T = {T_design} is kept")
    info.update(paper.load("recipe").adopt(setting, r))
    was = train["noise"]
    if "tight" in paper.load("recipe").noise_methods:
        train["noise"] = "tight"
        info["noise"] = {"value": "tight", "source": "recommended by plan" + (
            f" (overrides [train] noise = {was!r})" if was != "tight" else "")}
    else:
        info["noise"] = {"value": was, "source": "config ([train] noise; this recipe has no 'tight' method)"}
    info["sigma_recommended"] = {k: np.asarray(v).tolist() for k, v in r.sigma.items()}
    return rounds, info


def _design_sigma(info: dict[str, Any], plan: Any) -> None:
    """Record each stage's trained sigma beside the recommended one, and where it came from."""
    if not info or plan is None or info.get("design") != "recommended":
        return
    out = {}
    for stage, want in info.get("sigma_recommended", {}).items():
        got = getattr(plan, "sigma", {}).get(stage)
        if got is None:
            continue
        got_v, want_v = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        first = got_v[0] if got_v.ndim and got_v.shape[0] == plan.rounds else got_v
        rel = float(np.max(np.abs(first - want_v) / np.maximum(np.abs(want_v), 1e-300))) if np.size(want_v) \
            else 0.0
        out[stage] = {"value": np.asarray(first).tolist(), "source": "recommended by plan" if rel <= 1e-6 else
                      f"the recipe's noise method 'tight' ({rel:.3g} relative from the recommended sigma)",
                      "recommended": want}
    info["sigma"] = out


def build_run(prep: PreparedRun, progress: bool = False) -> BuiltRun:
    """Data, model, noise plan (when ``[train] private``) and algorithm of a prepared run; a plan whose noise
    cannot meet its budget at its T under exact accounting is refused here, before anything is trained
    (``fedbound.training.budget.check_plan``), unless ``[train] paper_reproduction`` (then the plan binds
    on the paper's accountant and its notes say what it really spends)."""
    from dataclasses import replace

    from fedbound.training import config as tc
    from fedbound.training.budget import check_plan

    setting, train, rec = prep.setting, prep.train, prep.recipe
    device_name = tc.resolve_device(train["device"])
    setup = tc.build_data(train, prep.num_clients, rec.min_client_size(setting), device_name)
    plan = rec.plan(setting, train, setup.client_sizes, prep.rounds) if train["private"] else None
    algorithm = rec.algorithm(setting, train, prep.rounds)
    budget = None
    if plan is not None:
        if train["paper_reproduction"]:
            plan = replace(plan, paper_reproduction=True)
        what = f"{prep.paper.short} with [train] noise = {train['noise']!r}"
        budget = check_plan(algorithm, setup.model, setup.data, plan, train["seed"], what)
        if train["paper_reproduction"]:
            plan = replace(plan, notes=(*plan.notes, f"paper reproduction ([train] paper_reproduction = "
                                        f"true): the budget binds on the {plan.binding_accountant} "
                                        f"accountant; over its T = {plan.rounds} rounds the plan is "
                                        f"{budget.statement}"))
    return BuiltRun(setup, plan, algorithm, tc.run_options(train, progress), budget)


def finish_run(prep: PreparedRun, built: BuiltRun, result: Any, run_dir: str | Path, wall_time_s: float,
               final_dir: str | Path | None = None, probes: list[tuple[dict, list[str]]] = ()) -> TrainRun:
    """The run's summary, and its metrics (CSV + Parquet), summary.json and config.toml in ``run_dir``
    (``final_dir``: where the summary says the run lies, when ``run_dir`` is renamed there afterwards;
    ``probes``: the sensitivity probe's findings, :func:`_probe`, which ``fedbound train`` runs and sweeps
    skip)."""
    from fedbound.training import config as tc
    from fedbound.training.metrics import write_outputs

    setup, plan, setting = built.setup, built.plan, prep.setting
    summary = dict(result.summary)
    sizes = np.asarray(setup.client_sizes)
    summary.update(config=str(prep.config), run_dir=str(final_dir or run_dir), wall_time_s=wall_time_s,
                   rounds=prep.rounds, num_clients=prep.num_clients, model=setup.model.name,
                   n_params=setup.model.n_params, dataset=setup.dataset.name,
                   client_sizes_min=int(sizes.min()), client_sizes_max=int(sizes.max()))
    if plan is not None:
        summary["plan"] = dict(plan.info)
        summary["plan_rounds"] = plan.rounds
    if built.budget is not None:
        summary["epsilon_planned"] = built.budget.epsilon
        summary["epsilon_planned_paper"] = built.budget.epsilon_paper
    summary.update(prep.recipe.summary(setting))
    summary["assumed"] = list(prep.assumed)
    if prep.design:
        _design_sigma(prep.design, plan)
        summary["design"] = prep.design
    summary["warnings"] = [*prep.notes, *summary.get("warnings", []),
                           *(w for _, found in probes for w in found)]
    if probes:
        summary["sensitivity_probe"] = [entry for entry, _ in probes]
    crd = result.state.algo_state.get("discounts")
    if crd:
        summary["crd_discounts"] = [list(d) for d in crd]
    config_text = tc.dump_toml(prep.sections(),
                               f"effective configuration of this run (from {prep.config})\n"
                               f"fedbound train {prep.algo} <this file> reproduces it")
    files = write_outputs(run_dir, result.metrics, summary, config_text)
    return TrainRun(result, plan, Path(run_dir), summary, {k: str(v) for k, v in files.items()})


def train_from_config(algo: str, config: str | Path, overrides: Iterable[str] = (), *,
                      out: str | Path | None = None, seed: int | None = None, device: str | None = None,
                      progress: bool = False, overwrite: bool = False, design: str | None = None,
                      paper: Any = None) -> TrainRun:
    """Train ``algo`` as configured; checkpoints, metrics (CSV + Parquet), summary and config in ``out``.

    ``design``: "recommended" (the plan's T, K and tight noise; the default when the config leaves T open)
    or "paper" (the config's values and the paper's formulas).  ``out`` defaults to
    ``runs/<algo>_<config stem>``.  A checkpoint there from the same configuration is
    resumed (identical numbers); one from another configuration is a ConfigError unless ``overwrite``.
    """
    from fedbound.training import checkpoint as ckpt
    from fedbound.training.engine import run

    prep = prepare_run(algo, config, overrides, seed=seed, device=device, design=design, paper=paper)
    built = build_run(prep, progress)  # a setting refused by its budget leaves no run directory behind
    # before training: a bad --out (a file, unwritable, a foreign folder to overwrite) fails now, not later
    run_dir = ckpt.prepare_run_dir(out if out is not None else Path("runs") / f"{algo}_{Path(config).stem}",
                                   prep.key, overwrite)
    paper, train = prep.paper, prep.train
    copies = paper.load("audit").prepare(built.algorithm) if paper.audit else built.algorithm  # as copies
    probes = _probe(paper.short, copies, built.setup, built.plan, built.options, train, None, "initial model")
    t0 = time.perf_counter()
    result = run(built.algorithm, built.setup.model, built.setup.data, plan=built.plan, options=built.options,
                 test=built.setup.test, run_dir=run_dir, run_key=prep.key)
    wall = time.perf_counter() - t0
    probes += _probe(paper.short, copies, built.setup, built.plan, built.options, train, result.params,
                     "trained model")
    return finish_run(prep, built, result, run_dir, wall, probes=probes)
