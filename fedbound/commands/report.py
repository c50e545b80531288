"""``fedbound report RESULTS_DIR``: one self-contained HTML page per results folder
(fedbound.validation.report)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("report")
    def report_cmd(
        results: Annotated[str, typer.Argument(metavar="RESULTS_DIR", help="the --out folder of fedbound "
                                                "reproduce / validate", show_default=False)],
        out: Annotated[str | None, typer.Option("--out", metavar="FILE",
                                                help="the HTML file (default RESULTS_DIR/"
                                                               "report.html)")] = None,
        points: Annotated[int, typer.Option("--points", help="random points per bound claim, 1..10000")] = 10,
        seed: Annotated[int, typer.Option("--seed", help="seed of the random points, >= 0")] = 0,
    ) -> None:
        """One HTML page, figures embedded, no network needed to view it: per paper the plan, predicted vs
        measured, every claim's status (bound and figure claims) and the errata.  Prints its path."""
        from fedbound.extras import require

        require("report", "report")
        from fedbound.checks import check_int
        from fedbound.paths import in_folder, out_file
        from fedbound.validation.report import build_report

        folder = in_folder("RESULTS_DIR", results)  # both paths before the work, which takes minutes
        page = out_file("--out", out) if out is not None else out_file("RESULTS_DIR", folder / "report.html")
        seed = int(check_int("--seed", seed, 0, 2**32 - 1))
        typer.echo(str(build_report(folder, page, points=points, seed=seed)))
