"""``fedbound flower --run`` on Flower's simulation engine (flwr 1.42's Ray backend, 4 virtual SuperNodes,
3 rounds): with ``--reproducible-noise`` the run directory has the numbers of ``fedbound train`` on the same
plan; without it the noise is drawn in the Ray workers from OS entropy: not the seed's, and different in
two runs of the same app and seed (the second run only in the ``FEDBOUND_AUDIT_SUITE=full`` profile that
``.ci/run`` sets: each Ray start costs ~25 s), and the clients keep their uploads in the run directory."""

from __future__ import annotations

import json
import os

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
def test_flower_simulation_engine_run_matches_fedbound_train_and_deployed_noise_does_not(tmp_path, capsys):
    """Seeded run (--reproducible-noise): fedbound train's numbers.  Deployed runs of the same app and seed:
    the same ledger epsilon, other losses from round 1 on (other noise), each run other noise than the
    others (the second deployed run: full profile)."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    assert main(["train", "nbafl", str(config), "--out", str(tmp_path / "train"), "--no-progress",
                 "--json"]) == 0
    assert main(["flower", "nbafl", str(config), "--run", "--supernodes", "4", "--out",
                 str(tmp_path / "flower"), "--reproducible-noise", "--json"]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "flower" / "summary.json").read_text())
    a, b = _rounds(tmp_path / "flower"), _rounds(tmp_path / "train")
    assert summary["rounds_done"] == len(a) == len(b) == 3
    np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
    np.testing.assert_array_equal(a["participants"], b["participants"])
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
    assert a["epsilon_flower"].notna().all()
    assert summary["warnings"][0].startswith("noise reproducible from the seed: simulation only")
    runs = [a]
    for name in ("one", "two") if os.environ.get("FEDBOUND_AUDIT_SUITE") == "full" else ("one",):
        assert main(["flower", "nbafl", str(config), "--run", "--out", str(tmp_path / name), "--json"]) == 0
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["noise_source"] == "os-entropy" and summary["rounds_done"] == 3
        assert any((tmp_path / name / "client-store").rglob("round-000002.npz"))
        runs.append(_rounds(tmp_path / name))
    capsys.readouterr()
    for i, first in enumerate(runs):
        for other in runs[i + 1:]:
            np.testing.assert_array_equal(first["epsilon_spent"], other["epsilon_spent"])
            assert (np.abs(first["loss"] - other["loss"]) > 1e-6).all()
    assert main(["flower", "nbafl", str(config), "--run", "--supernodes", "3", "--out",
                 str(tmp_path / "other")]) == 2
    assert "--supernodes = 3 is outside its valid range" in capsys.readouterr().err
