"""UDP's SVM experiment (seed 003 Sec. 5, Fig. 4): the hinge-loss model and the CSV reader for an IPUMS-US
extract."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbound.errors import ConfigError
from fedbound.training.clipping import per_sample_clipped_grad, per_sample_clipped_grad_vmap
from fedbound.training.data import load_dataset, read_csv_table
from fedbound.training.models import build_model
from fedbound.validation.recipes.runner import train_from_config


def test_svm_hinge_loss_by_hand():
    """w = (1, -2), b = 0.5.  x = (1, 1), class 1 (+1): f = -0.5, hinge 1.5; x = (0.5, -1), class 0 (-1):
    f = 3, hinge 4; x = (2, 0), class 1: f = 2.5, hinge 0."""
    model = build_model("svm", (2,), 2)
    assert (model.n_params, model.n_outputs, model.loss) == (3, 1, "hinge")
    flat = torch.tensor([[1.0, -2.0, 0.5]])
    x = torch.tensor([[[1.0, 1.0], [0.5, -1.0], [2.0, 0.0]]])
    y = torch.tensor([[1, 0, 1]])
    out = model(flat, x)
    np.testing.assert_allclose(model.per_sample_loss(out, y).numpy(), [[1.5, 4.0, 0.0]])
    np.testing.assert_array_equal(model.correct(out, y).numpy(), [[0.0, 0.0, 1.0]])


def test_svm_clipped_gradients_match_the_vmap_oracle():
    model = build_model("svm", (5,), 2)
    gen = torch.Generator().manual_seed(0)
    flat = torch.randn(3, model.n_params, generator=gen, dtype=torch.float64)
    x = torch.randn(3, 7, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (3, 7), generator=gen)
    w = torch.full((3, 7), 1 / 7, dtype=torch.float64)
    fast = per_sample_clipped_grad(model, flat, x, y, w, 0.5)
    slow = per_sample_clipped_grad_vmap(model, flat, x, y, w, 0.5)
    torch.testing.assert_close(fast.grad, slow.grad)
    torch.testing.assert_close(fast.norms, slow.norms)


def test_svm_needs_two_classes():
    with pytest.raises(ConfigError, match="svm needs exactly 2"):
        build_model("svm", (4,), 10)


def _write(tmp_path, text: str, name: str = "ipums.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_reader_labels_and_standardises(tmp_path):
    rows = ["age,sex,label"] + [f"{20 + i},{i % 2},{int(i >= 5)}" for i in range(10)]
    path = _write(tmp_path, "\n".join(rows) + "\n")
    data = read_csv_table(path, test_fraction=0.2, seed=0)
    assert (data.n_classes, data.n_features, len(data.y_train), len(data.y_test)) == (2, 2, 8, 2)
    np.testing.assert_allclose(data.x_train.mean(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(data.x_train.std(0), 1.0, rtol=1e-5)
    # the label is the row's own: age >= 25 <=> label 1, whatever the split; standardising keeps the order
    x_all = np.concatenate([data.x_train, data.x_test])[:, 0]
    y_all = np.concatenate([data.y_train, data.y_test])
    np.testing.assert_array_equal(y_all[np.argsort(x_all)], [0] * 5 + [1] * 5)
    via = load_dataset("csv", data_path=str(path), test_fraction=0.2)
    np.testing.assert_array_equal(via.y_train, data.y_train)


def test_csv_label_is_the_last_column_without_a_label_header_and_any_two_values(tmp_path):
    path = _write(tmp_path, "a,b,income\n1,2,-1\n3,4,1\n5,6,1\n7,8,-1\n")
    data = read_csv_table(path, test_fraction=0.0)
    assert data.meta["label"] == "income" and data.meta["classes"] == [-1, 1]
    np.testing.assert_array_equal(np.sort(data.y_train), [0, 0, 1, 1])


@pytest.mark.parametrize("text,match", [
    ("a,label\n1,x\n2,y\n", "non-numeric column"),
    ("a,label\n1,0\n,1\n", "missing values"),
    ("a,label\n1,1\n2,1\n", "has one value"),
    ("label\n1\n0\n", "1 column"),
    ("", "not a readable CSV"),
])
def test_csv_errors_name_the_file_and_the_problem(tmp_path, text, match):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError, match=match) as err:
        read_csv_table(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_csv_missing_file_and_missing_path(tmp_path):
    with pytest.raises(ConfigError, match="is not a file"):
        read_csv_table(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match="needs data_path"):
        load_dataset("csv")


def test_udp_trains_the_svm_on_a_csv(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 3))
    rows = ["f1,f2,f3,label"] + [f"{a:.4f},{b:.4f},{c:.4f},{int(a + b > 0)}" for a, b, c in x]
    data = _write(tmp_path, "\n".join(rows) + "\n")
    cfg = tmp_path / "svm.toml"
    cfg.write_text(f"""[udp]
N = 4
m = 10
K = 2
T = 2
eps = 8.0
delta = 0.001
eta = 1.0
C = 1.0

[train]
dataset = "csv"
data_path = "{data}"
model = "svm"
samples_per_client = 10
weight_decay = 0.01
noise = "tight"
""")
    done = train_from_config("udp", cfg, [], out=tmp_path / "run")
    assert done.summary["rounds_done"] == 2 and done.summary["model"] == "svm"
    hinge = done.result.metrics["test_loss"].dropna()
    assert len(hinge) == 2 and np.all(np.isfinite(hinge)) and np.all(hinge >= 0)
