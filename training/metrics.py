"""Per-round metrics: evaluation, the tidy table, the run summary, the files of a run directory, the bar.

The table has one row per (round, client) plus one global row per round (``client`` empty); the columns
are described in ``engine.py``.  Missing values (a client row has no test metrics; regression has no
accuracy; rounds between evaluations) are ``NA``, never NaN from a computation.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["evaluate_clients", "evaluate_test", "evaluate_models", "evaluation", "round_rows", "to_frame",
           "summary", "write_outputs", "progress_bar", "postfix", "set_postfix"]

FIRST_COLUMNS = ["round", "client", "loss", "accuracy", "test_loss", "test_accuracy", "sigma",
                 "epsilon_spent", "epsilon_spent_paper", "participated", "participants"]


@torch.no_grad()
def evaluate_clients(model, params: torch.Tensor, data, max_samples: int = 16384
                     ) -> tuple[np.ndarray, np.ndarray | None]:
    """Mean loss and accuracy of ``params`` (one model ``(1, d)`` or one per client ``(N, d)``) on each
    client's training data: two ``(N,)`` arrays (accuracy None for regression)."""
    n_clients, n_max = data.num_clients, data.n_max
    step = max(1, max_samples // n_max)
    losses, correct = [], []
    for lo in range(0, n_clients, step):
        hi = min(lo + step, n_clients)
        batch = data.gather(np.arange(lo, hi))  # padded a chunk at a time: memory stays near the data's
        x, y, mask = batch.x, batch.y, batch.mask.to(params.dtype)
        if params.shape[0] == 1:
            out = model(params, x.reshape(1, -1, *x.shape[2:])).view(hi - lo, n_max, -1)
        else:
            out = model(params[lo:hi], x)
        losses.append((model.per_sample_loss(out, y) * mask).sum(1))
        hit = model.correct(out, y)
        if hit is not None:
            correct.append((hit * mask).sum(1))
    sizes = torch.as_tensor(data.sizes, dtype=params.dtype, device=params.device)
    loss = (torch.cat(losses) / sizes).cpu().numpy().astype(np.float64)
    acc = (torch.cat(correct) / sizes).cpu().numpy().astype(np.float64) if correct else None
    return loss, acc


@torch.no_grad()
def evaluate_test(model, params: torch.Tensor, test, max_samples: int = 16384) -> tuple[float, float | None]:
    """Mean loss and accuracy of one model ``(1, d)`` on held-out ``(x, y)`` tensors."""
    x, y = test
    total, hits = 0.0, 0.0
    for lo in range(0, len(y), max_samples):
        out = model(params[:1], x[lo:lo + max_samples].unsqueeze(0))
        total += float(model.per_sample_loss(out, y[lo:lo + max_samples].unsqueeze(0)).sum())
        hit = model.correct(out, y[lo:lo + max_samples].unsqueeze(0))
        hits = None if hit is None else hits + float(hit.sum())
    return total / len(y), (None if hits is None else hits / len(y))


def evaluate_models(ctx, algorithm) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None]:
    """The training loss ``sum_i p_i F_i`` (plus the weight-decay term), accuracy and test metrics of the
    algorithm's evaluated model(s), and the per-client losses and accuracies."""
    params = algorithm.eval_models(ctx)
    client_loss, client_acc = evaluate_clients(ctx.model, params, ctx.data)
    one_model = params.shape[0] == 1
    test = evaluate_test(ctx.model, params, ctx.test) if ctx.test is not None and one_model else None
    return evaluation(ctx.data.sizes, algorithm.weight_decay, params, client_loss, client_acc, test)


