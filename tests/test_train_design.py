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
