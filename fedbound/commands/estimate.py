"""``fedbound estimate PAPER CONFIG``: the constants of a paper's bound, measured on the configured model.

Generic over the registry: the paper's validation entry says which config keys its bound needs and which
measured quantity sets each (fedbound.validation.estimate.paper_entry); ``--write`` puts them into a copy of
the config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides

RoundsOpt = Annotated[int, typer.Option("--rounds", help="Non-private rounds of the trajectory the constants "
                                        "are measured along (1..10000).")]
CacheOpt = Annotated[str, typer.Option("--cache", metavar="DIR",
                                       help="Folder caching F* of non-convex models (keyed by a "
                                        "hash of the config).")]


def _papers() -> str:
    from fedbound.registry import papers

    return ", ".join(n for n, p in papers().items() if p.validation is not None)


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("estimate", help="Measure the constants of a paper's bound (smoothness, PL, gradient bound, "
                                  "dissimilarity, initial gap) on CONFIG's model and data. "
                                  f"Papers: {_papers()}.")
    def estimate_cmd(
        paper: Annotated[str, typer.Argument(metavar="PAPER", help=f"Paper: {_papers()}.",
                                             show_default=False)],
        config: ConfigArg,
        overrides: SetOverrides = None,
        write: Annotated[Path | None, typer.Option("--write", help="Write a copy of CONFIG with the measured "
                                                   "constants (fedbound plan then lists them as measured)."
                                                   )] = None,
        rounds: RoundsOpt = 10,
        cache: CacheOpt = "runs/cache",
        json_: JsonFlag = False,
    ) -> None:
        """Measure the constants of PAPER's bound on CONFIG's model and data."""
        from fedbound.extras import require

        require("train", "estimate")
        from fedbound.commands.train import _train_extra
        from fedbound.output import print_json, print_table
        from fedbound.paths import out_folder
        from fedbound.validation.estimate import check_write_target, estimate, write_config

        cache_dir = out_folder("--cache", cache)

        if write is not None:
            check_write_target(config, write)
        with _train_extra():
            est = estimate(paper, config, overrides or [], rounds=rounds, cache=cache_dir)
        written = str(write_config(est, write, overrides or [])) if write is not None else None
        if json_:
            print_json({**est.to_dict(), "written": written})
            return
        rows = []
        for key, q in est.sources.items():
            e = est.quantities[q]
            rows.append([key, e.value, f"{e.low:.4g} .. {e.high:.4g}", e.method])
        rows += [[key, "not measured", "", why] for key, why in est.unmeasured.items()]
        print_table(f"fedbound estimate {est.paper}: measured constants", ["key", "value", "spread", "how"],
                    rows, caption=f"F* = {est.minimum.value:.6g} ({est.minimum.method}); F(w0) = "
                                  f"{est.initial_loss:.6g}; {est.rounds} non-private rounds; "
                                  f"{est.wall_time_s:.1f} s")
        for note in est.notes:
            typer.echo(f"note: {note}")
        if written:
            typer.echo(f"wrote {Path(written).resolve()}")
