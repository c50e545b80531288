"""Audit speed (``python bench/audit.py``): 2,000 one-round trials per side for NbAFL on logistic regression.

Ours: the trials batched in one engine call (round 1's whole federation replicated 2 x 2,000 times, each
copy with its own noise, the server's update run per trial; ``fedbound.training.sensitivity.
federated_trials``).  Baseline, measured in the same run and interleaved with
ours: the same trials one engine call each (a D copy and a D' copy per call), timed on a subset and scaled
to 2,000.  Also the whole ``audit()`` end to end (canary search, nominal audit, halved-noise control).
Target: the end-to-end audit <= 120 s on 2 cores.  Writes ``bench/results/audit.json``; ``--quick`` uses
fewer repeats and 500 trials.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import write_result  # noqa: E402

from fedbound.registry import get  # noqa: E402
from fedbound.training.engine import RunOptions  # noqa: E402
from fedbound.training.sensitivity import federated_trials  # noqa: E402
from fedbound.validation import audit as audit_mod  # noqa: E402

SECTIONS = {name: dict(table) for name, table in get("nbafl").load("audit").small.items()}
SECTIONS["nbafl"].update(sensitivity="paper", eps=2.0)  # the paper's NbAFL, its 2C/m
SECTIONS["train"].update(local_steps=10)


def main() -> None:
    quick = "--quick" in sys.argv
    trials = 500 if quick else 2000
    one_by_one = 20 if quick else 60
    from fedbound.config import load_config
    from fedbound.training import config as tc
    from fedbound.training.config import dump_toml

    path = Path(__file__).resolve().parent / "results" / "audit_config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_toml(SECTIONS))
    entry = get("nbafl")
    cfg = load_config(path, [entry.config_section, tc.TRAIN_SECTION], [], known_sections=("nbafl", "train"))
    setting = dict(cfg["nbafl"])
    setting.update({k: v for k, v in entry.defaults.items() if setting.get(k) is None})
    train = dict(cfg["train"])
    rec = entry.load("recipe")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = audit_mod._round_one(rec, setting, train, 1)
        starts = audit_mod._trajectory(s, 1)
        rep, _ = audit_mod._record_canary("flip", s, s.algorithm, starts, 8, None, 0)
        batched, single = [], []
        for _ in range(1 if quick else 3):  # A and B interleaved
            t0 = time.perf_counter()
            audit_mod._run_pair(s, s.algorithm, rep, starts, trials, 1.0, 0, True)
            batched.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for k in range(one_by_one):
                federated_trials(s.algorithm, s.model, s.data, s.target, s.participants, s.weights,
                                 [None, rep], starts, plan=s.plan, options=RunOptions(seed=k))
            single.append((time.perf_counter() - t0) / one_by_one * trials)
        t0 = time.perf_counter()
        result = audit_mod.audit_from_config("nbafl", path, trials=trials)
        end_to_end = time.perf_counter() - t0
    out = {"trials_per_side": trials, "batched_s": min(batched), "one_by_one_s_scaled": min(single),
           "one_by_one_measured_trials": one_by_one, "speedup": min(single) / min(batched),
           "end_to_end_audit_s": end_to_end, "end_to_end_target_s": 120.0, "verdict": result.verdict,
           "uplink_eps_lower": result.views[0].epsilon_lower}
    print(f"{trials} trials per side: batched {out['batched_s']:.2f} s, one by one "
          f"{out['one_by_one_s_scaled']:.1f} s (x{out['speedup']:.0f}); whole audit with control "
          f"{end_to_end:.1f} s (target <= 120 s); verdict: {result.verdict}")
    write_result("audit", out)


if __name__ == "__main__":
    main()
