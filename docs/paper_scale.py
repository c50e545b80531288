"""Run every figure of the five papers at paper scale and write the Paper scale page (docs/paper-scale.md).

Usage::

    python docs/paper_scale.py [--out out/paper-scale] [--jobs 2] [--render-only]

Needs the full MNIST in fedbound's data cache (``fedbound data mnist``); CIFAR-10 figures run when
``fedbound data cifar10 --from PATH`` put CIFAR-10 there, otherwise the page says "needs CIFAR-10".

Each figure runs as its own ``fedbound reproduce PAPER FIGURE --scale paper --out OUT`` process (niceness 19,
one thread each), at most ``--jobs`` at a time; two figures that share a run never run at once (the later
one re-uses the run), so each figure's CPU time is its own process's (``os.wait4``).  Everything resumes: a
killed run restarts from its checkpoint, a finished figure (its record in ``OUT/timings.json``) is not
redone (a stopped attempt's record may carry a ``note``, shown on the page).  Each figure's log, with its
progress bar and ETA, is ``OUT/logs/PAPER_FIGURE.log``.  Then the page is rendered from the figures'
``verdicts.json`` (and ``needs.json``), the PNGs copied to ``docs/paper_scale/``, with the provenance:
commit, date, machine, command, wall and CPU time per figure; the figures not yet run are listed as such,
with their commands and estimated CPU time.  The predicted-vs-measured figures also run at demo size
(seconds) for comparison.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "paper-scale.md"
IMAGES = REPO / "docs" / "paper_scale"
BENCH = REPO / "bench" / "results" / "paper_scale.json"
COMMAND = "python docs/paper_scale.py"
RUN_ORDER = ("nbafl", "adaptive", "wpfl", "udp", "dppfl")
"""The papers' training figures in this order (the cheaper first), then every predicted-vs-measured one."""

INTRO = """# Every figure at paper scale

The figures of the five papers re-created at the papers' own settings (N, samples per client, T, model,
local training, learning rates and budgets, as each paper states them) on the full MNIST, each claim judged
over 3 seeds. Where a paper does not state a value, the value fedbound assumes is named under the paper (and
in the command's output). The demo-size verdicts of the same claims are on [every figure claim at demo
size](reproduce_demo.md).
"""

PVM_INTRO = """## Predicted vs measured

Each paper's convergence theorem against training over T (`fedbound validate`; the `bound-vs-T` figures,
and NbAFL's Fig. 8): at demo size on a small convex task, at paper size on the paper's own model and MNIST.
Where the shape disagrees the verdict names the term of the bound responsible; where the theorem's premises
fail at the measured constants, the output says which.
"""


def _figures() -> list:
    from fedbound.validation.reproduce import Uncovered, targets

    return [t for t in targets() if not isinstance(t, Uncovered)]


def _keys(target) -> set[str]:
    """The run keys of a training figure at paper scale (what two figures may share)."""
    from fedbound.validation.reproduce import MissingData, Target, specs, toml_text

    if not isinstance(target, Target):
        return set()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(toml_text(target.config))
        try:
            runs = specs(target, config, "paper")
        except MissingData:
            return set()
        return {r.key for r in runs}


def _rounds(target) -> int:
    """Rounds the figure trains at paper scale (for the ETA): its runs' rounds, or a guess for the others."""
    from fedbound.validation.reproduce import MissingData, Target, specs, toml_text

    if not isinstance(target, Target):
        values = getattr(target, "paper_values", None) or ()
        return int(sum(values) * 3 * 1.5) if values else 0
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(toml_text(target.config))
        try:
            return sum(r.prepare().rounds for r in specs(target, config, "paper"))
        except MissingData:
            return 0


def _machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def _child_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("COLUMNS", None)
    return env


def demo_pvm(out: Path) -> None:
    """The predicted-vs-measured figures at demo size (seconds each), beside their paper-scale runs."""
    for t in _figures():
        if getattr(t, "kind", "") == "predicted vs measured":
            argv = [sys.executable, "-m", "fedbound", "reproduce", t.paper, t.figure, "--out",
                    str(out / "demo"), "--no-progress"]
            subprocess.run(argv, cwd=REPO, env=_child_env(), check=False, stdout=subprocess.DEVNULL,
                           preexec_fn=lambda: os.nice(19))


