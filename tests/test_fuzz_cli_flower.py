"""The CLI fuzz, grown to ``fedbound flower``'s options (issue 36, item 3): values that an app must never
carry are refused in one line naming the option, its value and the valid range, before anything is written.

Shapes: ``--round-timeout`` non-finite, zero, denormal or overflowing; ``--supernodes`` 0, 10^9 and N + 1;
``--design`` unknown for a registry paper and for a deploy mechanism; an ``--out`` the OS cannot use (5,000
characters); ``--deployment`` unknown or without ``--run``; ``--insecure`` without a deployment;
``--flower-guard`` unknown.  Each case runs through ``tests/_fuzz.py``'s forked workers (the verdict of
``cli_verdict``: exit 2, one error line naming the option); a second test checks, in this process, that no
app folder was created.  ``tests/test_fuzz_cli.py`` fuzzes every option of every command (these included)
with one hostile value each."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr")

from fedbound.cli import main  # noqa: E402
from fedbound.tests._fuzz import cli_verdict, run_cli_cases  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NBAFL = str(ROOT / "examples" / "nbafl_logistic.toml")  # N = 4
DPFEDAVG = str(ROOT / "examples" / "dpfedavg_logistic.toml")

SHAPES = [
    ("--round-timeout", NBAFL, [["--round-timeout", v]
                                for v in ("-inf", "0", "1e-300", "1e400", "nan", "-1")]),
    ("--supernodes", NBAFL, [["--supernodes", v] for v in ("0", "1000000000", "5")]),
    ("--design", NBAFL, [["--design", "x"]]),
    ("--design", DPFEDAVG, [["--design", "x"], ["--design", "recommended"]]),
    ("--out", NBAFL, [["--out", "a" * 5000], ["--out", ""]]),
    ("--deployment", NBAFL, [["--deployment", "x"], ["--deployment", "local"],
                             ["--run", "--deployment", ""]]),
    ("--insecure", NBAFL, [["--insecure"]]),
    ("--flower-guard", NBAFL, [["--flower-guard", "x"], ["--flower-guard", ""]]),
    ("--reproducible-noise", NBAFL, [["--run", "--deployment", "local", "--reproducible-noise"]]),
]


def _cases() -> list[dict]:
    cases = []
    for option, config, variants in SHAPES:
        paper = "dpfedavg" if config == DPFEDAVG else "nbafl"
        for extra in variants:
            argv = ["flower", paper, config, *(["--out", "app"] if "--out" not in extra else []), *extra]
            cases.append({"id": f"flower {paper} {' '.join(a[:20] for a in extra)}", "argv": argv,
                          "names": [option]})
    return cases


def test_flower_options_are_refused_in_one_line_naming_the_option():
    cases = _cases()
    outcomes = run_cli_cases(cases)
    failures = [f"{c['id']}: {why}" for c, o in zip(cases, outcomes, strict=True)
                if (why := cli_verdict(c, o)) is not None or o["code"] != 2]
    assert not failures, "\n".join(failures)
    for case, outcome in zip(cases, outcomes, strict=True):
        if "--round-timeout" in case["argv"] or "--supernodes" in case["argv"]:
            assert "valid range" in outcome["err"], outcome["err"]


@pytest.mark.parametrize("extra", [["--round-timeout", "-inf"], ["--supernodes", "5"],
                                   ["--flower-guard", "x"]])
def test_a_refused_option_writes_no_app(tmp_path, capsys, extra):
    app = tmp_path / "app"
    assert main(["flower", "nbafl", NBAFL, "--out", str(app), *extra]) == 2
    assert extra[0] in capsys.readouterr().err
    assert not app.exists()
