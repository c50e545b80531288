"""Registration of WPFL (Zhao et al. 2025): wireless personalized FL with the quantization-assisted Gaussian
mechanism
and the min-max fair OFDMA schedule.

Config section ``[wpfl]`` in the shared vocabulary: ``T`` is the number of uploads per client (the paper's
``T0``, the privacy cap; a run lasts until every client has used them, about N T / K rounds), ``eps`` and
``delta`` the budget over those uploads (the paper's ``eps_Q``, ``delta_Q``).  The paper's names are
accepted as aliases.
"""

from __future__ import annotations

from fedbound.registry import Paper, field_from_param

BOUND_DEFAULTS = {"mu": 0.13, "L": 0.43, "G0": 2.0, "M": 1.0, "phi1": 0.1, "phi2": 0.001, "vphi1": 0.001,
                  "vphi2": 1.0, "eps_P": 0.999, "D0": 10.0}
"""Bound constants assumed when not given.  mu, L: the paper's estimates for MLR on MNIST (Sec. VII); the
paper states no G0, M, phi's, eps_P target or initial distance (spec 004 E15): these are spec 004's TV3
values, for which eta_F* = 0.3196 and eps_F* = 0.9812 lie in (0, 1) (C10, C11) and eps_P = 0.999 >= 1 -
mu^2/4 (Theorem 5)."""


def section():
    """The [wpfl] config section (domains of the bound constants from fedbound.bounds.wpfl's parameters)."""
    from fedbound.bounds.wpfl import NOTATION
    from fedbound.config import Field, Section

    p = NOTATION.params

    def const(name: str, doc: str = "") -> Field:
        return field_from_param(p[name], optional=True,
                                doc=f" (default {BOUND_DEFAULTS[name]:g}, assumed{doc})")

    return Section("wpfl", (
        Field("N", int, doc="number of clients (paper: 20, printed 'M = 20', E11)", low=1),
        Field("K", int, doc="orthogonal subchannels = clients per round at most (paper: 10)", low=1),
        Field("T", int, doc="uploads per client, the privacy cap T0 (paper: 20; 5-30 swept)", low=1),
        field_from_param(p["C"], doc=" (paper: 3 MLR, 7 DNN, 20 CNN)"),
        Field("eps", float, 1.0, "privacy budget eps_Q over the T uploads", low=0.0, low_open=True),
        Field("delta", float, 1e-3, "delta_Q over the T uploads (paper: 1e-3 MLR/DNN, 5e-3 CNN)", low=0.0,
              high=1.0, low_open=True, high_open=True),
        Field("R", int, 16, "quantization bits per element", low=1, high=52),
        Field("q", float, 0.01, "mini-batch (Poisson) sampling rate, the q of Theorem 1", low=0.0, high=1.0,
              low_open=True),
        Field("n_params", int, 7850, "model size |omega| of the rate constraint C5 (MLR on MNIST: 7,850); "
              "must equal the [train] model's", low=1),
        Field("tau_max", float, 0.01, "maximum upload delay, s (paper: 0.01 MLR, 0.1 DNN, 0.6 CNN)", low=0.0,
              low_open=True),
        Field("P_th_dbm", float, 23.0, "client transmit power, dBm (Table I)"),
        Field("P_bs_dbm", float, 30.0, "base-station transmit power, dBm (Table I)"),
        Field("bandwidth_hz", float, 10e6, "total bandwidth K B, Hz (Table I: 10 MHz)", low=0.0,
              low_open=True),
        Field("N0_dbm_hz", float, -169.0, "noise power spectral density, dBm/Hz (Table I)"),
        Field("pathloss_1m_db", float, -30.0, "path loss at 1 m, dB (Table I)"),
        Field("pathloss_exponent", float, 2.8, "path-loss exponent (Table I)", low=0.0),
        Field("M_qam", int, 256, "QAM order, a perfect square (Table I: 256)", low=4),
        Field("d_min", float, 10.0, "smallest client distance, m (distances ~ U[d_min, d_max])", low=0.0,
              low_open=True),
        Field("d_max", float, 100.0, "largest client distance, m (BS coverage radius 100 m)", low=0.0,
              low_open=True),
        Field("channel_seed", int, 0, "seed of the distances, fading and the random scheduler", low=0),
        Field("policy", str, "proposed", "scheduling policy: the proposed min-max schedule or a baseline of "
              "Sec. VII (non_adjustment: KM with fixed rates)",
              choices=("proposed", "non_adjustment", "round_robin", "random", "error_free")),
        Field("max_rounds", int, None, "give up when the schedule is not done after this many rounds", low=1,
              optional=True),
        Field("eta_F", float, 0.01, "FL learning rate of the fixed-rate baselines", low=0.0, low_open=True),
        Field("eta_P", float, 0.01, "PL learning rate of the fixed-rate baselines", low=0.0, low_open=True),
        Field("lam", float, 0.5, "PL-FL weight lambda of the fixed-rate baselines", low=0.0, high=2.0),
        Field("mechanism", str, "quantized", "DP mechanism: the quantization-assisted Gaussian (sigma by "
              "[train] noise) or a Fig. 2 baseline: gaussian (classic mechanism ignoring quantization), "
              "moments (moments accountant), perfect_gaussian (same sigma, no quantization, no bit errors), "
              "dithering (subtractive dithered quantization with random steps: exactly Gaussian noise, "
              "tight sigma)",
              choices=("quantized", "gaussian", "moments", "perfect_gaussian", "dithering")),
        Field("personalization", str, "wpfl", "personalization rule: WPFL's (eq. (20b)) or a PFL baseline of "
              "Figs. 5-7 (pfedme, apple, fedamp, fedala) with WPFL's DP mechanism and schedule but fixed "
              "eta_F, eta_P (fedbound.training.pfl_baselines)",
              choices=("wpfl", "pfedme", "apple", "fedamp", "fedala")),
        Field("pl_clients", str, "all", "who updates its PL model each round (E12)",
              choices=("all", "selected")),
        const("mu", ", MLR-MNIST estimate"), const("L", ", MLR-MNIST estimate"), const("G0"), const("M"),
        const("phi1"), const("phi2"), const("vphi1"), const("vphi2"),
        const("eps_P", "; the common PL contraction target of C1"),
        Field("D0", float, None, f"initial PL distance E||w0 - w*||^2 of Theorem 4 (default "
              f"{BOUND_DEFAULTS['D0']:g}, assumed)", low=0.0, optional=True),
    ), doc="WPFL setting (Table I defaults)")


