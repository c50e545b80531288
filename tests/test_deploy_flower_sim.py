"""``fedbound flower --run`` on Flower's simulation engine (flwr 1.42's Ray backend, 4 virtual SuperNodes,
3 rounds): the run directory has the numbers of ``fedbound train`` on the same plan."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

from fedbound.cli import main  # noqa: E402
from fedbound.tests.test_deploy_flower import NBAFL as TINY  # noqa: E402


def _rounds(path):
    table = pd.read_csv(path / "metrics.csv")
    return table[table.client.isna()].reset_index(drop=True)


@pytest.mark.slow
def test_flower_simulation_engine_run_matches_fedbound_train(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    assert main(["train", "nbafl", str(config), "--out", str(tmp_path / "train"), "--no-progress",
                 "--json"]) == 0
    assert main(["flower", "nbafl", str(config), "--run", "--supernodes", "4", "--out",
                 str(tmp_path / "flower"), "--json"]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "flower" / "summary.json").read_text())
    a, b = _rounds(tmp_path / "flower"), _rounds(tmp_path / "train")
    assert summary["rounds_done"] == len(a) == len(b) == 3
    np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
    np.testing.assert_array_equal(a["participants"], b["participants"])
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
    assert a["epsilon_flower"].notna().all()
    assert main(["flower", "nbafl", str(config), "--run", "--supernodes", "3", "--out",
                 str(tmp_path / "other")]) == 2
    assert "--supernodes = 3 is outside its valid range" in capsys.readouterr().err
