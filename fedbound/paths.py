"""Paths a command reads or writes, checked before any work: one line naming the option, its value and
what is valid.

Commands take their path options as the text the user typed (``str``, not ``Path``: ``Path('')`` is the
working directory and ``Path('DIR/')`` drops the slash that says "a folder"), then call one of
:func:`out_folder`, :func:`out_file` or :func:`in_folder`.  Writability is tested, not guessed from
permission bits (root passes ``os.access`` on ``/proc``): a temporary file is created and removed in the
nearest folder that exists, and nothing else is created.

:func:`read_csv_rows` reads a user's CSV and names file, line and encoding when it cannot.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fedbound.errors import ConfigError, ParameterError

__all__ = ["out_folder", "out_file", "in_folder", "read_csv_rows"]


def _fail(option: str, text: str, valid: str, hint: str = "") -> ParameterError:
    """The error, with a long path shortened (a 5,000-character --out must not make a 5 kB message)."""
    shown = text if len(text) <= 200 else f"{text[:60]}... ({len(text)} characters)"
    return ParameterError(option, shown, valid, hint=hint)


def _text(option: str, value: str | os.PathLike | None, what: str) -> str:
    text = os.fspath(value) if value is not None else ""
    if not text.strip():
        raise _fail(option, text, f"a {what} path (an empty path names no {what})")
    if "\0" in text:
        raise _fail(option, text, f"a {what} path without NUL characters")
    return text


def _os_errors(check):
    """An OSError while checking (a name too long, a loop of links) is the same one-line error."""
    import functools

    @functools.wraps(check)
    def wrapped(option: str, value: str | os.PathLike | None) -> Path:
        try:
            return check(option, value)
        except OSError as exc:
            raise _fail(option, os.fspath(value) if value is not None else "", "a usable path",
                        hint=exc.strerror or str(exc)) from None
    return wrapped


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_writable(option: str, text: str, path: Path, what: str) -> None:
    """The nearest existing folder at or above ``path`` (a folder) must be one a file can be created in."""
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise _fail(option, text, f"a {what} path that can be created",
                    hint=f"{str(base)!r} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".fedbound-probe-", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _fail(option, text, f"a writable {what} path",
                    hint=f"cannot write in {str(base)!r}: {exc.strerror or exc}") from None


@_os_errors
def out_folder(option: str, value: str | os.PathLike | None) -> Path:
    """An output folder: not empty, not an existing file, creatable and writable (nothing is created)."""
    text = _text(option, value, "folder")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise _fail(option, text, "a folder (new or existing)", hint="it is an existing file")
    _check_writable(option, text, path, "folder")
    return path


@_os_errors
def out_file(option: str, value: str | os.PathLike | None) -> Path:
    """An output file: not empty, not a folder (nor a name ending in '/'), its folder creatable and
    writable.  An existing file is left as it is (it will be replaced)."""
    text = _text(option, value, "file")
    path = Path(text)
    if text.endswith(("/", os.sep)) or path.is_dir() or path.name in ("", ".", ".."):
        raise _fail(option, text, "a file path, not a folder",
                    hint="it names a folder, not a file")
    _check_writable(option, text, path.parent, "file")
    return path


@_os_errors
def in_folder(option: str, value: str | os.PathLike | None) -> Path:
    """An input folder that must exist."""
    text = _text(option, value, "folder")
    path = Path(text)
    if not path.is_dir():
        raise _fail(option, text, "an existing folder",
                    hint="it is not a folder: " + ("a file" if path.exists() else "nothing there"))
    return path


def read_csv_rows(path: Path, option: str = "CSV") -> list[list[str]]:
    """The rows of a UTF-8 CSV file, every row as wide as the header.

    ConfigError naming the file (and the line) when it is missing, not UTF-8, not CSV or ragged.
    """
    import csv
    import io

    if not path.is_file():
        raise ConfigError(f"{option} {str(path)!r}: no such file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not a UTF-8 text file (byte {exc.start} is "
                          f"{raw[exc.start:exc.start + 1]!r}); save the CSV as UTF-8") from None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        numbered = [(reader.line_num, row) for row in reader if row]
    except csv.Error as exc:
        raise ConfigError(f"{path}, line {reader.line_num}: not a valid CSV file: {exc}") from None
    for i, row in numbered[1:]:
        if len(row) != len(numbered[0][1]):
            width = len(numbered[0][1])
            raise ConfigError(f"{path}, line {i}: {len(row)} fields, the header has {width}; every row "
                              "needs one value per column")
    return [row for _, row in numbered]
