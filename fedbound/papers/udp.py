"""Registration of UDP (Wei et al. 2021): user-level DP federated learning with K-of-N scheduling, Theorems
1-4, the
optimal number of rounds, and communication-rounds discounting (CRD)."""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

LOSS_DEFAULTS = {"L": 1.0, "mu": 0.1, "div": 0.5, "theta0": 1.0}
"""Loss constants of Theorem 2 assumed when not given (the paper states none): those of fedbound's UDP test
vector B1 (L = 1, mu = 0.1, xi-bar = 0.5, Theta = 1), for which Theorem 3 has an interior optimum."""


def section():
    """The [udp] config section; domains come from the theorem parameters of fedbound.bounds.udp."""
    from fedbound.bounds.udp import METHODS, NOTATION
    from fedbound.config import Field, Section

    p = NOTATION.params
    return Section(
        "udp",
        (
            field_from_param(p["N"], high=100_000),
            field_from_param(p["K"], optional=True, high=100_000, doc=" (optional: default N, i.e. q = 1)"),
            field_from_param(
                p["T"],
                optional=True,
                kind=int,
                low=1,
                high=10**7,
                doc=" (optional: otherwise the optimal T; with crd, the initial T)",
            ),
            field_from_param(p["eps"], low=1e-6, high=1e6),
            field_from_param(p["delta"], low=1e-100),
            Field(
                "eps_clients",
                str,
                None,
                'per-client eps_i overriding eps: a list "2,4,8" cycled over the '
                'clients, or counts "2*20, 4*20, 8*10"',
                optional=True,
            ),
            Field(
                "delta_clients",
                str,
                None,
                "per-client delta_i overriding delta (same forms as eps_clients)",
                optional=True,
            ),
            Field("m", int, doc="local dataset size |D_i| (the smallest one when sizes is given)", low=1,
                  high=10**12),
            Field(
                "sizes", str, None, 'per-client |D_i|, e.g. "400,600,800,1000,1200" (cycled)', optional=True
            ),
            field_from_param(p["eta"], doc=" (also the sensitivity 2 eta C/|D_i|, eq. (13))", high=1e6),
            Field("C", float, doc="per-sample gradient clipping threshold", low=1e-12, high=1e12),
            *(
                field_from_param(p[k], optional=True, doc=f" (default {LOSS_DEFAULTS[k]:g}, assumed)",
                                 low=1e-12, high=1e12)
                for k in ("L", "mu", "div", "theta0")
            ),
            Field("crd", bool, False, "communication-rounds discounting (Alg. 2)"),
            Field(
                "beta", float, 0.9, "CRD discount factor", low=0.0, high=1.0, low_open=True, high_open=True
            ),
            Field(
                "zeta",
                float,
                0.001,
                "CRD trigger: discount when the loss improves by less",
                low=0.0,
                low_open=True,
            ),
            Field("lei", bool, False, "Lei et al.'s baseline: the noise std decays linearly (Sec. 5, "
                  "Figs. 8, 11-13) and the run stops when original UDP's budget is spent"),
            Field(
                "lei_decay",
                float,
                0.5,
                "Lei's decay: sigma_t = sigma_0 max(1 - lei_decay t / T, 0.01); the paper gives no rate, "
                "0.5 ends the run after about 2T/3 rounds at 2/3 of sigma_0",
                low=0.0,
                high=100.0,
                low_open=True,
            ),
            Field(
                "T_grid",
                str,
                None,
                'heuristic search grid for T, "lo:hi:step" or a list (plan: its cost)',
                optional=True,
            ),
            Field(
                "calibration",
                str,
                None,
                "which sigma to train with (overrides [train] noise): " + ", ".join(METHODS),
                choices=METHODS,
                optional=True,
            ),
        ),
        doc="UDP setting (Wei et al. 2021), in fedbound's shared notation (N clients, K per round)",
    )


PAPER = Paper(
    name="udp",
    seed="003",
    short="UDP (Wei et al. 2021)",
    title="User-Level Privacy-Preserving Federated Learning: Analysis and Performance Optimization",
    authors="K. Wei, J. Li, M. Ding, C. Ma, H. Su, B. Zhang, H. V. Poor",
    venue="IEEE Transactions on Mobile Computing 21(9)",
    year=2021,
    summary="Per-client (eps_i, delta_i) with K-of-N random scheduling: Theorem 1's noise (as printed, "
    "corrected, numeric, tight), the convergence bound of Theorem 2, the optimal number of rounds "
    "(Theorem 3, Wright omega closed form), and communication-rounds discounting (Theorem 4, Alg. 2).",
    section="fedbound.papers.udp:section",
    theorems="fedbound.bounds.udp",
    claims=("fedbound.bounds.udp:CLAIMS", "fedbound.scheduling.udp:CLAIMS"),
    noise="fedbound.bounds.udp:noise",
    planner="fedbound.scheduling.udp:plan",
    plots="fedbound.validation.reproduce.plots_udp:PLOTS",
    recipe="fedbound.validation.recipes.udp:RECIPE",
    defaults=LOSS_DEFAULTS,
    aliases={"U": "N"},
    example={"N": 50, "K": 30, "m": 80, "eps": 8.0, "delta": 0.001, "eta": 0.5, "C": 1.0},
    audit="fedbound.validation.audit.udp:AUDIT",
    validation="fedbound.validation.estimate.validate_udp:VALIDATION",
    reproduce="fedbound.validation.reproduce.udp:FIGURES",
)
