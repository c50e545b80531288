"""Config keys of ``sensitivity = "provable"`` (fedbound.bounds.provable), shared by the registrations of
the papers that clip the local model (NbAFL, PADPFL)."""

from __future__ import annotations

from typing import Any

MAX_LOCAL_STEPS = 100_000


def provable_fields(with_mode: bool = True) -> tuple[Any, ...]:
    """``sensitivity`` (unless the paper declares its own), ``C_g``, ``feature_norm``, ``tau``, ``eta``."""
    from fedbound.config import Field

    mode = (Field("sensitivity", str, None, "unset or 'provable' (the default): per-sample gradient "
                  "clipping C_g in local training and the sensitivity proven for the configured local "
                  "steps: 2 eta C_g/m for one step of any model, min(2C, growth recursion) for more "
                  "(fedbound.bounds.provable); 'paper': the paper's 2C/m, for reproducing the paper (not a "
                  "bound for more than one local step: the audit measures NbAFL's MNIST example with 10 "
                  "steps LEAK, a shift 5.8x the assumed one)",
                  choices=("paper", "provable"), optional=True),)
    return (*(mode if with_mode else ()),
            Field("C_g", float, None, "per-sample gradient clip of local training (sensitivity = provable; "
                  "default C / (tau eta): one step then moves the model by at most the paper's 2C/m)",
                  low=0.0, low_open=True, high=1e12, optional=True),
            Field("feature_norm", float, None, "declared bound X on every input's norm; local training clips "
                  "inputs to it (sensitivity = provable, more than one step of a one-output linear model: "
                  "the convex bound 2 tau eta C_g/m then applies, with the step-size condition eta <= 2/L "
                  "for L = kappa (X^2 + 1) + mu + lambda, independent of the data)",
                  low=0.0, low_open=True, high=1e12, optional=True),
            Field("tau", int, None, "local steps per round the provable sensitivity covers (fedbound train: "
                  "[train] local_steps; plan: default 1)", low=1, high=MAX_LOCAL_STEPS, optional=True),
            Field("eta", float, None, "local step size of the provable sensitivity (fedbound train: "
                  "[train] lr)",
                  low=0.0, low_open=True, high=1e6, optional=True))
