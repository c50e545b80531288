"""``fedbound flower PAPER CONFIG``: the plan as a runnable Flower app, or run on Flower's simulation
engine (fedbound.deploy)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, DesignOpt, JsonFlag, SetOverrides


def _papers() -> str:
    from fedbound.deploy.mechanisms import deployable_names

    return ", ".join(deployable_names())


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("flower", help="Deploy PAPER's plan on Flower: write a runnable Flower app (--out APP_DIR), "
                                "or with --run run it on Flower's simulation engine and write the same run "
                                "directory as fedbound train, fedbound's ledger accounting every round. "
                                f"Papers: {_papers()}. Needs the flower extra "
                                "(pip install 'fedbound\\[flower]').")
    def flower(
        paper: Annotated[str, typer.Argument(metavar="PAPER", help=f"Paper: {_papers()}.",
                                             show_default=False)],
        config: ConfigArg,
        set_: SetOverrides = None,
        out: Annotated[str | None, typer.Option("--out", help="The app directory to write (default "
                                                 "flower_<paper>_<config>); with --run the run directory "
                                                 "(default runs/<paper>_<config>_flower).")] = None,
        run: Annotated[bool, typer.Option("--run", help="Run the app locally on Flower's simulation engine "
                                          "(one virtual SuperNode per client).")] = False,
        supernodes: Annotated[int | None, typer.Option("--supernodes", help="SuperNodes of the simulation "
                                                       "(must equal the plan's N; default N).")] = None,
        design: DesignOpt = None,
        seed: Annotated[int | None, typer.Option("--seed", help="Override the \\[train] seed.")] = None,
        timeout: Annotated[float, typer.Option("--round-timeout", help="Seconds the server waits for a "
                                               "round's uploads.")] = 600.0,
        verbose: Annotated[bool, typer.Option("--verbose", help="Show Flower's and Ray's logs.")] = False,
        json_: JsonFlag = False,
    ) -> None:
        """Write PAPER's plan on CONFIG as a Flower app, or run it (--run)."""
        from fedbound.deploy.flower_app import require_flower, run_app, write_app
        from fedbound.deploy.flower_session import run_config
        from fedbound.deploy.mechanisms import lookup, mechanism
        from fedbound.errors import ConfigError
        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.validation.recipes.runner import build_run, prepare_run

        lookup(paper)
        require_flower()
        if design == "recommended" and mechanism(paper) is not None:
            raise ConfigError(f"--design = 'recommended' is outside its valid range for {paper}: a deploy "
                              "mechanism without fedbound's planner; give T and K in its config section")
        if out is not None and not out.strip():
            raise ConfigError("--out = '' names no folder: give the folder to write")
        stem = Path(config).stem
        target = Path(out) if out is not None else (Path("runs") / f"{paper}_{stem}_flower" if run
                                              else Path(f"flower_{paper}_{stem}"))
        overrides = list(set_ or [])
        notes: list[str] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prep = prepare_run(paper, config, overrides, seed=seed, paper=mechanism(paper),
                               design="paper" if mechanism(paper) is not None else design)
            plan = build_run(prep).plan
        run_dir = (target if run else Path("runs") / f"{paper}_{stem}_flower").resolve()
        cfg = run_config(prep, plan, run_dir, timeout)
        plan_rows = [(k, v) for k, v in cfg.items() if k.startswith("plan.")]
        if not run:
            written = write_app(cfg, target)
            if json_:
                print_json({"app_dir": str(written), "plan": dict(plan_rows), "warnings": notes})
                return
            print_table(f"fedbound flower {paper}: Flower app", ["quantity", "value"],
                        [("app directory", str(written)), *plan_rows,
                         ("run it", f"flwr run {written}  (or: fedbound flower {paper} {config} --run)")])
            print_warnings(notes)
            return
        s = run_app(cfg, supernodes, verbose=verbose)
        if json_:
            print_json(s)
            return
        rows = [("rounds done / planned", f"{s['rounds_done']} / {s['rounds_planned']}"),
                ("final loss", s["final_loss"]), ("final accuracy", s["final_accuracy"])]
        if s["private"]:
            rows += [("eps budget (delta)", f"{s['eps_budget']:g} ({s['delta']:g})"),
                     ("eps spent, tight accountant", s["epsilon_spent"]),
                     ("eps spent, paper's accountant", s["epsilon_spent_paper"]),
                     ("eps of the broadcast: fedbound's ledger",
                      ", ".join(f"{g} {v:.6g}" for g, v in (s.get("epsilon_broadcast") or {}).items()
                                if v is not None) or "-"),
                     ("eps of the broadcast: Flower's RdpAccountant", s.get("epsilon_flower") or "-")]
        rows += [*plan_rows, ("resumed from round", s["resumed_from_round"]), ("run directory", s["run_dir"])]
        print_table(f"fedbound flower {paper} --run", ["quantity", "value"], rows)
        print_warnings([*notes, *s["warnings"]])
