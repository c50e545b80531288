"""``fedbound validate PAPER CONFIG --vs T``: does the paper's bound predict what training does?

1. :func:`fedbound.validation.estimate.estimate` measures the bound's constants and ``F*``.
2. One :class:`~fedbound.validation.sweep.RunSpec` per (value, seed) is trained by
   :func:`~fedbound.validation.sweep.run_sweep` (private, as configured); the measured gap of a run is
   ``F(w_T) - F*`` (its final training loss minus ``F*``); per value: mean, standard error and the 95 %
   Student-t interval over the seeds.
3. The paper's entry evaluates its bound at the measured constants (paper noise and tight noise), as two
   additive terms; the *calibrated* prediction scales each term by a non-negative factor fitted (NNLS) on
   every other value and predicts the rest.
4. Verdicts (:func:`verdicts`): the bound holds at every point (or where not: theorem, point, numbers);
   predicted optimum against the measured best and its plateau (values within one standard error of the
   best); Spearman rank agreement of bound and measurement (where it is not positive: the term of the
   bound responsible, with its numbers); the calibrated prediction's held-out error.  A theorem whose
   premises fail at the measured constants says so, every failed premise named.

Writes ``validation.csv`` (tidy: one row per run, one per predicted point), ``validation.json`` and the
figure ``validation.png`` / ``.svg`` (:mod:`fedbound.validation.estimate.validate_plot`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ParameterError
from fedbound.validation.estimate import DEFAULT_CACHE, DEFAULT_ROUNDS, Estimation, entry, estimate

__all__ = ["ValidationResult", "validate", "parse_values", "measured_points", "calibrate", "verdicts",
           "responsible_term", "DEFAULT_SEEDS"]

DEFAULT_SEEDS = 3
MAX_SEEDS = 1000
MAX_VALUES = 200


def parse_values(text: str | Sequence[float] | None, default: Sequence[float]) -> list[float]:
    """``"5,10,20"`` -> ``[5.0, 10.0, 20.0]`` (sorted, distinct); ``default`` when None."""
    if text is None:
        return sorted({float(v) for v in default})
    raw = text.split(",") if isinstance(text, str) else list(text)
    try:
        values = [float(v) for v in raw if str(v).strip()]
    except ValueError:
        raise ParameterError("--values", text, "comma-separated numbers, e.g. 5,10,20") from None
    if not values or len(values) > MAX_VALUES or not all(math.isfinite(v) and v > 0 for v in values):
        raise ParameterError("--values", text, f"1 to {MAX_VALUES} comma-separated positive numbers, e.g. "
                             "5,10,20")
    return sorted(set(values))


def _literal(vs: str, value: float) -> str:
    return str(int(value)) if vs in ("T", "K", "N", "m") or float(value).is_integer() else repr(float(value))


def measured_points(final: Any, vs: str) -> list[dict[str, Any]]:
    """Per value of ``vs``: seeds, mean ``gap`` (``F(w_T) - F*`` of each run, F* of its seed's data),
    standard error and 95 % Student-t interval.  One seed has no spread: its ``se`` and interval are None
    ("n/a" in tables).  The gap is non-negative, so where every run's gap is, the interval is clipped at 0
    (an interval never leaves its quantity's range)."""
    from fedbound.validation.reproduce.claims import mean_interval

    out = []
    for value, group in final.groupby(vs, sort=True):
        gaps = group["gap"].to_numpy(dtype=float)
        n = len(gaps)
        floor = 0.0 if (gaps >= 0).all() else None
        mean, low, high = mean_interval(gaps, low=floor)
        se = float(gaps.std(ddof=1) / math.sqrt(n)) if n > 1 else None
        out.append({vs: float(value), "seeds": n, "mean": mean, "se": se,
                    "ci_low": low if math.isfinite(low) else None,
                    "ci_high": high if math.isfinite(high) else None})
    return out


def calibrate(terms: Mapping[str, np.ndarray], measured: np.ndarray) -> dict[str, Any]:
    """At most two non-negative scale factors, one per bound term, fitted (NNLS) on every other point
    (indices 0, 2, ...) and used to predict the others; relative error on the held-out points."""
    from scipy.optimize import nnls

    names = list(terms)
    design = np.column_stack([np.asarray(terms[k], dtype=float) for k in names])
    n = len(measured)
    fit = np.arange(0, n, 2)
    held = np.arange(1, n, 2)
    ok = np.isfinite(design).all(1) & np.isfinite(measured)
    fit, held = fit[ok[fit]], held[ok[held]]
    if len(fit) < 1 or not len(held):
        return {"factors": None, "prediction": [None] * n, "fit_points": fit.tolist(),
                "held_out": held.tolist(), "held_out_error": None,
                "message": "not enough points where the bound is defined (need 2 or more)"}
    cols = names if len(fit) >= len(names) else names[:0]
    if cols:
        coef, _ = nnls(design[fit], measured[fit])
    else:  # one point: a single factor on the whole bound
        total = design.sum(1)
        coef = np.full(len(names), float(measured[fit] @ total[fit] / (total[fit] @ total[fit])))
    prediction = design @ coef
    rel = np.abs(prediction[held] - measured[held]) / np.maximum(np.abs(measured[held]), 1e-12)
    return {"factors": dict(zip(names, coef.tolist(), strict=True)), "prediction": prediction.tolist(),
            "fit_points": fit.tolist(), "held_out": held.tolist(), "held_out_error": float(rel.mean()),
            "message": f"{len(coef)} factor(s) fitted on {len(fit)} point(s), tested on {len(held)}"}


def _argmin(x: np.ndarray, y: np.ndarray) -> float | None:
    ok = np.isfinite(y)
    return float(x[ok][np.argmin(y[ok])]) if ok.any() else None


def responsible_term(vs: str, x: np.ndarray, mean: np.ndarray, bound: np.ndarray,
                     terms: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Why the bound's shape disagrees with the measurement: each additive term's values at the first and
    last point and its Spearman rank correlation with the measured gap; the term moving against the
    measurement with the largest change is the one responsible (None when no term moves against it)."""
    from scipy import stats

    ok = np.isfinite(bound) & np.isfinite(mean)
    for values in terms.values():
        ok &= np.isfinite(np.asarray(values, dtype=float))
    idx = np.flatnonzero(ok)
    rows = {}
    for name, values in terms.items():
        v = np.asarray(values, dtype=float)[idx]
        varies = np.ptp(v) > 0 and np.ptp(mean[idx]) > 0
        rho = float(stats.spearmanr(v, mean[idx]).statistic) if varies else 0.0
        rows[name] = {"first": float(v[0]), "last": float(v[-1]), "spearman": rho}
    against = sorted((n for n, r in rows.items() if r["spearman"] < 0),
                     key=lambda n: -abs(rows[n]["last"] - rows[n]["first"]))
    name = against[0] if against else None

    def moves(a: float, b: float) -> str:
        return f"{'rises' if b > a else 'falls'} from {a:.4g} to {b:.4g}"

    first, last = idx[0], idx[-1]
    text = (f"the shape disagrees: over {vs} = {float(x[first]):g} to {float(x[last]):g} the bound "
            f"{moves(bound[first], bound[last])} while the measured gap {moves(mean[first], mean[last])}; ")
    if name is None:
        text += "no single term moves against the measurement (their sum does)"
    else:
        r = rows[name]
        text += (f"the term responsible is the bound's {name} term, which {moves(r['first'], r['last'])} "
                 f"(Spearman {r['spearman']:+.2f} with the measurement)")
        others = [f"its {n} term {moves(o['first'], o['last'])} (Spearman {o['spearman']:+.2f})"
                  for n, o in rows.items() if n != name]
        text += "; " + "; ".join(others) if others else ""
    return {"term": name, "terms": rows, "text": text}


def verdicts(vs: str, x: np.ndarray, measured: list[dict[str, Any]], bound: np.ndarray,
             calibrated: dict[str, Any], theorem: str, problems: list[str], exact: bool,
             terms: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The four verdicts (module docstring), each with a one-line ``text``.  ``terms``: the bound's additive
    terms at ``x``; when bound and measurement disagree in shape (Spearman <= 0) the rank verdict names the
    term responsible, with its numbers (:func:`responsible_term`)."""
    from scipy import stats

    mean = np.array([p["mean"] for p in measured])
    se = np.array([math.nan if p["se"] is None else p["se"] for p in measured], dtype=float)
    out: dict[str, Any] = {}
    defined = np.isfinite(bound)
    if problems or not defined.any():
        text = (f"the premises fail at the measured constants: {'; '.join(problems)}" if problems
                else f"{theorem} is undefined at every point")
        out["holds"] = {"status": "not applicable", "violations": [], "text": text}
    else:
        bad = [{vs: float(x[i]), "measured": float(mean[i]), "bound": float(bound[i]),
                "significant": measured[i]["ci_low"] is not None and bool(measured[i]["ci_low"] > bound[i])}
               for i in np.flatnonzero(defined) if mean[i] > bound[i]]
        if not bad:
            text = (f"holds at every point: the measured gap is below {theorem} at all {int(defined.sum())} "
                    f"values of {vs}")
            status = "holds"
        else:
            worst = max(bad, key=lambda b: b["measured"] / b["bound"])
            status = "violated"
            kind = ("a bug or an erratum (the constants are exact on this convex task)" if exact else
                    "the measured constants or the theorem's hypotheses do not describe this training")
            text = (f"VIOLATED at {len(bad)} of {int(defined.sum())} points of {theorem}: at {vs} = "
                    f"{worst[vs]:g} the measured gap {worst['measured']:.4g} exceeds the bound "
                    f"{worst['bound']:.4g} ({'outside' if worst['significant'] else 'within'} the 95 % "
                    f"interval); {kind}")
        out["holds"] = {"status": status, "violations": bad, "text": text}
    best = int(np.nanargmin(mean))
    plateau = [float(v) for v, m in zip(x, mean, strict=True) if m <= mean[best] + (se[best] if np.isfinite(
        se[best]) else 0.0)]
    predicted = _argmin(x, bound)
    cal = np.asarray([np.nan if v is None else v for v in calibrated["prediction"]], dtype=float)
    predicted_cal = _argmin(x, cal)
    inside = predicted is not None and predicted in plateau
    out["optimum"] = {"measured": float(x[best]), "plateau": plateau, "predicted": predicted,
                      "predicted_calibrated": predicted_cal, "inside_plateau": inside,
                      "text": (f"best {vs} measured {x[best]:g} (plateau within one standard error: "
                               f"{', '.join(f'{v:g}' for v in plateau)}); the bound predicts "
                               + (f"{predicted:g}" if predicted is not None else "nothing (undefined)")
                               + (f", the calibrated prediction {predicted_cal:g}"
                                  if predicted_cal is not None else "")
                               + (": inside the plateau" if inside else ": outside the plateau"))}
    ok = defined & np.isfinite(mean)
    if ok.sum() >= 3 and np.ptp(bound[ok]) > 0 and np.ptp(mean[ok]) > 0:
        rho = float(stats.spearmanr(bound[ok], mean[ok]).statistic)
        out["rank"] = {"spearman": rho, "points": int(ok.sum()),
                       "text": f"Spearman rank agreement of bound and measurement over {vs}: {rho:+.2f} "
                               f"({int(ok.sum())} points; +1 = same order)"}
        if rho <= 0 and terms:
            why = responsible_term(vs, x, mean, bound, terms)
            out["rank"]["responsible"] = why
            out["rank"]["text"] += f"; {why['text']}"
    else:
        out["rank"] = {"spearman": None, "points": int(ok.sum()),
                       "text": "rank agreement needs 3 or more points where bound and measurement vary"}
    err = calibrated["held_out_error"]
    out["calibrated"] = {"held_out_error": err, "factors": calibrated["factors"],
                         "text": ("calibrated prediction: " + calibrated["message"] +
                                  (f"; mean relative error on held-out points {100 * err:.1f} %"
                                   if err is not None else ""))}
    return out


@dataclass(frozen=True)
class ValidationResult:
    """Everything ``fedbound validate`` reports (:meth:`to_dict` is validation.json)."""

    paper: str
    vs: str
    values: list[float]
    seeds: int
    theorem: str
    estimation: Estimation
    setting: dict[str, Any]
    measured: list[dict[str, Any]]
    bound: dict[str, list[float | None]]
    terms: dict[str, list[float | None]]
    calibrated: dict[str, Any]
    verdicts: dict[str, Any]
    files: dict[str, str]
    failed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from fedbound.scheduling.results import json_number

        return {"paper": self.paper, "vs": self.vs, "values": self.values, "seeds": self.seeds,
                "theorem": self.theorem, "constants": self.estimation.to_dict(),
                "setting": {k: v if isinstance(v, str) else json_number(v) for k, v in self.setting.items()},
                "measured": self.measured, "bound": json_number(self.bound), "terms": json_number(self.terms),
                "calibrated": json_number(self.calibrated) | {"message": self.calibrated["message"]},
                "verdicts": _jsonable(self.verdicts), "files": self.files, "failed": self.failed}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer | np.bool_):
        return obj.item()
    return obj


EXECUTORS = ("local", "ray")


def _check_inputs(paper_name: str, vs: str, seeds: int, executor: str) -> Any:
    from fedbound.registry import get

    if executor not in EXECUTORS:
        raise ParameterError("--executor", executor, "one of " + ", ".join(EXECUTORS))
    paper = get(paper_name, "train")
    spec = entry(paper)
    if vs not in spec.sweeps:
        raise ParameterError("--vs", vs, f"one of {', '.join(spec.sweeps)} ({paper.short})")
    if not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise ParameterError("--seeds", seeds, f"integer in [1, {MAX_SEEDS}]")
    return paper, spec


def _tidy_rows(final: Any, vs: str, x: np.ndarray, bound: Mapping[str, np.ndarray],
               cal: Sequence[float | None]) -> list[dict[str, Any]]:
    rows = [{"kind": "run", vs: float(r[vs]), "seed": int(r["seed"]), "key": r["key"],
             "round": int(r["round"]), "loss": float(r["loss"]), "gap": float(r["gap"]), "prediction": None}
            for _, r in final.iterrows()]
    for name, values in {**{f"bound_{k}": v for k, v in bound.items()}, "calibrated": cal}.items():
        rows += [{"kind": name, vs: float(v), "seed": None, "key": None, "round": None, "loss": None,
                  "gap": None, "prediction": None if p is None or not np.isfinite(p) else float(p)}
                 for v, p in zip(x, values, strict=True)]
    return rows


def validate(paper_name: str, config: str | Path, vs: str = "T", values: str | Sequence[float] | None = None,
             seeds: int = DEFAULT_SEEDS, out: str | Path | None = None, *, executor: str = "local",
             address: str | None = None, overrides: Iterable[str] = (), rounds: int = DEFAULT_ROUNDS,
             cache: Path | None = DEFAULT_CACHE, progress: bool = True) -> ValidationResult:
    """Predicted against measured for ``paper_name`` on ``config``, sweeping ``vs`` (module docstring)."""
    import pandas as pd

    from fedbound.validation.estimate.validate_plot import draw
    from fedbound.validation.sweep import RunSpec, check_swept, run_sweep

    paper, spec = _check_inputs(paper_name, vs, seeds, executor)
    x_values = parse_values(values, spec.default_values.get(vs, ()))
    overrides = tuple(overrides)
    # the bound reads the paper's section; [train] overrides (paper scale: model, data) are the runs' only
    own = tuple(o for o in overrides if o.partition("=")[0].strip().partition(".")[0] != "train")
    base = {k: v for k, v in paper.load_setting(config, own).values.items() if k != vs}
    early = spec.applies(base)  # a premise the config alone decides fails: no constant to measure
    if not early:
        spec.terms(base, vs, np.asarray(x_values[:1]), "paper")  # a key the bound needs is missing: fail now
    out = Path(out) if out is not None else Path("runs") / f"validate_{paper.name}_{Path(config).stem}_{vs}"
    key = spec.sweeps[vs]
    specs = [RunSpec(paper.name, config, (*overrides, f"{key}={_literal(vs, v)}"), seed=s, label={vs: v})
             for v in x_values for s in range(seeds)]
    check_swept(specs, vs, key)
    est = estimate(paper.name, config, overrides, rounds=rounds, cache=cache, seeds=range(seeds),
                   constants=not early)
    sweep = run_sweep(specs, out / "sweep", executor=executor, address=address, progress=progress)
    final = sweep.final()
    if spec.measured != "loss" and not final.empty:  # the quantity the bound is on, e.g. the global model's
        final = final.assign(loss=final[spec.measured])
    if final.empty:
        first = next(iter(sweep.failed.values()), "").strip().splitlines()
        raise ParameterError("CONFIG", str(config), "a setting whose runs train",
                             hint="every run failed: " + (first[-1] if first else "no run finished"))
    f_star = {s: min(est.f_star_by_seed[s], float(g["loss"].min())) for s, g in final.groupby("seed")}
    final = final.assign(gap=final["loss"] - final["seed"].map(f_star))
    measured = measured_points(final, vs)
    x = np.array([p[vs] for p in measured])
    setting = {**paper.load_setting(config, own).values, **est.constants}
    setting.pop(vs, None)
    if early:  # the bound is not evaluated: it does not bound what is measured
        terms = {m: {"bound": np.full(len(x), np.nan)} for m in ("paper", "tight")}
    else:
        terms = {m: spec.terms(setting, vs, x, m) for m in ("paper", "tight")}
    bound = {m: sum(t.values()) for m, t in terms.items()}
    mean = np.array([p["mean"] for p in measured])
    cal = calibrate(terms["paper"], mean)
    problems = early or spec.check({**setting, vs: x[0]})
    verdict = verdicts(vs, x, measured, bound["paper"], cal, spec.theorem, problems, est.convex,
                       terms["paper"])
    out.mkdir(parents=True, exist_ok=True)
    files = {"csv": str(out / "validation.csv"), "json": str(out / "validation.json")}
    pd.DataFrame(_tidy_rows(final, vs, x, bound, cal["prediction"])).to_csv(files["csv"], index=False)
    result = ValidationResult(paper.name, vs, [float(v) for v in x_values], seeds, spec.theorem, est, setting,
                              measured, {k: v.tolist() for k, v in bound.items()},
                              {f"{m}_{k}": v.tolist() for m, t in terms.items() for k, v in t.items()}, cal,
                              verdict, files, dict(sweep.failed))
    files.update(draw(result, out / "validation.png"))
    (out / "validation.json").write_text(json.dumps(result.to_dict(), indent=1))
    return result
