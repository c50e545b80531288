"""Registration of DP-PFL / RDP-PFL (Wei et al. 2023): personalised meta-learning FL with Renyi DP in both
local
stages, its convergence bounds, optimal T, clipping threshold, model size and inner/outer budget split."""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

ANALYSIS_DEFAULTS = {"L": 1.0, "rho": 1.0, "B": 1.0, "lam": 1.0, "l": 0.5, "eps_het": 0.1, "gamma_het": 0.1,
                     "sigma_G": 1.0, "sigma_H": 1.0, "Delta0": 10.0, "S": 159010, "m": 300, "N": 30}
"""Constants assumed when not given (the paper reports none): spec 000 Sec. 8's illustrative analysis
constants (for which l' > 0 and 0 < beta < 2/L' hold at eta = beta = 0.01), the 784-200-10 MLP's
S = 159,010, the paper's 300 support samples per client and its 30 source clients (N only labels the
recommendation: all source clients train every round)."""


def section():
    """The [dppfl] config section: planning keys with domains from the theorem parameters, then the
    simulator's keys (``fedbound train dppfl``)."""
    from fedbound.bounds.dppfl import ANALYSIS_CONSTANTS, NOTATION
    from fedbound.config import Field, Section

    p = NOTATION.params
    prob = {"low": 0.0, "high": 1.0, "low_open": True}
    return Section("dppfl", (
        Field("N", int, doc="source clients (trained; all take part every round: K = N)", low=1),
        Field("targets", int, 0, "target clients K of the paper (fast-adaptation evaluation only, eq. (4)), "
                                 "drawn from the held-out split", low=0),
        Field("T", int, None, "communication rounds (optional for plan: otherwise the optimal T; required "
                              "for train)", low=1, optional=True),
        field_from_param(p["tau0"], default=1),
        field_from_param(p["eta"], default=0.01, doc="; also the targets' adaptation step (eq. (4))",
                         low=1e-12),  # eta = 1e-308 divides by zero; C = 1e-308 gives sigma = inf
        field_from_param(p["beta"], default=0.01),
        field_from_param(p["C"], default=2.4, low=1e-12, high=1e12),
        Field("eps", float, doc="each client's sample-level privacy budget epsilon (Theorem 1)", low=1e-6,
              high=1e6),  # eps = 1e308 took 23 CPU s to be refused by the calibration
        Field("delta", float, 1e-3, "each client's delta (Theorem 1)", low=0.0, high=1.0, low_open=True,
              high_open=True),
        Field("q_in", float, 0.1, "Poisson sampling rate of the query set (inner stage), q^Q", **prob),
        Field("q_out", float, 0.1, "Poisson sampling rate of the support set (outer stage), q^S", **prob),
        Field("sigma_ratio", float, 1.0, "sigma_out / sigma_in (1 = the paper's 50/50 budget allocation)",
              low=0.0, low_open=True),
        Field("split", str, "given", "given: use sigma_ratio; planned: the ratio minimising Theorem 3 with "
                                     "the outer noise (E18) at this T "
                                     "(fedbound.scheduling.dppfl.optimal_split)",
              choices=("given", "planned")),
        field_from_param(p["S"], optional=True, doc=" (default 159010: the 784-200-10 MLP, assumed)"),
        field_from_param(p["m"], optional=True, doc=" (default 300, the paper's support set)"),
        *(field_from_param(p[k], optional=True, doc=f" (default {ANALYSIS_DEFAULTS[k]:g}, assumed)")
          for k in ANALYSIS_CONSTANTS),
        Field("bound", str, "nonconvex", "bound the plan minimises: nonconvex (Theorem 3, eq. (32)) or "
                                         "convex (Theorem 2, eq. (31))", choices=("nonconvex", "convex")),
        Field("T_max", int, 400, "first window of the plan's T search (widened until the bound turns, up "
              "to 100000)", low=1),
        Field("a0", float, None, "model-size extension Psi(S) = a0 S^-kappa + bound: approximation-error "
                                 "scale (not in the paper)", low=0.0, optional=True),
        Field("kappa", float, None, "model-size extension: approximation-error exponent", low=0.0,
              low_open=True, optional=True),
        Field("S_base", int, None, "admissible model sizes S(n) = S_base + S_per_neuron n (e.g. 895242 for "
                                   "the paper's CIFAR-10 CNN)", low=0, optional=True),
        Field("S_per_neuron", int, None, "parameters per last-hidden-layer neuron (e.g. 139 for the CNN)",
              low=1, optional=True),
        Field("neurons_max", int, None, "largest last-hidden-layer width searched", low=1, optional=True),
        Field("variant", str, "v2", "simulator: v2 per-example clipping, DP-SGD normalisation (Theorem 1 "
                                    "holds); v1 the paper's eqs. (6)-(11) literally (batch clipping)",
              choices=("v2", "v1")),
        Field("g1", str, "first_order", "simulator: outer factor g1, first_order (I, spec option (c)) or "
                                        "hessian (I - eta grad^2 F on the query batch, eq. (10), option (a))",
              choices=("first_order", "hessian")),
        Field("query_fraction", float, 0.5, "simulator: share of each client's data in its query set "
                                            "(paper: 50 %)", low=0.0, high=1.0, low_open=True,
              high_open=True),
        Field("power_iterations", int, 10, "simulator, g1 = hessian: power-method steps for ||grad^2 F||_2",
              low=1),
        Field("target_samples_per_class", int, None, "simulator, partition = classes: samples per class of "
                                                     "a target client (default: [train] samples_per_class)",
              low=1, optional=True),
    ), doc="DP-PFL / RDP-PFL setting (Wei et al. 2023), in the paper's notation")


