"""``fedbound sweep PAPER CONFIG --vs KEY --values V1,V2,... --seeds S``: train one run per value and seed
(``fedbound.validation.sweep``), batched and resumable; print each run's final round, write the tidy
table (``OUT/table.csv``) and the run folders (``OUT/runs/<key>/``)."""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, JsonFlag, ProgressFlag, SetOverrides

SHOWN = ("loss", "test_accuracy", "accuracy", "epsilon_spent", "epsilon_spent_paper")
HEADERS = {"epsilon_spent": "eps (tight)", "epsilon_spent_paper": "eps, the paper's claim"}


MAX_RUNS = 10_000
"""The most runs one sweep trains (values x seeds): each is a run directory."""


def _budget(summary: dict) -> dict:
    """A run's binding epsilon against its budget (``fedbound.training.metrics.summary``)."""
    keys = ("binding_accountant", "epsilon_binding", "eps_budget", "privacy")
    return {k: summary.get(k) for k in keys if k in summary}


def _binding_text(budget: dict | None) -> str:
    if not budget or budget.get("eps_budget") is None:
        return "-"
    spent = budget.get("epsilon_binding")
    shown = "-" if spent is None else f"{spent:.4g}"
    text = f"{shown} / {budget['eps_budget']:g} ({budget['binding_accountant']})"
    # the marker on a line of its own, so a narrow table never splits it
    return text + ("\nNOT DP at budget" if str(budget.get("privacy", "")).startswith("not ") else "")


def _values(key: str, text: str) -> list:
    """``"2,4,8"`` -> ``[2, 4, 8]``: each item a TOML literal (ConfigError naming --values otherwise)."""
    from fedbound.config import parse_literal
    from fedbound.errors import ConfigError

    items = [v.strip() for v in text.split(",") if v.strip()]
    if not items:
        raise ConfigError(f"--values {text!r} names no value: give comma-separated values of {key}")
    return [parse_literal(item, "--values") for item in items]  # a bare word: a string value


def _check_vs(paper: str, key: str) -> str:
    """``--vs``: a key of the paper's section or of [train] (``section.key`` or bare), else a one-line
    ConfigError naming --vs (not the --set it would become)."""
    import difflib

    from fedbound.errors import ConfigError
    from fedbound.registry import get
    from fedbound.training.config import TRAIN_SECTION

    key = key.strip()
    sections = {paper: get(paper).config_section, "train": TRAIN_SECTION}
    name, _, sub = key.rpartition(".")
    anywhere = any(sub in s for s in sections.values())
    if (sub in sections[name]) if name in sections else (not name and anywhere):
        return key
    keys = [*(k for s in sections.values() for k in s.keys()), *(f"{n}.{k}" for n, s in sections.items()
                                                                  for k in s.keys())]
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    what = "names no key" if not key else "is not a key of " + " or ".join(f"[{n}]" for n in sections)
    raise ConfigError(f"--vs {key!r} {what}: give the swept key, e.g. T, eps, K or train.lr{hint}")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("sweep")
    def sweep(
        paper: Annotated[str, typer.Argument(metavar="PAPER", help="A paper that trains (fedbound papers).",
                                             show_default=False)],
        config: ConfigArg,
        vs: Annotated[str, typer.Option("--vs", help="The swept key, e.g. T, eps, K or train.lr.")],
        values: Annotated[str, typer.Option("--values", help="Comma-separated values, e.g. 5,10,20.")],
        seeds: Annotated[int, typer.Option("--seeds", min=1, max=MAX_RUNS, help="Seeds 0..S-1 per value.")
                         ] = 1,
        set_: SetOverrides = None,
        out: Annotated[str, typer.Option("--out", metavar="DIR", help="Sweep folder (re-running resumes it).")
                       ] = "runs/sweep",
        executor: Annotated[str, typer.Option("--executor", help="local or ray.")] = "local",
        workers: Annotated[int | None, typer.Option("--workers", min=1, help="Processes or Ray tasks.")
                           ] = None,
        address: Annotated[str | None, typer.Option("--address", help="Ray cluster address.")] = None,
        batch: Annotated[bool, typer.Option("--batch/--no-batch", help="Train compatible runs in one "
                                            "engine call.")] = True,
        progress: ProgressFlag = True,
        json_: JsonFlag = False,
    ) -> None:
        """Sweep KEY over VALUES x SEEDS for PAPER's CONFIG; one line per run, the tidy table in OUT."""
        from fedbound.errors import ConfigError
        from fedbound.extras import require

        require("train", "sweep")
        import warnings

        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.paths import out_folder
        from fedbound.registry import get
        from fedbound.validation.sweep import RunSpec, check_swept, run_sweep

        get(paper, "train")
        vs = _check_vs(paper, vs)
        folder = out_folder("--out", out)
        base = tuple(set_ or [])
        swept = _values(vs, values)
        if len(swept) * seeds > MAX_RUNS:
            raise ConfigError(f"--values x --seeds = {len(swept)} x {seeds} = {len(swept) * seeds} runs is "
                              f"outside the valid range [1, {MAX_RUNS}]: split the sweep")
        specs = [RunSpec(paper, config, (*base, f"{vs}={v!r}" if isinstance(v, str) else f"{vs}={v}"), seed,
                         {vs: v}) for v in swept for seed in range(seeds)]
        check_swept(specs, vs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each run's warnings are in its summary.json
            done = run_sweep(specs, folder, executor=executor, workers=workers, address=address, batch=batch,
                             progress=progress and not json_)
        final = done.final()
        shown = [c for c in SHOWN if c in final.columns and final[c].notna().any()]
        budget = {k: _budget(s) for k, s in done.summaries.items()}
        # each run's warnings (e.g. the noise under-delivers its budget), as `train` prints them
        run_warnings = {k: list(s["warnings"]) for k, s in done.summaries.items() if s.get("warnings")}
        if json_:
            print_json({"out": str(done.out), "table": str(done.out / "table.csv"),
                        "final": [{**r, **budget.get(r["key"], {})} for r in
                                  final[["key", vs, "seed", "round", *shown]].to_dict("records")],
                        "warnings": run_warnings, "damaged": done.damaged,
                        "failed": {k: v.strip().splitlines()[-1] for k, v in done.failed.items()}})
        else:
            rows = [[r[vs], r["seed"], r["round"], *(r[c] for c in shown),
                     _binding_text(budget.get(r["key"]))] for _, r in final.iterrows()]
            print_table(f"fedbound sweep {paper}: {len(final)} runs done, {len(done.failed)} failed "
                        f"(table: {done.out / 'table.csv'})",
                        [vs, "seed", "rounds", *(HEADERS.get(c, c) for c in shown), "binding eps / budget"],
                        rows)
            for key, texts in run_warnings.items():
                print_warnings([f"run {key}: {text}" for text in texts])
        for key, why in done.damaged.items():  # on stderr, so a --json answer stays one object
            typer.echo(f"warning: run {key} was damaged ({why}): set aside in "
                       f"{done.out / 'damaged'} and trained again", err=True)
        for key, text in done.failed.items():
            typer.echo(f"failed {key}: {text.strip().splitlines()[-1]} (traceback: "
                       f"{done.out / 'failed' / (key + '.txt')})", err=True)
        if done.failed:  # a sweep with a failed run is not a success, whatever the output format
            typer.echo(f"error: {len(done.failed)} of {len(specs)} runs of the sweep failed (see above); "
                       "re-running the command retries them", err=True)
            raise typer.Exit(1)
