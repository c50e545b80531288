"""Fuzz config loading, ``--set`` parsing and the ``account`` / ``calibrate`` commands (issue 8): typed junk,
non-UTF-8 files, bad paths.  Each case ends in a validated config / a finite table, or one line of
ConfigError (ValueError) naming what the user typed, within 10 s."""

from __future__ import annotations

import json
import math
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound.checks import MAX_INT
from fedbound.cli import main
from fedbound.config import Field, Section, load_config
from fedbound.errors import ConfigError
from fedbound.tests._fuzz import EXAMPLES, LONG, check_verdict, time_limit

SETTING = Section("nbafl", (
    Field("N", int, low=1), Field("eps", float, low=0, low_open=True),
    Field("delta", float, 0.01, low=0, high=1, low_open=True, high_open=True),
    Field("K", int, None, low=1, optional=True), Field("variant", str, "a", choices=("a", "two_sided")),
    Field("private", bool, True),
))
TRAIN = Section("train", (Field("lr", float, 0.1, low=0, low_open=True), Field("parts", str, "iid"),
                          Field("hidden", int, 16, low=1, high=65536)))
SECTIONS = [SETTING, TRAIN]

VALUE_TEXT = st.one_of(
    st.sampled_from(["0", "-1", "2.5", "nan", "inf", "-inf", "+inf", "1e308", "1e-308", "1e309",
                     "9223372036854775807", "9223372036854775808", "18446744073709551617", "1" + "0" * 400,
                     "true", "false", '"x"', "'x'", "[1, 2]", "{a = 1}", "", "=", "==", '"', "\x00", "é",
                     "x" * 10_000, "1_000", "0x10", "1979-05-27", "digits", "two_sided"]),
    st.text(max_size=40),
)
KEY_TEXT = st.one_of(
    st.sampled_from(["N", "eps", "delta", "K", "variant", "private", "lr", "parts", "hidden", "nbafl.eps",
                     "nbafll.eps", "train.eps", "train.lr", "udp.T", "eps.x", ".eps", "nbafl.", "nbafl.eps.x",
                     "", " ", "Eps", "epss"]),
    st.text(max_size=20),
)


def _valid_config(cfg) -> None:
    """A loaded config holds only values of the declared kinds, finite, ints within the cap."""
    for section in SECTIONS:
        for f in section.fields:
            value = cfg[section.name][f.name]
            if value is None:
                assert f.optional
            elif f.kind is float:
                assert isinstance(value, float) and math.isfinite(value)
            elif f.kind is int:
                assert isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INT
            else:
                assert isinstance(value, f.kind)


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(key=KEY_TEXT, value=VALUE_TEXT)
def test_any_override_loads_validly_or_is_one_line_naming_the_override(key, value):
    item = f"{key}={value}"
    outcome = check_verdict(lambda: load_config(None, SECTIONS, ["N=5", "eps=1", item]),
                            ("--set", key.strip() or "KEY=VALUE"))
    if isinstance(outcome, ValueError):
        assert isinstance(outcome, ConfigError)
    else:
        _valid_config(outcome)


@settings(max_examples=EXAMPLES, deadline=None)
@given(item=st.text(max_size=60))
def test_any_set_text_at_all(item):
    outcome = check_verdict(lambda: load_config(None, SECTIONS, ["N=5", "eps=1", item]), ("--set",))
    if not isinstance(outcome, ValueError):
        _valid_config(outcome)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                         st.sampled_from([b"[nbafl]\nN = 5\neps = 1.0\n\xff\xfe", b"\xef\xbb\xbf[nbafl]\n",
                                          b"[nbafl]\nN = 5\neps = 1.0\n[nbafll]\n", b"eps = 1\n",
                                          b"[nbafl]\nN = 9223372036854775807\neps = 1.0\n",
                                          b"[nbafl]\nN = 5\neps = nan\n",
                                          b"[nbafl]\nN = 5\neps = 1.0\nK = 2.5\n",
                                          b"[[nbafl]]\nN = 5\n", b"nbafl = 3\n"])))
def test_any_file_content(tmp_path, content):
    path = tmp_path / "fuzz.toml"
    path.write_bytes(content)
    outcome = check_verdict(lambda: load_config(path, SECTIONS), (str(path),))
    if not isinstance(outcome, ValueError):
        _valid_config(outcome)


def test_bad_paths_are_config_errors(tmp_path):
    for path in [tmp_path, tmp_path / "missing.toml", "/proc/self/mem", "", "a\x00b", "/dev/null/x"]:
        outcome = check_verdict(lambda p=path: load_config(p, SECTIONS), ("config",))
        assert isinstance(outcome, ConfigError), path


# -- the account and calibrate commands (their options are plain numbers; typer parses the text) ----------
NUMBER_TEXT = st.one_of(st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e308", "1e-308", "1e-310", "2.5",
                                         "9223372036854775808", "1e12", "abc", "", "0x1"]),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))
OPTIONS = {"account": ["--sigma", "--q", "--steps", "--delta", "--sensitivity"],
           "calibrate": ["--eps", "--q", "--steps", "--delta", "--sensitivity"]}
GOOD = {"--sigma": "1.5", "--eps": "6", "--q": "0.4", "--steps": "25", "--delta": "0.01",
        "--sensitivity": "1"}


def _cli(capsys, command: str, values: dict[str, str]) -> tuple[int, str, str]:
    args = [command]
    for option in OPTIONS[command]:
        args += [option, values.get(option, GOOD[option])]
    args += ["--json"] + ([] if LONG else ["--no-pld", "--no-wor"])
    with time_limit(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(OPTIONS)), data=st.data())
def test_account_and_calibrate_never_traceback_nor_print_a_non_finite_number(capsys, command, data):
    options = data.draw(st.lists(st.sampled_from(OPTIONS[command]), min_size=1, unique=True))
    code, out, err = _cli(capsys, command, {o: data.draw(NUMBER_TEXT) for o in options})
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    if code == 0:
        for row in json.loads(out)["rows"]:
            for key in ("value", "sigma", "saving_percent"):
                assert row.get(key) is None or math.isfinite(row[key]), row
    else:
        assert err.strip(), "an error exit says why"


def test_calibrate_and_account_reported_hangs_through_the_cli(capsys):
    """Issue 8 item 6 end to end, with PLD and sampling without replacement on (each < 10 s)."""
    for args in (["calibrate", "--eps", "1e6", "--q", "0.4", "--steps", "25", "--delta", "0.01"],
                 ["account", "--sigma", "0.01", "--q", "0.4", "--steps", "25", "--delta", "0.01"]):
        with time_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main([*args, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert all(r["value"] is None or math.isfinite(r["value"]) for r in rows)
        assert any(r["method"] == "pld" and r["value"] is not None for r in rows)


def test_a_huge_override_gives_a_short_error():
    for item in ("variant=" + "x" * 10_000, "private=" + "x" * 10_000, "x" * 10_000 + "=1"):
        outcome = check_verdict(lambda i=item: load_config(None, SECTIONS, ["N=5", "eps=1", i]), ("--set",))
        assert isinstance(outcome, ConfigError) and len(str(outcome)) < 400
