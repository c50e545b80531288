"""Records the privacy guarantee cannot cover are refused: non-finite features or labels.

Every sensitivity fedbound accounts with bounds how far one record moves what a client releases, through
clipping.  A record with a NaN or infinite feature or label has no such bound: clipping an infinite vector
gives NaN, a NaN gradient passes every norm test, and one such record turns the global model into NaN (in
provable mode too).  So a dataset holding one is refused where it is built, before anything is trained or
released, with one line naming the dataset (its file where it has one) and the row:

* :func:`check_dataset` on a loaded :class:`~fedbound.training.data.Dataset` (``load_dataset`` calls it):
  the training and test splits; a CSV file's row is found in the file itself (a standardised column spreads
  one non-finite value over every row), an IDX file's row is its record index;
* :func:`check_records` on the arrays a federation is built from
  (``ClientData.from_partition``), in the training dtype, so a float64 value beyond float32's range is
  caught as the infinity it becomes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["first_nonfinite", "check_records", "check_dataset"]

REFUSED = ("a record with a non-finite feature or label (NaN or inf) is outside every sensitivity bound "
           "(clipping cannot bound it): remove or repair it before training")


def first_nonfinite(values: np.ndarray) -> tuple[int, int | None] | None:
    """``(row, column)`` of the first NaN or infinite entry of ``values`` (rows along axis 0; column None
    for a 1-D array), or None when every entry is finite (integer arrays always are)."""
    arr = np.asarray(values)
    if not np.issubdtype(arr.dtype, np.inexact) or not arr.size:
        return None
    bad = ~np.isfinite(arr.reshape(len(arr), -1))
    rows = np.flatnonzero(bad.any(axis=1))
    if not len(rows):
        return None
    row = int(rows[0])
    return row, (int(np.flatnonzero(bad[row])[0]) if arr.ndim > 1 else None)


def _value(values: np.ndarray, row: int, column: int | None) -> float:
    arr = np.asarray(values)
    return float(arr[row] if column is None else arr.reshape(len(arr), -1)[row, column])


def check_records(x: np.ndarray, y: np.ndarray, what: str, rows: np.ndarray | None = None) -> None:
    """ConfigError naming ``what`` and the row (``rows[i]`` for row ``i`` when given) of the first record of
    ``(x, y)`` with a non-finite feature or label."""
    for name, values in (("feature", x), ("label", y)):
        found = first_nonfinite(values)
        if found is not None:
            row, column = found
            where = int(rows[row]) if rows is not None else row
            col = f" (column {column})" if column is not None else ""
            value = _value(values, row, column)
            raise ConfigError(f"{what}: row {where} has {name}{col} = {value}: {REFUSED}")


def _csv_row(path: Path) -> str | None:
    """Where the first non-finite value of a CSV file lies, as ``file, line L (column C)``."""
    import pandas as pd

    table = pd.read_csv(path)
    numeric = table.select_dtypes(include="number")
    bad = ~np.isfinite(numeric.to_numpy(dtype=np.float64))
    rows = np.flatnonzero(bad.any(axis=1))
    if not len(rows):
        return None
    row = int(rows[0])
    column = str(numeric.columns[int(np.flatnonzero(bad[row])[0])])
    return f"{path}, line {row + 2} (data row {row}, column {column!r})"


def check_dataset(data, data_path: str | None = None):
    """``data`` (a Dataset) unchanged when every feature and label of both splits is finite; otherwise a
    ConfigError naming the dataset, its file and the row (module docstring)."""
    path = data.meta.get("path") or data_path
    classes = data.meta.get("classes")
    labels_bad = classes is not None and not np.all(np.isfinite(np.asarray(classes, dtype=np.float64)))
    for split, x, y in (("training", data.x_train, data.y_train), ("test", data.x_test, data.y_test)):
        if not labels_bad and first_nonfinite(x) is None and first_nonfinite(y) is None:
            continue
        if data.name == "csv" and path is not None:
            where = _csv_row(Path(path))
            if where is not None:
                raise ConfigError(f"dataset 'csv' ({where}) holds a non-finite value: {REFUSED}")
        if data.name == "idx" and path is not None:
            stem = "train" if split == "training" else "t10k"
            check_records(x, y, f"dataset 'idx' ({path}, {stem}-images/{stem}-labels)")
        check_records(x, y, f"dataset {data.name!r}" + (f" ({path})" if path else "") + f", {split} split")
    if labels_bad:
        raise ConfigError(f"dataset {data.name!r}" + (f" ({path})" if path else "") + f": the labels "
                          f"{classes} include a non-finite value: {REFUSED}")
    return data
