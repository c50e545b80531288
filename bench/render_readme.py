"""Rewrite README.md's performance block from bench/results/all.json (what ``make bench`` wrote).

Usage: ``python bench/render_readme.py [--check] [--json PATH] [--readme PATH]``.  The block lies between
``<!-- bench:begin -->`` and ``<!-- bench:end -->``; README never types a measured number by hand.
``--check`` exits 1 when the block differs from what the JSON renders (tests/test_bench_readme.py does the
same).  One line per benchmark that has a headline: the script's ``HEADLINE`` (kept in all.json by
run_all.py), else the template below for scripts that predate it; a template is ``str.format`` over the
benchmark's figures.  Benchmarks that failed, or whose figures lack a template's key, are left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

#: Headlines of the benchmarks that return no dict of their own (figures = their result files by name).
def _plan_line(plan: dict[str, Any]) -> str:
    """bench/plan.py's figures (per example config) as one line: the worst case of each target."""
    ratio = {k: v["median"] for k, v in plan["cli_cached_over_numpy"].items()}
    replan = {k: v["eps"] for k, v in plan["replan_cpu_s"].items()}
    worst = max(replan, key=replan.get)
    explorer = max(v["plan_cpu_s"] for v in plan["explorer_cpu_s"].values())
    return (f"`fedbound plan` of each of the {len(ratio)} example configs, plan cached: "
            f"{min(ratio.values()):.1f}-{max(ratio.values()):.1f}x the CPU time of "
            "`python -c 'import numpy'`; "
            f"a warm re-plan at a new eps: at most {replan[worst]:.2f} CPU s ({worst}); the explorer's plan "
            f"for a new input: at most {explorer:.2f} CPU s per paper.")


def _engine_line(scale: dict[str, Any]) -> str:
    """bench/engine_scale.py's largest size as one line: round time, peak memory against the data."""
    row = max(scale["sizes"], key=lambda r: r["clients"])
    gib = 2.0**30
    marginal = scale.get("marginal_ratio_to_data")
    return (f"A logistic-regression NbAFL round of {row['clients']:,} clients x {row['samples_per_client']} "
            f"samples ({row['features']} features) on one machine: {row['round_s']:.1f} s per round "
            f"({row['round_cpu_s']:.1f} CPU s); peak memory {row['peak_rss_bytes'] / gib:.2f} GiB = the "
            f"{row['base_rss_bytes'] / gib:.2f} GiB base + {row['ratio_to_data']:.2f}x the float32 client "
            "data"
            + (f" ({marginal:.2f}x per added byte)" if marginal is not None else "")
            + f"; setup {row['setup_s']:.0f} s"
            + (f"; {scale['per_client_overhead_bytes']:,.0f} bytes per added client beyond its data"
               if scale.get("per_client_overhead_bytes") is not None else "")
            + (f"; checkpoint {row['checkpoint_bytes'] / 2**20:.1f} MB" if "checkpoint_bytes" in row else "")
            + ".")


TEMPLATES = {
    "engine_scale": lambda figures: _engine_line(figures["engine_scale"]),
    "plan": lambda figures: _plan_line(figures["plan"]),
    "accounting": "Calibrating σ for {accounting[grid_points]} privacy targets in one call: "
                  "{accounting[speedup][median]:.0f}x faster than a loop of Opacus' get_noise_multiplier "
                  "(same orders, σ within {accounting[max_rel_diff_sigma]:.0e}).",
    "explorer": "The explorer's live update ({explorer[paper]}, over HTTP): median "
                "{explorer[update][median_ms]:.0f} ms, {explorer[update_ratio_http_vs_in_process]:.2f}x the "
                "in-process plan.",
    "sweep": "A 40-run sweep batched: {sweep[logreg_per_run_overhead][one_by_one_over_batched][median]:.1f}x "
             "faster than the runs one after another, "
             "{sweep[logreg_per_run_overhead][cli_over_batched][median]:.1f}x faster than 40 "
             "`fedbound train` calls.",
}


def headline(name: str, entry: dict[str, Any]) -> str | None:
    template = entry.get("headline") or TEMPLATES.get(name)
    if entry.get("status") != "ok" or not template:
        return None
    try:
        if callable(template):
            return template({name: entry["figures"]})
        return template.format(**entry["figures"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def render(result: dict[str, Any]) -> str:
    """The block's text (without the markers) for one all.json."""
    m = result["machine"]
    threads = result.get("threads")
    lines = [f"Last `make bench` run {result['date']} ({m['cpu_model']}, {m['cores']} cores"
             + (f", {threads} thread{'s' if threads > 1 else ''} (OpenMP, MKL, torch)" if threads else "")
             + f", load {result['load_before'][0]:g} → {result['load_after'][0]:g}"
             + (": a shared machine, other jobs ran" if max(result["load_before"][0], result["load_after"][0])
                > m["cores"] else "")
             + f"{', quick sizes' if result.get('quick') else ''}; commit {_short(result['git_commit'])}); "
             "each ratio is against a baseline timed in the same run, interleaved. Every figure, with each "
             "benchmark's own date, commit and load: `bench/results/all.json`; how each is measured: "
             "[bench/README.md](bench/README.md).", ""]
    for name, entry in result["benchmarks"].items():
        line = headline(name, entry)
        if line:
            own = entry.get("threads")
            lines.append(f"- {line}" + (f" ({own} thread{'s' if own > 1 else ''})"
                                        if own and own != threads else ""))
    return "\n".join(lines)


def _short(commit: str | None) -> str:
    return "unknown" if not commit else commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def replace_block(readme: str, block: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise SystemExit(f"README must hold exactly one {BEGIN} ... {END} block")
    head, rest = readme.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=HERE / "results" / "all.json")
    parser.add_argument("--readme", type=Path, default=HERE.parent / "README.md")
    parser.add_argument("--check", action="store_true", help="only check that README's block is current")
    args = parser.parse_args()
    old = args.readme.read_text()
    new = replace_block(old, render(json.loads(args.json.read_text())))
    if args.check:
        if new != old:
            print(f"{args.readme}'s performance block differs from {args.json}: run bench/render_readme.py")
            return 1
        return 0
    args.readme.write_text(new)
    print(f"rewrote the performance block of {args.readme} from {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
