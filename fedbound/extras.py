"""Optional extras: which extra a command needs, and the command that installs it here, said in one line.

Installing fedbound without extras gives the planning core (numpy, scipy, sympy, pandas, cvxpy,
dp-accounting ...); training, the report's figures, the explorer and the deployment bridges need extras
(pyproject.toml).  A command that needs one calls :func:`require` before any work, and the CLI turns a
``ModuleNotFoundError`` of an extra's module raised anywhere later into the same one-line hint
(:func:`hint`), exit code 2.
:func:`require` looks modules up with ``importlib.util.find_spec``, which imports nothing: a command stays
as fast as its own imports.

fedbound is installed from its source tree (``make demo`` runs ``pip install -e '.[...]'`` in the checkout;
it is not on a package index), so :func:`install_command` names that tree: ``pip install -e '.[train]'``
when the checkout is the working folder, its path otherwise, with the pip of the Python that runs fedbound
when that is not the ``pip`` on PATH.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from pathlib import Path

from fedbound.errors import ConfigError

__all__ = ["EXTRAS", "extra_of", "hint", "install_command", "missing", "require", "source_tree"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("torch", "mlxtend", "sklearn", "tqdm", "pyarrow"),
    "report": ("plotly",),
    "explorer": ("fastapi", "starlette", "uvicorn", "plotly"),
    "flower": ("flwr", "cryptography"),
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


def source_tree() -> tuple[Path, bool] | None:
    """(the checkout fedbound was installed from, whether editably), or None when it came from an index.

    Read from the install's ``direct_url.json`` (PEP 610: pip records a local folder's ``file://`` URL and
    ``dir_info.editable``); without an install record, the checkout this package is imported from (a
    folder with ``pyproject.toml`` above ``fedbound/``), which only an editable install can follow."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        record = json.loads(metadata.distribution("fedbound").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        record = {}
    url = urlparse(str(record.get("url", "")))
    if url.scheme == "file" and "dir_info" in record:
        path = Path(unquote(url.path))
        if (path / "pyproject.toml").is_file():
            return path, bool(record["dir_info"].get("editable", False))
    root = Path(__file__).resolve().parents[1]
    return (root, True) if (root / "pyproject.toml").is_file() and not record else None


def _shown(path: Path, lead: str = "./") -> str:
    """``path`` as typed from the working folder: ``.``, ``./below`` or the absolute path (pip reads a bare
    ``name[extra]`` as a package on an index, so a relative folder keeps its ``./``; ``lead`` "" for a
    program, whose relative path has a slash anyway)."""
    path, here = Path(os.path.abspath(path)), Path.cwd()
    if path == here:
        return "."
    below = path.is_relative_to(here) and here.parent != here  # (everything is below /)
    return f"{lead}{path.relative_to(here)}" if below else str(path)


def _pip() -> str:
    """``pip`` when the ``pip`` on PATH belongs to the Python running fedbound, else ``PYTHON -m pip``."""
    import shutil

    found = shutil.which("pip")
    prefix = Path(os.path.abspath(sys.prefix))
    if found is not None and Path(os.path.abspath(found)).parent.parent == prefix:
        return "pip"
    return f"{shlex.quote(_shown(Path(sys.executable), lead=''))} -m pip"


def install_command(extra: str) -> str:
    """The command that installs ``extra`` into the Python running fedbound: from the source tree it was
    installed from (editable when it was), e.g. ``pip install -e '.[train]'``; ``pip install
    'fedbound[train]'`` for an install from an index."""
    source = source_tree()
    if source is None:
        return f"pip install 'fedbound[{extra}]'"
    path, editable = source
    return f"{_pip()} install {'-e ' if editable else ''}{shlex.quote(f'{_shown(path)}[{extra}]')}"


def hint(command: str, module: str, extra: str) -> str:
    """E.g. ``fedbound train needs torch: install the train extra: pip install -e '.[train]'`` (the command
    of :func:`install_command`)."""
    return f"fedbound {command} needs {module}: install the {extra} extra: {install_command(extra)}"


def require(extra: str, command: str) -> None:
    """ConfigError (one line, exit code 2 in the CLI) when a module of ``extra`` is not installed."""
    module = missing(extra)
    if module is not None:
        raise ConfigError(hint(command, module, extra))
