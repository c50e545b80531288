"""``fedbound schedule PAPER CONFIG``: a paper's per-round schedule (WPFL: the min-max fair
schedule of Alg. 2 -- selection, subchannel, power, eta_F, and eta_P, lambda per client -- with the min-max
bound and Jain's index per round).  ``--compare-training`` trains the proposed policy next to the
baselines and prints the paper's three metrics with its reported improvements beside ours.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, SetOverrides

SCHEDULED = ("wpfl",)


def _print_round(sched, t: int) -> None:
    from fedbound.output import print_table

    d = sched.round_dict(t)
    rows = []
    for n, chan in enumerate(d["assignment"]):
        rows.append([n, "-" if chan is None else chan, d["power"][n], d["rho_L"][n], d["rho_G"][n],
                     d["eta_pl"][n], d["lambda"][n], d["Phi"][n]])
    print_table(f"round {t + 1}: eta_F = {d['eta_fl']:.6g}, Theta_L,min = {d['theta_L_min']:.6g}, "
                f"min-max bound = {d['max_bound']:.6g}, Jain's index = {d['jain_index']:.6g}",
                ["client", "subchannel", "power W", "rho_L", "rho_G", "eta_P", "lambda", "Phi_n"], rows,
                digits=5)


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("schedule")
    def schedule(
        paper: Annotated[str, typer.Argument(help="Paper with a per-round schedule: wpfl.")],
        config: ConfigArg,
        overrides: SetOverrides = None,
        show: Annotated[int, typer.Option("--rounds", help="Rounds printed in full, 0..100000 (JSON has all)."
                                          )] = 3,
        noise: Annotated[str, typer.Option("--noise", help="sigma_DP method of fedbound.bounds.wpfl.noise: "
                                           "paper, tight, gaussian, moments, none.")] = "paper",
        variant: Annotated[str, typer.Option("--variant", help="Bound reading: paper, corrected, "
                                             "psi_young.")] = "paper",
        compare_training: Annotated[bool, typer.Option(
            "--compare-training", help="Train proposed, round-robin, random and non-adjustment and print "
            "accuracy, max test loss and Jain's index beside the paper's reported improvements.")] = False,
        out: Annotated[str | None, typer.Option("--out", metavar="DIR",
                                                help="Run directory for --compare-training.")
                       ] = None,
        json: JsonFlag = False,
    ) -> None:
        """The per-round schedule of a paper's policy (WPFL: Kuhn-Munkres selection, power, eta_F, per-client
        eta_P and lambda from P7), the min-max bound and Jain's index."""
        from fedbound.bounds.wpfl import noise as wpfl_noise
        from fedbound.checks import check_int
        from fedbound.commands.papers import _check_variant
        from fedbound.errors import ConfigError
        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.paths import out_folder
        from fedbound.registry import get
        from fedbound.scheduling.wpfl import radio_setting, schedule_rounds
        from fedbound.validation.recipes.wpfl import compare_policies, full_setting

        entry = get(paper)
        if entry.name not in SCHEDULED:
            raise ConfigError(f"fedbound schedule {paper}: {entry.short} has no per-round schedule in "
                              f"fedbound "
                              f"(papers with one: {', '.join(SCHEDULED)})")
        show = int(check_int("--rounds", show, 0, 100_000))
        _check_variant(entry, variant)
        if compare_training:
            result = compare_policies(config, list(overrides or []),
                                      out_folder("--out", out) if out is not None else None)
            if json:
                print_json({"command": "schedule", "paper": paper, **result})
                return
            rows = [[p, r["accuracy"], r["max_test_loss"], r["jain_index"], r["rounds"]]
                    for p, r in result["policies"].items()]
            print_table("WPFL policies trained on the same data, channels and seed",
                        ["policy", "PL test accuracy", "max test loss", "Jain's index", "rounds"], rows,
                        digits=5)
            ours, theirs = result["improvement_percent"], result["paper_improvement_percent"]
            print_table("proposed vs the best baseline (%)", ["metric", "ours", "paper (CNN)"],
                        [[k, ours.get(k), theirs[k]] for k in theirs], digits=4, caption=result["note"])
            return
        from fedbound.bounds.wpfl import NOISE_METHODS
        from fedbound.planning import blame_input

        if noise not in NOISE_METHODS:
            raise ConfigError(f"--noise = {noise!r} is outside its valid range one of "
                              f"{', '.join(NOISE_METHODS)}")
        setting = entry.load_setting(config, list(overrides or []))

        def run(values):
            s = full_setting(values)
            sigma = wpfl_noise(s, int(s["T"]), noise)["uplink"]
            return sigma, schedule_rounds(radio_setting(s), s, sigma, s["policy"], variant, s["channel_seed"],
                                          s.get("max_rounds"))

        sigma, sched = blame_input(entry, setting.values, run, setting.given)
        if json:
            print_json({"command": "schedule", "paper": paper, "noise": noise, **sched.to_dict()})
            return
        for t in range(min(show, sched.rounds)):
            _print_round(sched, t)
        rows = [[t + 1, int((sched.assignment[t] >= 0).sum()), sched.theta_L_min[t], sched.eta_F[t],
                 sched.max_bound[t], sched.jain_index[t]] for t in range(sched.rounds)]
        print_table(f"{entry.short}: {sched.policy} schedule, {sched.rounds} rounds, sigma_DP = {sigma:.4g} "
                    f"({noise})", ["round", "selected", "Theta_L,min", "eta_F", "max_n Phi_n", "Jain"], rows,
                    digits=5)
        print_warnings([*setting.notes, *sched.warnings])
