"""Registration of NbAFL (seed 002): noise before model aggregation FL with K-client scheduling."""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

LOSS_DEFAULTS = {"Theta": 2.0, "l": 0.1, "beta": 1.0, "rho": 1.0, "B": 1.0, "mu": 4.0}
"""Loss constants assumed when not given (the paper states none): an initial gap of 2 and the constants of
fedbound's NbAFL test vectors, for which Theorem 2's contraction factor P = 0.9125 lies in (0, 1)."""


def section():
    """The [nbafl] config section, with each key's domain taken from the theorem parameters."""
    from fedbound.bounds.nbafl import LOSS_CONSTANTS, NOTATION
    from fedbound.config import Section

    p = NOTATION.params
    return Section("nbafl", (
        field_from_param(p["N"]),
        field_from_param(p["K"], optional=True, doc=" (optional: K-client scheduling, Theorem 3; the K "
                                                    "analysis runs over 1..N either way)"),
        field_from_param(p["T"], optional=True, doc=" (optional: otherwise the optimal T is used)"),
        field_from_param(p["m"]), field_from_param(p["C"]), field_from_param(p["eps"]),
        field_from_param(p["delta"]), field_from_param(p["L"], default=1),
        *(field_from_param(p[k], optional=True, doc=f" (default {LOSS_DEFAULTS[k]:g}, assumed)")
          for k in LOSS_CONSTANTS),
    ), doc="NbAFL setting (Wei et al. 2020), in the paper's notation")


PAPER = Paper(
    name="nbafl", seed="002", short="NbAFL (Wei et al. 2020)",
    title="Federated Learning With Differential Privacy: Algorithms and Performance Analysis",
    authors="K. Wei, J. Li, M. Ding, C. Ma, H. H. Yang, F. Farokhi, S. Jin, T. Q. S. Quek, H. V. Poor",
    venue="IEEE Transactions on Information Forensics and Security 15", year=2020,
    summary="Noise before model aggregation: client (uplink) and server (downlink) Gaussian noise, the "
            "convergence bound of Theorem 2, an optimal number of rounds T, and K-of-N client scheduling "
            "(Lemma 4, Theorem 3) with an optimal K.",
    section="fedbound.papers.nbafl:section",
    theorems="fedbound.bounds.nbafl",
    claims=("fedbound.bounds.nbafl:CLAIMS", "fedbound.scheduling.nbafl:CLAIMS"),
    noise="fedbound.bounds.nbafl:noise",
    planner="fedbound.scheduling.nbafl:plan",
    plots="fedbound.validation.plots_nbafl:PLOTS",
    recipe="fedbound.validation.train_nbafl:RECIPE",
    defaults=LOSS_DEFAULTS,
    example={"N": 50, "m": 100, "C": 20.0, "eps": 6.0, "delta": 0.01},
)
