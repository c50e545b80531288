"""``fedbound audit PAPER CONFIG``: an empirical privacy audit of the configured mechanism, run through the
engine (fedbound.validation.audit)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides


def _papers() -> str:
    from fedbound.registry import names

    return ", ".join(names("audit"))


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("audit", help="Audit a paper's configured mechanism: neighbouring datasets, many trials "
                               "through the engine, an epsilon lower bound per adversary view against the "
                               f"reported epsilon, and a halved-noise control. Papers: {_papers()}.")
    def audit_cmd(
        paper_name: Annotated[str, typer.Argument(metavar="PAPER", help=f"Paper: {_papers()}.",
                                                  show_default=False)],
        config: ConfigArg,
        set_: SetOverrides = None,
        trials: Annotated[str, typer.Option("--trials", help="trials per side (D and D'; at most 64,000), or "
                                            "auto: raised until the halved-noise control is detected")
                          ] = "2000",
        canary: Annotated[str, typer.Option("--canary", help="worst (largest shift found by the search: "
                                            "flips, swaps, crafted outliers), flip (record 0 "
                                            "relabelled; client level: every record) or given (record 0 "
                                            "replaced by --canary-record; client level: every record)")
                          ] = "worst",
        canary_record: Annotated[int | None, typer.Option("--canary-record", help="training record that "
                                                          "replaces the target's record 0 (--canary given; "
                                                          "default the last)")] = None,
        level: Annotated[str | None, typer.Option("--level", help="neighbouring datasets: record (one record "
                                                  "of the target replaced) or client (all its records); "
                                                  "default the paper's own unit")] = None,
        rounds: Annotated[int, typer.Option("--rounds", help="rounds the adversary sees")] = 1,
        control: Annotated[bool, typer.Option("--control/--no-control", help="also audit with the noise "
                                              "halved (the positive control)")] = True,
        seed: Annotated[int, typer.Option("--seed", help="0: [train] seed as configured; otherwise a new "
                                          "seed for everything (data split, canary search, trial noise)")
                        ] = 0,
        out: Annotated[str | None, typer.Option("--out", metavar="FILE",
                                                help="figure (.png and .svg) and, beside it, the "
                                                 "JSON with every score (default: none written)")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Audit PAPER's mechanism on CONFIG's setting ([PAPER] + [train])."""
        from fedbound.extras import require

        require("train", "audit")
        from fedbound.checks import check_int
        from fedbound.errors import ConfigError
        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.paths import out_file
        from fedbound.registry import get
        from fedbound.validation.audit import MAX_TRIALS, audit_from_config

        get(paper_name, "audit")
        figure = out_file("--out", out) if out is not None else None
        seed = int(check_int("--seed", seed, 0, 2**32 - 1))
        if trials != "auto":
            try:
                trials = int(trials)
            except ValueError:
                raise ConfigError(f"--trials = {trials!r} is outside its valid range integer in "
                                  f"[4, {MAX_TRIALS}] or auto") from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = audit_from_config(paper_name, config, set_ or [], trials=trials, canary=canary,
                                       rounds=rounds, control=control, canary_record=canary_record, seed=seed,
                                       level=level)
        files = _write(result, figure) if figure is not None else []
        if json_:
            print_json({**result.to_dict(), "files": files})
            return
        print_table(f"fedbound audit {result.paper}: {result.trials} trials per side, {result.rounds} "
                    f"round(s), {result.level} level, canary {result.canary} (client {result.target_client}, "
                    f"{_changed(result)})", ["quantity", *(v.view for v in result.views)],
                    _rows(result), digits=4,
                    caption=f"delta = {result.delta:g}; the {result.budget_accountant} accountant holds the "
                            f"run's budget; seed {result.seed}; {result.wall_time_s:.1f} s")
        if result.noise_checks:
            print_table("noise measured / planned per stage (the lowest check of each; all must hold)",
                        ["stage", "checks", "lowest measured / planned", "its interval"], _noise_rows(result),
                        digits=4)
        if result.stream_checks or result.shift_checks:
            print_table("noise streams (independent across rounds, clients, trials), sensitivity per stage",
                        ["check", "worst", "limit"], _stream_shift_rows(result), digits=4)
        typer.echo(f"trials: {result.fast_path}")
        typer.echo(f"verdict: {result.verdict.split(':')[0]}")
        for reason in result.reasons:
            typer.echo(f"  - {reason}")
        for f in files:
            typer.echo(f)
        print_warnings(list(result.notes))


