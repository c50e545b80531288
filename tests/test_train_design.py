"""``fedbound train --design recommended|paper`` (issue 23, item 9): the run trains the plan's design and says
where every design value came from."""

from pathlib import Path

import pytest

from fedbound.errors import ConfigError
from fedbound.validation.recipes.runner import prepare_run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_default_trains_the_recommended_design_when_T_is_open():
    from fedbound.scheduling.nbafl import plan

    prep = prepare_run("nbafl", EXAMPLES / "nbafl_mnist.toml")
    rec = plan({k: v for k, v in prep.setting.items() if k != "T" and v is not None}).recommendation
    assert prep.rounds == rec.T and prep.train["noise"] == "tight"
    d = prep.design
    assert d["design"] == "recommended" and d["T"] == {"value": rec.T, "source": "recommended by plan"}
    assert "overrides [train] noise = 'paper'" in d["noise"]["source"]
    assert d["sigma_recommended"]["uplink"] == pytest.approx(rec.sigma["uplink"])


def test_design_paper_keeps_the_papers_formulas_and_the_config():
    prep = prepare_run("nbafl", EXAMPLES / "nbafl_mnist.toml", design="paper")
    assert prep.rounds == 5 and prep.train["noise"] == "paper"  # Theorem 2's T* with the paper's noise
    assert prep.design["T"]["source"].startswith("the paper's formula")
    fixed = prepare_run("nbafl", EXAMPLES / "nbafl_mnist.toml", ["nbafl.T=12"])
    assert fixed.design["design"] == "paper" and fixed.rounds == 12
    assert fixed.design["T"]["source"] == "config"


def test_recommended_holds_what_the_config_sets():
    prep = prepare_run("udp", EXAMPLES / "udp_mnist.toml", design="recommended")
    assert prep.rounds == 100 and prep.design["T"]["source"] == "config"  # [udp] T = 100 is the user's
    assert prep.design["K"] == {"value": 30, "source": "config"}
    with pytest.raises(ConfigError, match="--design"):
        prepare_run("udp", EXAMPLES / "udp_mnist.toml", design="best")


def test_padpfl_trains_the_plans_mu_and_p_not_lemma2s_mu_or_a_resolved_p(tmp_path):
    """Issue 23: with T and mu open and weights = "priority", the run deploys the plan's joint (T, mu) optimum
    and the p the plan printed (the priority program solved at the trained T would give another p)."""
    import numpy as np

    from fedbound.scheduling.adaptive import best_mu, plan
    from fedbound.validation.recipes.adaptive import impact_rows, proximal_mu
    from fedbound.validation.recipes.runner import _design_sigma, build_run

    text = (EXAMPLES / "adaptive_mnist.toml").read_text().splitlines()
    drop = ("T = ", "mu = ", "switch_after = ", "ratios = ", "salt_pepper = ")
    lines = [ln for ln in text if not ln.startswith(drop)]
    lines.insert(lines.index("[adaptive]") + 1, 'ratios = "1,3,5"\nweights = "priority"\nscores = "0,1,2"\n'
                 'quality_weight = 0.5\nsalt_pepper = "0.5,0.2,0.05"')
    cfg = tmp_path / "a.toml"
    cfg.write_text("\n".join(lines) + "\n")
    prep = prepare_run("adaptive", cfg)
    rec = plan({k: v for k, v in prep.setting.items()
                if k not in ("T", "mu", "p_planned") and v is not None}).recommendation
    assert prep.design["design"] == "recommended" and prep.rounds == rec.T
    lemma2 = best_mu(1.2, 0.1, 1.0).x  # the documented loss constants A, gamma, rho
    assert abs(rec.extra["mu"] - lemma2) > 1e-3  # the joint optimum is not Lemma 2's mu* here
    assert proximal_mu(prep.setting) == pytest.approx(rec.extra["mu"], rel=1e-12)
    assert prep.design["mu"]["source"].startswith("recommended by plan")
    rows = impact_rows(prep.setting, prep.train, prep.rounds)
    np.testing.assert_allclose(rows, np.tile(rec.extra["p"], (prep.rounds, 1)), rtol=1e-12)
    assert not np.allclose(rows[0], rows[0][0])  # not the uniform p a re-solve at T = rec.T gives
    built = build_run(prep)
    _design_sigma(prep.design, built.plan)
    sources = [v["source"] for v in prep.design["sigma"].values()]
    assert sources and all(src == "recommended by plan" for src in sources)
