"""Issue 25 item 3 / issue 26 item 7: the CLI imports torch and pandas only where a command needs them, and
every command that needs an optional extra says which one in one line (exit code 2) when it is missing.

Each case runs the CLI in a fresh interpreter; "not installed" is simulated by a ``sys.meta_path`` blocker
in a ``sitecustomize`` put first on ``PYTHONPATH``, so the test needs no second environment.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fedbound.extras import EXTRAS, extra_of, hint, require

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = str(REPO / "examples" / "nbafl_logistic.toml")

BLOCKER = """
import sys

BLOCKED = {blocked!r}


class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""

ALL_EXTRAS = sorted({m for modules in EXTRAS.values() for m in modules})


def _cli(args: list[str], tmp_path: Path, blocked: list[str] = (), code: str | None = None
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "200"}
    if blocked:
        site = tmp_path / "blocker"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked)))
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "fedbound", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


# Every registered command with arguments that would start real work; the extra it needs (None: none).
# A command missing here fails test_every_command_is_listed, so a new command gets its case.
CASES: dict[str, tuple[list[str], str | None]] = {
    "account": (["account", "--sigma", "2.0", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], None),
    "calibrate": (["calibrate", "--eps", "2", "--q", "0.1", "--steps", "10", "--delta", "1e-5"], None),
    "papers": (["papers"], None),
    "data": (["data", "list"], "train"),
    "plan": (["plan", "nbafl", EXAMPLE], None),
    "claims": (["claims", "nbafl", "--help"], None),
    "plot": (["plot", "nbafl", "--help"], None),
    "schedule": (["schedule", "--help"], None),
    "crd": (["crd", "replay", "--help"], None),
    "train": (["train", "nbafl", EXAMPLE, "--set", "T=1", "--out", "run"], "train"),
    "sweep": (["sweep", "nbafl", EXAMPLE, "--vs", "T", "--values", "1,2", "--out", "sw"], "train"),
    "estimate": (["estimate", "nbafl", EXAMPLE, "--rounds", "1"], "train"),
    "validate": (["validate", "nbafl", EXAMPLE, "--vs", "T", "--values", "1,2", "--seeds", "1", "--rounds",
                  "1", "--out", "val"], "train"),
    "audit": (["audit", "nbafl", EXAMPLE], "train"),
    "reproduce": (["reproduce", "nbafl", "fig2", "--scale", "tiny", "--out", "rep"], "train"),
    "report": (["report", "."], "report"),
    "serve": (["serve", "--port", "0"], "explorer"),
    "flower": (["flower", "nbafl", EXAMPLE, "--out", "app"], "flower"),
}


def test_every_command_is_listed():
    from fedbound.cli import app

    registered = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert registered == set(CASES)


@pytest.mark.parametrize("name", [n for n, (_, extra) in CASES.items() if extra is not None])
def test_missing_extra_is_one_line(name, tmp_path):
    args, extra = CASES[name]
    done = _cli(args, tmp_path, blocked=ALL_EXTRAS)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    # fedbound is installed editable from this checkout, which is not the working folder here
    assert lines[0].endswith(f"install the {extra} extra: {shlex.quote(sys.executable)} -m pip install -e "
                             f"'{REPO}[{extra}]'") or lines[0].endswith(f"pip install -e '{REPO}[{extra}]'")
    assert lines[0].startswith(f"error: fedbound {name} needs ")
    assert not any(p.name != "blocker" for p in tmp_path.iterdir())  # stopped before writing anything


@pytest.mark.parametrize("name", [n for n, (_, extra) in CASES.items() if extra is None])
def test_core_commands_run_without_extras(name, tmp_path):
    args, _ = CASES[name]
    done = _cli(args, tmp_path, blocked=ALL_EXTRAS)
    assert done.returncode == 0, done.stderr[-2000:]


