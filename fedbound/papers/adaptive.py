"""Registration of PADPFL (Talaei and Izadi 2024), seed 001: its training recipe."""

from __future__ import annotations

from fedbound.registry import Paper

PAPER = Paper(
    name="adaptive", seed="001", short="PADPFL (Talaei and Izadi 2024)",
    title=(
        "Enhancing Federated Learning with Adaptive Differential Privacy and Priority-Based "
        "Aggregation"),
    authors="M. Talaei, I. Izadi",
    venue="arXiv:2406.18491", year=2024,
    summary=(
        "Client and server Gaussian noise with personalized impact factors (priority-based "
        "aggregation)."),
    section="fedbound.validation.train_adaptive:ADAPTIVE_SECTION",
    theorems="fedbound.bounds.adaptive",
    recipe="fedbound.validation.train_adaptive:RECIPE",
)
