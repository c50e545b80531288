"""``fedbound flower PAPER CONFIG``: the plan as a runnable Flower app, or run on Flower's simulation
engine (fedbound.deploy)."""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, DesignOpt, JsonFlag, ProgressFlag, SetOverrides


def _papers() -> str:
    from fedbound.deploy.mechanisms import deployable_names

    return ", ".join(deployable_names())


def _flower_rows(info: dict | None) -> list[tuple[str, str]]:
    """Flower's accountant beside fedbound's: its eps of the broadcast, why it differs, its guard."""
    if not info or info.get("privacy_config") is None:
        note = (info or {}).get("note", "-")
        return [("Flower's RdpAccountant", note)]
    eps = info.get("epsilon")
    flagged = info.get("would_exceed_rounds") or []
    guard = (f"{info['guard']}: would_exceed flagged round {flagged[0]}" if flagged
             else f"{info['guard']}: would_exceed never flagged a round")
    return [("eps of the broadcast: Flower's RdpAccountant", "-" if eps is None else f"{eps:.6g}"),
            ("why the two differ", info.get("difference", "-")),
            (f"Flower's guard (max_epsilon = {info['privacy_config']['max-epsilon']:g})", guard)]


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("flower", help="Deploy PAPER's plan on Flower: write a runnable Flower app (--out APP_DIR), "
                                "or with --run run it on Flower's simulation engine (with --deployment "
                                "local: on Flower's deployment engine, a SuperLink and one SuperNode per "
                                "client as separate processes, TLS-secured) and write the same run "
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
        seed: Annotated[int | None, typer.Option("--seed", help="Override the \\[train] seed (the data split "
                                                 "and the initial model; the noise never).")] = None,
        deployment: Annotated[str | None, typer.Option(
            "--deployment", metavar="local", help="With --run: run on Flower's deployment engine instead of "
                                                  "its simulation engine. local: a SuperLink and one "
                                                  "SuperNode per client as separate processes on this "
                                                  "machine, TLS with certificates made for the run; every "
                                                  "process is stopped when the run ends, fails or is "
                                                  "interrupted.")] = None,
        insecure: Annotated[bool, typer.Option("--insecure", help="With --deployment: no TLS (debugging "
                                               "only: uploads and models travel unencrypted).")] = False,
        flower_guard: Annotated[str, typer.Option(
            "--flower-guard", metavar="report|stop",
            help="Flower's own accountant (the PrivacyConfig the plan emits, max_epsilon = the budget) "
                 "checks every round with would_exceed. report: a round it flags runs if fedbound's ledger "
                 "allows it, and is reported; stop: it is not sent.")] = "report",
        timeout: Annotated[float, typer.Option("--round-timeout", help="Seconds the server waits for a "
                                               "round's uploads, 1 to 604800.")] = 600.0,
        reproducible: Annotated[bool, typer.Option(
            "--reproducible-noise", help="With --run only: draw every noise from the run seed, as "
                                         "fedbound train does (reproducible, so NOT private against anyone "
                                         "holding the config). Without it every party draws its noise from "
                                         "OS entropy.")] = False,
        progress: ProgressFlag = True,
        verbose: Annotated[bool, typer.Option("--verbose", help="Show Flower's and Ray's logs.")] = False,
        json_: JsonFlag = False,
    ) -> None:
        """Write PAPER's plan on CONFIG as a Flower app, or run it (--run)."""
        from fedbound.deploy.flower_app import flower as deploy
        from fedbound.deploy.processes import Terminated
        from fedbound.output import print_json, print_table, print_warnings

        try:
            s = deploy(paper, config, set_ or [], out=out, run=run, supernodes=supernodes, design=design,
                       seed=seed, round_timeout=timeout, reproducible_noise=reproducible,
                       progress=progress and not json_, verbose=verbose, deployment=deployment,
                       insecure=insecure, flower_guard=flower_guard)
        except (KeyboardInterrupt, Terminated) as exc:  # the deployment's processes are stopped by now
            if deployment is None:
                raise
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
            typer.echo(f"fedbound flower: {why}: every process of the deployment was stopped; the run "
                       "directory keeps the rounds done (the same command resumes)", err=True)
            raise typer.Exit(130 if isinstance(exc, KeyboardInterrupt) else 128 + exc.signum) from None
        if json_:
            print_json(s)
            return
        if not run:
            print_table(f"fedbound flower {paper}: Flower app", ["quantity", "value"],
                        [("app directory", s["app_dir"]), *s["plan"].items(), *s["flower_privacy"].items(),
                         ("noise", "OS entropy, drawn by the party that adds it"),
                         ("run it", f"flwr run {s['app_dir']}  (or: fedbound flower {paper} {config} "
                                    "--run)")])
            print_warnings(s["warnings"])
            return
        from fedbound.deploy.flower_server import binding_epsilon  # torch: after the extras are checked
        from fedbound.deploy.flower_session import REPRODUCIBLE_NOTE

        rows = [("rounds done / planned", f"{s['rounds_done']} / {s['rounds_planned']}"),
                ("final loss", s["final_loss"]), ("final accuracy", s["final_accuracy"])]
        if s["private"]:
            binding, label, other, other_label = binding_epsilon(s, s["binding_accountant"])
            spent = "-" if binding is None else f"{binding:.6g}"
            rows += [(f"eps spent / budget, binding: {label}", f"{spent} / {s['eps_budget']:g} "
                                                                 f"(delta {s['delta']:g})"),
                     (f"eps, {other_label}", "-" if other is None else f"{other:.6g}"),
                     ("eps of the broadcast: fedbound's ledger",
                      ", ".join(f"{g} {v:.6g}" for g, v in (s.get("epsilon_broadcast") or {}).items()
                                if v is not None) or "-"),
                     *_flower_rows(s.get("flower_accounting"))]
        noise = REPRODUCIBLE_NOTE if s.get("noise_source") != "os-entropy" else \
            "OS entropy, drawn by the party that adds it"
        rows += [("noise", noise), *s["app_plan"].items()]
        rows += [("resumed from round", s["resumed_from_round"]), ("run directory", s["run_dir"])]
        if s.get("deployment"):
            d = s["deployment"]
            security = "TLS" if d["tls"] else "INSECURE (no TLS)"
            rows += [("deployment", f"{d['kind']}: SuperLink {d['superlink']} and {d['supernodes']} "
                                    f"SuperNodes, separate processes, {security}; logs in {d['folder']}")]
        print_table(f"fedbound flower {paper} --run", ["quantity", "value"], rows)
        print_warnings(s["warnings"])
