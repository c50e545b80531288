"""The paper registry and the generic face over it: every registered paper, every command it supports.

Parametrised over ``fedbound.registry``: registering a paper adds it here without editing this file.
"""

import json

import pytest

from fedbound import registry
from fedbound.cli import main
from fedbound.errors import ConfigError

PAPERS = list(registry.papers())
PLANNERS = list(registry.names("plan"))
PLOTTERS = list(registry.names("plot"))


def _sets(values):
    return [a for k, v in values.items() for a in ("--set", f"{k}={v}")]


def test_registry_holds_nbafl_and_the_simulator_papers():
    assert {"nbafl", "udp", "dppfl", "adaptive", "wpfl"} <= set(PAPERS)
    assert "nbafl" in PLANNERS
    assert set(registry.names("train")) >= {"nbafl", "udp", "dppfl", "adaptive", "wpfl"}


@pytest.mark.parametrize("name", PAPERS)
def test_entry_is_complete(name):
    p = registry.get(name)
    assert p.name == name and p.seed.isdigit() and p.title and p.authors and str(p.year) in p.citation
    assert p.config_section.name == name
    for key in p.keys():
        assert key["domain"] and key["meaning"], f"{name}.{key['key']} needs a domain and a meaning"
    for what in ("noise", "planner", "plots", "recipe"):
        if getattr(p, what) is not None:
            assert p.load(what) is not None


def test_papers_command_lists_every_paper_with_its_keys(capsys):
    assert main(["papers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in out["papers"]] == PAPERS
    nbafl = next(p for p in out["papers"] if p["name"] == "nbafl")
    keys = {k["key"]: k for k in nbafl["keys"]}
    assert keys["eps"]["domain"] == "[1e-06, 1000000]" and keys["N"]["required"]
    assert not keys["Theta"]["required"]
    assert keys["N"]["domain"] == "integer in [1, 100000]"
    assert keys["Theta"]["default"] == 2.0 and "plan" in nbafl["supports"]
    assert main(["papers"]) == 0
    text = capsys.readouterr().out
    assert "NbAFL" in text and all(name in text for name in PAPERS)


def test_help_lists_the_registered_papers(capsys):
    assert main(["plan", "--help"]) == 0
    text = capsys.readouterr().out
    for name in PLANNERS:
        assert name in text


def test_unknown_paper_is_one_line_with_a_suggestion(capsys):
    assert main(["plan", "nbafll", "--set", "N=5"]) == 2
    err = capsys.readouterr().err
    assert "nbafll" in err and "did you mean 'nbafl'" in err
    with pytest.raises(ConfigError, match="has no"):
        registry.get(PAPERS[0], "no-such-capability")


@pytest.mark.parametrize("name", PLANNERS)
def test_plan_through_the_registry(capsys, name):
    p = registry.get(name)
    assert p.example, f"{name} needs an example setting to plan"
    assert main(["plan", name, *_sets(p.example), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # the JSON encoder refuses NaN/inf
    rec = out["recommendation"]
    assert out["paper"] == name and isinstance(rec["T"], int) and rec["T"] >= 1
    sigmas = [x for v in rec["sigma"].values() for x in (v if isinstance(v, list) else [v])]
    assert sigmas and all(x is None or x >= 0 for x in sigmas)  # per stage, or per client
    assert rec["accounting"] and rec["why"]
    assert set(out["assumed"]) == set(p.defaults) - set(p.example)
    assert main(["plan", name, *_sets(p.example)]) == 0
    assert "Recommendation" in capsys.readouterr().out


@pytest.mark.parametrize("name", PLOTTERS)
def test_plot_every_axis_through_the_registry(tmp_path, capsys, name):
    p = registry.get(name)
    for vs in p.load("plots"):
        out = tmp_path / f"{name}_{vs}.png"
        assert main(["plot", name, *_sets(p.example), "--vs", vs, "--out", str(out), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
        assert data["curves"] and all(len(c["x"]) == len(c["y"]) for c in data["curves"])


def test_a_capability_a_paper_lacks_is_a_clear_error(capsys, monkeypatch):
    import dataclasses

    monkeypatch.setitem(registry._REGISTRY, "nbafl", dataclasses.replace(registry.get("nbafl"), planner=None))
    assert main(["plan", "nbafl", "--set", "eps=1"]) == 2
    assert "has no plan" in capsys.readouterr().err


@pytest.mark.parametrize("name", PAPERS)
def test_every_paper_is_documented(name):
    """docs/papers.md lists every registered paper; its section names the paper and lists its errata."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    assert f"`{name}`" in (docs / "papers.md").read_text(encoding="utf-8")
    section = (docs / "papers" / f"{name}.md").read_text(encoding="utf-8")
    assert registry.get(name).title.split(":")[0] in section.replace("\n", " ")


def test_every_formula_cites_its_paper_as_the_registry_does():
    """A formula's source prints the registry's short citation (bounds/*_theory.py keep their own copy, since
    bounds may not import the registry): the two never drift apart."""
    import importlib

    from fedbound.registry import papers

    for entry in papers().values():
        theory = importlib.import_module(f"fedbound.bounds.{entry.name}_theory")
        assert theory.SEED == entry.seed and theory.SHORT == entry.short, entry.name
        source = next(t.source for t in vars(theory).values() if hasattr(t, "source") and hasattr(t, "lhs"))
        assert str(source).startswith(entry.short + ", ")
