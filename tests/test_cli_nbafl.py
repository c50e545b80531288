"""fedbound plan / plot / claims nbafl, end to end through the CLI entry point."""

import json
import shutil
from pathlib import Path

import pytest

from fedbound.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nbafl_mnist.toml"


def _json(capsys, *args):
    assert main(["plan", "nbafl", str(EXAMPLE), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_json_has_the_promised_keys(capsys):
    out = _json(capsys)
    for key in ["sigma_uplink", "sigma_downlink", "T_opt", "bound_at_T_opt", "K_opt", "variant", "warnings",
                "sigma_uplink_tight", "sigma_downlink_tight"]:
        assert key in out
    assert out["K_opt"] is None and out["variant"] == "paper"
    # eps = 6, N = 50, m = 100: spec 002 TV3's setting, T* = 5
    assert out["T_opt"] == 5 and out["T"] == 5 and out["T_source"] == "T_opt"
    assert out["bound_at_T_opt"] == pytest.approx(1.856281572, rel=1e-9)
    assert out["sigma_uplink"] == pytest.approx(0.2071674307, rel=1e-9)
    assert isinstance(out["warnings"], list) and any("E6" in w for w in out["warnings"])


def test_plan_with_overrides_T_and_K(capsys):
    out = _json(capsys, "--set", "K=20", "--set", "T=25")
    assert out["T"] == 25 and out["T_source"] == "config"
    assert out["sigma_downlink"] == pytest.approx(0.09935400946, rel=1e-9)
    assert out["sigma_downlink_k"] == pytest.approx(0.06708478318, rel=1e-9)
    assert out["K_opt"] == 11 and out["K_opt_at_domain_edge"] is True and out["K_opt_is_N"] is False
    assert out["bound_k_at_T"] == pytest.approx(2.542425237, rel=1e-9)


def test_plan_variant_two_sided_moves_K_opt_to_N(capsys):
    out = _json(capsys, "--set", "K=20", "--set", "T=25", "--variant", "two_sided")
    assert out["variant"] == "two_sided" and out["K_opt"] == 50 and out["K_opt_is_N"] is True


def test_plan_eps60_matches_fig7(capsys):
    out = _json(capsys, "--set", "eps=60")
    assert out["T_opt"] == 34 and out["bound_at_T_opt"] == pytest.approx(1.125557213, rel=1e-9)


def test_plan_human_table(capsys):
    assert main(["plan", "nbafl", str(EXAMPLE), "--set", "K=20"]) == 0
    text = capsys.readouterr().out
    assert "NbAFL plan" in text and "T_opt" in text and "K_opt" in text and "warning" in text


def test_plan_errors_are_one_line_with_exit_code_2(capsys):
    assert main(["plan", "nbafl", str(EXAMPLE), "--set", "delta=2"]) == 2
    assert "delta" in capsys.readouterr().err
    assert main(["plan", "nbafl", str(EXAMPLE), "--set", "mu=1"]) == 2
    assert "P" in capsys.readouterr().err
    assert main(["plan", "nbafl", str(EXAMPLE), "--variant", "nope"]) == 2


@pytest.mark.parametrize("vs", ["T", "eps", "N", "K"])
def test_plot_writes_png_and_svg(tmp_path, capsys, vs):
    out = tmp_path / f"fig_{vs}.png"
    assert main(["plot", "nbafl", str(EXAMPLE), "--vs", vs, "--out", str(out), "--set", "K=20"]) == 0
    png, svg = out.with_suffix(".png"), out.with_suffix(".svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "<svg" in svg.read_text()[:500]


def test_plot_json_gives_the_plotted_curves(tmp_path, capsys):
    """--json prints the curves; each point is the Theorem 2 bound at that (T, eps), evaluated afresh."""
    from fedbound.bounds import nbafl as nb

    out = tmp_path / "fig.png"
    assert main(["plot", "nbafl", str(EXAMPLE), "--vs", "T", "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == [str(out.with_suffix(".png")), str(out.with_suffix(".svg"))]
    curves = [c for c in data["curves"] if c["label"].startswith("Thm 2")]
    assert len(curves) == 4
    setting = {k: v for k, v in nb.TV1.items() if k not in ("T", "eps")}
    for curve in curves:
        eps = float(curve["label"].split("=")[-1])
        T, y = curve["x"][5], curve["y"][5]
        assert y == pytest.approx(nb.bound(T, eps, setting["delta"], setting["N"], setting["C"], setting["m"],
                                           setting["Theta"], setting["l"], setting["beta"], setting["rho"],
                                           setting["B"], setting["mu"]), rel=1e-9)


def test_plot_rejects_unknown_axis(tmp_path, capsys):
    assert main(["plot", "nbafl", str(EXAMPLE), "--vs", "C", "--out", str(tmp_path / "x.png")]) == 2


def test_claims_command(capsys):
    assert main(["claims", "nbafl", "--json", "--points", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    status = {c["id"]: c["status"] for c in out["claims"]}
    assert status["S10"] == "holds"
    assert status["S14"] == "fails in region" and status["R5"] == "fails in region"
    assert "CONTRADICTED" not in status.values()
    assert main(["claims", "nbafl", "--points", "2"]) == 0
    assert "fails in region" in capsys.readouterr().out


def test_example_config_is_self_contained(tmp_path, capsys):
    copy = tmp_path / "setting.toml"
    shutil.copy(EXAMPLE, copy)
    assert main(["plan", "nbafl", str(copy), "--json"]) == 0
