"""docs/paper_scale.py, the Paper scale page's driver: its run order and the page it renders from a results
folder.  Nothing trains here: the results folder is written by the test (one judged figure, one figure that
needs CIFAR-10, the rest not run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fedbound.training import fetch

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def driver():
    spec = importlib.util.spec_from_file_location("paper_scale_driver", REPO / "docs" / "paper_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_cheapest_first_reaches_every_paper_before_finishing_any(driver):
    items = [("a", 500), ("a", 100), ("b", 300), ("c", 0), ("b", 900), ("c", 400), ("b", 0)]
    # by hand: the free ones (no rounds), then each paper's cheapest, then each paper's second
    assert driver.cheapest_first(items, lambda i: i) == [
        ("b", 0), ("c", 0), ("a", 100), ("b", 300), ("c", 400), ("a", 500), ("b", 900)]


def _figure(out: Path, paper: str, figure: str, doc: dict) -> None:
    folder = out / paper / figure
    folder.mkdir(parents=True)
    (folder / ("needs.json" if doc.get("needs") else "verdicts.json")).write_text(json.dumps(doc))


def test_the_page_judges_what_ran_and_lists_the_rest_as_not_run(driver, tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path / "cache"))  # no MNIST: no figure's rounds known
    monkeypatch.setattr(driver, "PAGE", tmp_path / "paper-scale.md")
    monkeypatch.setattr(driver, "IMAGES", tmp_path / "images")
    monkeypatch.setattr(driver, "BENCH", tmp_path / "no-bench.json")
    out = tmp_path / "out"
    claim = {"id": "F2a", "statement": "the loss decreases as eps grows", "metric": "loss", "holds": True,
             "seeds_holding": 3, "seeds": 3, "effect": 0.16, "low": 0.15, "high": 0.17,
             "values": {"0": {"eps=50": 0.5, "eps=100": 0.3}, "1": {"eps=50": 0.7, "eps=100": 0.5}}}
    _figure(out, "nbafl", "fig2", {"title": "loss vs round", "claims": [claim], "runs": 12})
    _figure(out, "dppfl", "fig4", {"title": "accuracy", "needs": "CIFAR-10", "message": "needs CIFAR-10",
                                   "claims": [{"id": "F4", "statement": "accuracy grows with eps"}]})
    (out / "timings.json").write_text(json.dumps({"nbafl/fig2": {
        "cpu_s": 342.0, "wall_s": 3102.0, "returncode": 0, "rounds": 300, "finished": "2026-11-28 12:01 UTC",
        "commit": "abc123", "command": f"fedbound reproduce nbafl fig2 --scale paper --out {out}"}}))
    (out / "provenance.json").write_text(json.dumps({"commit": "abc123def456", "started": "then",
                                                     "machine": {"cpu": "x", "cores": 2}}))
    page = driver.render(out).read_text()
    assert "**Verdicts:** 1 claims hold, 0 do not, 1 are not comparable" in page
    # the measured means over seeds beside the claim: eps=50 (0.5 + 0.7) / 2, eps=100 (0.3 + 0.5) / 2
    assert "holds in 3/3 seeds, effect 0.16 (0.15 to 0.17); mean loss: eps=50: 0.6, eps=100: 0.4" in page
    assert "**not comparable (needs CIFAR-10)**" in page
    assert "342 CPU s" in page and "commit `abc123`" in page
    assert "**stopped before every figure ran**" in page
    not_run = page.split("## Not yet run", 1)[1].split("## CPU time per figure")[0]
    assert "not been run at paper scale yet" in not_run
    assert "`fedbound reproduce udp fig8 --scale paper --out " in not_run
    assert "nbafl fig2 " not in not_run and "dppfl fig4 " not in not_run