PAPER = Paper(
    name="wpfl", seed="004", short="WPFL (Zhao et al. 2025)",
    title="Enhancing Convergence, Privacy and Fairness for Wireless Personalized Federated Learning: "
          "Quantization-Assisted Min-Max Fair Scheduling",
    authors="X. Zhao, Q. Cui, Z. Du, W. Ni, W. Li, X. Yu, J. Zhang, X. Tao, P. Zhang",
    venue="IEEE journal (accepted April 2025)", year=2025,
    summary="Quantization-assisted Gaussian mechanism (Theorem 1), bit errors over OFDMA, PL/FL convergence "
            "bounds (Lemma 1, Theorems 2-4) and the per-round min-max fair schedule: full power, "
            "Kuhn-Munkres client/subchannel assignment, eta_F*, and per-client eta_P, lambda (Theorem 5).",
    section="fedbound.papers.wpfl:section",
    theorems="fedbound.bounds.wpfl",
    claims=("fedbound.bounds.wpfl:CLAIMS", "fedbound.scheduling.wpfl:CLAIMS"),
    noise="fedbound.bounds.wpfl:noise",
    planner="fedbound.scheduling.wpfl:plan",
    plots="fedbound.validation.reproduce.plots_wpfl:PLOTS",
    recipe="fedbound.validation.recipes.wpfl:RECIPE",
    audit="fedbound.validation.audit.wpfl:AUDIT",
    defaults=BOUND_DEFAULTS,
    example={"N": 20, "K": 10, "T": 20, "C": 3.0, "eps": 1.0, "delta": 0.001, "tau_max": 0.01},
    # at C = 3 Theorem 4's bound (1e6) is far above D0 = 10: the PL contraction eps_P >= 1 - mu^2/4 removes at
    # most 0.4 % of the distance per round, so the bound is informative only with little noise per round
    # (small C) and a larger initial distance; informative for eps in about (0.1, 100)
    explore={"C": 0.01, "D0": 1000.0},
    levers={"C": "down", "eps": "up", "T": "up", "D0": "up"},
    aliases={"T0": "T", "eps_Q": "eps", "delta_Q": "delta"},
    validation="fedbound.validation.estimate.validate_wpfl:VALIDATION",
    reproduce="fedbound.validation.reproduce.wpfl:FIGURES",
)