def cheapest_first(items: list, cost) -> list:
    """``items`` so that every paper gets its cheapest figure before any paper gets its second: sorted by
    (rank of the item's cost within its paper, cost), items without rounds first; ``cost(item)`` is
    ``(paper, rounds)``."""
    ranked = []
    for paper in dict.fromkeys(cost(i)[0] for i in items):
        mine = sorted((i for i in items if cost(i)[0] == paper), key=lambda i: cost(i)[1])
        free = sum(1 for i in mine if not cost(i)[1])  # no rounds (a bound, missing data): first, for all
        ranked += [(max(rank - free, -1), cost(i)[1], i) for rank, i in enumerate(mine)]
    return [i for *_, i in sorted(ranked, key=lambda r: r[:2])]


def run_all(out: Path, jobs: int, order: str = "paper", only: list[str] | None = None) -> None:
    """Every figure at paper scale (module docstring), then the bound-vs-T figures at demo size.  ``order``:
    ``paper`` (paper by paper, training figures first) or ``cheap`` (:func:`cheapest_first`: every paper
    reached before any is finished); ``only``: just these figures ("PAPER/FIGURE"), in that order."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    timings_path = out / "timings.json"
    timings = _load(timings_path)
    provenance = _load(out / "provenance.json") or {
        "commit": _git("rev-parse", "HEAD"), "dirty": bool(_git("status", "--porcelain")),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": _machine(),
        "load_at_start": os.getloadavg()[0], "command": f"{COMMAND} --out {out} --jobs {jobs}",
        "jobs": jobs}
    if timings:  # a resumed run: say when, on which commit and how
        provenance.setdefault("resumed", []).append({
            "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": _git("rev-parse", "HEAD"),
            "jobs": jobs, "order": order, "load": os.getloadavg()[0]})
    _save(out / "provenance.json", provenance)
    figures = sorted(_figures(), key=lambda t: (t.kind == "predicted vs measured", RUN_ORDER.index(t.paper)))
    name = {id(t): f"{t.paper}/{t.figure}" for t in figures}
    todo = [t for t in figures if timings.get(name[id(t)], {}).get("returncode") != 0]
    keys = {id(t): _keys(t) for t in todo}
    planned = {id(t): _rounds(t) for t in todo}
    if order == "cheap":
        todo = cheapest_first(todo, lambda t: (t.paper, planned[id(t)]))
    if only:  # these figures alone, in the order given
        todo = sorted((t for t in todo if name[id(t)] in only), key=lambda t: only.index(name[id(t)]))
    done = sum(1 for t in figures if timings.get(name[id(t)], {}).get("returncode") == 0)
    print(f"{done} of {len(figures)} figures already done; {len(todo)} to run now "
          f"({sum(planned[id(t)] for t in todo):,} rounds), {jobs} at a time; logs in {out / 'logs'}",
          flush=True)
    running: dict[int, tuple] = {}
    rate: dict[str, list[float]] = {}
    while todo or running:
        busy = set().union(*(keys[id(t)] for _, (t, *_rest) in running.items())) if running else set()
        for t in list(todo):
            if len(running) >= jobs:
                break
            if keys[id(t)] & busy:
                continue  # shares a run with a figure running now: wait, then re-use it
            todo.remove(t)
            log = (out / "logs" / f"{t.paper}_{t.figure}.log").open("a")
            argv = [sys.executable, "-m", "fedbound", "reproduce", t.paper, t.figure, "--scale", "paper",
                    "--out", str(out), "--workers", "1"]
            log.write(f"\n$ {' '.join(argv[2:])}\n")
            log.flush()
            proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=_child_env(),
                                    preexec_fn=lambda: os.nice(19))
            running[proc.pid] = (t, proc, log, time.time(), dt.datetime.now(dt.UTC))
            busy |= keys[id(t)]
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        t, proc, log, t0, started = running.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.close()
        key = name[id(t)]
        cpu = usage.ru_utime + usage.ru_stime
        earlier = timings.get(key, {})
        timings[key] = {"cpu_s": cpu + earlier.get("cpu_s", 0.0), "wall_s": time.time() - t0
                        + earlier.get("wall_s", 0.0), "returncode": proc.returncode,
                        "attempts": earlier.get("attempts", 0) + 1, "rounds": planned[id(t)],
                        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                        "commit": _git("rev-parse", "--short=12", "HEAD"),
                        "command": f"fedbound reproduce {t.paper} {t.figure} --scale paper --out {out}"}
        _save(timings_path, timings)
        if planned[id(t)]:
            rate.setdefault(t.paper, []).append(cpu / planned[id(t)])
        mean = {p: sum(v) / len(v) for p, v in rate.items()}
        overall = sum(mean.values()) / len(mean) if mean else 1.0
        left = sum(planned[id(u)] * mean.get(u.paper, overall) for u in todo)
        left += sum(planned[id(u)] * mean.get(u.paper, overall) for u, *_ in running.values())
        print(f"{dt.datetime.now():%H:%M} {key}: exit {proc.returncode}, {cpu:.0f} CPU s, "
              f"{time.time() - t0:.0f} s wall; {len(todo)} to start, {len(running)} running; "
              f"ETA ~{left / jobs / 60:.0f} min ({left / 3600:.1f} CPU h left)", flush=True)
    demo_pvm(out)
    provenance["finished"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    provenance["load_at_end"] = os.getloadavg()[0]
    _save(out / "provenance.json", provenance)


# --- the page ----------------------------------------------------------------------------------------------

def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _means(claim: dict) -> str:
    """The per-case means over seeds of a claim's numbers."""
    cases: dict[str, list[float]] = {}
    for per_seed in claim.get("values", {}).values():
        for case, v in per_seed.items():
            cases.setdefault(case, []).append(v)
    return ", ".join(f"{c}: {_fmt(sum(v) / len(v))}" for c, v in cases.items())


