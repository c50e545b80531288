"""Issue 25 item 3 / issue 26 item 7: the CLI imports torch and pandas only where a command needs them, and
every command that needs an optional extra says which one in one line (exit code 2) when it is missing.

Each case runs the CLI in a fresh interpreter; "not installed" is simulated by a ``sys.meta_path`` blocker
in a ``sitecustomize`` put first on ``PYTHONPATH``, so the test needs no second environment.
"""

from __future__ import annotations

import json
import os
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
    assert f"pip install 'fedbound[{extra}]'" in lines[0]
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
    assert extra_of("torch.nn") == "train"
    assert extra_of("plotly") == "report"
    assert extra_of("numpy") is None and extra_of(None) is None
    assert hint("sweep", "torch", "train") == ("fedbound sweep needs torch: install the train extra: "
                                               "pip install 'fedbound[train]'")
    require("train", "train")  # installed in the test environment: no error
    import importlib.util

    from fedbound.errors import ConfigError

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"fedbound audit needs torch: .*fedbound\[train\]"):
        require("train", "audit")
