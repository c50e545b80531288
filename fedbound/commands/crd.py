"""``fedbound crd replay LOSSES.csv CONFIG``: communication-rounds discounting (UDP, Alg. 2) replayed
on a loss curve of your own: CSV in, decisions out (the T in force, the discounts and the noise std round by
round, and what that noise spends)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides


def read_losses(path: Path, column: str | None = None) -> list[float]:
    """The loss column of a CSV (``loss`` by default, else the last column), in row order: row t is
    V(w^t), row 0 the initial model.  ConfigError on a missing, non-UTF-8 or ragged file, a missing column
    or a non-number."""
    from fedbound.errors import ConfigError
    from fedbound.paths import read_csv_rows

    rows = read_csv_rows(path, "LOSSES")
    if len(rows) < 2:
        raise ConfigError(f"{path}: needs a header row and at least one loss")
    header = [h.strip() for h in rows[0]]
    name = column or ("loss" if "loss" in header else header[-1])
    if name not in header:
        raise ConfigError(f"{path}: column {name!r} is outside its valid range one of {', '.join(header)}")
    j = header.index(name)
    out = []
    for i, row in enumerate(rows[1:], start=2):
        try:
            value = float(row[j])
        except ValueError as exc:
            raise ConfigError(f"{path}, line {i}: {name} = {row[j]!r} is not a number") from exc
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{path}, line {i}: {name} = {value} is not a finite number")
        out.append(value)
    return out


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    crd = typer.Typer(
        help="Communication-rounds discounting (UDP, Wei et al. 2021, Alg. 2).", no_args_is_help=True
    )
    app.add_typer(crd, name="crd")

    @crd.command("replay")
    def replay_cmd(
        losses: Annotated[
            Path,
            typer.Argument(
                help="CSV with a loss column: row t = V(w^t), t = 0 the initial model.", show_default=False
            ),
        ],
        config: ConfigArg,
        column: Annotated[
            str | None, typer.Option("--column", help="Loss column (default: loss, else the last column).")
        ] = None,
        set_: SetOverrides = None,
        json: JsonFlag = False,
    ) -> None:
        """Replay CRD's decisions (T and sigma per round) on a recorded loss curve and a [udp] config."""
        from fedbound.config import load_config
        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.registry import get
        from fedbound.scheduling.crd import replay

        paper = get("udp")
        section = paper.config_section
        cfg = load_config(config, [section], list(set_ or []))
        setting = {k: v for k, v in dict(cfg[section.name]).items() if v is not None}
        for key, value in paper.defaults.items():
            setting.setdefault(key, value)
        out = replay(setting, read_losses(losses, column))
        if json:
            print_json({"command": "crd replay", "losses": str(losses), "config": str(config), **out})
            return
        rows = [
            [
                r["t"],
                r["T"],
                r["loss_after"],
                r["improvement"],
                "yes" if r["discount"] else "",
                r["T_next"],
                r["sigma"],
            ]
            for r in out["rounds_detail"]
        ]
        print_table(
            f"CRD replay: beta = {out['policy']['beta']:g}, zeta = {out['policy']['zeta']:g}, "
            f"T_init = {out['T_init']}",
            ["t", "T", "loss after", "improvement", "discount", "T next", "sigma"],
            rows,
            caption=f"{out['rounds']} rounds, final T = {out['T_final']}, stopped: {out['stopped']}; "
            f"sigma of client {out['client']} (the largest noise per budget)",
        )
        notes = []
        if out.get("validity_x", 0.0) > 0.75:
            notes.append(
                f"UDP (Wei et al. 2021), eq. (15): the smallest sigma has lambda Delta_l^2/(2 sigma^2) = "
                f"{out['validity_x']:.3g} > 0.75; the paper's accountant no longer bounds the exact "
                "moment in that round"
            )
        if out["stopped"] == "losses ran out":
            notes.append("the loss file ended before CRD stopped: the decisions cover the rounds given")
        if "delta_at_eps_release" in out:
            notes.append(
                f"delta spent at eps by the sigma sequence: paper's accountant "
                f"{out['delta_at_eps_approx']:.4g}, exact release accountant "
                f"{out['delta_at_eps_release']:.4g}"
            )
        print_warnings(notes)
