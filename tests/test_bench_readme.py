"""README's performance block is generated from the committed bench/results/all.json (issue 25 item 5), and
bench/run_all.py finds every benchmark script with its quick arguments."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_readme_block_is_what_the_committed_json_renders():
    render = _load("render_readme")
    readme = (BENCH.parent / "README.md").read_text()
    result = json.loads((BENCH / "results" / "all.json").read_text())
    assert render.replace_block(readme, render.render(result)) == readme, \
        "README's bench block is stale: run `python bench/render_readme.py`"
    block = readme.split(render.BEGIN)[1].split(render.END)[0]
    assert result["date"] in block and str(result["machine"]["cores"]) in block
    for name, entry in result["benchmarks"].items():  # every benchmark with a headline has its line
        if render.headline(name, entry):
            assert render.headline(name, entry) in block


def test_render_leaves_out_failed_benchmarks_and_missing_keys():
    render = _load("render_readme")
    result = {"date": "D", "git_commit": "abc+dirty", "machine": {"cpu_model": "cpu", "cores": 2},
              "load_before": [1.0], "load_after": [2.0], "quick": False,
              "benchmarks": {"a": {"status": "ok", "headline": "A is {x:.1f}x", "figures": {"x": 2.25}},
                             "b": {"status": "failed (exit status 1)", "headline": "B {x}", "figures": {}},
                             "c": {"status": "ok", "headline": "C {missing}", "figures": {"x": 1}}}}
    text = render.render(result)
    assert "- A is 2.2x" in text and "B " not in text and "C " not in text and "abc+dirty" in text
    with pytest.raises(SystemExit):
        render.replace_block("no markers here", text)


def test_run_all_discovers_benchmarks_and_their_quick_arguments():
    run_all = _load("run_all")
    found = run_all.discover()
    assert {"calibrate_orders", "accounting", "plan"} <= set(found)
    assert not {"run_all", "render_readme", "_harness"} & set(found)
    assert run_all.quick_args(found["accounting"]) == ["--opacus-points", "50"]  # its QUICK_ARGS
    assert run_all.quick_args(found["calibrate_orders"]) == ["--quick"]  # reads the flag itself
