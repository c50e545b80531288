"""The audit tests' configuration: a paper's ``AuditViews.small`` sections, with changes, written as TOML."""

from __future__ import annotations

from pathlib import Path

from fedbound.registry import get
from fedbound.training.config import dump_toml


def small_config(tmp_path: Path, paper: str, **changes: dict) -> Path:
    """``paper``'s small audit setting with ``changes`` (``{section: {key: value}}``) at ``tmp_path``."""
    sections = {name: dict(table) for name, table in get(paper).load("audit").small.items()}
    for name, table in changes.items():
        sections[name].update(table)
    path = tmp_path / f"{paper}.toml"
    path.write_text(dump_toml(sections))
    return path
