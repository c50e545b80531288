"""Options every command shares, so ``--json`` and ``--set`` read the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
SetOverrides = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY=VALUE",
                 help="Override a config key (repeatable): KEY or section.KEY, VALUE as a TOML literal."),
]
ConfigArg = Annotated[Path, typer.Argument(help="TOML config file (see examples/).", show_default=False)]
ProgressFlag = Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")]
DesignOpt = Annotated[str | None, typer.Option(
    "--design", help="recommended: the plan's recommended design (its T, K, tight noise); paper: the "
                     "config's values and the paper's formulas. Default: recommended when the config "
                     "leaves T open, else paper.")]
