"""WPFL's audit (``fedbound audit wpfl``): the quantized upload through the channel, record-level.

What the adversary sees (Zhao et al. 2025, eqs. (2), (8), (15); the plan's view ``uplink``): the target's
model clipped to norm ``C``, plus ``N(0, sigma_DP^2 I)``, quantized to ``R`` bits on ``[-(C + 3 sigma_DP),
C + 3 sigma_DP]`` and received through its subchannel's bit errors, all by ``WPFL.upload`` itself.  The
ledger's sensitivity is ``2C`` (two models in the C-ball); its tight epsilon is the subsampled Gaussian's
(quantization and bit errors are post-processing).  The noise is checked on the noised model before
quantization (the release ``"uplink_noised"``, against the plan's ``sigma_DP``): quantization and bit errors
would otherwise blur a halved noise into the upload's residual.

Every copy of the target sends through the target's subchannel in round 1 (its scheduled bit error rate,
for every audited round) and starts from the global model the audit gives it (the downlink's bit errors on
it are the same in D and D', so they are left out); the copies carry no personalization state (the PL
models never leave the client).

``small``: four clients (two per round) of binary logistic regression, 12 records each, one full-batch
local step (``q = 1``) of rate ``eta_F = 1``, ``C = 0.02`` (every trained model is clipped, so a crafted
outlier turns the upload around: a shift near ``2C``), one upload per client (``T = 1``), ``eps = 1``,
tight noise, clients 10-20 m from the base station (a clean channel)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbound.validation.audit import AuditViews, without


def _prepare(algorithm: Any, target: int) -> Any:
    sched = algorithm.schedule
    chosen = sched.clients[0]
    if target not in chosen:
        from fedbound.errors import ConfigError

        raise ConfigError(f"audit: client {target} uploads nothing in round 1 of the WPFL schedule")
    ber = float(sched.uplink_ber[0][int(np.searchsorted(chosen, target))])
    return without(algorithm, init_client_state=lambda ctx: {},
                   uplink_ber=lambda ctx, clients: np.full(len(clients), ber))


AUDIT = AuditViews(
    prepare_target=_prepare,
    doc="WPFL's quantized, noised upload through the target's subchannel, record-level",
    small={"wpfl": {"N": 4, "K": 2, "T": 1, "C": 0.02, "eps": 3.0, "delta": 0.01, "R": 16, "q": 1.0,
                    "n_params": 6, "policy": "non_adjustment", "eta_F": 1.0, "d_min": 10.0, "d_max": 20.0},
           "train": {"dataset": "synthetic_logistic", "synthetic_samples": 48, "synthetic_dim": 2,
                     "test_fraction": 0.0, "model": "logreg", "local_steps": 1, "noise": "tight",
                     "eval_clients": False}},
    checked_releases={"uplink": "uplink_noised"},
)