def _status(claim: dict, doc: dict) -> str:
    if doc.get("needs"):
        return f"not comparable (needs {doc['needs']})"
    if doc.get("kind") == "predicted vs measured" and any(n.startswith("theorem:") and "premises fail" in n
                                                           for n in doc.get("notes", [])):
        return "not comparable (the theorem's premises fail)"
    return "holds" if claim["holds"] else "does not hold"


def _measured(claim: dict, doc: dict) -> str:
    if doc.get("needs"):
        return f"not run: {doc['message']}"
    n = f"{claim['seeds_holding']}/{claim['seeds']} seeds"
    effect = claim.get("effect")
    text = f"{'holds' if claim['holds'] else 'fails'} in {n}"
    if effect is not None:
        low, high = claim.get("low"), claim.get("high")
        text += f", effect {_fmt(effect)}" + (f" ({_fmt(low)} to {_fmt(high)})" if low is not None else "")
    means = _means(claim)
    return f"{text}; mean {claim['metric']}: {means}" if means else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _shown(out: Path) -> str:
    """``out`` as the page shows it: relative to the repository when inside it."""
    try:
        return str(out.relative_to(REPO))
    except ValueError:
        return str(out)


def render(out: Path) -> Path:
    """docs/paper-scale.md from the results in ``out`` (module docstring)."""
    from fedbound.registry import get

    shown = _shown(out)
    timings = {k: {**v, "command": v["command"].replace(str(out), shown)}
               for k, v in _load(out / "timings.json").items()}
    prov = _load(out / "provenance.json")
    if "command" in prov:
        prov["command"] = prov["command"].replace(str(out), shown)
    IMAGES.mkdir(exist_ok=True)
    rows, sections, pending = [], {}, []
    counts = {"holds": 0, "does not hold": 0, "not comparable": 0}
    for t in _figures():
        folder = out / t.paper / t.figure
        doc = _load(folder / "verdicts.json") or _load(folder / "needs.json")
        if not doc:
            pending.append(t)
            continue
        key = f"{t.paper}/{t.figure}"
        timing = timings.get(key, {})
        title = getattr(t, "title", None) or doc["title"]  # today's title, not the one of the run's day
        lines = [f"### {t.paper} {t.figure}: {title}", ""]
        if doc.get("png"):
            image = IMAGES / f"{t.paper}_{t.figure}.png"
            shutil.copyfile(folder / doc["png"], image)
            lines += [f"![{t.paper} {t.figure} at paper scale](paper_scale/{image.name})", ""]
        lines += ["| claim | the paper | measured at paper scale | verdict |", "|---|---|---|---|"]
        for claim in doc["claims"]:
            status = _status(claim, doc)
            counts[status.split(" (")[0]] += 1
            lines.append(f"| {claim['id']} | {_cell(claim['statement'])} | {_cell(_measured(claim, doc))} | "
                         f"**{status}** |")
        lines.append("")
        for note in doc.get("notes", []):
            lines += [f"- {_cell(note)}"]
        extra = [a for a in doc.get("assumptions", []) if a not in _common(t.paper, out)]
        lines += [f"- assumed for this figure: {_cell(a)}" for a in extra]
        if timing:
            commit = timing.get("commit") or prov.get("commit", "?")[:12]
            lines.append(f"- {doc.get('runs', 0)} runs, {timing['cpu_s']:.0f} CPU s "
                         f"({_minutes(timing['wall_s'])} wall), finished {timing.get('finished', '?')} on "
                         f"commit `{commit}`; `{timing['command']}`")
        lines.append("")
        sections.setdefault(t.paper, []).append("\n".join(lines))
        rows.append((t.paper, t.figure, timing.get("cpu_s", 0.0), timing.get("wall_s", 0.0),
                     doc.get("runs", 0)))
    total_cpu = sum(r[2] for r in rows)
    total_wall = sum(r[3] for r in rows)
    machine = prov.get("machine", {})
    head = [
        INTRO,
        f"Re-create this page with `{COMMAND}` (after `fedbound data mnist`; it resumes where it stopped).",
        "",
        f"**Verdicts:** {counts['holds']} claims hold, {counts['does not hold']} do not, "
        f"{counts['not comparable']} are not comparable (a dataset not given, or a theorem whose premises "
        "fail at the measured constants).",
        "",
        f"**Provenance:** started {prov.get('started', '?')} on commit `{prov.get('commit', '?')[:12]}`"
        + (" (with uncommitted changes)" if prov.get("dirty") else "")
        + f" with `{prov.get('command', COMMAND)}`, {prov.get('jobs', 2)} figures at a time"
        + "".join(f"; resumed {r['at']} on commit `{r['commit'][:12]}`, {r['jobs']} at a time (load "
                  f"{r['load']:.1f})" for r in prov.get("resumed", []))
        + (f"; finished {prov['finished']}" if prov.get("finished") else "; **stopped before every figure "
           "ran** (see [Not yet run](#not-yet-run))")
        + f". {machine.get('cpu', '?')}, {machine.get('cores')} cores shared with other jobs (load "
        f"{prov.get('load_at_start', 0):.1f} at the start); each figure one process at niceness 19 and one "
        "thread, so its wall time mostly measures the machine's load: its CPU time is the figure's cost. "
        f"Each figure below names the commit it finished on. In all {total_cpu / 3600:.2f} CPU hours, "
        f"{total_wall / 3600:.2f} hours of figure wall time.",
        "",
    ]
    body = []
    for paper, parts in sections.items():
        p = get(paper)
        body += [f"## {p.short}", ""]
        common = _common(paper, out)
        if common:
            body += ["Assumed (the paper does not state these):", ""] + [f"- {a}" for a in common] + [""]
        body += parts
    table = ["## CPU time per figure", "", "| figure | runs | CPU time | wall time |", "|---|---|---|---|"]
    table += [f"| {p} {f} | {n} | {c:.0f} s | {_minutes(w)} |" for p, f, c, w, n in rows]
    table += [f"| **all** | {sum(r[4] for r in rows)} | {total_cpu:.0f} s ({total_cpu / 3600:.2f} h) | "
              f"{_minutes(total_wall)} |", ""]
    PAGE.write_text("\n".join(head + _demo_pvm(out, pending) + body + _not_run(pending, timings, out)
                              + table))
    return PAGE


