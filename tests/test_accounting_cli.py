"""fedbound account / fedbound calibrate: every method in one table or one JSON object."""

import json
import math

import pytest

from fedbound.accounting import calibrate_noise, epsilon
from fedbound.cli import main


def _json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_calibrate_json_nbafl_setting(capsys):
    out = _json(capsys, "calibrate", "--eps", "6", "--delta", "0.01", "--q", "0.4", "--steps", "25",
                "--sensitivity", "2", "--no-pld")
    rows = {r["method"]: r for r in out["rows"]}
    assert set(rows) == {"classic", "classic+bbg", "moments", "udp-thm1", "analytic", "rdp", "rdp-wor"}
    classic = math.sqrt(2 * math.log(1.25 * 25 / 0.01)) * 25 / 6  # eps/T = 0.24 < 1: proven
    assert rows["classic"]["value"] == pytest.approx(classic, rel=1e-12) and rows["classic"]["valid"] is True
    assert rows["classic"]["sigma"] == pytest.approx(2 * classic, rel=1e-12)
    rdp = calibrate_noise(6, 0.01, 0.4, 25)
    assert rows["rdp"]["value"] == pytest.approx(rdp, rel=1e-12) and rows["rdp"]["valid"] is True
    assert rows["rdp"]["saving_percent"] == pytest.approx(100 * (1 - rdp / classic), rel=1e-12)
    assert rows["analytic"]["value"] is None  # q < 1
    assert rows["udp-thm1"]["valid"] is False and "eq. (21)" in rows["udp-thm1"]["note"]
    assert "replace-one" in rows["rdp-wor"]["assumes"]


def test_calibrate_at_full_participation_has_the_exact_row(capsys):
    out = _json(capsys, "calibrate", "--eps", "2", "--delta", "1e-5", "--q", "1", "--steps", "100")
    rows = {r["method"]: r for r in out["rows"]}
    assert rows["analytic"]["value"] == pytest.approx(calibrate_noise(2, 1e-5, 1.0, 100, "analytic"))
    assert rows["pld"]["value"] is None and "analytic" in rows["pld"]["note"]
    assert "rdp-wor" not in rows and rows["classic+bbg"]["value"] is None


def test_account_json_and_table(capsys):
    out = _json(capsys, "account", "--sigma", "2.6", "--sensitivity", "2", "--q", "0.4", "--steps", "25",
                "--delta", "0.01", "--no-pld")
    rows = {r["method"]: r for r in out["rows"]}
    assert out["inputs"]["noise_multiplier"] == pytest.approx(1.3)
    assert rows["rdp"]["value"] == pytest.approx(epsilon(1.3, 0.4, 25, 0.01), rel=1e-12)
    assert rows["classic"]["valid"] is False and "eps" in rows["classic"]["note"]  # 3.1 per step >= 1
    assert main(["account", "-z", "1.3", "--q", "0.4", "--steps", "25", "--delta", "0.01", "--no-pld",
                 "--no-wor"]) == 0
    text = capsys.readouterr().out
    assert "RDP, Poisson" in text and "NOT proven" in text and "What each method assumes" in text


def test_calibrate_table_is_readable(capsys):
    args = ["calibrate", "--eps", "6", "--delta", "0.01", "--q", "0.4", "--steps", "25", "--no-pld"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "saving" in text and "+92.2 %" in text and "warning" in text and "sigma_classic" in text


def test_errors_are_one_line_exit_2(capsys):
    assert main(["account", "--sigma", "1", "-z", "1", "--q", "0.4", "--steps", "25", "--delta", "0.01"]) == 2
    assert "sigma" in capsys.readouterr().err
    assert main(["calibrate", "--eps", "6", "--delta", "2", "--q", "0.4", "--steps", "25"]) == 2
    assert "delta" in capsys.readouterr().err


def test_quantized_gaussian_is_a_method_of_calibrate_and_account(capsys):
    """WPFL's Theorem 1 as a row (with --clip C --bits R): the same numbers as fedbound.accounting, never
    marked proven (its delta is per outcome)."""
    import json

    from fedbound.accounting import calibrate_sigma_dp, qa_gaussian_epsilon
    from fedbound.cli import main

    assert main(["calibrate", "--eps", "1", "--delta", "0.001", "--q", "0.5", "--steps", "20", "--clip", "3",
                 "--bits", "16", "--sensitivity", "6", "--no-pld", "--no-wor", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["rows"] if r["method"] == "quantized_gaussian")
    assert row["sigma"] == pytest.approx(calibrate_sigma_dp(1.0, 0.001, 3.0, 16, 0.5, 20), rel=1e-12)
    assert row["valid"] is False
    assert main(["account", "--sigma", "4.72", "--sensitivity", "6", "--q", "0.5", "--steps", "20", "--delta",
                 "0.001", "--clip", "3", "--no-pld", "--no-wor", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["rows"] if r["method"] == "quantized_gaussian")
    assert row["value"] == pytest.approx(qa_gaussian_epsilon(0.001, 3.0, 4.72, 16, 0.5, 20), rel=1e-12)


def test_calibrate_has_dppfl_theorem1_with_the_planners_sigma(capsys):
    """`calibrate --mechanism dppfl` gives the sigma* the DP-PFL planner uses (Theorem 1 on Opacus' orders),
    beside the one-mechanism calibration on the default grid (spec 000 setting A: 3.34841 vs 3.3581)."""
    import json

    from fedbound.bounds.dppfl import rdp_pfl_noise_multiplier
    from fedbound.cli import main

    args = ["calibrate", "--mechanism", "dppfl", "--eps", "2", "--delta", "1e-5", "--q", "1", "--steps", "50",
            "--tau0", "3", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sigma"] == pytest.approx(rdp_pfl_noise_multiplier(2.0, 1e-5, 50, 3, 1.0, 1.0), rel=1e-12)
    assert out["sigma_default_orders"] >= out["sigma"] * (1 - 1e-9)
    assert main(["calibrate", "--mechanism", "nope", "--eps", "2", "--delta", "1e-5", "--q", "1",
                 "--steps", "5"]) == 2
    assert "--mechanism" in capsys.readouterr().err
