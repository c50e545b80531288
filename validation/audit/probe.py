"""The sensitivity probe of ``fedbound train``: before training (and again at the trained model), measure how
far replacing one record moves the clipped upload of the smallest client, and warn when that exceeds the
sensitivity the plan's ledger assumes.

Only for algorithms that clip the whole model rather than per-sample gradients (``sensitivity_probe = True``
on the algorithm class, e.g. NbAFL and PADPFL): their papers' ``2C/m`` is an assumption about local training
that multi-step training can break (fedbound.bounds.provable).  The probe is
:func:`fedbound.training.sensitivity.probe` (label flips and swapped features of ``records`` records,
noise-free, through the engine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["probe_sensitivity"]


def probe_sensitivity(short: str, algorithm: Any, model: Any, data: Any, plan: Any, options: Any,
                      models: Any, label: str, records: int = 8) -> tuple[dict[str, Any], list[str]]:
    """The probe at ``models`` (``(r, d)``, described by ``label``): a summary entry and the warnings."""
    if plan is None or records < 1 or not getattr(algorithm, "sensitivity_probe", False):
        return {}, []
    from fedbound.training.sensitivity import probe

    stages = [v.stage for v in plan.views if v.kind == "upload"]
    if not stages:
        return {}, []
    client = int(np.argmin(data.sizes))
    found = probe(algorithm, model, data, client, models, records=records, options=options)
    assumed = float(plan.stage_sensitivity(stages[0])[client])
    entry = {"client": client, "assumed": assumed, "measured": found.max_shift, "at": label,
             "ratio": found.max_shift / assumed}
    if found.max_shift <= assumed * (1 + 1e-6):
        return entry, []
    return entry, [f"{short}: replacing one record of client {client} moved its clipped upload by "
                   f"{found.max_shift:.4g} at the {label}, {found.max_shift / assumed:.3g}x the {stages[0]} "
                   f"sensitivity {assumed:.4g} the privacy ledger assumes: the paper's sensitivity argument "
                   "does not cover this local training, and the reported epsilon does not hold (set "
                   "sensitivity = \"provable\" for a bound that does)"]
