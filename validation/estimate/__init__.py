"""``fedbound.validation.estimate``: Constants and validation: measure the constants a paper's bound assumes
on a real model and data (``estimate``), then put the bound against training (``validate``: holds, optimum,
rank, calibrated). One ``validate_PAPER`` module per paper declares its ``VALIDATION`` entry (which
constants, how measured, what it sweeps, how the bound is evaluated).

Modules: ``constants``, ``paper_entry``, ``validate``, ``validate_adaptive``, ``validate_dppfl``,
``validate_nbafl``, ``validate_plot``, ``validate_udp``, ``validate_wpfl``.

``fedbound estimate PAPER CONFIG``: the constants of a paper's bound, measured on the configured model and
data along a short non-private run of the paper's own algorithm.

:func:`load_problem` builds what training would build (the ``[PAPER]`` and ``[train]`` sections, the
paper's recipe, the data, the model and the objective of :mod:`fedbound.validation.estimate.constants`);
:func:`estimate` runs ``rounds`` non-private rounds, measures every quantity at the trajectory's points and
maps them onto the paper's config keys through its validation entry
(:class:`fedbound.validation.estimate.paper_entry.Validation`); :func:`write_config` writes a copy of the
config with the measured values and the marker ``# fedbound-measured: KEYS`` that ``fedbound plan`` reads.

``F*``: L-BFGS to tolerance on convex models (``logreg``: logistic or ridge regression); for other models
the best value of a long L-BFGS run from ``w0``, cached in ``cache/fstar/<config hash>.json``.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.config import MEASURED_MARKER
from fedbound.errors import ConfigError, ParameterError
from fedbound.validation.estimate import constants as cn

__all__ = ["Problem", "Estimation", "load_problem", "trajectory", "estimate", "write_config", "entry",
           "DEFAULT_ROUNDS", "DEFAULT_CACHE"]

DEFAULT_ROUNDS = 10
"""Rounds of the non-private trajectory the constants are measured along."""
DEFAULT_CACHE = Path("runs") / "cache"
HESSIAN_POINTS = 3
"""Trajectory points where Hessian eigenvalues are computed (evenly spaced, both ends included)."""
NONCONVEX_ITERATIONS = 300
"""L-BFGS iterations of the long non-private run that estimates F* of a non-convex model."""


def entry(paper: Any) -> Any:
    """The paper's validation entry; ConfigError naming what it supports when it has none."""
    if getattr(paper, "validation", None) is None:
        from fedbound.registry import names

        have = [n for n in names() if _registry(n).validation is not None]
        raise ConfigError(f"{paper.short} has no validation entry in fedbound yet (papers with one: "
                          f"{', '.join(have) or 'none'})")
    from fedbound.registry import resolve

    return resolve(paper.validation)


def _registry(name: str) -> Any:
    from fedbound.registry import get

    return get(name)


@dataclass
class Problem:
    """A paper's configured training problem: setting, train section, recipe, data, model, objective."""

    paper: Any
    config: Path
    overrides: tuple[str, ...]
    setting: dict[str, Any]
    train: dict[str, Any]
    recipe: Any
    setup: Any
    objective: cn.Objective
    convex: bool
    init: Any = None
    """The initial model of a user's own ``torch.nn`` module (its weights); None: the seeded
    initialisation."""

    def algorithm(self, rounds: int) -> Any:
        return self.recipe.algorithm(self.setting, self.train, rounds)


