"""UDP's figure targets (seed 003 Sec. 5): every figure claim is reproduced (Fig. 2's by its bound); the
stand-ins say what they are; Lei's runs stop early at the same budget; --scale paper reads the user's data."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fedbound.errors import ConfigError
from fedbound.validation.reproduce import Target, Uncovered, find, reproduce, specs, targets, toml_text, udp

NEW = ("fig4", "fig7", "fig8-lei", "fig11")


def test_no_figure_claim_is_uncovered():
    entries = targets("udp")
    assert [u.figure for u in entries if isinstance(u, Uncovered)] == []
    assert set(NEW) <= {t.figure for t in entries if isinstance(t, Target)}


@pytest.mark.parametrize("figure,stand_in,dataset", [("fig4", "synthetic logistic", "csv"),
                                                     ("fig11", "8x8 digits", "cifar10")])
def test_stand_ins_say_what_they_are_and_paper_scale_names_the_real_data(figure, stand_in, dataset):
    target = find("udp", figure)
    assert f"stand-in: {stand_in}" in target.title
    assert target.paper_scale.dataset == dataset


def test_baseline_cases_are_original_lei_and_crd():
    methods = {c.labels["method"]: c.overrides for c in udp.METHODS}
    assert methods == {"original": ("crd=false", "lei=false"), "lei": ("lei=true",), "crd": ("crd=true",)}


def test_fig4_paper_scale_reads_the_users_csv(tmp_path):
    target = find("udp", "fig4")
    config = tmp_path / "config.toml"
    config.write_text(toml_text(target.config))
    with pytest.raises(ConfigError, match="needs --data: an IPUMS-US extract as one CSV file"):
        specs(target, config, "paper")
    with pytest.raises(ConfigError, match="is not a file"):
        specs(target, config, "paper", data=tmp_path / "missing.csv")
    extract = tmp_path / "ipums.csv"
    extract.write_text("age,sex,label\n" + "".join(f"{20 + i},{i % 2},{i % 3 == 0:d}\n" for i in range(9)))
    runs = specs(target, config, "paper", data=extract)
    assert len(runs) == len(target.cases) * target.paper_scale.seeds
    assert 'train.dataset="csv"' in runs[0].overrides and "N=50" in runs[0].overrides


def test_fig8_lei_tiny_lei_stops_before_original(tmp_path):
    """T = 3 at tiny size: Lei (decay 0.5) runs 2 rounds (1 + 1/(5/6)^2 + 1/(2/3)^2 > 3), the others 3 or
    fewer (CRD may discount); the verdict lines keep the reproduce format."""
    result = reproduce(find("udp", "fig8-lei"), tmp_path, scale="tiny")[0]
    assert not result.failed
    table = pd.read_csv(result.files["csv"])
    last = table.groupby(["method", "eps"])["round"].max().unstack(0)
    assert (last["lei"] == 2).all() and (last["original"] == 3).all() and (last["crd"] <= 3).all()
    assert result.privacy is not None and "not (ε, δ)-DP" in result.privacy  # the paper's sigma at T = 3
    for line in result.lines()[:-1]:
        assert re.match(r"^udp fig8-lei: F8L-\d+ (holds in 1/1 seeds|does not hold \(in 0/1 seeds\)), "
                        r"effect size \S+ .*: CRD improves on Lei's decaying noise at eps_p = \d+$", line), \
            line
