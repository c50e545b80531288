"""NbAFL's audit (``fedbound audit nbafl``): the uplink (each client's clipped, noised model) and the
downlink broadcast (the aggregate plus the server's noise), as the plan's views say.  The record-level
neighbouring relation is the paper's (Wei et al. 2020, Sec. II-C: one sample of one client replaced); the
sensitivity the plan assumes is eq. (6)'s ``2C/m`` (paper mode) or the provable one (``sensitivity =
"provable"``, ``fedbound.bounds.provable``).

``small``: ten clients of binary logistic regression, one local step with per-sample clipping and the
provable sensitivity ``2 eta C_g / m`` (exact for one step), eps = 3: the canary reaches the sensitivity, so
the halved-noise control is visible at 1,000 trials."""

from fedbound.validation.audit import AuditViews

SMALL_TRAIN = {"dataset": "synthetic_logistic", "synthetic_samples": 1000, "test_fraction": 0.0,
               "model": "logreg", "local_steps": 1, "lr": 0.5}
"""The [train] section of the small audits of the papers on binary logistic regression."""

AUDIT = AuditViews(
    doc="uplink and downlink of NbAFL's Algorithm 1, record-level",
    small={"nbafl": {"N": 10, "m": 50, "C": 1.0, "eps": 3.0, "delta": 0.01, "L": 1, "T": 5, "mu": 0.01,
                     "sensitivity": "provable", "C_g": 0.2},
           "train": SMALL_TRAIN},
)
