"""The built wheel installs and imports from outside the repository (proves the package-dir mapping)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["accounting", "bounds", "scheduling", "training", "validation", "deploy", "commands", "tests"]


@pytest.mark.slow
def test_wheel_installs_and_imports_outside_repo(tmp_path):
    import shutil

    shutil.rmtree(REPO / "build", ignore_errors=True)  # a stale build/ would put deleted modules in the wheel
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                            "-w", str(wheel_dir), str(REPO)], check=True, capture_output=True, text=True)
    # a data folder missing from the packages list builds with a BuildBackendWarning (and a later setuptools
    # drops the folder): a clean build says nothing of the kind
    assert "is absent from the `packages` configuration" not in built.stdout + built.stderr
    assert "BuildBackendWarning" not in built.stdout + built.stderr
    wheels = list(wheel_dir.glob("fedbound-*.whl"))
    assert len(wheels) == 1
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheels[0])], check=True, capture_output=True)
    code = (
        "import importlib, fedbound, pathlib, sys\n"
        f"assert pathlib.Path(fedbound.__file__).is_relative_to({str(target)!r}), fedbound.__file__\n"
        f"for name in {SUBPACKAGES!r}:\n"
        "    mod = importlib.import_module('fedbound.' + name)\n"
        f"    assert pathlib.Path(mod.__file__).is_relative_to({str(target)!r}), mod.__file__\n"
        "from fedbound.cli import main\n"
        "sys.exit(main(['--version']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "fedbound" in out.stdout


def test_every_source_folder_is_in_the_package_list():
    """A new module folder must be declared in pyproject.toml, or the wheel silently lacks it."""
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(cfg["package-dir"].values())
    for folder in ["fedbound", "accounting", "bounds", "scheduling", "training", "validation", "deploy",
                   "tests"]:
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO).as_posix()
            assert rel in declared, f"{rel} is a package but not in [tool.setuptools.package-dir]"


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_checkout_is_self_consistent_without_any_install():
    """From the repository root, with the installed package's finder removed, ``fedbound.bounds`` is the
    checkout's ``bounds/`` (the face folder alone used to shadow the installed package, half of it)."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            "sys.path.insert(0, '.'); import fedbound.bounds.nbafl as nb, fedbound.registry as r; "
            "print(nb.__file__); print(sorted(r.papers()))")
    out = _run(code, root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == str(root / "bounds" / "nbafl.py")
    assert "nbafl" in out.stdout


def test_train_without_torch_says_which_extra_to_install(tmp_path):
    root = Path(__file__).resolve().parents[1]
    code = ("import sys; sys.modules['torch'] = None; from fedbound.cli import main; "
            f"sys.exit(main(['train', 'nbafl', {str(root / 'examples' / 'nbafl_mnist.toml')!r}, "
            f"'--out', {str(tmp_path / 'run')!r}, '--no-progress']))")
    out = _run(code, tmp_path)
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].endswith(f"pip install -e '{root}[train]'")  # the editable checkout
