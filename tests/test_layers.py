"""The dependency rule of the design page (docs/design.md), checked on the source.

accounting <- bounds <- scheduling <- validation, training <- validation; the face (fedbound/: CLI, registry,
output, config) on top; errors and checks the floor."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FACE = ("fedbound.cli", "fedbound.commands", "fedbound.registry", "fedbound.papers", "fedbound.output")
FORBIDDEN = {
    "accounting": ("fedbound.bounds", "fedbound.scheduling", "fedbound.training", "fedbound.validation",
                   "fedbound.config", *FACE),
    "bounds": ("fedbound.scheduling", "fedbound.training", "fedbound.validation", "fedbound.config", *FACE),
    "scheduling": ("fedbound.training", "fedbound.validation", "fedbound.config", *FACE),
    "training": ("fedbound.bounds", "fedbound.scheduling", "fedbound.validation", *FACE),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_upwards(layer):
    bad = []
    for path in sorted((ROOT / layer).glob("*.py")):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)
