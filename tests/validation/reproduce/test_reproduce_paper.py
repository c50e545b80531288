"""``fedbound reproduce --scale paper``: every figure's paper setting is a valid sweep on the full MNIST of
the data cache (a stand-in file here: no dataset in the repository), names what it assumes, needs what it
needs, and a missing dataset leaves that figure "needs ..." while the others run.  The runs themselves take
hours (docs/paper_scale.py); these checks take seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbound.training import fetch
from fedbound.validation import reproduce as rep
from fedbound.validation.reproduce import (
    MissingData,
    PaperScale,
    Reproduction,
    Target,
    Uncovered,
    find,
    reproduce,
    specs,
    targets,
    toml_text,
)
from fedbound.validation.reproduce.validate import ValidateFigure

FIGURES = [t for t in targets() if not isinstance(t, Uncovered)]
TRAINING = [t for t in FIGURES if isinstance(t, Target)]
IDS = [f"{t.paper}-{t.figure}" for t in TRAINING]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A data cache whose mnist.npz exists (specs only check that it is there; nothing loads it)."""
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path / "cache"))
    fetch.data_dir().mkdir(parents=True)
    fetch.cached_path("mnist").write_bytes(b"stand-in")
    return fetch.data_dir()


@pytest.mark.parametrize("target", TRAINING, ids=IDS)
def test_every_paper_setting_is_a_valid_sweep_with_three_seeds(target, cache, tmp_path):
    size = target.scale("paper")
    assert isinstance(size, PaperScale) and size.seeds >= 3  # the issue: at least 3 seeds per compared curve
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    if size.dataset != "mnist":  # CIFAR-10 / IPUMS-US: not in this cache
        with pytest.raises(MissingData) as info:
            specs(target, config, "paper")
        assert info.value.what in ("CIFAR-10", "IPUMS-US")
        return
    runs = specs(target, config, "paper")
    assert len(runs) == len(target.cases_at("paper")) * size.seeds
    assert len({r.key for r in runs}) == len(runs), "two cases make the same run"
    prep = runs[0].prepare()
    assert prep.train["dataset"] == "mnist"
    assert size.assumptions, "a paper-scale setting names what the paper does not state"
    labels = set(target.labels)
    assert all(set(c.labels) <= labels for c in target.cases_at("paper"))


def test_the_paper_settings_follow_the_papers(cache, tmp_path):
    """Spot checks against the papers' Sec. VI / 5 / V / VII settings (values typed from the papers)."""
    def setting(paper, figure, **labels):
        target = find(paper, figure)
        config = tmp_path / f"{paper}_{figure}.toml"
        config.write_text(toml_text(target.config))
        spec = next(s for s in specs(target, config, "paper") if all(s.label.get(k) == v
                                                                        for k, v in labels.items()))
        prep = spec.prepare()
        return prep.setting, prep.train, prep.rounds

    s, t, rounds = setting("nbafl", "fig2", eps=50.0)
    assert (s["N"], s["m"], rounds, t["hidden"], s["delta"], s["sensitivity"]) == (50, 100, 25, 256, 0.01,
                                                                                     "paper")
    assert setting("nbafl", "fig3", eps=6.0)[0]["m"] == 512
    assert setting("nbafl", "fig4", eps=50.0)[0]["K"] == 20
    s, t, rounds = setting("udp", "fig8", crd=False, eps=4.0)
    assert (s["N"], s["K"], s["m"], rounds, s["zeta"], t["hidden"]) == (50, 30, 800, 200, 0.001, 256)
    s, t, rounds = setting("adaptive", "fig3")
    assert (s["N"], rounds, t["lr"], s["sizes"], s["sensitivity"]) == (60, 30, 0.02, "150,150,150", "paper")
    s, t, rounds = setting("dppfl", "fig2", eps=2.0)
    assert (s["N"], s["targets"], rounds, s["eta"], s["beta"], t["hidden"], t["samples_per_class"]) == \
        (30, 20, 200, 0.01, 0.01, 200, 200)
    s, t, _ = setting("wpfl", "fig3", policy="proposed")
    assert (s["N"], s["K"], s["T"], s["q"], s["C"], t["local_steps"]) == (20, 10, 20, 0.01, 3.0, 1)


