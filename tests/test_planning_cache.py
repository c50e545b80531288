"""A plan kept across runs (fedbound.planning.cached_plan): the same answer as computing it, recomputed when
the key or the code changes, and a second `fedbound plan` of a paper loads it without importing scipy,
sympy, torch or pandas (issue 25: cached CLI plan)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fedbound import planning, registry
from fedbound.output import to_jsonable


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDBOUND_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planning, "_PLANS", {})
    return tmp_path


def test_a_kept_plan_is_the_computed_one(fresh):
    paper = registry.get("nbafl")
    setting = paper.load_setting(None, ["N=20", "m=50", "C=10", "eps=5", "delta=0.01"])
    first = planning.plan_for(paper, setting)
    assert list((fresh / "plans").glob("*.pickle"))  # written to disk
    planning._PLANS.clear()  # as a new process: read back from disk
    again = planning.plan_for(paper, setting)
    assert again is not first and to_jsonable(again) == to_jsonable(first)


def test_another_key_or_other_code_recomputes(fresh, monkeypatch):
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return {"v": value}
        return run

    assert planning.cached_plan(("a", 1), compute(1)) == {"v": 1}
    assert planning.cached_plan(("a", 1), compute(99)) == {"v": 1}  # kept
    assert planning.cached_plan(("a", 2), compute(2)) == {"v": 2}  # another setting
    planning._PLANS.clear()
    monkeypatch.setattr(planning, "code_fingerprint", lambda: "edited source")
    assert planning.cached_plan(("a", 1), compute(3)) == {"v": 3}  # the code changed: recomputed
    assert calls == [1, 2, 3]


def test_the_disk_cache_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("FEDBOUND_CACHE_DIR", "")
    monkeypatch.setattr(planning, "_PLANS", {})
    assert planning.cached_plan(("off",), lambda: 5) == 5


def test_the_fingerprint_covers_the_source_files(monkeypatch, tmp_path):
    monkeypatch.setattr(planning, "_PLANS", {})
    before = planning.code_fingerprint()
    monkeypatch.setattr(planning, "_PACKAGES", ("accounting",))
    planning._PLANS.clear()
    assert planning.code_fingerprint() != before


@pytest.mark.parametrize("paper, config", [("wpfl", "wpfl_ridge.toml"), ("udp", "udp_ridge.toml")])
def test_a_second_cli_plan_loads_it_without_heavy_imports(tmp_path, paper, config):
    from fedbound.tests._certified import ROOT

    env = {**os.environ, "FEDBOUND_CACHE_DIR": str(tmp_path)}
    args = ["plan", paper, str(ROOT / "examples" / config), "--json"]
    probe = (f"import sys, json\nfrom fedbound.cli import main\nmain({args!r})\n"
             "print(json.dumps({m: m in sys.modules for m in ('sympy', 'scipy', 'torch', 'pandas')}))")
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    plans = [json.loads("\n".join(r.stdout.splitlines()[:-1])) for r in runs]
    assert plans[0] == plans[1]
    assert json.loads(runs[1].stdout.splitlines()[-1]) == dict.fromkeys(("sympy", "scipy", "torch", "pandas"),
                                                                         False)