def _rates(timings: dict) -> dict[str, float]:
    """CPU seconds per run-round of each paper's training figures run so far (their mean), and of all."""
    per: dict[str, list[float]] = {}
    for key, t in timings.items():
        if t.get("returncode") == 0 and t.get("rounds"):
            per.setdefault(key.split("/")[0], []).append(t["cpu_s"] / t["rounds"])
    rates = {p: sum(v) / len(v) for p, v in per.items()}
    if rates:
        rates["*"] = max(rates.values())
    return rates


def _not_run(pending: list, timings: dict, out: Path) -> list[str]:
    """The figures not yet run: the command of each and its estimated CPU time (its rounds at the CPU
    seconds per round measured on the paper's figures that ran, or the dearest paper's where none did)."""
    if not pending:
        return []
    rates = _rates(timings)
    bench = _load(BENCH)
    each = [t["cpu_s"] / t["rounds"] for t in timings.values()
            if t.get("returncode") == 0 and t.get("rounds")]
    spread = f"{min(each):.2f} to {max(each):.2f}" if each else "an unknown"
    lines = ["## Not yet run", "",
             "These figures have **not been run at paper scale yet**: nothing below is a result. Each row is "
             f"the command that runs it (`{COMMAND}` runs them all and resumes) and an estimate of its CPU "
             "time on this machine: the rounds it trains, all runs together, times the CPU seconds per round "
             "measured on the same paper's figures above; where none of its figures ran, the CPU seconds of "
             "one paper-scale round of one run from `python bench/paper_scale.py` (marked †; the figures "
             f"measured here cost {spread} CPU s per run-round, so a figure may differ from its bench round "
             "by that much), else the dearest paper's rate (marked \\*). "
             "Predicted-vs-measured figures count their validate runs (T summed over the sweep, 3 seeds) "
             "plus half again; for them this is **a lower bound**: at paper scale they first measure F* by "
             "300 L-BFGS iterations over the whole training objective per seed, and the bound's constants, "
             "before any run (the last column says what an attempt spent).", "",
             "| figure | rounds | estimated CPU time | command | spent so far |", "|---|---|---|---|---|"]
    total = 0.0
    for t in pending:
        rounds = _rounds(t)
        rate, mark = rates.get(t.paper), ""
        if rate is None and bench.get(f"{t.paper}_paper_s"):
            rate, mark = bench[f"{t.paper}_paper_s"], " †"
        if rate is None:
            rate, mark = rates.get("*", 0.0), " \\*"
        total += rounds * rate
        tried = timings.get(f"{t.paper}/{t.figure}", {})
        spent = f"{tried['cpu_s']:.0f} CPU s, {tried['note']}" if tried.get("note") else ""
        lines.append(f"| {t.paper} {t.figure} | {rounds:,} | {rounds * rate / 3600:.2f} h{mark} | "
                     f"`fedbound reproduce {t.paper} {t.figure} --scale paper --out {_shown(out)}` | "
                     f"{_cell(spent)} |")
    lines += ["", f"In all about {total / 3600:.1f} CPU hours not yet run (2 cores: about "
              f"{total / 7200:.1f} hours of wall time with nothing else running).", ""]
    return lines


