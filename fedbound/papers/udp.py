"""Registration of UDP (Wei et al. 2021), seed 003: its training recipe."""

from __future__ import annotations

from fedbound.registry import Paper

PAPER = Paper(
    name="udp", seed="003", short="UDP (Wei et al. 2021)",
    title=(
        "User-Level Privacy-Preserving Federated Learning: Analysis and Performance Optimization"),
    authors="K. Wei, J. Li, M. Ding, C. Ma, H. Su, B. Zhang, H. V. Poor",
    venue="IEEE Transactions on Mobile Computing", year=2021,
    summary=(
        "User-level DP with per-client noise calibrated by the moments accountant, and "
        "communication-rounds discounting (CRD)."),
    section="fedbound.validation.train_udp:UDP_SECTION",
    recipe="fedbound.validation.train_udp:RECIPE",
)