def test_plan_imports_neither_torch_nor_pandas(tmp_path):
    code = "\n".join(["import json, sys", "from fedbound.cli import main",
                      f"code = main(['plan', 'nbafl', {EXAMPLE!r}, '--json'])",
                      "heavy = sorted(m for m in ('torch', 'pandas') if m in sys.modules)",
                      "print(json.dumps({'code': code, 'heavy': heavy}))"])
    done = _cli([], tmp_path, code=code)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last == {"code": 0, "heavy": []}, done.stderr[-2000:]


def test_hint_helpers(monkeypatch):
    import shutil

    assert extra_of("torch.nn") == "train"
    assert extra_of("plotly") == "report"
    assert extra_of("numpy") is None and extra_of(None) is None
    monkeypatch.chdir(REPO)  # the checkout fedbound is installed from (editable), with its pip on PATH
    monkeypatch.setattr(shutil, "which", lambda name: str(Path(sys.prefix) / "bin" / name))
    assert hint("sweep", "torch", "train") == ("fedbound sweep needs torch: install the train extra: "
                                               "pip install -e '.[train]'")
    require("train", "train")  # installed in the test environment: no error
    import importlib.util

    from fedbound.errors import ConfigError

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"fedbound audit needs torch: .*pip install -e '\.\[train\]'$"):
        require("train", "audit")


class _Install:
    """A stand-in for ``importlib.metadata.distribution("fedbound")`` with a given PEP 610 record."""

    def __init__(self, record):
        self.record = record

    def read_text(self, name):
        return None if self.record is None else json.dumps(self.record)


@pytest.mark.parametrize(("record", "where", "pip_on_path", "expected"), [
    # make demo's install: editable from the checkout, run in the checkout with .venv activated
    ({"url": "file://{repo}", "dir_info": {"editable": True}}, ".", True, "pip install -e '.[train]'"),
    # the same, from a folder below the checkout, .venv not activated
    ({"url": "file://{repo}", "dir_info": {"editable": True}}, "docs", False,
     "{python} -m pip install -e '{repo}[train]'"),
    # CI's core-only venv: `pip install .` (not editable) in the checkout, run elsewhere
    ({"url": "file://{repo}", "dir_info": {}}, "/", False, "{python} -m pip install '{repo}[train]'"),
    # the checkout is below the working folder
    ({"url": "file://{repo}", "dir_info": {}}, "..", True, "pip install './{name}[train]'"),
    # installed from an index (a wheel): the package name
    ({"url": "https://example.org/fedbound-0.1.0-py3-none-any.whl", "archive_info": {}}, ".", True,
     "pip install 'fedbound[train]'"),
])
def test_install_command_names_the_checkout_fedbound_came_from(monkeypatch, record, where, pip_on_path,
                                                               expected):
    import shutil
    from importlib import metadata

    from fedbound.extras import install_command

    monkeypatch.setattr(metadata, "distribution", lambda name: _Install(json.loads(
        json.dumps(record).replace("{repo}", str(REPO)))))
    monkeypatch.setattr(shutil, "which", lambda name: str(Path(sys.prefix) / "bin" / name) if pip_on_path
                        else "/usr/bin/pip")
    monkeypatch.chdir(REPO / where if where != "/" else "/")
    below = os.path.abspath(sys.executable).startswith(os.getcwd() + os.sep) and os.getcwd() != "/"
    python = os.path.relpath(sys.executable) if below else os.path.abspath(sys.executable)
    assert install_command("train") == expected.format(repo=REPO, name=REPO.name, python=python)


def test_install_command_of_a_checkout_that_is_gone_is_the_package_name(monkeypatch, tmp_path):
    """An install record pointing at a folder that no longer holds the project says the package name."""
    from importlib import metadata

    from fedbound.extras import install_command

    record = {"url": f"file://{tmp_path / 'moved'}", "dir_info": {"editable": True}}
    monkeypatch.setattr(metadata, "distribution", lambda name: _Install(record))
    assert install_command("flower") == "pip install 'fedbound[flower]'"