def _common(paper: str, out: Path) -> list[str]:
    """The assumptions every paper-scale figure of ``paper`` shares."""
    lists = [_load(out / paper / t.figure / "verdicts.json").get("assumptions") for t in _figures()
             if t.paper == paper]
    lists = [set(a) for a in lists if a]
    if not lists:
        return []
    first = next(_load(out / paper / t.figure / "verdicts.json").get("assumptions") for t in _figures()
                 if t.paper == paper and _load(out / paper / t.figure / "verdicts.json").get("assumptions"))
    shared = set.intersection(*lists)
    return [a for a in first if a in shared]


def _demo_pvm(out: Path, pending: list) -> list[str]:
    """Predicted vs measured at demo and at paper size, one row per paper (``pending``: not run yet)."""
    from fedbound.registry import get

    lines = [PVM_INTRO,
             "| paper | demo size | paper scale |", "|---|---|---|"]
    for t in _figures():
        if getattr(t, "kind", "") != "predicted vs measured":
            continue
        cells = []
        for root in (out / "demo", out):
            doc = _load(root / t.paper / t.figure / "verdicts.json")
            if not doc:
                cells.append("not yet run (see [Not yet run](#not-yet-run))" if t in pending else "not run")
                continue
            claim = doc["claims"][0]
            text = f"Spearman {_fmt(claim['effect'])} ({claim['seeds_holding']}/{claim['seeds']} seeds > 0)"
            text += "".join(f"; {n}" for n in doc.get("notes", []))
            cells.append(_cell(text))
        lines.append(f"| {get(t.paper).short} {t.figure} | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/paper-scale", help="results folder (resumed)")
    parser.add_argument("--jobs", type=int, default=2, help="figures at a time (processes)")
    parser.add_argument("--order", choices=("paper", "cheap"), default="paper",
                        help="paper: paper by paper; cheap: each paper's cheapest figure first (by rounds)")
    parser.add_argument("--only", nargs="+", metavar="PAPER/FIGURE", help="run just these, in this order")
    parser.add_argument("--render-only", action="store_true", help="only write the page from --out")
    parser.add_argument("--demo-pvm", action="store_true",
                        help="only run the predicted-vs-measured figures at demo size, then write the page")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.demo_pvm:
        demo_pvm(out)
    elif not args.render_only:
        run_all(out, max(1, args.jobs), args.order, args.only)
    print(f"wrote {render(out).relative_to(REPO)}")


if __name__ == "__main__":
    main()
