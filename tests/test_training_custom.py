"""A user's own torch model and data through the engine and the constants' estimation (issue 37: "bring your
own model and data"; :mod:`fedbound.training.custom`).

Oracles: the user's ``torch.nn`` module itself (its outputs, its loss at its weights, computed by torch),
and hand-written shapes and counts.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbound.errors import ConfigError
from fedbound.training.custom import as_dataset, as_model
from fedbound.validation.estimate import estimate
from fedbound.validation.recipes.runner import train_from_config

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples" / "nbafl_logistic.toml"  # N = 4 clients of m = 60 records, test_fraction 0


def _task(n: int = 240, features: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return x, (x @ torch.randn(features, generator=g) > 0).long()


def _mlp(features: int = 6, seed: int = 1) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(features, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_tensors_become_a_classification_or_regression_dataset():
    x, y = _task(50)
    data = as_dataset((x, y), test_fraction=0.2, seed=3)
    assert (data.n_classes, data.n_features, len(data.y_train), len(data.y_test)) == (2, 6, 40, 10)
    assert data.y_train.dtype == np.int64 and data.image_shape is None
    reg = as_dataset((x.numpy(), (x[:, 0] * 2.0).numpy()), test_fraction=0.0)
    assert reg.is_regression and reg.n_outputs == 1 and reg.y_train.dtype == np.float32
    images = as_dataset(torch.utils.data.TensorDataset(torch.rand(20, 1, 8, 8), torch.arange(20) % 3),
                        test=(torch.rand(5, 1, 8, 8), torch.arange(5) % 3))
    assert images.image_shape == (1, 8, 8) and images.n_features == 64 and images.n_classes == 3
    assert len(images.y_test) == 5


@pytest.mark.parametrize(("data", "message"), [
    ((torch.zeros(10, 3), torch.zeros(9, dtype=torch.long)), "does not match x's 10 records"),
    ((torch.zeros(10, 3), -torch.ones(10, dtype=torch.long)), "class labels must lie in 0 .. n_classes - 1"),
    ((torch.full((10, 3), float("nan")), torch.zeros(10)), "non-finite"),
    ("a string", "data = str is outside its valid range"),
])
def test_bad_data_is_refused_in_one_line(data, message):
    with pytest.raises(ConfigError, match=message) as info:
        as_dataset(data)
    assert "\n" not in str(info.value)


def test_an_mlp_and_a_cnn_compute_what_the_module_computes():
    """The engine's copy of the module (flat parameters = parameters_to_vector) gives the module's outputs."""
    x, y = _task(30)
    data = as_dataset((x, y), test_fraction=0.0)
    net = _mlp()
    model, params = as_model(net, data)
    assert model.name == "custom" and model.n_params == sum(p.numel() for p in net.parameters()) == 74
    with torch.no_grad():
        got = model(params.unsqueeze(0), x.unsqueeze(0))[0]
        np.testing.assert_allclose(got, net(x), rtol=1e-5, atol=1e-6)
    images = torch.rand(12, 1, 8, 8)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Flatten(), torch.nn.Linear(48, 4))
    image_data = as_dataset((images, torch.arange(12) % 4), test_fraction=0.0)
    model, params = as_model(cnn, image_data)
    flat = torch.as_tensor(image_data.x_train)
    with torch.no_grad():
        want = cnn(flat.reshape(-1, 1, 8, 8))
        got = model(params.unsqueeze(0), flat.unsqueeze(0))[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert as_model(torch.nn.Linear(6, 2), data)[0].name == "logreg"  # the built-in convex model


@pytest.mark.parametrize(("module", "message"), [
    (torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)),
     r"layer 1 \(Tanh\(\)\)"),
    (torch.nn.Sequential(torch.nn.Linear(6, 2, bias=False)), "has no bias"),
    (torch.nn.Sequential(torch.nn.Linear(6, 3)), r"output shape \(3,\), expected \(2,\)"),
    ("mlp", "model = str is outside its valid range"),
])
def test_a_model_the_engine_cannot_train_is_refused_in_one_line(module, message):
    data = as_dataset(_task(20), test_fraction=0.0)
    with pytest.raises(ConfigError, match=message) as info:
        as_model(module, data)
    assert "\n" not in str(info.value)


def test_training_starts_from_the_modules_weights_on_the_users_data(tmp_path):
    """summary.json's initial loss is the module's own loss on the training records (torch's cross-entropy
    plus the config's weight decay 0.05 / 2 ||w||^2); the run's key holds the data and weights, so a run with
    other weights does not resume this one's checkpoint."""
    x, y = _task()
    net = _mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = train_from_config("nbafl", CONFIG, ["T=2"], data=(x, y), model=net, out=tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    with torch.no_grad():
        weights = torch.nn.utils.parameters_to_vector(net.parameters())
        want = torch.nn.functional.cross_entropy(net(x), y) + 0.025 * weights.square().sum()
    assert summary["initial_loss"] == pytest.approx(float(want), rel=1e-5)
    assert (summary["model"], summary["dataset"], summary["rounds_done"]) == ("custom", "custom", 2)
    assert summary["epsilon_binding"] <= summary["eps_budget"] * (1 + 1e-9)
    assert "given in Python" in (tmp_path / "run" / "config.toml").read_text()
    assert run.result.params.shape[-1] == 74
    with pytest.raises(ConfigError, match="another configuration|different configuration|other"):
        train_from_config("nbafl", CONFIG, ["T=2"], data=(x, y), model=_mlp(seed=2), out=tmp_path / "run")


def test_estimate_measures_the_constants_of_the_users_model_and_data():
    """A single linear layer is the convex model (exact F*); its initial gap is the module's own loss at its
    weights minus F*, and the data's records are the module's."""
    x, y = _task()
    linear = torch.nn.Linear(6, 2)
    est = estimate("nbafl", CONFIG, data=(x, y), model=linear, rounds=2, cache=None)
    assert est.convex and set(est.constants) >= {"Theta", "beta", "rho", "B"}
    with torch.no_grad():
        weights = torch.nn.utils.parameters_to_vector(linear.parameters()).double()
        loss = torch.nn.functional.cross_entropy(linear.double()(x.double()), y)
        f0 = loss + 0.025 * weights.square().sum()
    assert est.initial_loss == pytest.approx(float(f0), rel=1e-6)
    assert est.constants["Theta"] == pytest.approx(est.initial_loss - est.minimum.value, rel=1e-9)
