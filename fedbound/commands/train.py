"""``fedbound train ALGO CONFIG``: run the simulator on a paper's setting, write the run directory."""

from __future__ import annotations

import contextlib
import warnings
from typing import Annotated

import typer

from fedbound.commands._common import ConfigArg, DesignOpt, JsonFlag, ProgressFlag, SetOverrides


@contextlib.contextmanager
def _train_extra():
    """A missing training dependency becomes one line saying which extra to install (exit code 2)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in TRAIN_EXTRA:
            raise
        from fedbound.errors import ConfigError

        raise ConfigError(f"fedbound train needs {exc.name}: install the train extra: "
                          "pip install 'fedbound[train]'") from None


TRAIN_EXTRA = ("torch", "mlxtend", "sklearn", "tqdm", "pyarrow")


def _papers() -> str:
    from fedbound.registry import names

    return ", ".join(names("train"))


def _fmt(value) -> object:
    return "-" if value is None else value


def _num(value) -> str:
    return "-" if value is None else f"{value:.6g}"


def _privacy_rows(s: dict) -> list[tuple[str, object]]:
    """The summary's privacy: the binding epsilon against the budget first, the paper's claim beside it
    (labelled), and the one-line statement (in paper-reproduction mode: not (eps, delta)-DP where so)."""
    binding = s["binding_accountant"]
    spent = f"{_num(s['epsilon_binding'])} of {s['eps_budget']:g} at delta = {s['delta']:g}"
    rows = [(f"eps spent, {binding} accountant (binding)", spent)]
    if binding == "paper":
        rows.append(("eps spent, tight accountant (exact)", _num(s["epsilon_spent"])))
    else:
        rows.append(("eps the paper's accountant claims", _num(s["epsilon_spent_paper"])))
    rows.append(("privacy", s["privacy"]))
    if s.get("paper_reproduction"):
        rows.append(("mode", "paper reproduction ([train] paper_reproduction = true)"))
    return rows


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("train", help="Train a paper's algorithm on CONFIG's setting (the paper's section and the "
                               "train section); print a summary, write the run directory. "
                               f"Papers: {_papers()}.")
    def train(
        algo: Annotated[str, typer.Argument(metavar="PAPER", help=f"Paper: {_papers()}.",
                                            show_default=False)],
        config: ConfigArg,
        set_: SetOverrides = None,
        out: Annotated[str | None, typer.Option("--out", metavar="DIR",
                                                help="Run directory (default runs/<algo>_<config>)."
                                                 )] = None,
        seed: Annotated[int | None, typer.Option("--seed", help="Override [train] seed.")] = None,
        device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = None,
        overwrite: Annotated[bool, typer.Option("--overwrite", help="Discard an existing checkpoint in the "
                                                "run directory instead of resuming it.")] = False,
        design: DesignOpt = None,
        progress: ProgressFlag = True,
        json_: JsonFlag = False,
    ) -> None:
        """Train PAPER's algorithm on CONFIG's setting ([PAPER] + [train]).

        The run directory gets config.toml, checkpoint.pt (every round), metrics.csv, metrics.parquet and
        summary.json. Running the same command again resumes from the checkpoint with identical numbers.
        """
        from fedbound.output import print_json, print_table, print_warnings
        from fedbound.paths import out_folder
        from fedbound.registry import get
        from fedbound.validation.recipes.runner import train_from_config

        get(algo, "train")
        run_dir = out_folder("--out", out) if out is not None else None

        with warnings.catch_warnings(), _train_extra():  # every warning is in the summary, printed once below
            warnings.simplefilter("ignore")
            done = train_from_config(algo, config, set_ or [], out=run_dir, seed=seed, device=device,
                                     progress=progress and not json_, overwrite=overwrite, design=design)
        s = done.summary
        if json_:
            print_json(s)
            return
        rows = [
            ("algorithm", s["algorithm"]), ("dataset / model", f"{s['dataset']} / {s['model']} "
                                            f"({s['n_params']} parameters)"),
            ("clients", s["num_clients"]),
            ("rounds done / planned", f"{s['rounds_done']} / {s['rounds_planned']}"),
            ("initial loss", _fmt(s["initial_loss"])), ("final loss", _fmt(s["final_loss"])),
            ("final accuracy", _fmt(s["final_accuracy"])),
            ("final test accuracy", _fmt(s["final_test_accuracy"])),
        ]
        rows += [(f"final {k.replace('_', ' ')}", v) for k, v in s.get("final_extra", {}).items()]
        if s["private"]:
            rows += _privacy_rows(s)
            rows += [(k.replace("_", " "), v) for k, v in s.get("plan", {}).items()]
        for name, item in (s.get("design") or {}).items():
            if isinstance(item, dict) and "source" in item:
                rows.append((f"design {name}", f"{item['value']} ({item['source']})"))
        if s["resumed_from_round"]:
            rows.append(("resumed from round", s["resumed_from_round"]))
        rows += [("wall time (s)", round(s["wall_time_s"], 2)), ("run directory", s["run_dir"])]
        print_table(f"fedbound train {s['algorithm']}", ["quantity", "value"], rows)
        print_warnings(s["warnings"])
