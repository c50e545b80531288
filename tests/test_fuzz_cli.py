"""The whole command line, fuzzed (issue 26): every command's options (introspected from the CLI, so a new
command or option is fuzzed without edits) and every registered paper's config keys (from the registry, so
a new paper is fuzzed without edits), each given values from a corpus of hostile values (``_fuzz.HOSTILE``).

Each case runs in a forked child of a worker process (imports paid once per worker) in its own empty
working directory, under RLIMIT_CPU (``CASE_SECONDS`` CPU s) and RLIMIT_AS (``MEMORY_BYTES`` beyond the
imports).  The verdict (``_fuzz.cli_verdict``): exit 0 with finite output, or exit 2 with one line naming
the input; never a traceback, never a kill, never a hang.

Every key is fuzzed twice: by ``--set`` and written into a config file (issue 36: the file form takes other
paths).  Profiles: CI-sized by default (every option of every command once, with one paper per command, and
every paper's keys once in plan, by --set and in a file, values rotated through the corpus);
``FEDBOUND_FUZZ=long`` gives every option and every key every value of the corpus, for every paper, in plan
and train.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import click
import pytest
import typer

from fedbound import registry
from fedbound.cli import app
from fedbound.tests._fuzz import HOSTILE, LONG, cli_verdict, run_cli_cases

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"



def _config(paper: str) -> str | None:
    for suffix in ("ridge", "logistic", "mnist"):
        path = EXAMPLES / f"{paper}_{suffix}.toml"
        if path.is_file():
            return str(path)
    return None


def _papers(capability: str) -> list[str]:
    return [p for p in registry.names(capability) if _config(p)]


def _commands() -> dict[str, click.Command]:
    """Every leaf command of the CLI by its path (``"crd replay"``), introspected."""
    root = typer.main.get_command(app)
    out = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(root, [])
    return out


def _bases(losses: str) -> dict[str, list[tuple[str, list[str]]]]:
    """Per command, the (label, argv) invocations that answer quickly on valid input; the fuzz changes one
    input of them at a time.  PAPER and CONFIG stand for each paper and its smallest example config."""
    one = "--no-progress"
    per_paper = {
        "plan": ["plan", "PAPER", "CONFIG", "--json"],
        "plot": ["plot", "PAPER", "CONFIG", "--out", "fig.png"],
        "claims": ["claims", "PAPER", "--points", "2"],
        "train": ["train", "PAPER", "CONFIG", "--set", "T=2", "--out", "run", one],
        "audit": ["audit", "PAPER", "CONFIG", "--trials", "8", "--rounds", "1", "--no-control", "--out", "a"],
        "estimate": ["estimate", "PAPER", "CONFIG", "--rounds", "2", "--cache", "cache"],
        "flower": ["flower", "PAPER", "CONFIG", "--out", "app"],
        "sweep": ["sweep", "PAPER", "CONFIG", "--vs", "T", "--values", "2", "--out", "sw", one],
        "validate": ["validate", "PAPER", "CONFIG", "--vs", "T", "--values", "1,2", "--seeds", "1",
                     "--rounds", "2", "--out", "v", "--cache", "cache", one],
    }
    capability = {"plan": "plan", "plot": "plot", "claims": "claims", "audit": "audit"}
    wpfl = _config("wpfl")
    out: dict[str, list[tuple[str, list[str]]]] = {
        "account": [("", ["account", "--q", "0.1", "--steps", "10", "--delta", "1e-5", "--sigma", "1.0"])],
        "calibrate": [("", ["calibrate", "--eps", "1", "--q", "0.1", "--steps", "10", "--delta", "1e-5"])],
        "data": [("", ["data", "list", "--json"])],  # never `data mnist`: it downloads
        "papers": [("", ["papers", "--json"])],
        "report": [("", ["report", "DIR", "--out", "r.html"])],
        "reproduce": [("", ["reproduce", "--list"])],
        "schedule": [("wpfl", ["schedule", "wpfl", wpfl, "--json"])] if wpfl else [],
        "serve": [("", ["serve", "--port", "0"])],
        "crd replay": ([("udp", ["crd", "replay", losses, _config("udp"), "--json"])] if _config("udp")
                       else []),
    }
    for command, argv in per_paper.items():
        papers = _papers(capability.get(command, "train"))
        out[command] = [(p, [_config(p) if a == "CONFIG" else p if a == "PAPER" else a for a in argv])
                        for p in papers]
    return out


SERVE_SAFE = {"--port": ["-1", "70000", "nan", "", "abc", "1e308"]}
"""``serve`` answers valid input by serving forever: it is fuzzed with values it must refuse up front."""


def _option_cases(losses: str) -> list[dict]:
    cases: list[dict] = []
    bases = _bases(losses)
    commands = _commands()
    rotate = itertools.count()
    for name, cmd in sorted(commands.items()):
        assert name in bases, f"no base invocation for the new command {name!r}: add one to _bases"
        runs = bases[name]
        if not LONG and runs:  # CI: a command's options with one paper (rotated); every paper's keys below
            runs = [runs[len(name) % len(runs)]]
        for label, argv in runs:
            args = [p for p in cmd.params if isinstance(p, click.Argument)]
            n_words = len(name.split())
            for i, param in enumerate(args):
                # a word that starts with '-' is an option, not an argument (as in every CLI)
                positional = [v for v in HOSTILE if not v.startswith("-")]
                values = positional if LONG else [positional[next(rotate) % len(positional)]]
                for value in values:
                    new = list(argv)
                    new[n_words + i] = value
                    cases.append({"id": f"{name} {label} <{param.name}>={value!r}", "argv": new,
                                  "names": [param.name, param.human_readable_name.lower(), value or "''",
                                            os.path.normpath(value) if value else "''"]})
            for param in cmd.params:
                if isinstance(param, click.Argument) or param.is_flag or param.name == "help":
                    continue
                flag = max(param.opts, key=len)
                if name == "serve":
                    values = SERVE_SAFE.get(flag, [])
                elif LONG:
                    values = HOSTILE
                else:
                    values = [HOSTILE[next(rotate) % len(HOSTILE)]]
                for value in values:
                    new = list(argv)
                    if flag in new and flag != "--set":
                        new[new.index(flag) + 1] = value
                    else:
                        new += [flag, value]
                    names = [*param.opts, param.name, value or "''"]
                    if flag == "--set":
                        names += ["KEY=VALUE"]
                    cases.append({"id": f"{name} {label} {flag}={value!r}", "argv": new, "names": names})
    return cases


def _keys_and_values():
    """(paper name, its entry, key, hostile value) for every registered paper's config keys (aliases
    included): the values rotated through the corpus, all of them in the long profile."""
    rotate = itertools.count()
    for name in registry.names("plan"):
        paper = registry.get(name)
        for key in (k["key"] for k in paper.keys()):
            for value in (HOSTILE if LONG else [HOSTILE[next(rotate) % len(HOSTILE)]]):
                yield name, paper, key, value


def _key_cases() -> list[dict]:
    """Every registered paper's config keys (aliases included) with hostile values, through plan (and, in
    the long profile, train)."""
    cases = []
    for name, paper, key, value in _keys_and_values():
        config, section = _config(name), paper.config_section
        names = list(dict.fromkeys([key, section.canonical(key)]))
        cases.append({"id": f"plan {name} --set {key}={value!r}", "names": names,
                      "argv": ["plan", name, *([config] if config else []), "--set", f"{key}={value}",
                               "--json"]})
        if LONG and config and "train" in paper.supports:
            cases.append({"id": f"train {name} --set {key}={value!r}", "names": names,
                          "argv": ["train", name, config, "--set", "T=2", "--set", f"{key}={value}", "--out",
                                   "run", "--no-progress"]})
    return cases


def _toml_value(text: str) -> str:
    """``text`` as the value of a config-file line: a TOML literal where it is one (numbers, booleans,
    lists), else a TOML string (a bare word, the empty text, unicode)."""
    import json

    from fedbound.config import parse_literal

    try:
        literal = parse_literal(text, "value")
    except ValueError:  # more digits than --set takes: the file gets them as written
        return text
    return json.dumps(text) if isinstance(literal, str) else text


def _with_key(text: str, section: str, spellings: list[str], line: str) -> str:
    """The config ``text`` with ``line`` as the first line of ``[section]`` (every spelling of its key that
    was there removed; the section added when the file has none)."""
    import re

    out, inside = [], False
    for row in text.splitlines():
        if row.strip().startswith("["):
            inside = row.strip() == f"[{section}]"
            out.append(row)
            if inside:
                out.append(line)
            continue
        if inside and re.match(r"\s*(" + "|".join(map(re.escape, spellings)) + r")\s*=", row):
            continue
        out.append(row)
    if f"[{section}]" not in text:
        out = [f"[{section}]", line, *out]
    return "\n".join(out) + "\n"


def _file_cases(folder: Path) -> list[dict]:
    """Every registered paper's keys (aliases included) given in a config FILE, not by --set (issue 36: the
    file form of a value reached other code paths: eps = 495 was blamed on delta there), values rotated
    through the corpus (all of them in the long profile)."""
    cases = []
    for name, paper, key, value in _keys_and_values():
        section, example = paper.config_section, _config(name)
        base = Path(example).read_text() if example else ""
        path = folder / f"{name}_{key}_{len(cases)}.toml"
        line = f"{key} = {_toml_value(value)}"
        path.write_text(_with_key(base, name, section.spellings(key), line), encoding="utf-8")
        names = list(dict.fromkeys([key, section.canonical(key), str(path)]))
        cases.append({"id": f"plan {name} file {key}={value!r}", "names": names,
                      "argv": ["plan", name, str(path), "--json"]})
    return cases


def test_the_fuzz_covers_every_command_and_every_papers_keys(tmp_path):
    losses = tmp_path / "losses.csv"
    losses.write_text("round,loss\n1,2.0\n2,1.5\n3,1.4\n")
    option_cases = _option_cases(str(losses))
    key_cases = _key_cases()
    file_cases = _file_cases(tmp_path)
    for name, cmd in _commands().items():
        fuzzable = [p for p in cmd.params if not getattr(p, "is_flag", False) and p.name != "help"]
        for param in fuzzable:
            if name == "serve" and max(param.opts, key=len) not in SERVE_SAFE:
                continue  # a host it can bind serves forever: not fuzzable in a test
            label = f"<{param.name}>" if isinstance(param, click.Argument) else max(param.opts, key=len)
            assert any(c["id"].startswith(f"{name} ") and f" {label}=" in c["id"] for c in option_cases), \
                (name, label)
    for name in registry.names("plan"):
        keys = {k["key"] for k in registry.get(name).keys()}
        fuzzed = {c["id"].split("--set ")[1].split("=")[0] for c in key_cases if f"plan {name} " in c["id"]}
        assert keys <= fuzzed
        in_files = {c["id"].split(" file ")[1].split("=")[0] for c in file_cases
                    if f"plan {name} " in c["id"]}
        assert keys <= in_files


def test_every_command_and_key_answers_cleanly(tmp_path):
    """The fuzz: each case exits 0 with finite output or 2 with one line naming the input (module
    docstring); the failures are listed all together, with the command to reproduce each."""
    losses = tmp_path / "losses.csv"
    losses.write_text("round,loss\n1,2.0\n2,1.5\n3,1.4\n")
    cases = _option_cases(str(losses)) + _key_cases() + _file_cases(tmp_path)
    outcomes = run_cli_cases(cases)
    failures = []
    for case, outcome in zip(cases, outcomes, strict=True):
        why = cli_verdict(case, outcome)
        if why is not None:
            command = " ".join(repr(a) if " " in a or not a else a for a in case["argv"])
            failures.append(f"{case['id']}: {why}\n    fedbound {command}")
    cpu = sum(o["cpu"] for o in outcomes)
    print(f"{len(cases)} cases, {cpu:.0f} CPU s in the cases")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures)


if __name__ == "__main__":  # pragma: no cover - `python tests/test_fuzz_cli.py`: list the cases
    for c in _option_cases("losses.csv") + _key_cases():
        print(c["id"])
    pytest.main([__file__, "-q"])
