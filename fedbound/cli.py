"""The ``fedbound`` command line.

Typer (with rich) gives typed options, ``--help`` on every command and readable tables.  Commands live in
``fedbound/commands/<name>.py``; each module defines ``register(app, groups)`` and is discovered here, so
adding a command never touches this file.  Command modules import heavy libraries (torch, cvxpy, sympy
models) inside the command functions so that ``fedbound --help`` stays fast.

Commands that act on a paper (``fedbound plan PAPER``, ``plot``, ``claims``, ``train``) take the paper's name
as an argument and look it up in the paper registry (fedbound.registry): no command names a paper.
``groups`` is handed to the modules for sub-command groups a module wants to share.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from fedbound._version import __version__
from fedbound.errors import FedboundError

app = typer.Typer(
    name="fedbound",
    help="Differentially private federated learning: noise formulas, bounds, optimal designs, simulator.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

groups: dict[str, typer.Typer] = {}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"fedbound {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """fedbound: from DP-FL theorems to deployable decisions."""


def _register_commands() -> None:
    import fedbound.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"fedbound.commands.{info.name}")
        module.register(app, groups)


_register_commands()


def _error_line(message: str) -> int:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote config sections such as "[nbafl]", which rich would swallow
    # one line whatever the terminal width: no wrapping
    error = Text("error: ", style="red") + Text(message)
    Console(stderr=True, soft_wrap=True).print(error, highlight=False)
    return 2


BUDGETED = ("plan", "plot", "claims", "schedule", "calibrate", "account", "papers", "crd")
"""Commands that answer within a CPU budget (fedbound.budget, FEDBOUND_CPU_BUDGET); the others train or
serve."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; fedbound's own errors become one red line on stderr and exit code 2.

    Usage errors (unknown command, bad option) are reported by Typer itself, also with exit code 2; a
    missing optional extra (torch, plotly ...) is one line naming the extra to install, exit code 2.
    """
    import click

    from fedbound.budget import CpuBudgetExceeded, cpu_budget, seconds_from_env

    args = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in args if not a.startswith("-")]
    try:
        with cpu_budget(seconds_from_env() if words[:1] and words[0] in BUDGETED else None):
            code = app(args=argv, prog_name="fedbound", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError:
        return 2  # the help is printed: it is the answer
    except CpuBudgetExceeded as exc:  # say which input made it costly: the command as typed
        typed = " ".join(a if len(a) <= 80 else a[:80] + "..." for a in args)
        return _error_line(f"{exc} (fedbound {typed[:400]})")
    except FedboundError as exc:
        return _error_line(str(exc))
    except click.UsageError as exc:  # unknown option, a value of the wrong type: one line naming the option
        return _error_line(_usage_line(exc))
    except click.exceptions.Abort:
        return 1
    except ModuleNotFoundError as exc:  # an optional extra is not installed: say which one (fedbound.extras)
        from fedbound.extras import extra_of, hint

        extra = extra_of(exc.name)
        if extra is None:
            raise
        return _error_line(hint(words[0] if words else "", str(exc.name).split(".")[0], extra))
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return code if isinstance(code, int) else 0


def _usage_line(exc) -> str:
    """A click usage error as one line: the message, then where to read the command's options."""
    command = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "fedbound"
    return f"{' '.join(exc.format_message().split())} (see: {command} --help)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