PAPER = Paper(
    name="dppfl", seed="000", short="DP-PFL (Wei et al. 2023)",
    title="Personalized Federated Learning With Differential Privacy and Convergence Guarantee",
    authors="K. Wei, J. Li, C. Ma, M. Ding, W. Chen, J. Wu, M. Tao, H. V. Poor",
    venue="IEEE Transactions on Information Forensics and Security 18", year=2023,
    summary="MAML-style personalised FL with Renyi DP in both local stages (Theorem 1, the inner/outer "
            "budget allocation), convergence bounds for strongly convex (Theorem 2) and non-convex (Theorem "
            "3) losses, an optimal number of rounds T under a fixed budget, the clipping threshold, model "
            "size and an optimised inner/outer split.",
    section="fedbound.papers.dppfl:section",
    theorems="fedbound.bounds.dppfl",
    claims=("fedbound.bounds.dppfl:CLAIMS", "fedbound.scheduling.dppfl:CLAIMS"),
    noise="fedbound.bounds.dppfl:noise",
    planner="fedbound.scheduling.dppfl:plan",
    plots="fedbound.validation.reproduce.plots_dppfl:PLOTS",
    recipe="fedbound.validation.recipes.dppfl:RECIPE",
    audit="fedbound.validation.audit.dppfl:AUDIT",
    defaults=ANALYSIS_DEFAULTS,
    aliases={"U": "N"},
    # spec 000 Sec. 8 setting C (q = 1: sigma*(T) = sigma*(1) sqrt(T), so plans and plots are quick)
    example={"N": 3, "eps": 4.0, "delta": 1e-3, "T": 50, "tau0": 3, "q_in": 1.0, "q_out": 1.0, "C": 1.0,
             "S": 11, "m": 100, "T_max": 200},
    # Theorem 3 (the default, non-convex) is vacuous at every eps here; Theorem 2 (convex) with T searched
    # is informative for eps in about (0.4, 400)
    explore={"T": None, "bound": "convex"},
    levers={"T": None, "bound": "convex", "eps": "up", "m": "up"},
    validation="fedbound.validation.estimate.validate_dppfl:VALIDATION",
    reproduce="fedbound.validation.reproduce.dppfl:FIGURES",
)
