"""Records the guarantee cannot cover are refused (issue 32): a NaN or infinite feature or label in a dataset
a run reads is a one-line error naming the file (or dataset) and the row, before anything is trained."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from fedbound.errors import ConfigError
from fedbound.training.federation import ClientData
from fedbound.training.finite import check_records, first_nonfinite

UDP_CSV = """
[udp]
N = 2
m = 2
K = 2
T = 2
eps = 50.0
delta = 0.001
eta = 0.3
C = 5.0
crd = false

[train]
dataset = "{dataset}"
data_path = "{path}"
test_fraction = 0.0
model = "logreg"
noise = "tight"
"""


def test_first_nonfinite_finds_row_and_column():
    x = np.zeros((5, 3))
    assert first_nonfinite(x) is None and first_nonfinite(np.arange(4)) is None  # integers are finite
    x[3, 2], x[4, 0] = np.nan, np.inf
    assert first_nonfinite(x) == (3, 2)
    assert first_nonfinite(np.array([1.0, -np.inf])) == (1, None)
    with pytest.raises(ConfigError, match=r"^where: row 7 has label = nan: a record .*\(NaN or inf\)"):
        check_records(np.zeros((2, 2)), np.array([0.0, np.nan]), "where", rows=np.array([3, 7]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_federation_refuses_a_non_finite_feature(bad):
    x = np.random.default_rng(0).standard_normal((10, 3))
    x[6, 1] = bad
    with pytest.raises(ConfigError, match=r"row 6 has feature \(column 1\)"):
        ClientData.from_partition(x, np.zeros(10, dtype=np.int64), [np.arange(5), np.arange(5, 10)])


def test_a_value_beyond_float32_is_refused_as_the_infinity_it_becomes():
    x = np.ones((6, 2))
    x[4, 0] = 1e39  # finite in float64, inf in the float32 the engine trains in
    with pytest.raises(ConfigError, match="row 4 has feature"):
        ClientData.from_partition(x, np.zeros(6, dtype=np.int64), [np.array([4, 5])])
    import torch

    ClientData.from_partition(x, np.zeros(6, dtype=np.int64), [np.array([4, 5])], dtype=torch.float64)


def test_a_regression_label_is_checked_too():
    y = np.array([0.0, 1.0, np.inf, 2.0])
    with pytest.raises(ConfigError, match="row 2 has label = inf"):
        ClientData.from_partition(np.ones((4, 2)), y, [np.arange(4)])


@pytest.mark.parametrize("where, cell, line", [("feature", "3,inf,1", "line 3 (data row 1, column 'b')"),
                                               ("label", "3,4,nan", None),
                                               ("label", "3,4,inf", "line 3 (data row 1, column 'label')")])
def test_a_csv_file_is_refused_naming_the_file_and_line(tmp_path, capsys, where, cell, line):
    from fedbound.cli import main

    csv = tmp_path / "data.csv"
    csv.write_text("a,b,label\n1,2,0\n" + cell + "\n5,6,0\n7,8,1\n")
    cfg = tmp_path / "u.toml"
    cfg.write_text(UDP_CSV.format(dataset="csv", path=csv))
    assert main(["train", "udp", str(cfg), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(csv) in err
    if line is None:  # NaN: the CSV reader's own check (a missing value) names the file
        assert "missing values" in err
    else:
        assert line in err and "non-finite" in err
    assert not (tmp_path / "run").exists()  # refused before anything was trained or written


def _idx(path, array: np.ndarray, code: int) -> None:
    dims = struct.pack(">" + "i" * array.ndim, *array.shape)
    dtype = {0x08: ">u1", 0x0D: ">f4"}[code]
    path.write_bytes(gzip.compress(bytes([0, 0, code, array.ndim]) + dims + array.astype(dtype).tobytes()))


def test_an_idx_file_is_refused_naming_the_file_and_record(tmp_path, capsys):
    from fedbound.cli import main

    rng = np.random.default_rng(1)
    images = rng.random((8, 2, 2)) * 255
    images[5, 1, 0] = np.nan  # a float IDX file (type 0x0D) with a NaN pixel in record 5
    for prefix in ("train", "t10k"):
        _idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", images, 0x0D)
        _idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(8) % 2, 0x08)
    cfg = tmp_path / "u.toml"
    cfg.write_text(UDP_CSV.format(dataset="idx", path=tmp_path).replace("m = 2", "m = 4"))
    assert main(["train", "udp", str(cfg), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"dataset 'idx' ({tmp_path}, train-images/train-labels): row 5 has feature (column 2) = nan" in err