def load_problem(paper_name: str, config: str | Path, overrides: Iterable[str] = (), *, data: Any = None,
                 model: Any = None) -> Problem:
    """``[PAPER]`` + ``[train]`` of ``config`` (with ``--set`` overrides) as training reads them
    (:func:`fedbound.validation.recipes.runner.prepare_run`), the paper's data, model and objective;
    ``data``, ``model``: a user's own (:mod:`fedbound.training.custom`) instead of ``[train]``'s."""
    import torch

    from fedbound.registry import get
    from fedbound.training import config as tc
    from fedbound.validation.recipes.runner import prepare_run

    entry(get(paper_name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = prepare_run(paper_name, config, overrides, data=data, model=model)
    setting = {k: v for k, v in run.setting.items() if v is not None}
    rec = run.recipe
    setup = tc.build_data(run.train, run.num_clients, rec.min_client_size(setting), "cpu",
                          custom=run.custom[:2] if run.custom else None)
    convex = setup.model.name == "logreg"
    # float64 where the estimates are checked against exact constants; float32 (half the time) otherwise
    objective = cn.Objective.from_client_data(setup.model, setup.data, run.train["weight_decay"],
                                              torch.float64 if convex else torch.float32)
    return Problem(run.paper, Path(config), tuple(overrides), setting, dict(run.train), rec, setup, objective,
                   convex, run.custom[2] if run.custom else None)


def trajectory_start(problem: Problem) -> Any:
    """``w_0``: the engine's initial model for the run's seed (``Model.init`` from the "init" stream)."""
    from fedbound.training import config as tc
    from fedbound.training.noise import Streams

    options = tc.run_options(problem.train)
    if problem.init is not None:
        return problem.init.to(options.dtype)
    return problem.setup.model.init(Streams(options.seed).generator("init"), options.dtype)


def trajectory(problem: Problem, rounds: int) -> list[Any]:
    """``w_0, ..., w_rounds``: the global models of a non-private run of the paper's algorithm."""
    import torch

    from fedbound.training import config as tc
    from fedbound.training.engine import run

    if not 1 <= rounds <= 10_000:
        raise ParameterError("--rounds", rounds, "integer in [1, 10000]")
    train = {**problem.train, "eval_every": rounds, "eval_clients": False}
    options = tc.run_options(train)
    w0 = trajectory_start(problem)
    algorithm = problem.algorithm(rounds)
    points = [w0.to(torch.float64)]
    after_round = algorithm.after_round

    def record(ctx: Any, new_global: torch.Tensor) -> None:  # the engine's hook, plus a copy of w_t
        after_round(ctx, new_global)
        points.append(new_global.detach().reshape(-1).to(torch.float64).clone())

    algorithm.after_round = record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(algorithm, problem.setup.model, problem.setup.data, plan=None, options=options, init_params=w0,
            rounds=rounds)
    return points


@dataclass(frozen=True)
class Estimation:
    """Measured quantities, ``F*``, and the paper's config keys they set (``constants``: key -> value;
    ``sources``: key -> quantity); ``unmeasured``: key -> why not."""

    paper: str
    config: str
    convex: bool
    rounds: int
    initial_loss: float
    minimum: cn.Minimum
    quantities: dict[str, cn.Estimate]
    constants: dict[str, float]
    sources: dict[str, str]
    unmeasured: dict[str, str]
    wall_time_s: float
    notes: tuple[str, ...] = field(default=())
    f_star_by_seed: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"paper": self.paper, "config": self.config, "convex": self.convex, "rounds": self.rounds,
                "initial_loss": self.initial_loss, "f_star": self.minimum.to_dict(),
                "quantities": {k: v.to_dict() for k, v in self.quantities.items()},
                "constants": dict(self.constants), "sources": dict(self.sources),
                "unmeasured": dict(self.unmeasured), "wall_time_s": self.wall_time_s,
                "notes": list(self.notes),
                "f_star_by_seed": {str(k): v for k, v in self.f_star_by_seed.items()}}


def _data_key(problem: Problem) -> str:
    """A hash of what ``F`` depends on: the samples (F is their mean loss), the model and weight decay."""
    import hashlib

    obj = problem.objective
    h = hashlib.blake2b(digest_size=16)
    for t in (obj._x_all, obj._y_all):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(json.dumps([problem.setup.model.name, problem.setup.model.n_params, obj.weight_decay,
                         str(obj.dtype), NONCONVEX_ITERATIONS]).encode())
    if problem.init is not None:  # a user's own module: its layers and weights (w0, where F*'s run starts)
        h.update(repr(problem.setup.model.layers).encode())
        h.update(problem.init.numpy().tobytes())
    return h.hexdigest()


def _f_star(problem: Problem, w0: Any, cache: Path | None) -> cn.Minimum:
    """F* (exact on convex models; otherwise a long L-BFGS run, cached by a hash of the data and model, so
    seeds that train on the same samples share it)."""
    if problem.convex:
        return cn.minimise(problem.objective, w0, convex=True)
    path = None if cache is None else Path(cache) / "fstar" / f"{_data_key(problem)}.json"
    if path is not None and path.is_file():
        return cn.Minimum(**json.loads(path.read_text()))
    found = cn.minimise(problem.objective, w0, convex=False, maxiter=NONCONVEX_ITERATIONS)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.time_ns()}.tmp")
        tmp.write_text(json.dumps(found.to_dict()))
        tmp.replace(path)
    return found


