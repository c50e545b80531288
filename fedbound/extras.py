"""Optional extras: which ``pip install 'fedbound[EXTRA]'`` a command needs, said in one line.

``pip install fedbound`` installs the planning core (numpy, scipy, sympy, pandas, cvxpy, dp-accounting ...);
training, the report's figures, the explorer and the deployment bridges need extras (pyproject.toml).  A
command that needs one calls :func:`require` before any work, and the CLI turns a ``ModuleNotFoundError`` of
an extra's module raised anywhere later into the same one-line hint (:func:`hint`), exit code 2.
:func:`require` looks modules up with ``importlib.util.find_spec``, which imports nothing: a command stays
as fast as its own imports.
"""

from __future__ import annotations

import importlib.util

from fedbound.errors import ConfigError

__all__ = ["EXTRAS", "extra_of", "hint", "missing", "require"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("torch", "mlxtend", "sklearn", "tqdm", "pyarrow"),
    "report": ("plotly",),
    "explorer": ("fastapi", "starlette", "uvicorn", "plotly"),
    "flower": ("flwr",),
    "ray": ("ray",),
}
"""Each extra's top-level modules (the ``[project.optional-dependencies]`` of pyproject.toml)."""


def extra_of(module: str | None) -> str | None:
    """The first extra that provides ``module``'s top-level package (None for a core or unknown one)."""
    top = (module or "").split(".")[0]
    return next((name for name, modules in EXTRAS.items() if top in modules), None)


def missing(extra: str) -> str | None:
    """The first of ``extra``'s modules that cannot be imported (None when all are there)."""
    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):
            return module
    return None


def hint(command: str, module: str, extra: str) -> str:
    """E.g. ``fedbound train needs torch: install the train extra: pip install 'fedbound[train]'``."""
    return (f"fedbound {command} needs {module}: install the {extra} extra: "
            f"pip install 'fedbound[{extra}]'")


def require(extra: str, command: str) -> None:
    """ConfigError (one line, exit code 2 in the CLI) when a module of ``extra`` is not installed."""
    module = missing(extra)
    if module is not None:
        raise ConfigError(hint(command, module, extra))
