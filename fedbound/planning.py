"""One code path from a paper's setting to its Plan: ``fedbound plan`` and ``fedbound report`` both call
it."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any

__all__ = ["plan_for", "example_overrides", "cached_plan", "code_fingerprint"]

_PLANS: dict[str, Any] = {}
_PACKAGES = ("fedbound", "accounting", "bounds", "scheduling", "validation", "training", "deploy")


def code_fingerprint() -> str:
    """What a plan depends on besides its input: every source file of the project (path, size, mtime) and
    every installed distribution (site-packages' entries carry their versions).  ~5 ms; computed once per
    process."""
    if "fingerprint" not in _PLANS:
        import hashlib
        import os
        import sysconfig
        from pathlib import Path

        h = hashlib.blake2b(digest_size=20)
        root = Path(__file__).resolve().parents[1]
        for package in _PACKAGES:
            for dirpath, dirnames, files in os.walk(root / package):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        site = sysconfig.get_paths()["purelib"]
        h.update("|".join(sorted(os.listdir(site)) if os.path.isdir(site) else []).encode())
        _PLANS["fingerprint"] = h.hexdigest()
    return _PLANS["fingerprint"]


def _remember(digest: str, result: Any, keep: int = 256) -> None:
    """Keep the last ``keep`` plans of this process (an explorer session asks for many)."""
    _PLANS[digest] = result
    if len(_PLANS) > keep + 1:
        _PLANS.pop(next(k for k in _PLANS if k != "fingerprint"))


def cached_plan(key: Any, compute: Any) -> Any:
    """``compute()``, kept in memory and across runs (the compiled-formula cache's directory, ``plans/``;
    ``FEDBOUND_CACHE_DIR=""`` turns it off) under ``key`` (paper, setting, variant, check) and
    :func:`code_fingerprint`: a planner is a pure function of its input and the code, so a second ``fedbound
    plan`` of the same setting loads the Plan instead of recomputing it (and imports no scipy).  Any problem
    with the cache falls back to ``compute()``."""
    import hashlib
    import os
    import pickle
    import tempfile

    from fedbound.bounds.compiled import cache_dir

    digest = hashlib.blake2b(repr((key, code_fingerprint())).encode(), digest_size=20).hexdigest()
    if digest in _PLANS:
        return _PLANS[digest]
    root = cache_dir()
    path = None if root is None else root / "plans" / f"{digest}.pickle"
    if path is not None and path.is_file():
        try:
            with open(path, "rb") as fh:
                result = pickle.load(fh)  # noqa: S301 - our own cache entry
            _remember(digest, result)
            return result
        except Exception:  # noqa: BLE001 - a corrupt or stale entry is recomputed
            pass
    result = compute()
    _remember(digest, result)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, suffix=".tmp") as tmp:
                pickle.dump(result, tmp, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp.name, path)
        except Exception:  # noqa: BLE001 - unpicklable or unwritable: no disk cache, same answer
            pass
    return result


def plan_for(paper: Any, setting: Any, variant: str = "paper", check: bool = False) -> Any:
    """The registered planner's Plan for ``paper`` (a :class:`fedbound.registry.Paper`) on ``setting`` (its
    :meth:`~fedbound.registry.Paper.load_setting`); the setting's assumed and measured keys and its notes
    are recorded in the plan, and every validity problem is in ``plan.warnings`` (printed once) instead of
    raised as a Python warning.  ``check``: the planner runs its certificate's full independent check
    (``fedbound plan --check``; planners take ``check=`` as a keyword)."""
    def compute() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            planner = paper.load("planner")
            takes_check = "check" in inspect.signature(planner).parameters
            return planner(setting.values, variant, check=True) if check and takes_check \
                else planner(setting.values, variant)

    key = (paper.name, str(paper.planner), sorted(setting.values.items()), variant, bool(check))
    result = cached_plan(key, compute)
    return dataclasses.replace(result, assumed=setting.assumed, measured=setting.measured,
                               warnings=(*setting.notes, *result.warnings))


def example_overrides(paper: Any) -> list[str]:
    """The paper's registered example (its own experiment) as ``--set KEY=VALUE`` overrides."""
    from fedbound.validation.reproduce import toml_literal

    return [f"{k}={toml_literal(v)}" for k, v in paper.example.items()]
