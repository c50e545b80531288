"""fedbound: differentially private federated learning, from theorems to deployable decisions.

Subpackages (one import namespace over the repository's top-level folders, see DESIGN.md):

* ``fedbound.accounting``  noise std <-> (eps, delta): classic, analytic Gaussian, RDP, PLD
* ``fedbound.bounds``      one module per paper: noise formulas and convergence bounds as data
* ``fedbound.scheduling``  optimisers: optimal T, K, budget split, learning rates, lambda, channels, power
* ``fedbound.training``    the compact PyTorch simulator (needs the ``train`` extra)
* ``fedbound.validation``  predicted vs measured: sweeps, constant estimation, figures

Subpackages are imported lazily, so ``import fedbound`` is cheap and never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from fedbound._version import __version__

_SUBPACKAGES = ("accounting", "bounds", "scheduling", "training", "validation", "config", "errors", "checks")

__all__ = ["__version__", *_SUBPACKAGES]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"fedbound.{name}")
    raise AttributeError(f"module 'fedbound' has no attribute {name!r}")