def _changed(result) -> str:
    return "all its records" if result.target_record is None else f"record {result.target_record}"


def _rows(result) -> list[list]:
    """One row per quantity, one column per adversary view."""
    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    quantities = [
        ("kind", lambda v: v.kind),
        ("eps lower bound (95 %)", lambda v: fmt(v.epsilon_lower)),
        ("eps reported (tight, as deployed)", lambda v: fmt(v.epsilon_reported)),
        ("eps reported, tight / paper", lambda v: f"{fmt(v.epsilon_reported_tight)} / "
                                                  f"{fmt(v.epsilon_reported_paper)}"),
        ("eps Gaussian fit [95 %]", lambda v: f"{fmt(v.gaussian_epsilon)} [{fmt(v.gaussian_interval[0])}, "
                                              f"{fmt(v.gaussian_interval[1])}]"),
        ("eps independent (dp-accounting)", lambda v: fmt(v.epsilon_independent)),
        ("eps Gaussian-DP estimate / lower (Nasr et al.)", lambda v: f"{fmt(v.gdp_epsilon)} / "
                                                                     f"{fmt(v.gdp_epsilon_low)}"),
        ("one-run lower / plan's eps, at delta (Steinke et al.)", lambda v: "-" if v.one_run_epsilon is None
         else f"{fmt(v.one_run_epsilon)} / {fmt(v.one_run_reference)} at {v.one_run_delta:g} "
              f"({v.one_run_canaries} canaries)"),
        ("control (noise halved): eps lower", lambda v: fmt(v.control_epsilon_lower)),
        ("smallest eps detectable / control needs trials", lambda v: f"{fmt(v.detectable_epsilon)} / "
                                                                     f"{v.trials_needed or '-'}"),
        ("noise std measured / planned", lambda v: f"{fmt(v.noise_std_measured)} / "
                                                   f"{fmt(v.noise_std_planned)}"),
        ("shift measured / sensitivity assumed", lambda v: f"{fmt(v.shift_measured)} / "
                                                           f"{fmt(v.sensitivity_assumed)}"),
        ("natural records' largest shift", lambda v: fmt(result.natural_shift) if v.kind != "broadcast"
         else "-"),
        ("false pos. / neg. at the bound's threshold", lambda v: f"{v.false_positives} / "
                                                                 f"{v.false_negatives} of {v.held_out}"),
    ]
    return [[name, *(get(v) for v in result.views)] for name, get in quantities]


def _noise_rows(result) -> list[list]:
    """Per noise source: how many checks (clients, rounds), and its lowest one."""
    rows = []
    for stage in dict.fromkeys(c.stage for c in result.noise_checks):
        checks = [c for c in result.noise_checks if c.stage == stage]
        low = min(checks, key=lambda c: c.ratio_high)
        rows.append([stage, str(len(checks)), f"{low.measured / low.planned:.4g}{low.where}",
                     f"[{low.ratio_low:.4g}, {low.ratio_high:.4g}] ({100 * (1 - low.alpha):.4g} %)"])
    return rows


def _stream_shift_rows(result) -> list[list]:
    """The largest stream statistic per source and relation; the largest shift / sensitivity per stage."""
    from scipy.stats import norm

    rows = [[f"{c.stage} noise across {c.relation} (t statistic)", f"{c.statistic:.3g} ({c.cosines} cosines)",
             f"{float(norm.isf(c.alpha)):.3g}"] for c in result.stream_checks]
    for stage in dict.fromkeys(c.stage for c in result.shift_checks):
        worst = max((c for c in result.shift_checks if c.stage == stage),
                    key=lambda c: c.shift / c.sensitivity)
        rows.append([f"{stage} input shift D vs D' / sensitivity", f"{worst.shift / worst.sensitivity:.4g} "
                     f"(client {worst.client})", "1"])
    return rows


def _write(result, out: Path) -> list[str]:
    """The figure and the JSON (with every score) beside it."""
    import json

    from fedbound.validation.audit.plot import draw_audit

    paths = draw_audit(result, out)
    target = Path(out).with_suffix(".json")
    target.write_text(json.dumps(result.to_dict(scores=True), indent=1, default=float))
    return [str(p) for p in paths] + [str(target)]