def _spaced(n: int, k: int) -> list[int]:
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, min(k, n))})


def measure(problem: Problem, points: list[Any], cache: Path | None = DEFAULT_CACHE,
            needed: Iterable[str] = ()) -> tuple[cn.Minimum, float, dict[str, cn.Estimate]]:
    """``F*``, ``F(w0)`` and the quantities of :data:`fedbound.validation.estimate.paper_entry.QUANTITIES`
    along ``points`` (``F*`` is lowered to the trajectory's best loss if the solver stopped above it): the
    cheap ones always, the costly per-client and per-sample ones (:data:`COSTLY`) only when ``needed`` names
    them."""
    obj = problem.objective
    minimum = _f_star(problem, points[0], cache)
    losses, norms, b_values, a_values, divergences, client = [], [], [], [], [], []
    for w in points:
        value, g = obj.grad(w)
        losses.append(value)
        norms.append(float(g.norm()))
        client.append(obj.client_grads(w).numpy())
        b_values.append(_or_nan(cn.dissimilarity_at, client[-1], obj.sizes))
        a_values.append(_or_nan(cn.mean_dissimilarity_at, client[-1], obj.sizes))
        divergences.append(cn.divergence_at(client[-1], obj.sizes))
    f_star = min(minimum.value, min(losses))
    hess = [points[i] for i in _spaced(len(points), HESSIAN_POINTS)]
    out = {
        "initial_gap": cn.Estimate("initial_gap", losses[0] - f_star, losses[0] - f_star,
                                   losses[0] - f_star, losses[0] - f_star,
                                   f"F(w0) - F*, F* by {minimum.method}"),
        "smoothness": cn.smoothness(obj, hess, **({"iters": 500, "tol": 1e-10} if problem.convex else {})),
        "pl": (cn.strong_convexity(obj, hess) if problem.convex
               else cn.pl_constant(losses, norms, f_star)),
        "gradient_bound": cn.gradient_bound(norms),
        "dissimilarity": cn.dissimilarity(b_values),
        "gradient_divergence": cn.gradient_divergence(divergences),
        "mean_dissimilarity": cn.mean_dissimilarity(a_values),
        "client_gradient_bound": cn.client_gradient_bound(client),
        "weighted_divergence": cn.weighted_divergence(divergences, obj.sizes),
    }
    if problem.convex:
        out["pl_ratio"] = cn.pl_constant(losses, norms, f_star)
    wanted = set(needed) & set(COSTLY)
    if "eta" not in problem.setting:  # the meta objective needs the paper's inner learning rate
        wanted.discard("meta_initial_gap")
    costly = {
        "lower_curvature": lambda: cn.lower_curvature(obj, hess),
        "client_smoothness": lambda: cn.client_smoothness(obj, hess),
        "client_strong_convexity": lambda: cn.client_strong_convexity(obj, hess),
        "hessian_dissimilarity": lambda: cn.hessian_dissimilarity(obj, hess),
        "hessian_lipschitz": lambda: cn.hessian_lipschitz(obj, hess),
        "sample_gradient_std": lambda: cn.sample_gradient_std(obj, points),
        "sample_hessian_std": lambda: cn.sample_hessian_std(obj, hess),
        "meta_initial_gap": lambda: cn.meta_initial_gap(obj, points, float(problem.setting["eta"]),
                                                        problem.convex),
        "initial_distance": lambda: cn.initial_distance(obj, points[0]),
        "optimum_spread": lambda: cn.optimum_spread(obj, points[0]),
    }
    out.update({name: costly[name]() for name in COSTLY if name in wanted})
    return minimum, losses[0], out


