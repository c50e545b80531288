"""Models, gradients and clipping against torch.nn, autograd and vmap(grad) oracles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fedbound.errors import ConfigError
from fedbound.training.clipping import (
    clip_rows,
    per_sample_clipped_grad,
    per_sample_clipped_grad_vmap,
    per_sample_grads_vmap,
)
from fedbound.training.federation import ClientBatch
from fedbound.training.grads import batch_gradient
from fedbound.training.local import LocalSGD, select_minibatch
from fedbound.training.models import build_model
from fedbound.training.noise import Streams

ARCHS = [  # (name, input features, image shape, expected parameter count)
    ("logreg", 64, None, 650),
    ("mlp", 784, None, 203_530),  # seed 002 Sec. VI: d = 203,530 for 784-256-10
    ("cnn_1conv", 64, (1, 8, 8), None),
    ("cnn_2conv", 784, (1, 28, 28), None),
    ("cnn_3conv", 3072, (3, 32, 32), 930_826),  # spec 000 Sec. 6: 930,826 on CIFAR-10 (padding 1)
]


def make(name, feats, image, hidden=256, seed=0, k=3, dtype=torch.float64):
    model = build_model(name, (feats,), 10, image_shape=image, hidden=hidden)
    gen = torch.Generator().manual_seed(seed)
    flat = torch.stack([model.init(gen, dtype) for _ in range(k)])
    return model, flat


@pytest.mark.parametrize("name,feats,image,count", ARCHS)
def test_parameter_counts_and_torch_module_equivalence(name, feats, image, count):
    model, flat = make(name, feats, image)
    if count is not None:
        assert model.n_params == count
    x = torch.rand(3, 4, feats, dtype=torch.float64)
    out = model(flat, x)
    for i in range(3):
        module = model.to_module().double()
        torch.nn.utils.vector_to_parameters(flat[i], module.parameters())
        torch.testing.assert_close(module(x[i]), out[i], rtol=1e-12, atol=1e-12)
    assert model.n_params == sum(p.numel() for p in model.to_module().parameters())


def test_wpfl_cnn_fc_widths_match_the_paper():
    """Seed 004 Sec. VII: the first FC layer has 1024 inputs on 28x28 and 1600 on 32x32 images."""
    for image, width in (((1, 28, 28), 1024), ((3, 32, 32), 1600)):
        model = build_model("cnn_2conv", (int(np.prod(image)),), 10, image_shape=image)
        dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
        assert dense[0].in_features == width


def test_too_small_images_are_a_clear_error():
    with pytest.raises(ConfigError, match="too small"):
        build_model("cnn_2conv", (64,), 10, image_shape=(1, 8, 8))
    with pytest.raises(ConfigError, match="image dataset"):
        build_model("cnn_1conv", (64,), 10)


@pytest.mark.parametrize("name,feats,image,count", [a for a in ARCHS if a[0] != "cnn_3conv"])
def test_batch_gradient_equals_autograd_per_client(name, feats, image, count):
    model, flat = make(name, feats, image, hidden=16)
    x = torch.rand(3, 5, feats, dtype=torch.float64)
    y = torch.randint(0, 10, (3, 5))
    w = torch.rand(3, 5, dtype=torch.float64)
    g = batch_gradient(model, flat, x, y, w)
    for i in range(3):
        module = model.to_module().double()
        torch.nn.utils.vector_to_parameters(flat[i], module.parameters())
        loss = (torch.nn.functional.cross_entropy(module(x[i]), y[i], reduction="none") * w[i]).sum()
        loss.backward()
        ref = torch.cat([p.grad.reshape(-1) for p in module.parameters()])
        torch.testing.assert_close(g[i], ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,feats,image,count", ARCHS[:4] + [("cnn_3conv", 192, (3, 8, 8), None)])
def test_per_layer_clipping_equals_vmap_grad(name, feats, image, count):
    model, flat = make(name, feats, image, hidden=16)
    x = torch.rand(3, 6, feats, dtype=torch.float64)
    y = torch.randint(0, 10, (3, 6))
    w = torch.full((3, 6), 1 / 6, dtype=torch.float64)
    fast = per_sample_clipped_grad(model, flat, x, y, w, 0.3)
    slow = per_sample_clipped_grad_vmap(model, flat, x, y, w, 0.3)
    torch.testing.assert_close(fast.norms, slow.norms, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fast.grad, slow.grad, rtol=1e-10, atol=1e-12)
    assert bool((fast.norms > 0.3).any())  # the clipping is active in this comparison


@given(clip=st.floats(1e-3, 10.0), scale=st.floats(0.01, 20.0), seed=st.integers(0, 2**16))
def test_clipped_per_sample_gradients_never_exceed_c(clip, scale, seed):
    model, flat = make("mlp", 16, None, hidden=8, seed=seed, k=2)
    gen = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(2, 7, 16, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (2, 7), generator=gen)
    g = per_sample_grads_vmap(model, flat, x, y)
    out = per_sample_clipped_grad(model, flat, x, y, torch.ones(2, 7, dtype=torch.float64), clip)
    factors = clip / torch.clamp(out.norms, min=clip)
    clipped = g * factors[..., None]
    assert float(torch.linalg.vector_norm(clipped, dim=2).max()) <= clip * (1 + 1e-9)
    assert float(torch.linalg.vector_norm(out.grad / 7, dim=1).max()) <= clip * (1 + 1e-9)


@given(clip=st.floats(1e-3, 100.0), scale=st.floats(1e-3, 1e3), seed=st.integers(0, 2**16))
def test_clip_rows_never_exceed_c_and_keep_small_rows(clip, scale, seed):
    x = scale * torch.randn(5, 40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    out, norms = clip_rows(x, clip)
    new = torch.linalg.vector_norm(out, dim=1)
    assert float(new.max()) <= clip * (1 + 1e-12)
    small = norms <= clip
    torch.testing.assert_close(out[small], x[small])
    cos = (out * x).sum(1) / (new * norms)
    torch.testing.assert_close(cos, torch.ones_like(cos))


def test_proximal_step_matches_the_formula():
    """One FedProx step: w - lr (grad F_i(w) + mu (w - anchor)) (seed 002 Alg. 1 line 6)."""
    model, flat = make("logreg", 64, None, k=2)
    anchor = flat + 0.1
    x = torch.rand(2, 5, 64, dtype=torch.float64)
    y = torch.randint(0, 10, (2, 5))
    ones = torch.ones(2, 5, dtype=torch.float64)
    batch = ClientBatch(x, y, ones, torch.full((2,), 5.0, dtype=torch.float64))
    out = LocalSGD(steps=1, lr=0.3, prox_mu=2.0, weight_decay=0.1).run(
        model, flat, batch, streams=Streams(0), round_=0, clients=np.arange(2), num_clients=2, anchor=anchor)
    g = batch_gradient(model, flat, x, y, batch.weight)
    torch.testing.assert_close(out, flat - 0.3 * (g + 2.0 * (flat - anchor) + 0.1 * flat))


def test_minibatches_are_uniform_subsets_of_real_samples():
    sizes = torch.tensor([4.0, 7.0])
    mask = torch.tensor([[1.0] * 4 + [0.0] * 3, [1.0] * 7])
    x = torch.arange(14, dtype=torch.float64).reshape(2, 7, 1)
    batch = ClientBatch(x, torch.zeros(2, 7, dtype=torch.long), mask, sizes)
    counts = np.zeros((2, 7))
    for step in range(400):
        xb, _, w = select_minibatch(Streams(1), ("batch", 0, step), 2, np.arange(2), batch, batch_size=3)
        assert xb.shape == (2, 3, 1)
        taken = xb[..., 0].long() - torch.tensor([[0], [7]])
        for i in range(2):
            counts[i, taken[i][w[i] > 0].numpy()] += 1
        torch.testing.assert_close(w.sum(1), torch.ones(2, dtype=torch.float64))
    assert counts[0, 4:].sum() == 0  # padding is never drawn
    assert counts[0, :4].min() > 0.6 * 300 and counts[1].min() > 0.6 * 400 * 3 / 7


def test_poisson_minibatches_have_the_expected_size_and_weights():
    sizes = torch.tensor([50.0])
    batch = ClientBatch(torch.zeros(1, 50, 1), torch.zeros(1, 50, dtype=torch.long), torch.ones(1, 50), sizes)
    total = 0.0
    for step in range(300):
        _, _, w = select_minibatch(Streams(2), ("b", step), 1, np.arange(1), batch, sample_rate=0.2)
        nonzero = w[w > 0]
        torch.testing.assert_close(nonzero, torch.full_like(nonzero, 1 / (0.2 * 50)))
        total += float((w > 0).sum())
    assert abs(total / 300 - 10.0) < 4 * np.sqrt(50 * 0.2 * 0.8 / 300)


@pytest.mark.parametrize("n", [1, 64, 256, 300])
def test_cnn_3conv_last_hidden_width_spec000_count(n):
    """Spec 000 Sec. 6 / Fig. 6(b): the CIFAR-10 CNN with n last-hidden neurons has 895,242 + 139 n
    parameters (n = 256: the default 930,826), and torch.nn agrees with the flat layout."""
    model = build_model("cnn_3conv", (3072,), 10, image_shape=(3, 32, 32), last_hidden=n)
    assert model.n_params == 895_242 + 139 * n
    assert sum(p.numel() for p in model.to_module().parameters()) == model.n_params


def test_last_hidden_runs_and_is_checked():
    model = build_model("cnn_2conv", (784,), 10, image_shape=(1, 28, 28), last_hidden=7)
    flat = model.init(torch.Generator().manual_seed(0), torch.float64).unsqueeze(0)
    x = torch.randn(1, 2, 784, dtype=torch.float64)
    assert model(flat, x).shape == (1, 2, 10)
    module = model.to_module().double()
    torch.nn.utils.vector_to_parameters(flat[0], module.parameters())
    torch.testing.assert_close(module(x[0]), model(flat, x)[0])
    with pytest.raises(ConfigError, match="last_hidden"):
        build_model("cnn_3conv", (3072,), 10, image_shape=(3, 32, 32), last_hidden=0)
    with pytest.raises(ConfigError, match="last_hidden"):
        build_model("cnn_1conv", (64,), 10, image_shape=(1, 8, 8), last_hidden=5)


def test_resnet18_on_random_tensors_matches_torch_and_clips_per_sample():
    """Seed 000 Fig. 4's ResNet-18 (CIFAR variant, parameter-free group norm): the flat layout equals
    torch.nn, the full-width model has 11,169,162 parameters (convolutions with biases), and the tape-based
    per-sample clipped gradient equals the vmap(grad) oracle on random tensors (width 4 to stay small)."""
    full = build_model("resnet18", (3072,), 10, image_shape=(3, 32, 32))
    assert full.n_params == 11_169_162 == sum(p.numel() for p in full.to_module().parameters())
    model = build_model("resnet18", (3 * 16 * 16,), 10, image_shape=(3, 16, 16), width=4)
    gen = torch.Generator().manual_seed(1)
    flat = torch.stack([model.init(gen, torch.float64) for _ in range(2)])
    x = torch.randn(2, 3, 3 * 16 * 16, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (2, 3), generator=gen)
    module = model.to_module().double()
    torch.nn.utils.vector_to_parameters(flat[1], module.parameters())
    torch.testing.assert_close(module(x[1]), model(flat, x)[1])
    weight = torch.full((2, 3), 1 / 3, dtype=torch.float64)
    fast = per_sample_clipped_grad(model, flat, x, y, weight, 0.5)
    slow = per_sample_clipped_grad_vmap(model, flat, x, y, weight, 0.5)
    torch.testing.assert_close(fast.norms, slow.norms)
    torch.testing.assert_close(fast.grad, slow.grad)
    assert (fast.norms > 0.5).any()  # clipping is active
    with pytest.raises(ConfigError, match="width"):
        build_model("resnet18", (192,), 10, image_shape=(3, 8, 8), width=0)
    with pytest.raises(ConfigError, match="image"):
        build_model("resnet18", (192,), 10)


def test_resnet18_too_small_images_are_a_config_error():
    with pytest.raises(ConfigError, match="too small"):
        build_model("resnet18", (3 * 8 * 8,), 10, image_shape=(3, 8, 8), width=4)
