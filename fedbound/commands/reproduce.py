"""``fedbound reproduce``: the papers' figure claims, re-created on the simulator and judged.

Generic over the registry: each paper's ``reproduce`` entry lists its targets (fedbound.validation.reproduce).
"""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import JsonFlag


def _list(paper: str | None, json_out: bool) -> None:
    from fedbound.output import print_json, print_table
    from fedbound.validation.reproduce import Uncovered, targets

    rows, doc = [], []
    for t in targets(paper):
        if isinstance(t, Uncovered):
            rows.append([t.paper, t.figure, "-", "-", f"{t.claim} [not reproduced: {t.reason}]", "-"])
            doc.append({"paper": t.paper, "figure": t.figure, "kind": None, "claim": None,
                        "statement": t.claim, "covered": False, "reason": t.reason})
            continue
        for claim, statement in t.statements():
            rows.append([t.paper, t.figure, t.kind, claim, statement, f"~{t.seconds:.0f} s"])
            doc.append({"paper": t.paper, "figure": t.figure, "kind": t.kind, "claim": claim,
                        "statement": statement, "covered": True, "seconds": t.seconds})
    if json_out:
        print_json({"targets": doc})
        return
    print_table("Figure claims", ["paper", "figure", "verdict", "claim", "statement", "demo time"], rows,
                caption="verdict: training (judged on runs), bound (the bound's formula, checked as fedbound "
                        "claims does), predicted vs measured (fedbound validate); time: estimated at demo "
                        "size on 2 idle cores (fedbound reproduce PAPER FIGURE)")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("reproduce")
    def reproduce_cmd(
        names: Annotated[list[str] | None, typer.Argument(
            metavar="[PAPER [FIGURE] ...]", show_default=False,
            help="a paper and a figure (see --list); several pairs run as one batched sweep; with --all, "
                 "one paper (or none: every paper)")] = None,
        all_: Annotated[bool, typer.Option("--all", help="every reproduced figure (of PAPER, or of every "
                                                         "paper)")] = False,
        list_: Annotated[bool, typer.Option("--list", help="list every figure claim: paper, figure, claim "
                                                           "in words, run time, and what is not covered")
                         ] = False,
        scale: Annotated[str, typer.Option(
            "--scale", help="tiny (seconds), demo (minutes, embedded data) or paper (the paper's setting on "
                            "the full MNIST of fedbound data mnist; hours)")] = "demo",
        data: Annotated[str | None, typer.Option(
            "--data", help="--scale paper: the dataset from a path instead of the data cache (a folder of "
                           "MNIST IDX files or CIFAR-10 batches; IPUMS-US: a CSV file)")
        ] = None,
        seeds: Annotated[int | None, typer.Option("--seeds", help="seeds per case (default: the scale's)")
                         ] = None,
        out: Annotated[str, typer.Option("--out", metavar="DIR",
                                         help="results folder (runs are shared and resumed)")
                       ] = "out/reproduce",
        executor: Annotated[str, typer.Option("--executor", help="local or ray")] = "local",
        address: Annotated[str | None, typer.Option("--address", help="Ray cluster address")] = None,
        workers: Annotated[int | None, typer.Option("--workers", help="local worker processes")] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar")] = True,
        json_out: JsonFlag = False,
    ) -> None:
        """Re-create a paper's figure on the simulator and judge each of its claims: 'holds in k/n seeds,
        effect size x (95 % interval)' or 'does not hold' with the numbers.  PNG + SVG + CSV per figure."""
        from fedbound.errors import ConfigError
        from fedbound.extras import require
        from fedbound.output import print_json
        from fedbound.paths import out_folder
        from fedbound.validation.reproduce import Uncovered, find, reproduce, targets

        names = list(names or [])
        if data is not None and not data.strip():  # Path('') would be shown (and read) as '.'
            raise ConfigError("--data '' is empty: give the folder that holds the full dataset "
                              "(--scale paper)")
        if list_:
            if len(names) > 1:
                raise ConfigError("--list takes at most one PAPER")
            _list(names[0] if names else None, json_out)
            return
        require("train", "reproduce")
        if all_:
            if len(names) > 1:
                raise ConfigError("--all takes at most one PAPER, not a FIGURE")
            chosen = [t for t in targets(names[0] if names else None) if not isinstance(t, Uncovered)]
        elif not names or len(names) % 2:
            given = f"; got {' '.join(repr(n[:60]) for n in names[:4])}" if names else ""
            raise ConfigError("fedbound reproduce needs PAPER FIGURE [PAPER FIGURE ...], PAPER --all, --all "
                              f"or --list{given}")
        else:
            chosen = [find(p, f) for p, f in zip(names[::2], names[1::2], strict=True)]
        results = reproduce(chosen, out_folder("--out", out), scale=scale, seeds=seeds, data=data,
                            executor=executor, workers=workers, address=address,
                            progress=progress and not json_out)
        if all(r.needs for r in results):  # nothing could run: say what to get, as an error
            raise ConfigError(results[0].notes[0])
        if not json_out:
            for result in results:
                for line in result.lines():
                    typer.echo(line)
                typer.echo(f"  files: {', '.join(str(p) for p in result.files.values())}")
        if json_out:
            print_json({"scale": scale, "out": str(out), "figures": [
                {"paper": r.target.paper, "figure": r.target.figure, "files": r.files,
                 "verdicts": r.lines(), "failed_runs": len(r.failed), "needs": r.needs} for r in results]})
