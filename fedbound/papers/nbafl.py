"""Registration of NbAFL (Wei et al. 2020): noise before model aggregation FL with K-client scheduling."""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

LOSS_DEFAULTS = {"Theta": 2.0, "l": 0.1, "beta": 1.0, "rho": 1.0, "B": 1.0, "mu": 4.0}
"""Loss constants assumed when not given (the paper states none): an initial gap of 2 and the constants of
fedbound's NbAFL test vectors, for which Theorem 2's contraction factor P = 0.9125 lies in (0, 1)."""


MAXIMA = {"N": 100_000, "T": 10_000_000, "m": 10**12, "L": 10**6}
"""Documented maxima of the integer keys: the K analysis is exhaustive over 1..N, and beyond these the
formulas lose every digit in floating point."""
LOSS_RANGE = {k: (1e-12, 1e12) for k in LOSS_DEFAULTS} | {"B": (1.0, 1e6)}
"""Ranges of the loss constants the planner answers without overflow."""


def section():
    """The [nbafl] config section, with each key's domain taken from the theorem parameters."""
    from fedbound.bounds.nbafl import LOSS_CONSTANTS, NOTATION
    from fedbound.config import Field, Section
    from fedbound.papers._provable import provable_fields

    p = NOTATION.params
    f = field_from_param
    return Section("nbafl", (
        f(p["N"], high=MAXIMA["N"]),
        f(p["K"], optional=True, high=MAXIMA["N"], doc=" (optional: K-client scheduling, Theorem 3; the K "
                                                       "analysis runs over 1..N either way)"),
        Field("T", int, None, "aggregation rounds (optional: otherwise the optimal T is used)", low=1,
              high=MAXIMA["T"], optional=True),
        f(p["m"], high=MAXIMA["m"]), f(p["C"], low=1e-12, high=1e12), f(p["eps"], low=1e-6, high=1e6),
        f(p["delta"], low=1e-100), f(p["L"], default=1, high=MAXIMA["L"]),
        *(f(p[k], optional=True, doc=f" (default {LOSS_DEFAULTS[k]:g}, assumed)", low=LOSS_RANGE[k][0],
            high=LOSS_RANGE[k][1]) for k in LOSS_CONSTANTS),
        *provable_fields(),
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
    plots="fedbound.validation.reproduce.plots_nbafl:PLOTS",
    recipe="fedbound.validation.recipes.nbafl:RECIPE",
    defaults=LOSS_DEFAULTS,
    example={"N": 50, "m": 100, "C": 20.0, "eps": 6.0, "delta": 0.01},
    # less noise per release: a larger budget, more samples per client (sensitivity 2C/m), more clients
    # (the aggregate's noise falls as 1/sqrt(N)) or a smaller clipping bound C
    levers={"eps": "up", "m": "up", "N": "up", "C": "down"},
    audit="fedbound.validation.audit.nbafl:AUDIT",
    validation="fedbound.validation.estimate.validate_nbafl:VALIDATION",
    reproduce="fedbound.validation.reproduce.nbafl:FIGURES",
)