def evaluation(sizes: np.ndarray, weight_decay: float, params: torch.Tensor, client_loss: np.ndarray,
               client_acc: np.ndarray | None, test: tuple[float, float | None] | None
               ) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None]:
    """What :func:`evaluate_models` returns, from the per-client losses and accuracies and the test metrics
    (``multirun`` computes those for several runs in one pass)."""
    p = sizes / sizes.sum()
    out: dict[str, Any] = {"loss": float(p @ client_loss)}
    if weight_decay and params.shape[0] == 1:
        out["loss"] += 0.5 * weight_decay * float(params.square().sum())
    out["accuracy"] = None if client_acc is None else float(p @ client_acc)
    if test is not None:
        out["test_loss"], out["test_accuracy"] = test
    return out, client_loss, client_acc


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def round_rows(ctx, algorithm, ledger, releases, evaluate: bool, wall_time: float,
               evaluated: tuple | None = None) -> dict[str, Any]:
    """Append this round's rows to ``ctx.state.rows``; return the global row.  ``evaluated``: what
    :func:`evaluate_models` would return, computed already (by ``multirun`` for several runs at once)."""
    state, data = ctx.state, ctx.data
    part = ctx.participants
    n = data.num_clients
    uplink = np.zeros(n)
    ups = ctx.noise_std.get("uplink", [])
    if len(ups) == len(part):
        uplink[part] = ups
    server = ctx.noise_std.get("server", [0.0])
    row: dict[str, Any] = {"round": ctx.round + 1, "client": None, "participants": len(part),
                           "participated": None, "wall_time": wall_time}
    row["sigma"] = math.sqrt(float(np.sum(ctx.weights**2 * uplink[part] ** 2)) + float(server[0]) ** 2)
    for stage, values in ctx.noise_std.items():
        row[f"sigma_{stage}"] = float(np.mean(values)) if values else 0.0
    for name, value in ctx.logs.items():
        row[name] = value
    if "clipped" in ctx.logs and len(part):
        row["clipped_fraction"] = ctx.logs["clipped"] / len(part)
        del row["clipped"]
    tight = paper = None
    if ledger is not None:
        eps = ledger.epsilons()
        tight = np.max(np.stack(list(eps["tight"].values())), axis=0)
        row["epsilon_spent"] = float(tight.max())
        for group, values in eps["tight"].items():
            row[f"epsilon_{group}"] = float(values.max())
        if "paper" in eps:
            paper = np.max(np.stack(list(eps["paper"].values())), axis=0)
            row["epsilon_spent_paper"] = float(paper.max())
    client_loss = client_acc = None
    if evaluate:
        metrics, client_loss, client_acc = evaluated or evaluate_models(ctx, algorithm)
        row.update(metrics)
    state.rows.append(row)
    if evaluate and ctx.options.eval_clients:
        took = np.zeros(n, dtype=bool)
        took[part] = True
        for i in range(n):
            state.rows.append({
                "round": ctx.round + 1, "client": i, "loss": float(client_loss[i]),
                "accuracy": None if client_acc is None else float(client_acc[i]),
                "participated": bool(took[i]), "sigma": float(uplink[i]),
                "epsilon_spent": None if tight is None else float(tight[i]),
                "epsilon_spent_paper": None if paper is None else float(paper[i])})
    return row


_INTEGER_COLUMNS = ("round", "client", "participants")


def to_frame(rows: list[dict]):
    """The tidy pandas table (``client`` as a nullable integer, NA where a value does not apply): ``round``,
    ``client``, ``participants`` Int64, ``participated`` boolean, every other column Float64 (a value that is
    not a number is NA).  Built column by column from numpy arrays (a sweep builds one per run)."""
    import pandas as pd

    seen = dict.fromkeys(c for r in rows for c in r)
    columns = FIRST_COLUMNS + [c for c in seen if c not in FIRST_COLUMNS]
    data = {}
    for col in columns:
        values = [r.get(col) for r in rows]
        missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        if col in _INTEGER_COLUMNS:
            ints = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
            data[col] = pd.arrays.IntegerArray(ints, missing)
        elif col == "participated":
            flags = np.fromiter((bool(v) if v is not None else False for v in values), dtype=bool,
                                count=len(values))
            data[col] = pd.arrays.BooleanArray(flags, missing)
        else:
            data[col] = _floats(values)
    return pd.DataFrame(data, index=pd.RangeIndex(len(rows)))


def _floats(values: list) -> Any:
    """A Float64 column: numbers as they are, None and anything that is not a number NA."""
    import pandas as pd

    try:
        floats = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):  # a string among them: coerced one by one, as pandas.to_numeric would
        floats = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)
    if floats.ndim != 1:
        floats = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)
    return pd.arrays.FloatingArray(floats, np.isnan(floats))


STANDARD_LOSS_COLUMNS = ("loss", "accuracy", "test_loss", "test_accuracy")


def _number(row: Mapping[str, Any] | None, col: str) -> float | None:
    """``row[col]`` as a float, None when absent, not a number or NaN (what the table shows as NA)."""
    value = None if row is None else row.get(col)
    if value is None or isinstance(value, str):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _last_with(rows: list[Mapping[str, Any]], col: str) -> Mapping[str, Any] | None:
    return next((r for r in reversed(rows) if _number(r, col) is not None), None)


