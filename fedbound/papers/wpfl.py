"""Registration of WPFL (Zhao et al. 2025), seed 004: its training recipe."""

from __future__ import annotations

from fedbound.registry import Paper

PAPER = Paper(
    name="wpfl", seed="004", short="WPFL (Zhao et al. 2025)",
    title=(
        "Enhancing Convergence, Privacy and Fairness for Wireless Personalized Federated Learning: "
        "Quantization-Assisted Min-Max Fair Scheduling"),
    authors="X. Zhao, Q. Cui, Z. Du, W. Ni, W. Li, X. Yu, J. Zhang, X. Tao, P. Zhang",
    venue="IEEE journal version (accepted 2025)", year=2025,
    summary=(
        "Quantization-assisted Gaussian mechanism for wireless personalized FL and min-max fair "
        "OFDMA scheduling."),
    section="fedbound.validation.train_wpfl:WPFL_SECTION",
    recipe="fedbound.validation.train_wpfl:RECIPE",
)
