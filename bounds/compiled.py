"""Numeric functions of sympy expressions, compiled once and kept across runs.

``sympy.lambdify`` prints and compiles an expression in 10-50 ms; a plan needs a few dozen, so a cold
``fedbound plan`` spent most of its time there (and in substituting definitions before it).
:func:`cached_function` keeps the generated Python source in a cache directory (``$FEDBOUND_CACHE_DIR``,
else ``~/.cache/fedbound``), keyed by the caller's key: theorems use a :func:`fingerprint` of the files that
define them (the paper's bounds module, core.py, this file) and the sympy version, plus the theorem, variant
and what is compiled, so an edited formula gets a new key and a stale entry is never used; on a hit sympy
does no work at all.  :func:`cached_json` keeps small derived facts (a theorem's parameter names) the same
way.  The globals the source needs are recorded by module and name and imported on
load.  Any problem with the cache (unwritable, corrupt) falls back to a plain ``lambdify``; the cache never
changes a number (tests compare both paths).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # sympy is imported only where an expression is compiled (a cache miss)
    import sympy as sp

__all__ = ["compile_expression", "cached_function", "cached_json", "fingerprint", "cache_dir"]

MODULES = ["numpy", "scipy"]
NUMPY_ONLY = {("scipy.special", "gammaln"): ("fedbound.accounting._numerics", "gammaln")}
"""scipy functions a compiled formula gets from fedbound instead (same values; no scipy import on a cached
plan)."""


def _numpy_only(namespace: dict[str, Any]) -> None:
    for (module, attr), (mine, name) in NUMPY_ONLY.items():
        if attr in namespace and getattr(namespace[attr], "__module__", "").startswith(module.split(".")[0]):
            namespace[attr] = getattr(importlib.import_module(mine), name)


def cache_dir() -> Path | None:
    """Where compiled functions are kept; ``FEDBOUND_CACHE_DIR=""`` turns the disk cache off."""
    env = os.environ.get("FEDBOUND_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    return Path.home() / ".cache" / "fedbound" / "lambdify"


def _key(symbols: Sequence[sp.Symbol], expr: sp.Basic) -> str:
    import sympy as sp

    text = json.dumps([sp.srepr(expr), [sp.srepr(s) for s in symbols], sp.__version__, MODULES])
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


def _load(path: Path) -> Callable[..., Any] | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        namespace: dict[str, Any] = {}
        for name, (module, attr) in entry["globals"].items():
            module, attr = NUMPY_ONLY.get((module, attr), (module, attr))
            obj = importlib.import_module(module)
            namespace[name] = getattr(obj, attr) if attr else obj
        exec(compile(entry["source"], str(path), "exec"), namespace)  # noqa: S102 - our own cache entry
        return namespace[entry["name"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError, SyntaxError):
        return None


def _origin(value: Any) -> tuple[str, str] | None:
    """(module, attribute) that gives ``value`` back, or None."""
    if inspect.ismodule(value):
        return value.__name__, ""
    if isinstance(value, float):  # constants lambdify puts in its namespace: nan, inf, pi, e
        import numpy as np

        return next((("numpy", n) for n in ("pi", "e", "inf") if getattr(np, n) == value),
                    ("numpy", "nan") if np.isnan(value) else None)
    module, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    for mod in (module, "numpy", "scipy.special"):
        if mod and name:
            try:
                if getattr(importlib.import_module(mod), name) is value:
                    return mod, name
            except (ImportError, AttributeError):
                continue
    return None


def _save(path: Path, fn: Callable[..., Any]) -> None:
    source = inspect.getsource(fn)
    needed: dict[str, tuple[str, str]] = {}
    for name in fn.__code__.co_names:
        if name in fn.__globals__:
            origin = _origin(fn.__globals__[name])
            if origin is None:
                return  # a value we cannot name: keep it in memory only
            needed[name] = origin
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                     encoding="utf-8") as tmp:
        json.dump({"name": fn.__name__, "source": source, "globals": needed}, tmp)
    os.replace(tmp.name, path)


_FINGERPRINTS: dict[tuple[str, ...], str] = {}


def fingerprint(*files: str) -> str:
    """A hash of ``files``, core.py, this module and the sympy version: part of every theorem's key.

    The sympy version is read from its ``release.py`` without importing sympy (a cached plan never does)."""
    here = Path(__file__).resolve().parent
    names = tuple(sorted({*(str(Path(f).resolve()) for f in files), str(here / "core.py"),
                          str(here / "compiled.py"), str(here / "lazy.py"), _sympy_release()}))
    if names not in _FINGERPRINTS:
        h = hashlib.blake2b(digest_size=20)
        for name in names:
            try:
                h.update(Path(name).read_bytes())
            except OSError:
                h.update(os.urandom(16))  # unreadable source: never reuse an entry
        _FINGERPRINTS[names] = h.hexdigest()
    return _FINGERPRINTS[names]


def _sympy_release() -> str:
    """The file that states sympy's version (``sympy/release.py``), found without importing sympy."""
    import importlib.util

    spec = importlib.util.find_spec("sympy")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return str(Path(locations[0]) / "release.py") if locations else "sympy-missing"


def _path(key: str) -> Path | None:
    root = cache_dir()
    if root is None:
        return None
    return root / f"{hashlib.blake2b(key.encode(), digest_size=20).hexdigest()}.json"


Build = Callable[[], tuple[Sequence[Any], Any]]  # () -> (sympy symbols, sympy expression)


def cached_function(key: str, build: Build) -> Callable[..., Any]:
    """The numpy function stored under ``key``, else lambdify ``build()`` = (symbols, expression), stored."""
    path = _path(key)
    if path is not None and path.is_file():
        fn = _load(path)
        if fn is not None:
            return fn
    import sympy as sp

    symbols, expr = build()
    fn = sp.lambdify(list(symbols), expr, modules=MODULES, cse=True)
    _numpy_only(fn.__globals__)
    if path is not None:
        try:
            _save(path, fn)
        except (OSError, TypeError):
            pass
    return fn


def cached_json(key: str, build: Callable[[], Any]) -> Any:
    """The JSON value stored under ``key``, or ``build()`` (stored for next time)."""
    path = _path(f"json:{key}")
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))["value"]
        except (OSError, ValueError, KeyError):
            pass
    value = build()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                             encoding="utf-8") as tmp:
                json.dump({"value": value}, tmp)
            os.replace(tmp.name, path)
        except OSError:
            pass
    return value


def compile_expression(symbols: Sequence[sp.Symbol], expr: sp.Basic) -> Callable[..., Any]:
    """A numpy function of ``expr`` with arguments ``symbols``, keyed by the expression itself."""
    return cached_function(f"expr:{_key(symbols, expr)}", lambda: (symbols, expr))