def summary(algorithm, state, ledger) -> dict[str, Any]:
    """The run's headline numbers and its warnings (budget under-delivery, infinite epsilon, plan notes),
    from the global rows of ``state.rows`` (no pandas: a run that never builds its table never imports it)."""
    glob = [r for r in state.rows if r.get("client") is None]
    last = glob[-1] if glob else None
    final = _last_with(glob, "loss")

    out: dict[str, Any] = {
        "algorithm": algorithm.name, "rounds_done": state.round, "rounds_planned": state.rounds,
        "final_loss": _number(final, "loss"), "final_accuracy": _number(final, "accuracy"),
        "final_test_loss": _number(final, "test_loss"),
        "final_test_accuracy": _number(final, "test_accuracy"),
        "initial_loss": state.initial.get("loss"),
        "last_round_sigma": _number(last, "sigma"),
        "private": state.plan is not None, "warnings": [],
    }
    # Algorithm-specific evaluations (WPFL's pl_test_accuracy, DP-PFL's personalized_test_loss, ...): the
    # last value of each extra *_loss / *_accuracy column, so personalised results reach the summary too.
    columns = dict.fromkeys(c for r in state.rows for c in r)
    out["final_extra"] = {col: _number(_last_with(glob, col), col) for col in columns
                          if col not in STANDARD_LOSS_COLUMNS and col.endswith(("_loss", "_accuracy"))
                          and _last_with(glob, col) is not None}
    plan = state.plan
    if plan is not None:
        from fedbound.training.budget import privacy_statement

        tight = _number(last, "epsilon_spent")
        paper = _number(last, "epsilon_spent_paper")
        binding = plan.binding_accountant
        out.update({"eps_budget": plan.eps, "delta": plan.delta, "binding_accountant": binding,
                    "epsilon_binding": _finite_or_none(tight if binding == "tight" else paper),
                    "budget_accountant": binding, "noise_calibrated_for": plan.budget_accountant,
                    "paper_reproduction": plan.paper_reproduction, "paper_accountant": plan.paper_accountant,
                    "epsilon_spent": _finite_or_none(tight), "epsilon_spent_paper": _finite_or_none(paper),
                    "plan_source": plan.source})
        out["privacy"] = privacy_statement(0.0 if tight is None else tight, plan.eps, plan.delta, binding)
        out["warnings"].extend(plan.notes)
        if tight is not None and not math.isfinite(tight):
            out["warnings"].append("a release had zero noise: the tight epsilon is unbounded (no privacy)")
        elif tight is not None and tight > plan.eps * (1 + 1e-9):
            paper_text = f"; the paper's accountant claims {paper:.4g}" if paper is not None else ""
            out["warnings"].append(f"{out['privacy']} (tight accountant){paper_text}")
    return out


def write_outputs(run_dir: str | Path, table, summary_dict: Mapping[str, Any], config_text: str | None = None
                  ) -> dict[str, Path]:
    """``metrics.csv``, ``metrics.parquet``, ``summary.json`` (and ``config.toml``) in ``run_dir``."""
    from fedbound.checks import to_jsonable

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {"csv": run_dir / "metrics.csv", "parquet": run_dir / "metrics.parquet",
             "summary": run_dir / "summary.json"}
    # object columns: the same text as the nullable columns write, without pandas' per-column string arrays
    # (5x faster; a sweep writes one table per run)
    table.astype(object).to_csv(paths["csv"], index=False)
    table.to_parquet(paths["parquet"], index=False)
    paths["summary"].write_text(json.dumps(to_jsonable(dict(summary_dict)), indent=2) + "\n")
    if config_text is not None:
        paths["config"] = run_dir / "config.toml"
        paths["config"].write_text(config_text)
    return paths


class _NoBar:
    total = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class _Reporter(_NoBar):
    """A bar that reports ``(rounds done, rounds planned)`` to a callable after every round (a sweep worker's
    heartbeat, :mod:`fedbound.validation.sweep.worker`) instead of drawing."""

    def __init__(self, sink, total: int, initial: int) -> None:
        self.sink, self.total, self.n = sink, total, initial

    def update(self, n: int = 1) -> None:
        self.n += n
        self.sink(self.n, self.total)


def progress_bar(total: int, initial: int, enabled, name: str):
    """A tqdm bar on stderr that says how long the run will take after its first round
    (:func:`fedbound.training.eta.timed_bar`), a silent stand-in (``enabled`` false), or, when ``enabled`` is
    a callable, a stand-in that calls it with ``(rounds done, rounds planned)`` after each round."""
    if callable(enabled):
        return _Reporter(enabled, total, initial)
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    from fedbound.training.eta import timed_bar

    bar = tqdm(total=total, initial=initial, desc=name, unit="round", file=sys.stderr, dynamic_ncols=True)
    return timed_bar(bar, name, "round", initial)


def postfix(row: Mapping[str, Any], plan=None) -> str:
    """The bar's line: the loss, the binding epsilon against the budget (``eps=5.7/6 (tight, binding)``),
    the paper's claim beside it, and in the paper-reproduction mode whether the run is still (eps, delta)-DP
    at the stated budget."""
    parts = []
    if row.get("loss") is not None:
        parts.append(f"loss={row['loss']:.4f}")
    tight, paper = row.get("epsilon_spent"), row.get("epsilon_spent_paper")
    if plan is None:
        parts += [f"eps={tight:.4g}"] if tight is not None else []
        parts += [f"eps_paper={paper:.4g}"] if paper is not None else []
        return " ".join(parts)
    if plan.binding_accountant == "paper":
        if paper is not None:
            parts.append(f"eps_paper={paper:.4g}/{plan.eps:g} (paper's, binding: paper reproduction)")
        if tight is not None:
            over = tight > plan.eps * (1 + 1e-9)
            parts.append(f"not (ε, δ)-DP at the stated budget: exact ε = {tight:.4g}" if over else
                         f"exact eps={tight:.4g}")
        return " ".join(parts)
    if tight is not None:
        parts.append(f"eps={tight:.4g}/{plan.eps:g} (tight, binding)")
    if paper is not None:
        parts.append(f"paper's claim={paper:.4g}")
    return " ".join(parts)


def set_postfix(bar, row: Mapping[str, Any], plan=None) -> None:
    """:func:`postfix` on the bar's line."""
    bar.set_postfix_str(postfix(row, plan))
