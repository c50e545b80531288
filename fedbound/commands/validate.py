"""``fedbound validate PAPER CONFIG --vs T``: the paper's bound at measured constants against training runs.

Generic over the registry (each paper's validation entry, fedbound.validation.estimate.paper_entry): measures
the constants, sweeps ``--vs`` over ``--values`` with ``--seeds`` seeds each (fedbound.validation.sweep),
prints one line per verdict and writes validation.csv, validation.json and the figure.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides
from fedbound.commands.estimate import CacheOpt, RoundsOpt, _papers


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("validate", help="Predicted vs measured: train a sweep over one variable, measure the gap "
                                  "F(w_T) - F*, evaluate the bound at measured constants, and say whether it "
                                  f"holds and predicts the optimum. Papers: {_papers()}.")
    def validate_cmd(
        paper: Annotated[str, typer.Argument(metavar="PAPER", help=f"Paper: {_papers()}.",
                                             show_default=False)],
        config: ConfigArg,
        vs: Annotated[str, typer.Option("--vs", help="The swept variable (the paper's choices; a wrong one "
                                        "lists them).")] = "T",
        values: Annotated[str | None, typer.Option("--values", help="Comma-separated values of --vs "
                                                   "(default: the paper's entry's).")] = None,
        seeds: Annotated[int, typer.Option("--seeds", help="Seeds per value (1..1000).")] = 3,
        out: Annotated[str | None, typer.Option("--out", metavar="DIR",
                                                help="Output folder (default runs/validate_PAPER_"
                                                 "CONFIG_VS).")] = None,
        executor: Annotated[str, typer.Option("--executor", help="local or ray.")] = "local",
        address: Annotated[str | None, typer.Option("--address", help="Ray cluster address.")] = None,
        overrides: SetOverrides = None,
        rounds: RoundsOpt = 10,
        cache: CacheOpt = "runs/cache",
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")
                            ] = True,
        json_: JsonFlag = False,
    ) -> None:
        """Validate PAPER's bound against a sweep of training runs on CONFIG."""
        from fedbound.extras import require

        require("train", "validate")
        from fedbound.commands.train import _train_extra
        from fedbound.output import print_json, print_table
        from fedbound.paths import out_folder
        from fedbound.validation.estimate.validate import validate

        folder = out_folder("--out", out) if out is not None else None
        cache_dir = out_folder("--cache", cache)
        with _train_extra():
            result = validate(paper, config, vs, values, seeds, folder, executor=executor, address=address,
                              overrides=overrides or [], rounds=rounds, cache=cache_dir,
                              progress=progress and not json_)
        if json_:
            print_json(result.to_dict())
            return
        def _ci(x):  # one seed has no interval
            return "n/a" if x is None else x

        rows = [[p[vs], p["seeds"], p["mean"], _ci(p["ci_low"]), _ci(p["ci_high"]), result.bound["paper"][i],
                 result.bound["tight"][i], result.calibrated["prediction"][i]]
                for i, p in enumerate(result.measured)]
        print_table(f"fedbound validate {result.paper}: F(w_T) - F* against {result.theorem}",
                    [vs, "seeds", "measured", "95% low", "95% high", "bound", "bound (tight)", "calibrated"],
                    rows, digits=4)
        for name, verdict in result.verdicts.items():
            typer.echo(f"{name}: {verdict['text']}")
        for kind, path in result.files.items():
            typer.echo(f"{kind}: {path}")
