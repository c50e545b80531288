"""Fuzz of damaged result folders (issue 36 item 4): a finished sweep run whose files are truncated, flipped,
replaced by binary, emptied, deleted or given NaN, and a results folder whose validation.json / verdicts.json
is damaged.  Every case ends in an answer (the damaged run set aside and trained again: the same numbers as
trained before) or one line naming a file, within 10 CPU s; never a traceback, never a silent empty table.

Profiles: CI-sized by default (a dozen damages); ``FEDBOUND_FUZZ=long`` draws 15x more."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound.cli import main
from fedbound.errors import ConfigError
from fedbound.tests._fuzz import LONG, time_limit
from fedbound.tests._hardening import SWEEP, numbers, trained_sweep

RUN_FILES = ("summary.json", "metrics.csv", "spec.json", "metrics.parquet", "config.toml")
CASES = 180 if LONG else 12


def _sweep(out: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    with time_limit(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main([*SWEEP, "--out", str(out), "--no-progress", "--json"])
    stdout, err = capsys.readouterr()
    return code, stdout, err


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return trained_sweep(tmp_path_factory.mktemp("fuzz"))


def _damage(path: Path, kind: str, where: float, junk: bytes) -> None:
    data = path.read_bytes() if path.is_file() else b""
    if kind == "truncate":
        path.write_bytes(data[:int(where * len(data))])
    elif kind == "binary":
        path.write_bytes(junk)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "flip" and data:
        i = int(where * (len(data) - 1))
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    elif kind == "nan":
        path.write_bytes(data.replace(b"2", b"NaN", 1))
    elif kind == "folder_is_a_file":
        shutil.rmtree(path.parent)
        path.parent.write_bytes(junk)


@settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(RUN_FILES),
       kind=st.sampled_from(["truncate", "binary", "empty", "delete", "flip", "nan", "folder_is_a_file"]),
       where=st.floats(0.0, 1.0), junk=st.binary(max_size=64))
def test_a_damaged_run_is_trained_again_or_named(original, tmp_path_factory, capsys, name, kind, where, junk):
    out, key, trained = original
    copy = tmp_path_factory.mktemp("case") / "sw"
    shutil.copytree(out, copy)
    _damage(copy / "runs" / key / name, kind, where, junk)
    code, stdout, err = _sweep(copy, capsys)
    assert "Traceback" not in err, err
    if code != 0:
        lines = [x for x in err.splitlines() if x.strip() and not x.startswith("warning:")]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
        return
    doc = json.loads(stdout)
    assert [r["round"] for r in doc["final"]] == [2], doc  # never an empty table for a run that finished
    assert numbers(copy / "runs" / key / "metrics.csv") == trained  # what is read is what was trained
    if key in doc["damaged"]:
        assert (copy / "damaged").is_dir()


@settings(max_examples=CASES * 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=st.sampled_from(["validation.json", "verdicts.json"]),
       content=st.one_of(st.binary(max_size=200),
                         st.sampled_from([b'{"paper": "udp", "x": NaN}', b'{"paper": "udp", "x": -Infinity}',
                                          b'{"paper": "udp"', b"\xef\xbb\xbf{}", b"[]", b'{"paper": 3}',
                                          b'{"paper": "udp", "claims": []}'])))
def test_a_damaged_result_file_is_named_or_read(tmp_path_factory, file, content):
    from fedbound.validation.report import find_results

    folder = tmp_path_factory.mktemp("results")
    (folder / "x").mkdir()
    (folder / "x" / file).write_bytes(content)
    with time_limit():
        try:
            found = find_results(folder, file)
        except ConfigError as exc:
            text = str(exc)
            assert "\n" not in text and str(folder / "x" / file) in text
            return
    for docs in found.values():
        for _, doc in docs:
            json.dumps(doc, allow_nan=False)  # only finite JSON is read as a result