def test_every_reproduction_run_gets_the_shared_train_keys(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(rep, "REPRODUCTION_TRAIN", ("train.eval_every=3",))
    target = find("nbafl", "fig2")
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    for scale in ("tiny", "demo", "paper"):
        for run in specs(target, config, scale):
            assert run.overrides[0] == "train.eval_every=3"
            assert run.prepare().train["eval_every"] == 3


def test_without_mnist_every_figure_says_what_it_needs(tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path / "empty"))
    chosen = [find("nbafl", "fig2"), find("dppfl", "fig4")]
    results = reproduce(chosen, tmp_path / "out", scale="paper")
    assert [r.needs for r in results] == ["MNIST", "CIFAR-10"]
    for r in results:
        assert r.verdicts == [] and not (r.files["needs"].parent / "verdicts.json").exists()
        doc = json.loads(r.files["needs"].read_text())
        assert doc["needs"] == r.needs and [c["id"] for c in doc["claims"]] == [i for i, _ in
                                                                                 r.target.statements()]
        lines = r.lines()
        assert len(lines) == len(r.target.claims) + 1
        assert all(f"needs {r.needs}, not run" in line for line in lines[:-1])
        assert "fedbound data" in lines[-1]  # how to get it
    assert "fedbound data mnist" in json.loads(results[0].files["needs"].read_text())["message"]


def test_cifar10_figures_run_from_the_cache_when_it_is_there(cache, tmp_path):
    fetch.cached_path("cifar10").write_bytes(b"stand-in")
    target = find("udp", "fig11")
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    runs = specs(target, config, "paper")
    assert {r.prepare().train["dataset"] for r in runs} == {"cifar10"}
    assert all(r.prepare().train["data_path"] is None for r in runs)


def test_a_data_folder_still_reads_the_mnist_idx_files(tmp_path):
    target = find("nbafl", "fig2")
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    with pytest.raises(Exception, match="missing train-images-idx3-ubyte"):
        specs(target, config, "paper", data=tmp_path)


def test_paper_scale_lines_name_the_assumptions():
    target = find("nbafl", "fig2")
    result = Reproduction(target, "paper", [], {}, assumptions=target.paper_scale.assumptions,
                          notes=["theorem: the premises fail at the measured constants: P = 3"])
    lines = result.lines()
    assert lines[0] == "nbafl fig2: theorem: the premises fail at the measured constants: P = 3"
    assert [line.split("assumed: ")[1] for line in lines[1:]] == list(target.paper_scale.assumptions)


@pytest.mark.parametrize("target", [t for t in FIGURES if isinstance(t, ValidateFigure)],
                         ids=lambda t: f"{t.paper}-{t.figure}")
def test_predicted_vs_measured_at_paper_scale_runs_the_papers_own_setting(target, cache, tmp_path,
                                                                           monkeypatch):
    """Every paper has one; at paper scale it validates on the paper's model and MNIST (validate itself is
    replaced here by a stand-in that records its arguments)."""
    import fedbound.validation.estimate.validate as vd

    seen = {}

    def stand_in(paper, config, **kw):
        seen.update(kw, paper=paper, config=Path(config).read_text())
        raise RuntimeError("recorded")

    monkeypatch.setattr(vd, "validate", stand_in)
    folder = tmp_path / "f"
    folder.mkdir()
    with pytest.raises(RuntimeError, match="recorded"):
        target.run(folder, "paper")
    assert seen["paper"] == target.paper and seen["values"] == list(target.paper_values)
    assert seen["rounds"] == target.paper_estimate_rounds
    assert 'train.dataset="mnist"' in seen["overrides"] and seen["seeds"] >= 3
    assert target.paper_scale.assumptions


def test_every_paper_has_a_predicted_vs_measured_figure():
    from fedbound.registry import papers

    assert {t.paper for t in FIGURES if isinstance(t, ValidateFigure)} == set(papers())
