"""The small NbAFL settings on the synthetic convex tasks that the estimate and validate tests share."""

from __future__ import annotations

from pathlib import Path

TASKS = ("synthetic_ridge", "synthetic_logistic")

CONFIG = """
[nbafl]
N = 4
m = 60
C = 50.0
eps = 50.0
delta = 0.01
L = 1
mu = 4.0
sensitivity = "paper"

[train]
dataset = "{dataset}"
synthetic_samples = 240
synthetic_dim = 4
test_fraction = 0.0
model = "logreg"
local_steps = 3
lr = 0.3
weight_decay = 0.05
eval_clients = false
paper_reproduction = true  # Theorem 2 against the paper's own mechanism (its sigma spends eps = 166 exactly)
"""


def write_config(folder: Path, dataset: str) -> Path:
    """``folder/<dataset>.toml``: NbAFL with 4 clients on ``dataset`` (logistic or ridge regression)."""
    path = folder / f"{dataset}.toml"
    path.write_text(CONFIG.format(dataset=dataset))
    return path
