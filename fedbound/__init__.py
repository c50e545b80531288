"""fedbound: differentially private federated learning, from theorems to deployable decisions.

Subpackages (one import namespace over the repository's top-level folders; see the docs' design page,
docs/design.md):

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


def _source_tree_layout() -> None:
    """Run from a checkout (``python -m fedbound`` in the repository root, or a path entry pointing at it),
    Python finds this folder before any installed copy; its subpackages live in the sibling folders
    (``bounds/``, ``accounting/`` ...; pyproject's package-dir).  Adding the checkout's root to ``__path__``
    makes ``fedbound.bounds`` that checkout's ``bounds/``, so a checkout is always self-consistent instead of
    half-shadowing an installed package."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "bounds" / "__init__.py").is_file():
        if str(root) not in __path__:
            __path__.append(str(root))


_source_tree_layout()

_SUBPACKAGES = ("accounting", "bounds", "scheduling", "training", "validation", "config", "errors", "checks")

__all__ = ["__version__", *_SUBPACKAGES]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"fedbound.{name}")
    raise AttributeError(f"module 'fedbound' has no attribute {name!r}")
