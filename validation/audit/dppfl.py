"""DP-PFL's audit (``fedbound audit dppfl``): the two DP-SGD releases of the local epoch, record-level.

What the adversary sees (Wei et al. 2023, Algorithm 1; the plan's views ``inner`` and ``outer``, one group
``local`` whose epsilon composes both stages): the first local epoch's two noised sums, handed to the audit
by ``fedbound.training.dppfl.DPPFL`` as the release ``"local"``: the query set's clipped per-example
gradients plus ``N(0, C^2 sigma_in^2 I)`` (eqs. (6)-(7)) beside the support set's clipped meta-gradients
plus ``N(0, C^2 sigma_out^2 I)`` (eqs. (8)-(11)); the score weighs it by the inner stage's std (the
likelihood ratio for ``sigma_ratio = 1``, a valid if weaker score otherwise) and its noise-free shift is held
against ``sqrt(2) 2C``.  Each stage's noise is checked on its own release (``"inner"``, ``"outer"``) against
the plan's ``C sigma``.

* Records: the target's copies put every record in both sets (``DPPFL.audit_both_sets``): Theorem 1's
  ledger charges every record both stages, which such a record attains exactly (a record in one set leaks
  less), so the lower bound is held against the epsilon the ledger pays for.
* Neighbours: Theorem 1 counts add/remove neighbours (sensitivity ``C`` per stage); the audit replaces a
  record (remove + add), so its ledger reads sensitivity ``2C``: the epsilon the same ledger gives for
  replace-one neighbours (:func:`_replace_one`).
* The outer step is taken at the noised inner model: its shift is checked given the inner release (the
  audit's coupled runs hand D' the inner release of D), which is what Theorem 1's composition bounds.

``small``: three clients of binary logistic regression, 16 records each, one local epoch of full batches
(``q_in = q_out = 1``), ``C = 0.5`` (every natural gradient is clipped, so a label flip moves each sum by
``2C``), ``eps = 1`` over ``T = 1``.  With Poisson sampling (``q < 1``) the audit is told that local
training samples (``prepare``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbound.validation.audit import AuditViews, without


def _replace_one(plan: Any) -> Any:
    """Theorem 1 counts add/remove neighbours (sensitivity C per stage); the audit replaces a record
    (remove + add): sensitivity 2C, the epsilon the same ledger gives for replace-one neighbours."""
    from dataclasses import replace

    return replace(plan, sensitivity={stage: 2.0 * plan.stage_sensitivity(stage)
                                      for stage in plan.sensitivity})


def _prepare(algorithm: Any) -> Any:
    from fedbound.training.local import LocalSGD

    sampled = min(algorithm.q_in, algorithm.q_out)
    local = LocalSGD(sample_rate=sampled) if sampled < 1.0 else algorithm.local
    return without(algorithm, audit_both_sets=True, targets=None, local=local)


def _local_sensitivity(plan: Any, target: int) -> float:
    """Both stages' sums side by side move by at most ``sqrt(s_in^2 + s_out^2)`` (each by its own ``s``)."""
    return float(np.hypot(plan.stage_sensitivity("inner")[target], plan.stage_sensitivity("outer")[target]))


AUDIT = AuditViews(
    prepare=_prepare,
    doc="the inner and outer DP-SGD releases of DP-PFL's local epoch, record-level",
    small={"dppfl": {"N": 3, "T": 1, "tau0": 1, "eta": 0.5, "beta": 0.5, "C": 0.5, "eps": 1.0,
                     "delta": 0.01, "q_in": 1.0, "q_out": 1.0, "S": 6, "m": 8},
           "train": {"dataset": "synthetic_logistic", "synthetic_samples": 48, "synthetic_dim": 2,
                     "test_fraction": 0.0, "model": "logreg", "eval_clients": False}},
    releases={"inner": "local", "outer": "local"},
    release_sensitivity={"inner": _local_sensitivity, "outer": _local_sensitivity},
    ledger=_replace_one,
    checked_releases={"inner": "inner", "outer": "outer"},
)
