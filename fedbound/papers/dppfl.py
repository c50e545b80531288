"""Registration of DP-PFL (Wei et al. 2023), seed 000: its training recipe."""

from __future__ import annotations

from fedbound.registry import Paper

PAPER = Paper(
    name="dppfl", seed="000", short="DP-PFL (Wei et al. 2023)",
    title=(
        "Personalized Federated Learning With Differential Privacy and Convergence Guarantee"),
    authors="K. Wei, J. Li, C. Ma, M. Ding, W. Chen, J. Wu, M. Tao, H. V. Poor",
    venue="IEEE Transactions on Information Forensics and Security 18", year=2023,
    summary=(
        "Meta-learning personalized FL with DP-SGD in both stages and a Renyi-DP budget."),
    section="fedbound.validation.train_dppfl:DPPFL_SECTION",
    theorems="fedbound.bounds.dppfl",
    recipe="fedbound.validation.train_dppfl:RECIPE",
)
