"""The privacy ledger's share of a batched sweep (issue 25 item 3): target < 5 %.

The 40-run NbAFL sweep of ``bench/sweep.py`` (logistic regression, 8 values of T x 5 seeds, one batched
``run_sweep``), timed as a whole, with the time spent inside the ledger (``PrivacyLedger.releases``,
``check_budget``, ``commit``, ``epsilons`` and the batched ``privacy.releases_many`` and
``privacy.check_budgets``, counted once however they nest) measured by wrapping those functions.  Two code
paths, interleaved (A B A B ...):

* ``batched``: this branch (a round's releases of every run, and its budget check and epsilons, vectorised
  over runs: runs of one shape recorded and accounted as one ledger, one root search for all; each round's
  epsilons computed once, at the budget check, and reused for the metrics);
* ``per_run``: the path before it, reproduced in the same process: each run computes its releases and checks
  its budget alone, and the metrics recompute the epsilons.

Writes ``bench/results/ledger_share.json``; ``--quick`` repeats twice instead of three times.
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import interleaved, load, ratio, write_result  # noqa: E402
from sweep import LOGREG_CONFIG as CONFIG  # noqa: E402 - the same 40-run sweep as bench/sweep.py
from sweep import SEEDS, T_VALUES  # noqa: E402

from fedbound.training import multirun, privacy  # noqa: E402
from fedbound.validation.sweep import RunSpec, run_sweep  # noqa: E402

QUICK = "--quick" in sys.argv
HEADLINE = ("The privacy ledger in a 40-run batched sweep: {ledger_share[batched][median]:.1%} of its time "
            "(target < 5 %; {ledger_share[per_run][median]:.1%} with each run accounted alone).")


class _Clock:
    """Seconds spent inside the wrapped functions (outermost calls only)."""

    def __init__(self) -> None:
        self.seconds, self.depth = 0.0, 0

    def wrap(self, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            self.depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.seconds += time.perf_counter() - t0
        return timed


CLOCK = _Clock()
_LEDGER = privacy.PrivacyLedger
_ORIGINAL = {name: getattr(_LEDGER, name) for name in ("releases", "check_budget", "commit", "epsilons")}
_BATCHED_CHECK = multirun._Lockstep._check_budgets


def _per_run_check(self, runners) -> None:
    """The path before batching: each run's releases and budget alone."""
    for runner in runners:
        if runner.ledger is None:
            continue
        try:
            ctx = runner.ctx
            runner.releases = runner.ledger.releases(ctx.round, ctx.participants, ctx.weights)
            runner.ledger.check_budget(runner.releases, runner.state.round)
        except Exception as exc:  # noqa: BLE001
            self.fail(runner, exc)


def _commit_without_reuse(self, releases) -> None:
    _ORIGINAL["commit"](self, releases)
    self._current = None  # the metrics recompute the round's epsilons, as before


def _use(path: str) -> None:
    commit = _commit_without_reuse if path == "per_run" else _ORIGINAL["commit"]
    for name, fn in {**_ORIGINAL, "commit": commit}.items():
        setattr(_LEDGER, name, CLOCK.wrap(fn))
    multirun._Lockstep._check_budgets = _per_run_check if path == "per_run" else _BATCHED_CHECK
    multirun.check_budgets = CLOCK.wrap(privacy.check_budgets)
    multirun.releases_many = CLOCK.wrap(privacy.releases_many)


def _sweep(config: Path, path: str, shares: dict[str, list[float]]) -> None:
    _use(path)
    specs = [RunSpec("nbafl", config, (f"T={T}",), seed, {"T": T}) for T in T_VALUES for seed in SEEDS]
    CLOCK.seconds = 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = run_sweep(specs, out, batch=True, progress=False, workers=1)
    wall = time.perf_counter() - t0
    assert not done.failed, done.failed
    shares[path].append(CLOCK.seconds / wall)


def main() -> dict:
    shares: dict[str, list[float]] = {"batched": [], "per_run": []}
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "nbafl_logreg.toml"
        config.write_text(CONFIG)
        _sweep(config, "batched", {"batched": [], "per_run": []})  # imports and first calls, untimed
        times = interleaved({p: functools.partial(_sweep, config, p, shares) for p in shares},
                            repeat=2 if QUICK else 3, warmup=0)
    _use("batched")
    median = {p: sorted(v)[len(v) // 2] for p, v in shares.items()}
    payload = {"runs": len(T_VALUES) * len(SEEDS), "quick": QUICK, "load_during": load(),
               "sweep_seconds": {p: t.to_json() for p, t in times.items()},
               "per_run_over_batched": ratio(times["per_run"], times["batched"]),
               "ledger_share": {p: {"median": median[p], "samples": v} for p, v in shares.items()},
               "target": "ledger share of the batched sweep < 5 %", "met": median["batched"] < 0.05}
    print(f"40-run batched sweep: ledger share {100 * median['batched']:.1f} % (target < 5 %); the per-run "
          f"path: {100 * median['per_run']:.1f} %; sweep time per-run / batched = "
          f"{payload['per_run_over_batched']['median']:.2f}x")
    write_result("ledger_share", payload)
    return payload


if __name__ == "__main__":
    main()
