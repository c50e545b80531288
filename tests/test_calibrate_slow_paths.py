"""`fedbound calibrate`'s slow and hanging inputs (issue 26 item 3): each answers (a result, or one line
naming the input) within 10 CPU seconds.  Each case runs in a subprocess under RLIMIT_CPU, so a regression
is a killed process, not a slow test; no wall-clock assertion."""

import json
import resource
import subprocess
import sys

import pytest

CPU_LIMIT_S = 10

CHILD = """
import json, sys, warnings
warnings.simplefilter("ignore")
from fedbound.accounting import calibrate_noise
from fedbound.errors import FedboundError
args, kw = json.loads(sys.argv[1])
try:
    print(json.dumps({"z": calibrate_noise(*args, **kw)}))
except FedboundError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S + 1))


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, preexec_fn=_limited, timeout=600)


def _calibrate(*args, **kw) -> dict:
    proc = _run([sys.executable, "-c", CHILD, json.dumps([args, kw])])
    assert proc.returncode == 0, f"killed or failed (CPU limit {CPU_LIMIT_S} s): {proc.stderr[-500:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pld_at_delta_near_one_answers():
    """eps drops to 0 on the feasible side (KL branch): the search used to creep there one point at a time."""
    out = _calibrate(6.0, 0.999, 0.4, 25, "pld")
    rdp = _calibrate(6.0, 0.999, 0.4, 25, "rdp")
    assert 0 < out["z"] <= rdp["z"]  # PLD is the tighter accountant


def test_without_replacement_at_delta_1e300_is_refused_at_once():
    """dp-accounting's RDP without replacement keeps eps > 6 at any noise here: refused, naming the target."""
    out = _calibrate(6.0, 1e-300, 0.4, 25, sampling="without_replacement")
    assert "target_eps = 6" in out["error"] and "delta = 1e-300" in out["error"]


@pytest.mark.parametrize("method, kw", [("pld", {}), ("rdp", {"sampling": "without_replacement"})])
def test_eps_1000_answers(method, kw):
    out = _calibrate(1000.0, 0.01, 0.4, 25, method, **kw)
    assert 0 < out["z"] < _calibrate(6.0, 0.01, 0.4, 25, "rdp")["z"]  # far less noise than at eps = 6


def test_cli_huge_sensitivity_is_one_line_before_pld_and_wor():
    proc = _run([sys.executable, "-m", "fedbound", "calibrate", "--eps", "6", "--q", "0.4", "--steps", "25",
                 "--delta", "0.01", "--sensitivity", "1e308"])
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--sensitivity = 1e+308" in lines[0], proc.stderr
    assert "(0, " in lines[0]  # the range that works
