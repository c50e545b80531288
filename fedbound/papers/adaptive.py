"""Registration of PADPFL (seed 001): priority-based aggregation with adaptive client- and server-side DP."""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

LOSS_DEFAULTS = {
    "Theta": 2.3,
    "A": 1.2,
    "gamma": 0.1,
    "rho": 1.0,
    "beta": 1.0,
    "rho_minus": 0.0,
    "l_max": 2.3,
}
"""Loss constants assumed when not given: ``fedbound.bounds.adaptive.ASSUMED_LOSS_CONSTANTS`` (spelled out so
that ``fedbound --help`` does not import sympy; a test pins the two together)."""

_LOSS_DOCS = {
    "Theta": "initial gap L(x0) - L(x*)",
    "A": "dissimilarity constant of Lemma 1 (>= 1)",
    "gamma": "local inexactness of the FedProx solve",
    "rho": "smoothness constant of the local losses",
    "beta": "bound on ||grad L||",
    "rho_minus": "lower curvature bound (0: convex losses)",
    "l_max": "largest local loss (Theorem 3)",
}


def section():
    """The [adaptive] config section; numeric domains come from the theorem parameters."""
    from dataclasses import replace

    from fedbound.bounds.adaptive import NOTATION
    from fedbound.config import Field, Section
    from fedbound.papers._provable import provable_fields

    p = NOTATION.params

    def text(name: str, doc: str, optional: bool = True, default: str | None = None) -> Field:
        return Field(name, str, default, doc, optional=optional and default is None)

    return Section(
        "adaptive",
        (
            field_from_param(p["N"]),
            replace(
                field_from_param(
                    p["T"], optional=True, kind=int, doc=" (optional: plan recommends one; train needs it)"
                ),
                low=1,
            ),
            field_from_param(p["R"], default=1),
            replace(
                field_from_param(p["B"], low=1e-12, high=1e12),
                name="C",
                doc="clip bound on the model weights ||x_i|| <= C (the paper's B)",
            ),
            field_from_param(p["eps"], low=1e-6, high=1e6),  # the bound's T^3 / eps^2 overflows at 1e308
            field_from_param(p["delta"]),
            Field(
                "m",
                int,
                None,
                "smallest local dataset min_i m_i in the sensitivities (eqs. (7), (10)); default: "
                "the smallest of sizes (plan) or of the partition (train)",
                low=1,
                optional=True,
            ),
            text(
                "sizes", 'local dataset size of a client of each part, e.g. "50,120,271" (default: m for all)'
            ),
            field_from_param(p["mu"], optional=True, doc=" (optional: mu* = 2K/(1 - A gamma) of Lemma 2)"),
            text("parts", 'clients per part, consecutive client ids, e.g. "20,20,20"', optional=False),
            text(
                "ratios",
                "priorities r_k per part (p_i = r_k / sum_k n_k r_k, Sec. VI), one list per phase "
                "separated by ';', e.g. \"0,1,2; 2,1,0\"",
                optional=False,
            ),
            text("switch_after", 'rounds after which each later phase starts, e.g. "10"'),
            text("salt_pepper", "salt-and-pepper density per part, one list per phase (train only)"),
            Field(
                "weights",
                str,
                "ratios",
                "impact factors used: 'ratios' (the setting's), 'planned' (the bound's argmin over the "
                "feasible p, jointly optimal with T and mu) or 'priority' (the program: noise against "
                "quality)",
                choices=("ratios", "planned", "priority"),
            ),
            text("scores", 'data-quality score per part favoured by the impact-factor program, e.g. "0,1,2"'),
            Field(
                "quality_weight",
                float,
                0.0,
                "weight of the quality score against the noise in the program",
                low=0.0,
            ),
            text("group_min", 'minimum total weight per part, e.g. "0.1,0.1,0.1"'),
            text("group_max", "maximum total weight per part"),
            Field(
                "floor", float, 0.0, "every client's weight at least floor/N (fairness)", low=0.0, high=1.0
            ),
            Field(
                "sensitivity",
                str,
                "provable",
                "'provable' (the default): per-sample gradient clipping C_g in local training and the "
                "sensitivity proven for the configured local steps (fedbound.bounds.provable) in every noise "
                "formula; 'paper': the paper's 2B/m (eqs. (7), (10)), or 'tight': max_i 2B p_i/m_i for the "
                "server in the program, both for reproducing the paper (not a bound for more than one local "
                "step: the audit measures multi-step training LEAK)",
                choices=("paper", "tight", "provable"),
            ),
            *provable_fields(with_mode=False),
            Field(
                "dropout",
                float,
                0.0,
                "probability that a client drops out of a round (train: its weight is redistributed)",
                low=0.0,
                high=1.0,
                high_open=True,
            ),
            *(
                field_from_param(
                    p[k], optional=True, doc=f" -- {_LOSS_DOCS[k]} (default {LOSS_DEFAULTS[k]:g}, assumed)"
                )
                for k in LOSS_DEFAULTS
            ),
            field_from_param(
                p["d"], optional=True, doc=" (optional: exact chi noise moments instead of N in eq. (49))"
            ),
        ),
        doc="PADPFL setting (Talaei and Izadi 2024); the paper's B is the shared key C",
    )


PAPER = Paper(
    name="adaptive",
    seed="001",
    short="PADPFL (Talaei and Izadi 2024)",
    title="Enhancing Federated Learning with Adaptive Differential Privacy and Priority-Based Aggregation",
    authors="M. Talaei, I. Izadi",
    venue="arXiv:2406.18491",
    year=2024,
    summary="NbAFL with impact factors: per-client priorities p_i (fixed or adaptive) as aggregation "
    "weights, "
    "client noise (8), the server top-up of Theorem 1, the convergence bounds of Theorems 2-3; "
    "fedbound adds the optimal T, the best mu and impact factors from a convex program.",
    section="fedbound.papers.adaptive:section",
    theorems="fedbound.bounds.adaptive",
    claims=("fedbound.bounds.adaptive:CLAIMS", "fedbound.scheduling.adaptive:CLAIMS"),
    noise="fedbound.bounds.adaptive:noise",
    planner="fedbound.scheduling.adaptive:plan",
    plots="fedbound.validation.reproduce.plots_adaptive:PLOTS",
    recipe="fedbound.validation.recipes.adaptive:RECIPE",
    defaults=LOSS_DEFAULTS,
    aliases={"B": "C"},
    example={
        "N": 60,
        "R": 1,
        "C": 20.0,
        "eps": 5.0,
        "delta": 0.01,
        "m": 150,
        "parts": "20,20,20",
        "ratios": "0,1,2",
    },
    audit="fedbound.validation.audit.adaptive:AUDIT",
    validation="fedbound.validation.estimate.validate_adaptive:VALIDATION",
    reproduce="fedbound.validation.reproduce.adaptive:FIGURES",
)
