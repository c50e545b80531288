"""``fedbound report RESULTS_DIR``: one self-contained HTML page per results folder
(fedbound.validation.report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("report")
    def report_cmd(
        results: Annotated[Path, typer.Argument(metavar="RESULTS_DIR", help="the --out folder of fedbound "
                                                "reproduce / validate", show_default=False)],
        out: Annotated[Path | None, typer.Option("--out", help="the HTML file (default RESULTS_DIR/"
                                                               "report.html)")] = None,
        points: Annotated[int, typer.Option("--points", help="random points per bound claim, 1..10000")] = 10,
        seed: Annotated[int, typer.Option("--seed", help="seed of the random points, >= 0")] = 0,
    ) -> None:
        """One HTML page, figures embedded, no network needed to view it: per paper the plan, predicted vs
        measured, every claim's status (bound and figure claims) and the errata.  Prints its path."""
        from fedbound.extras import require

        require("report", "report")
        from fedbound.checks import check_int
        from fedbound.validation.report import build_report

        seed = int(check_int("--seed", seed, 0, 2**32 - 1))
        typer.echo(str(build_report(results, out, points=points, seed=seed)))