COSTLY = ("lower_curvature", "client_smoothness", "client_strong_convexity", "hessian_dissimilarity",
          "hessian_lipschitz", "sample_gradient_std", "sample_hessian_std", "meta_initial_gap",
          "initial_distance", "optimum_spread")
"""Quantities that cost Hessian-vector products per client or per sample (or a second solver): measured
only for the papers whose entries need them."""


def _or_nan(fn: Any, *args: Any) -> float:
    try:
        return float(fn(*args))
    except ValueError:
        return float("nan")


SUPREMA = ("initial_gap", "smoothness", "gradient_bound", "dissimilarity", "gradient_divergence",
           "mean_dissimilarity", "client_gradient_bound", "weighted_divergence", "lower_curvature",
           "client_smoothness", "hessian_dissimilarity", "hessian_lipschitz", "sample_gradient_std",
           "sample_hessian_std", "meta_initial_gap", "initial_distance", "optimum_spread")
"""Quantities a bound needs as an upper bound (combined over seeds by max; the others by min)."""


def _combine(per_seed: list[dict[str, cn.Estimate]]) -> dict[str, cn.Estimate]:
    """One estimate per quantity valid for every seed: the max of the suprema, the min of the infima."""
    out = {}
    for name in per_seed[0]:
        found = [q[name] for q in per_seed if name in q]
        pick = max if name in SUPREMA else min
        best = pick(found, key=lambda e: e.value)
        note = f"worst case over {len(found)} seeds" if len(found) > 1 else best.note
        out[name] = cn.Estimate(best.name, best.value, min(e.low for e in found),
                                float(np.median([e.median for e in found])), max(e.high for e in found),
                                best.method, best.points, note)
    return out


def estimate(paper_name: str, config: str | Path, overrides: Iterable[str] = (), *,
             rounds: int = DEFAULT_ROUNDS, cache: Path | None = DEFAULT_CACHE,
             seeds: Iterable[int] | None = None, data: Any = None, model: Any = None,
             constants: bool = True) -> Estimation:
    """Measure the constants of ``paper_name``'s bound on ``config``'s model and data (module docstring).

    ``seeds``: the ``[train] seed`` values the constants must hold for (each seed draws its own data split,
    and synthetic tasks their own data): every constant is measured for the first; ``F*`` and ``Theta``
    for each (all constants on convex models, where it is cheap), combined to the worst case.  None: the
    config's own seed.  ``data``, ``model``: a user's own data and ``torch.nn`` model instead of the
    ``[train]`` ones (:mod:`fedbound.training.custom`; the module's weights are ``w0``).  ``constants=False``:
    only ``F*`` and ``Theta`` (what a measured gap needs; ``fedbound validate`` when a premise the config
    alone decides fails).
    """
    t0 = time.perf_counter()
    overrides = tuple(overrides)
    seed_list = [None] if seeds is None else list(dict.fromkeys(int(s) for s in seeds))
    per_seed, minima, f_stars = [], [], {}
    first = None
    for seed in seed_list:
        problem = load_problem(paper_name, config, overrides if seed is None else
                               (*overrides, f"train.seed={seed}"), data=data, model=model)
        if constants and (first is None or problem.convex):
            points = trajectory(problem, int(rounds))
            needed = set(entry(problem.paper).constants.values())
            minimum, initial_loss, quantities = measure(problem, points, cache, needed)
        else:
            w0 = trajectory_start(problem)
            minimum = _f_star(problem, w0, cache)
            f0 = initial_loss = problem.objective.loss(w0)
            gap = f0 - min(minimum.value, f0)
            quantities = {"initial_gap": cn.Estimate("initial_gap", gap, gap, gap, gap,
                                                     f"F(w0) - F*, F* by {minimum.method}")}
        if first is None:
            first, first_loss = problem, initial_loss
        per_seed.append(quantities)
        minima.append(minimum)
        f_stars[int(problem.train["seed"])] = minimum.value
    quantities = _combine(per_seed)
    spec = entry(first.paper)
    constants = {key: quantities[q].value for key, q in spec.constants.items() if q in quantities}
    notes = []
    if not first.convex:
        notes.append(f"model {first.setup.model.name} is not convex: F* is the best of a long L-BFGS run "
                     "(a local minimum), the PL constant is the smallest PL ratio seen along the trajectory")
    return Estimation(first.paper.name, str(config), first.convex, int(rounds), first_loss, minima[0],
                      quantities, constants, {k: q for k, q in spec.constants.items() if q in quantities},
                      dict(spec.unmeasured),
                      time.perf_counter() - t0, tuple(notes), f_stars)


