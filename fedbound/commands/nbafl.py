"""``fedbound plan nbafl``, ``fedbound plot nbafl``, ``fedbound claims nbafl`` (seed 002, spec 002)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides

VariantOpt = Annotated[str, typer.Option(
    "--variant", help="paper (default) or an erratum's reading: thm1_noise, dimensional_lambda1, "
                      "regime_aware, two_sided, eq13_printed; combine with '+'.")]


def _settings(config: Path, overrides: list[str] | None) -> dict[str, Any]:
    from fedbound.bounds.nbafl import CONFIG_SECTION, settings_from_config
    from fedbound.config import load_config

    cfg = load_config(config, [CONFIG_SECTION], overrides or [])
    return settings_from_config(dict(cfg["nbafl"]))


def _fmt(x: Any) -> Any:
    return "-" if x is None else x


def _print_plan(p: dict[str, Any]) -> None:
    from fedbound.output import print_table, print_warnings

    t_note = "the config's T" if p["T_source"] == "config" else "at T_opt"
    rows: list[list[Any]] = [
        ["sigma_uplink (client noise std)", p["sigma_uplink"], _fmt(p["sigma_uplink_tight"]),
         "per coordinate"],
        ["sigma_downlink (server noise std)", p["sigma_downlink"], _fmt(p["sigma_downlink_tight"]), t_note],
        ["sigma_aggregate (effective)", p["sigma_aggregate"], _fmt(p["sigma_aggregate_tight"]), t_note],
        ["T used for the sigma's", p["T"], "", p["T_source"]],
        ["T_opt (Theorem 2)", p["T_opt"], _fmt(p["T_opt_tight"]),
         f"continuous {p['T_opt_continuous']:.4g}; Lambert-W upper {p['T_opt_linear']:.4g}"],
        ["bound at T_opt", p["bound_at_T_opt"], _fmt(p["bound_at_T_opt_tight"]),
         f"Theta = {p['setting']['Theta']:g}"],
    ]
    if "bound_at_T" in p:
        rows.append(["bound at the config's T", p["bound_at_T"], "-", ""])
    if p.get("K") is not None:
        rows += [
            ["K (config)", p["K"], "", f"of N = {p['setting']['N']}"],
            ["sigma_downlink_k (Lemma 4)", p["sigma_downlink_k"], _fmt(p.get("sigma_downlink_k_tight")),
             "tight: RDP, K-of-N without replacement"],
            ["sigma_aggregate_k", p["sigma_aggregate_k"], _fmt(p.get("sigma_aggregate_k_tight")), ""],
            ["Theorem 3 bound at (T, K)", _fmt(p["bound_k_at_T"]), "-", "- = outside (60)"],
        ]
        if p.get("K_opt") is not None:
            edge = "K = N" if p["K_opt_is_N"] else (
                "domain edge" if p["K_opt_at_domain_edge"] else "interior")
            rows.append(["K_opt (Theorem 3, over 1..N)", p["K_opt"], "-",
                         f"{edge}; bound {p['bound_at_K_opt']:.4g}"])
        j = p["joint_opt"]
        if j["success"]:
            rows.append(["joint (T, K) optimum", f"({j['T']}, {j['K']})", "-", f"bound {j['fun']:.4g}"])
    print_table(f"NbAFL plan (seed 002), variant {p['variant']}", ["quantity", "paper", "tight", "note"],
                rows, caption="tight: exact Gaussian composition (analytic Gaussian), fedbound.accounting")
    print_warnings(p["warnings"])


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @groups["plan"].command("nbafl")
    def plan_nbafl(config: ConfigArg, overrides: SetOverrides = None, variant: VariantOpt = "paper",
                   json_out: JsonFlag = False) -> None:
        """NbAFL (seed 002): noise sigma's (paper and tight), optimal T, the bound, optimal K, warnings."""
        import warnings

        from fedbound.output import print_json
        from fedbound.scheduling.nbafl import plan

        settings = _settings(config, overrides)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = plan(settings, variant)
        if json_out:
            print_json(result)
        else:
            _print_plan(result)

    @groups["plot"].command("nbafl")
    def plot_nbafl(config: ConfigArg,
                   vs: Annotated[str, typer.Option("--vs", help="T, eps, N or K")] = "T",
                   out: Annotated[Path | None, typer.Option("--out", help="output file (.png and .svg are "
                                                            "written)")] = None,
                   overrides: SetOverrides = None, variant: VariantOpt = "paper",
                   json_out: JsonFlag = False) -> None:
        """Plot the NbAFL bound against T, eps, N or K (figures 7-10 of seed 002), optimum marked.

        --json prints the files and the plotted curves (x, y; null where the bound is undefined)."""
        from fedbound.output import print_json
        from fedbound.validation.bound_plots import plot_nbafl as draw

        settings = _settings(config, overrides)
        curves: list = []
        paths = draw(settings, vs, out or Path(f"nbafl_vs_{vs}.png"), variant, curves=curves)
        if json_out:
            print_json({"paper": "nbafl", "vs": vs, "variant": variant, "files": paths, "curves": curves})
            return
        for p in paths:
            typer.echo(str(p))

    @groups["claims"].command("nbafl")
    def claims_nbafl(json_out: JsonFlag = False,
                     points: Annotated[int, typer.Option("--points", help="random points per claim")] = 10,
                     seed: Annotated[int, typer.Option("--seed")] = 0) -> None:
        """Check every declared claim of seed 002: holds, or fails in a region (with a counterexample)."""
        import warnings

        from fedbound.bounds import nbafl
        from fedbound.bounds.claims import check_all
        from fedbound.output import print_json, print_table
        from fedbound.scheduling import nbafl as sched

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reports = check_all(nbafl.CLAIMS + sched.CLAIMS, n=points, seed=seed)
        if json_out:
            print_json({"paper": "nbafl", "points_per_claim": points, "claims": reports})
            return
        rows = [[r.id, r.status, r.statement] for r in reports]
        print_table("NbAFL claims (seed 002)", ["id", "status", "claim"], rows,
                    caption=f"'holds': checked on {points} random points of the claim's region (--points); "
                            "'fails in region': the paper's claim, false where shown below")
        _print_failures(reports)
        bad = [r.id for r in reports if r.status == "CONTRADICTED"]
        if bad:
            typer.echo(f"contradicted: {', '.join(bad)}", err=True)
            raise typer.Exit(1)


def _print_failures(reports) -> None:
    """Each claim that fails somewhere: where, and its counterexamples, readable at 80 columns."""
    from fedbound.output import console

    con = console()
    for r in reports:
        if not r.fails_in and not r.counterexamples:
            continue
        con.print(f"\n{r.id} {r.statement}", markup=False, highlight=False, style="bold")
        if r.fails_in:
            con.print(f"  fails in: {r.fails_in}", markup=False, highlight=False)
        for example in r.counterexamples:
            con.print(f"  counterexample: {example}", markup=False, highlight=False)
