"""The CLI shell: version, help on every command, and fedbound errors as one line with exit code 2."""

import subprocess
import sys

import pytest
import typer

from fedbound import __version__
from fedbound.cli import app, main


def _all_command_paths():
    root = typer.main.get_command(app)
    paths = []

    def walk(cmd, prefix):
        paths.append(prefix)
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*prefix, name])

    walk(root, [])
    return paths


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fedbound {__version__}"


@pytest.mark.parametrize("path", _all_command_paths(), ids=lambda p: " ".join(p) or "fedbound")
def test_help_on_every_command(path, capsys):
    assert main([*path, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "fedbound", "--version"], capture_output=True, text=True,
                         check=True)
    assert __version__ in out.stdout


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2


def test_error_messages_keep_bracketed_text(tmp_path, capsys):
    """Errors quote config sections like [nbafl]; the terminal output must not swallow them as markup."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[nbafl]\nN = 50\n")
    assert main(["plan", "nbafl", str(cfg)]) == 2
    assert "[nbafl]" in capsys.readouterr().err


def test_table_cells_are_not_markup(capsys):
    from fedbound.output import print_table, print_warnings

    print_table("t", ["a", "b"], [["x [paper]", 1.0]])
    print_warnings(["w [two_sided]"])
    out = capsys.readouterr().out
    assert "[paper]" in out and "[two_sided]" in out