def _set_key(text: str, section: str, key: str, value: float, comment: str) -> str:
    """``text`` with ``key = value  # comment`` in ``[section]`` (replacing a set or commented-out key)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == f"[{section}]"), None)
    if start is None:
        raise ConfigError(f"the config has no [{section}] section to write the measured constants into")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    pattern = re.compile(rf"^\s*#?\s*{re.escape(key)}\s*=")
    new = f"{key} = {value!r}  # MEASURED: {comment}"
    for i in range(start + 1, end):
        if pattern.match(lines[i]):
            lines[i] = new
            break
    else:
        last = max(i for i in range(start, end) if lines[i].strip() and not lines[i].lstrip().startswith("#"))
        lines.insert(last + 1, new)
    return "\n".join(lines) + "\n"


def check_write_target(config: str | Path, out: str | Path) -> Path:
    """``out`` as a Path; ParameterError if it is the config itself or a folder."""
    out = Path(out)
    if out.resolve() == Path(config).resolve() or out.is_dir():
        raise ParameterError("--write", str(out), "a new file path (not the config itself, not a folder)")
    return out


def write_config(est: Estimation, out: str | Path, overrides: Iterable[str] = ()) -> Path:
    """A copy of ``est.config`` with the measured constants in the paper's section, a header saying when and
    how they were measured, and the ``# fedbound-measured: KEYS`` marker ``fedbound plan`` reads."""
    out = check_write_target(est.config, out)
    text = Path(est.config).read_text(encoding="utf-8")
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(f"# {MEASURED_MARKER}")) + "\n"
    internal = set(entry(_registry(est.paper)).internal)
    for key, value in est.constants.items():
        if key in internal:
            continue
        q = est.quantities[est.sources[key]]
        text = _set_key(text, est.paper, key, float(f"{value:.6g}"),
                        f"{q.name}, spread {q.low:.3g}..{q.high:.3g} along the trajectory")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    sets = "".join(f" --set {o}" for o in overrides)
    header = (f"# {MEASURED_MARKER} {' '.join(k for k in est.constants if k not in internal)}\n"
              f"# measured by `fedbound estimate {est.paper} {est.config}{sets}` on {stamp}: "
              f"{est.rounds} non-private rounds, F* = {est.minimum.value:.6g} ({est.minimum.method})\n")
    if est.unmeasured:
        header += "# not measured: " + "; ".join(f"{k} ({v})" for k, v in est.unmeasured.items()) + "\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(header + text, encoding="utf-8")
    except OSError as exc:
        raise ParameterError("--write", str(out), "a writable file path", hint=exc.strerror or str(exc)
                             ) from None
    return out


def measured_setting(est: Estimation, setting: Mapping[str, Any]) -> dict[str, Any]:
    """``setting`` with the measured constants in place of the configured ones."""
    return {**setting, **est.constants}
