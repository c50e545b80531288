"""Issue 36 item 7: declare what you import.  A core-only ``pip install .`` crashed every command because
fedbound.cli imports click, which typer >= 0.26 no longer installs; the make venv (every extra) hid it.

* every third-party module the shipped code imports belongs to a distribution pyproject.toml declares
  (the core dependencies or an extra);
* the core's modules (the CLI, accounting, bounds, scheduling) import only core dependencies at module level
  (an extra's module is imported inside the function that needs it, after ``fedbound.extras.require``);
* with every extra's modules made unimportable, ``fedbound --help``, ``papers``, ``calibrate`` and plans
  (NbAFL, DP-PFL, PADPFL: scipy, PLD and cvxpy) answer (the core path needs no extra).  ``.ci/run`` also
  builds a real core-only venv and runs the CLI in it.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("fedbound", "accounting", "bounds", "scheduling", "training", "validation", "deploy", "tests")
CORE = ("fedbound", "accounting", "bounds", "scheduling")
NOT_CORE = ("fedbound/explorer",)  # the explorer extra's app


def _name(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    return core, extras


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, imported at module level) for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    for node in tree.body:  # an `if TYPE_CHECKING:` / try block at module level is module level too
        if isinstance(node, ast.If | ast.Try):
            top_level |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [(n.split(".")[0], id(node) in top_level) for n in names]
    return out


def _third_party() -> dict[str, list[tuple[str, bool]]]:
    """top-level module -> [(file, module level?)] for every import that is neither stdlib nor ours."""
    first_party = {"fedbound", "__future__", *SHIPPED}
    found: dict[str, list[tuple[str, bool]]] = {}
    for folder in SHIPPED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for top, module_level in _imports(path):
                if top in sys.stdlib_module_names or top in first_party:
                    continue
                found.setdefault(top, []).append((path.relative_to(ROOT).as_posix(), module_level))
    return found


def test_the_scan_sees_the_imports_it_must_judge():
    """The scan is not vacuous: it finds cli.py's click import (the reported crash) at module level or in
    main(), and the lazy torch imports of the training modules."""
    found = _third_party()
    assert any(f == "fedbound/cli.py" for f, _ in found["click"])
    assert any(f.startswith("training/") for f, _ in found["torch"])
    assert _name("typer>=0.12,<0.26") == "typer" and _name("dp-accounting>=0.4") == "dp-accounting"
    assert _name("flwr[simulation]>=1.42,<1.43") == "flwr" and _name("markdown_it.py") == "markdown-it-py"


def test_every_imported_package_is_declared():
    core, extras = _declared()
    declared = core.union(*extras.values())
    owners = md.packages_distributions()
    undeclared = []
    for top, where in sorted(_third_party().items()):
        dists = {_name(d) for d in owners.get(top, [])}
        assert dists, f"{top} (imported by {where[0][0]}) is not installed: cannot tell its distribution"
        if not dists & declared:
            undeclared.append(f"{top} ({', '.join(sorted(dists))}) imported by {where[0][0]}")
    assert not undeclared, "imported but not declared in pyproject.toml: " + "; ".join(undeclared)


def test_core_modules_import_only_core_dependencies_at_module_level():
    core, _ = _declared()
    owners = md.packages_distributions()
    bad = []
    for top, where in sorted(_third_party().items()):
        dists = {_name(d) for d in owners.get(top, [])}
        for path, module_level in where:
            in_core = path.split("/")[0] in CORE and not path.startswith(NOT_CORE)
            if in_core and (module_level or path == "fedbound/cli.py") and not dists & core:
                bad.append(f"{path} imports {top} ({', '.join(sorted(dists))}), not a core dependency")
    assert not bad, "; ".join(bad)


def test_the_core_commands_run_with_every_extra_missing(tmp_path):
    """Each extra's modules (fedbound.extras.EXTRAS, plus the dev extra's) refused by an import hook: the
    import fails as it would in a core-only install."""
    from fedbound.extras import EXTRAS

    blocked = sorted({m for mods in EXTRAS.values() for m in mods} | {"hypothesis", "pytest", "opacus"})
    examples = ROOT / "examples"
    runs = [["--help"], ["papers", "--json"], ["calibrate", "--eps", "2", "--q", "0.1", "--steps", "10",
                                               "--delta", "1e-5", "--no-pld", "--json"],
            *(["plan", p, str(examples / c), "--json"] for p, c in (
                ("nbafl", "nbafl_mnist.toml"), ("dppfl", "dppfl_ridge.toml"),
                ("adaptive", "adaptive_s3_plan.toml")))]  # scipy, dp-accounting's PLD, cvxpy
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {blocked!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from fedbound.cli import main\n"
            f"codes = [main(a) for a in {runs!r}]\n"
            "assert codes == [0] * len(codes), codes\n"
            f"loaded = sorted(m for m in {blocked!r} if sys.modules.get(m) is not None)\n"
            "assert not loaded, loaded\n")
    env = {**os.environ, "FEDBOUND_CACHE_DIR": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore",
           "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
