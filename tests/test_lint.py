"""The codebase stays ruff-clean (docs/design.md, "Conventions"); a style slip fails here, not in review."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed; it is part of the dev extra")
    out = subprocess.run([ruff, "check", str(REPO)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
