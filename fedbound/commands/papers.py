"""``fedbound papers | plan | plot | claims``: one generic face over the paper registry (fedbound.registry).

Nothing here names a paper: each command looks the paper up in the registry and calls what its entry points
to (planner, plots, claims).  A newly registered paper appears in every command and in ``--help``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedbound.commands._common import JsonFlag, SetOverrides


def _paper_help(capability: str) -> str:
    from fedbound.registry import names

    return f"Paper: {', '.join(names(capability)) or 'none registered'} (see fedbound papers)."


VariantOpt = Annotated[str, typer.Option(
    "--variant", help="paper (default) or a named reading of an erratum (see the paper's theorems); "
                      "combine with '+'.")]
OptionalConfig = Annotated[Path | None, typer.Argument(
    help="TOML config file (see examples/); optional: --set KEY=VALUE alone also works.", show_default=False)]


def _setting(paper, config: Path | None, overrides: list[str] | None):
    return paper.load_setting(config, overrides or [])


def _check_variant(paper, variant: str) -> str:
    from fedbound.errors import ParameterError

    if not variant.strip():
        raise ParameterError("--variant", variant, "paper or one of the paper's named readings")
    paper.variants(variant)
    return variant


def build_plan(paper_name: str, config: Path | None, overrides: list[str] | None, variant: str = "paper",
               check: bool = False):
    """The Plan ``fedbound plan PAPER [CONFIG] --set ... --variant V`` prints (and the explorer's
    ``/api/plan`` returns): the setting validated by the paper's config section, the planner's answer, the
    assumed defaults and every warning (notes about the setting first)."""
    from fedbound.planning import plan_for
    from fedbound.registry import get

    paper = get(paper_name, "plan")
    setting = _setting(paper, config, overrides)
    _check_variant(paper, variant)
    return plan_for(paper, setting, variant, check=check)


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("papers")
    def papers_cmd(json_out: JsonFlag = False) -> None:
        """The registered papers: title, citation, what fedbound supports for each, and their config keys."""
        from fedbound.output import print_json, print_table
        from fedbound.registry import papers

        entries = papers()
        if json_out:
            print_json({"papers": [p.describe() for p in entries.values()]})
            return
        rows = [[p.name, p.short, p.venue, ", ".join(p.supports)] for p in entries.values()]
        print_table("Registered papers", ["name", "paper", "venue", "supports"], rows,
                    caption="titles, citations, config keys with domains and meanings: "
                            "fedbound papers --json")

    @app.command("plan", help="Optimal design for a paper's setting: the recommendation (T, K, sigma per "
                              "stage under proven accounting, and its bound), then the paper's own answer. "
                 + _paper_help("plan"))
    def plan_cmd(paper_name: Annotated[str, typer.Argument(metavar="PAPER", help=_paper_help("plan"),
                                                           show_default=False)],
                 config: OptionalConfig = None, overrides: SetOverrides = None, variant: VariantOpt = "paper",
                 json_out: JsonFlag = False,
                 check: Annotated[bool, typer.Option(
                     "--check", help="run the recommendation's certificate in full (independent check of "
                                     "the optimum, privacy re-accounted) and exit 1 if it fails")] = False,
                 ) -> None:
        """Plan a deployment for one paper's setting."""
        from fedbound.output import print_json, print_plan

        result = build_plan(paper_name, config, overrides, variant, check=check)
        if json_out:
            print_json(result)
        else:
            print_plan(result)
        if check and (result.certificate is None or not result.certificate.passed):
            why = "no certificate" if result.certificate is None else result.certificate.line()
            typer.echo(f"error: the certificate of the {paper_name} plan failed: {why}", err=True)
            raise typer.Exit(1)

    @app.command("plot", help="Plot a paper's bound against one variable (PNG and SVG). "
                 + _paper_help("plot"))
    def plot_cmd(paper_name: Annotated[str, typer.Argument(metavar="PAPER", help=_paper_help("plot"),
                                                           show_default=False)],
                 config: OptionalConfig = None,
                 vs: Annotated[str, typer.Option("--vs", help="the variable on the x axis (the paper's "
                                                             "choices; a wrong one lists them)")] = "T",
                 out: Annotated[str | None, typer.Option("--out", metavar="FILE",
                                                         help="output file (.png and .svg are "
                                                          "written; default PAPER_vs_X.png)")] = None,
                 overrides: SetOverrides = None, variant: VariantOpt = "paper",
                 json_out: JsonFlag = False) -> None:
        """Plot the bound against one variable, optimum marked; --json prints the files and the curves."""
        import warnings

        from fedbound.output import print_json
        from fedbound.paths import out_file
        from fedbound.registry import get
        from fedbound.validation.reproduce.plots import draw_figure

        target = out_file("--out", out) if out is not None else None
        paper = get(paper_name, "plot")
        setting = _setting(paper, config, overrides)
        _check_variant(paper, variant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            paths, curves = draw_figure(paper.load("plots"), setting.values, vs,
                                        target or Path(f"{paper.name}_vs_{vs}.png"), variant)
        if json_out:
            print_json({"paper": paper.name, "vs": vs, "variant": variant, "files": paths, "curves": curves})
            return
        for p in paths:
            typer.echo(str(p))

    @app.command("claims", help="Check every declared claim of a paper: holds, or fails in a region (with "
                                "counterexamples). " + _paper_help("claims"))
    def claims_cmd(paper_name: Annotated[str, typer.Argument(metavar="PAPER", help=_paper_help("claims"),
                                                             show_default=False)],
                   json_out: JsonFlag = False,
                   points: Annotated[int, typer.Option("--points", help="random points per claim, 1..10000"
                                                       )] = 10,
                   seed: Annotated[int, typer.Option("--seed", help="seed of the random points, >= 0")] = 0
                   ) -> None:
        """Check every declared claim of a paper."""
        import warnings

        from fedbound.bounds.claims import check_all
        from fedbound.checks import check_int
        from fedbound.output import print_json, print_table
        from fedbound.registry import get

        paper = get(paper_name, "claims")
        points = int(check_int("--points", points, 1, 10_000))
        seed = int(check_int("--seed", seed, 0, 2**32 - 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reports = check_all(paper.all_claims(), n=points, seed=seed)
        if json_out:
            print_json({"paper": paper.name, "points_per_claim": points, "claims": reports})
            return
        rows = [[r.id, r.status, r.statement] for r in reports]
        print_table(f"{paper.short}: claims", ["id", "status", "claim"], rows,
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
