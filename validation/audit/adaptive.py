"""PADPFL's audit (``fedbound audit adaptive``): NbAFL's two views with the impact factors as aggregation
weights (Talaei & Izadi 2024, eq. (3)); the broadcast's weight on the target is its ``p_i``.  The copies of
the target client are trained without the per-round inexactness measurement and without a data schedule
(both read the original federation's impact factors; neither changes the upload).  ``small``: six clients
in two parts (priorities 1 and 2) of binary logistic regression, one local step with every per-sample
gradient clipped (``sensitivity = "provable"``, ``C_g = 0.2``: the paper's ``2C/m`` assumes the local solve
moves the clipped model little, which one crafted outlier breaks, ``fedbound audit`` says LEAK), eps = 3."""

from typing import Any

from fedbound.validation.audit import AuditViews, without
from fedbound.validation.audit.nbafl import SMALL_TRAIN


def _prepare(algorithm: Any) -> Any:
    return without(algorithm, measure_gamma=False, data_schedule=())


AUDIT = AuditViews(
    prepare=_prepare,
    doc="uplink and downlink of PADPFL, record-level",
    small={"adaptive": {"N": 6, "T": 5, "R": 1, "C": 1.0, "eps": 3.0, "delta": 0.01, "mu": 0.01,
                        "parts": "3,3", "ratios": "1,2", "sensitivity": "provable", "C_g": 0.2},
           "train": {**SMALL_TRAIN, "samples_per_client": 50, "lr": 0.5}},
)
