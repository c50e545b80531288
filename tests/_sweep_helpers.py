"""Shared by the sweep tests: a small NbAFL config (logistic regression on synthetic data)."""

from __future__ import annotations

import pandas as pd

CONFIG = """
[nbafl]
N = 4
m = 40
C = 5.0
eps = 20.0
delta = 0.01
L = 1
T = 3
mu = 1.0

[train]
dataset = "synthetic_logistic"
synthetic_samples = 200
synthetic_dim = 5
test_fraction = 0.2
model = "logreg"
local_steps = 2
lr = 0.1
eval_clients = false
noise = "tight"
"""


def numbers(table: pd.DataFrame) -> pd.DataFrame:
    """The table without its timing column (the only one that differs between equal runs)."""
    return table.drop(columns="wall_time")
