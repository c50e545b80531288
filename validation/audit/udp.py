"""UDP's audit (``fedbound audit udp``): the uplink view of UDP's Algorithm 1 (per-sample clipped local
step, then the client's Gaussian noise).

Levels.  ``record`` (the default): the paper's own neighbouring relation.  Despite the name "user-level",
Wei et al. 2021 guarantee (eps_i, delta_i)-LDP per MT against two versions of ONE MT's dataset "that have
the same size and only differ by one sample" (proof of Theorem 1), so the assumed sensitivity is eq. (13)'s
``2 eta C / |D_i|``.  ``client``: the whole MT's data replaced (what "user-level" usually means): the same
noise, read by the ledger at the client-level sensitivity ``|D_i| x 2 eta C / |D_i| = 2 eta C``, i.e. the
epsilon a whole user gets from UDP's noise.

``small``: one round of ten clients of binary logistic regression at eps = 3, every per-sample gradient
clipped (C = 0.1)."""

from fedbound.validation.audit import AuditViews
from fedbound.validation.audit.nbafl import SMALL_TRAIN

AUDIT = AuditViews(
    doc="uplink of UDP's Algorithm 1, record-level (the paper's unit) or client-level",
    small={"udp": {"N": 10, "m": 50, "K": 10, "T": 1, "eps": 3.0, "delta": 0.01, "eta": 0.5, "C": 0.1,
                   "L": 1.0, "mu": 0.1, "div": 0.5, "theta0": 1.0},
           "train": SMALL_TRAIN},
    levels=("record", "client"),
)
