"""Issue 8's command-level cases (plan / plot / claims over the registry): each ends in one line naming the
input and exit code 2, never a traceback, a NaN or a success that did nothing."""

from pathlib import Path

import pytest

from fedbound.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "nbafl_mnist.toml")


@pytest.mark.parametrize("args, named", [
    (["claims", "nbafl", "--points", "0"], "--points"),
    (["claims", "nbafl", "--seed", "-1"], "--seed"),
    (["plan", "nbafl", EXAMPLE, "--variant", ""], "--variant"),
    (["plan", "nbafl", EXAMPLE, "--variant", "nope"], "variant"),
    (["plan", "nbafl", EXAMPLE, "--set", "K=51"], "K"),
    (["plan", "nbafl", EXAMPLE, "--set", "T=2.5"], "T"),
    (["plan", "nbafl", EXAMPLE, "--set", "T=1e308"], "T"),
    (["plan", "nbafl", EXAMPLE, "--set", "m=9223372036854775807"], "m"),
    (["plan", "nbafl", EXAMPLE, "--set", "nbafll.eps=60"], "nbafll"),
    (["plan", "nbafl", EXAMPLE, "--set", "train.eps=60"], "eps"),
    (["plot", "nbafl", EXAMPLE, "--out", ""], "--out"),
    (["plot", "nbafl", EXAMPLE, "--out", "/proc/x.png"], "--out"),
    (["plot", "nbafl", EXAMPLE, "--vs", "C"], "--vs"),
    (["account", "--sigma", "0", "--q", "0.4", "--steps", "25", "--delta", "0.01"], "--sigma"),
    (["calibrate", "--eps", "6", "--delta", "0.01", "--q", "0.4", "--steps", "25", "--sensitivity", "1e308",
      "--no-pld", "--no-wor"], "--sensitivity"),
    (["calibrate", "--mechanism", "dppfl", "--eps", "1e308", "--delta", "1e-5", "--q", "1", "--steps", "5"],
     "--eps"),
    (["calibrate", "--mechanism", "dppfl", "--eps", "2", "--delta", "1e-5", "--q", "1", "--steps", "5",
      "--tau0", "0"], "--tau0"),
    (["calibrate", "--eps", "1", "--delta", "0.001", "--q", "0.5", "--steps", "20", "--clip", "0"], "--clip"),
])
def test_bad_command_line_is_one_line_naming_the_input(capsys, args, named):
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], err
    assert "nan" not in lines[0].lower().split() and "Traceback" not in err
