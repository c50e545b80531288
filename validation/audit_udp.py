"""UDP's audit (``fedbound audit udp``): the uplink view of seed 003's Algorithm 1 (per-sample clipped local
step, then the client's Gaussian noise), record-level: one sample of one client replaced, against the
sensitivity ``2 eta C / |D_i|`` of eq. (13).  ``small``: one round of ten clients of binary logistic
regression at eps = 3, every per-sample gradient clipped (C = 0.1)."""

from fedbound.validation.audit import AuditViews
from fedbound.validation.audit_nbafl import SMALL_TRAIN

AUDIT = AuditViews(
    doc="uplink of UDP's Algorithm 1, record-level",
    small={"udp": {"N": 10, "m": 50, "K": 10, "T": 1, "eps": 3.0, "delta": 0.01, "eta": 0.5, "C": 0.1,
                   "L": 1.0, "mu": 0.1, "div": 0.5, "theta0": 1.0},
           "train": SMALL_TRAIN},
)
