"""A user's own PyTorch model and data for the engine (``fedbound train``'s and ``fedbound estimate``'s
Python API: ``train_from_config(..., data=, model=)``, ``estimate(..., data=, model=)``).

* :func:`as_dataset`: a :class:`~fedbound.training.data.Dataset` from ``(x, y)`` (numpy arrays or torch
  tensors), a map-style ``torch.utils.data.Dataset`` of ``(x, y)`` pairs (e.g. a ``TensorDataset``), or a
  Dataset as it is.  ``x`` is ``(n, features)`` or images ``(n, C, H, W)`` / ``(n, H, W)`` (kept as
  ``image_shape`` and flattened: the engine's layout); ``y`` of an integer (or bool) dtype holds class labels
  ``0 .. n_classes - 1`` (a classification task), a floating ``y`` real targets (a regression task, squared
  loss), unless ``n_classes`` is given.  Without ``test`` arrays, ``test_fraction`` of the records are held
  out (seeded, as the built-in datasets are).  NaN or infinite records are refused (``training.finite``).
* :func:`as_model`: the engine's :class:`~fedbound.training.models.Model` from an ``nn.Sequential`` (nested
  ones are flattened) of ``Linear``, ``Conv2d``, ``ReLU``, ``MaxPool2d``, ``Flatten``, ``Unflatten`` and
  ``Identity`` layers: the layers whose per-sample gradients the engine clips without materialising them
  (``training.models``: affine over tokens).  The flat parameter layout is ``parameters_to_vector`` of the
  module, so the module's current weights are the run's initial model; the converted model is checked to
  compute what the module computes on a few inputs.  Any other layer is refused in one line naming it.
* :func:`fingerprint`: a hash of the data and the initial model, part of a run's key (a checkpoint of other
  data or weights is never resumed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError
from fedbound.training.data import Dataset, _split
from fedbound.training.models import Conv2d, Dense, Flatten, MaxPool2d, Model, ReLU, _Unflatten

__all__ = ["as_dataset", "as_model", "fingerprint", "MAX_RECORDS", "LAYERS"]

MAX_RECORDS = 10_000_000
"""Records a torch Dataset may hold (each is read once, into memory, as the engine holds its data)."""

LAYERS = ("Linear", "Conv2d", "ReLU", "MaxPool2d", "Flatten", "Unflatten", "Identity")
"""The ``torch.nn`` layers :func:`as_model` converts."""


def _array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"data: {what} cannot be read as an array ({exc})") from None


def _pairs(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of a pair or of a map-style torch Dataset of pairs."""
    if isinstance(data, tuple | list) and len(data) == 2:
        return _array(data[0], "x"), _array(data[1], "y")
    if isinstance(data, torch.utils.data.Dataset) and hasattr(data, "__len__"):
        n = len(data)
        if not 0 < n <= MAX_RECORDS:
            raise ConfigError(f"data: a torch Dataset of {n} records is outside its valid range [1, "
                              f"{MAX_RECORDS:,}]")
        first = data[0]
        if not (isinstance(first, tuple | list) and len(first) == 2):
            raise ConfigError("data: a torch Dataset must yield (x, y) pairs, e.g. a TensorDataset(x, y)")
        xs, ys = zip(*(data[i] for i in range(n)), strict=True)
        return np.stack([_array(x, "x") for x in xs]), np.stack([_array(y, "y") for y in ys])
    raise ConfigError(f"data = {type(data).__name__} is outside its valid range: a Dataset, (x, y) arrays or "
                      "tensors, or a torch Dataset of (x, y) pairs")


def _features(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """Flat float32 features and the image shape of ``(n, C, H, W)`` / ``(n, H, W)`` inputs."""
    if x.ndim < 1 or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise ConfigError(f"data: x of shape {x.shape} and dtype {x.dtype} is outside its valid range: "
                          "numbers of shape (n, features), (n, H, W) or (n, C, H, W)")
    image = (1, *x.shape[1:]) if x.ndim == 3 else (tuple(x.shape[1:]) if x.ndim == 4 else None)
    return x.reshape(len(x), -1).astype(np.float32), image


def _labels(y: np.ndarray, n: int, n_classes: int | None) -> tuple[np.ndarray, int]:
    y = y.reshape(len(y), -1)
    if len(y) != n or y.shape[1] != 1:
        raise ConfigError(f"data: y of shape {tuple(y.shape)} does not match x's {n} records (one label or "
                          "target per record)")
    y = y[:, 0]
    classify = n_classes is not None or np.issubdtype(y.dtype, np.integer) or y.dtype == bool
    if not classify:
        return y.astype(np.float32), 0
    if np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y) & (y == np.round(y))):
        raise ConfigError("data: n_classes is given but y holds values that are not whole class labels")
    labels = y.astype(np.int64)
    k = int(labels.max()) + 1 if n_classes is None else int(n_classes)
    if k < 2 or labels.min() < 0 or labels.max() >= k:
        raise ConfigError(f"data: class labels must lie in 0 .. n_classes - 1 with n_classes >= 2; got "
                          f"{labels.min()} .. {labels.max()} with n_classes = {k}")
    return labels, k


def as_dataset(data: Any, test: Any = None, *, n_classes: int | None = None, test_fraction: float = 0.2,
               seed: int = 0, name: str = "custom") -> Dataset:
    """The engine's Dataset of a user's data (module docstring)."""
    from fedbound.training.finite import check_dataset

    if isinstance(data, Dataset):
        return check_dataset(data)
    x_raw, y_raw = _pairs(data)
    x, image = _features(x_raw)
    y, k = _labels(y_raw, len(x), n_classes)
    if test is None:
        return check_dataset(_split(name, x, y, k, test_fraction, seed, image, {"custom": True}))
    xt_raw, yt_raw = _pairs(test)
    xt, image_t = _features(xt_raw)
    if xt.shape[1] != x.shape[1] or image_t != image:
        raise ConfigError(f"data: test records of shape {xt_raw.shape[1:]} differ from the training records' "
                          f"{x_raw.shape[1:]}")
    yt, _ = _labels(yt_raw, len(xt), k if k else None)
    return check_dataset(Dataset(name, x, y, xt, yt.astype(y.dtype), k, image, {"custom": True}))


def _modules(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    if isinstance(module, torch.nn.Sequential):
        for child in module:
            yield from _modules(child)
    else:
        yield module


def _pair(value: Any) -> int | None:
    """An int from ``k`` or ``(k, k)``; None when the two differ."""
    if isinstance(value, int):
        return value
    a, b = value
    return int(a) if a == b else None


def _refuse(i: int, layer: torch.nn.Module, why: str) -> ConfigError:
    return ConfigError(f"model: layer {i} ({layer!r}) {why}; the engine trains an nn.Sequential of "
                       f"{', '.join(LAYERS)} layers (per-sample clipping needs layers affine over tokens)")


def _layer(i: int, m: torch.nn.Module) -> Any:
    nn = torch.nn
    if type(m) is nn.Linear:
        if m.bias is None:
            raise _refuse(i, m, "has no bias")
        return Dense(m.in_features, m.out_features)
    if type(m) is nn.Conv2d:
        k, s, p = _pair(m.kernel_size), _pair(m.stride), m.padding
        p = _pair(p) if not isinstance(p, str) else None
        if m.bias is None or None in (k, s, p) or _pair(m.dilation) != 1 or m.groups != 1 or \
                m.padding_mode != "zeros":
            raise _refuse(i, m, "is not a square convolution with a bias, numeric zero padding, dilation 1 "
                                "and one group")
        return Conv2d(m.in_channels, m.out_channels, k, padding=p, stride=s)
    if type(m) is nn.ReLU:
        return ReLU()
    if type(m) is nn.MaxPool2d:
        k = _pair(m.kernel_size)
        if k is None or _pair(m.stride or k) != k or _pair(m.padding) != 0 or _pair(m.dilation) != 1 or \
                m.ceil_mode or m.return_indices:
            raise _refuse(i, m, "is not a square pooling with stride = kernel, no padding")
        return MaxPool2d(k)
    if type(m) is nn.Flatten:
        if m.start_dim != 1 or m.end_dim != -1:
            raise _refuse(i, m, "does not flatten every dimension after the batch")
        return Flatten()
    if type(m) is nn.Unflatten:
        if m.dim != 1:
            raise _refuse(i, m, "does not unflatten dimension 1")
        return _Unflatten(tuple(int(s) for s in m.unflattened_size))
    if type(m) is nn.Identity:
        return None
    raise _refuse(i, m, "is not supported")


def as_model(model: Any, dataset: Dataset) -> tuple[Model, torch.Tensor | None]:
    """``(the engine's Model, its initial flat parameters)`` of a user's ``torch.nn`` module for ``dataset``
    (module docstring); a Model passes through (initial parameters None: the run's seeded initialisation).
    A single linear layer is named ``logreg`` (it is the built-in model: convex, exact constants), any
    other stack ``custom``."""
    if isinstance(model, Model):
        return model, None
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"model = {type(model).__name__} is outside its valid range: a torch.nn.Module (an "
                          "nn.Sequential) or a fedbound Model")
    layers = [x for i, m in enumerate(_modules(model)) if (x := _layer(i, m)) is not None]
    if dataset.image_shape is not None and layers and isinstance(layers[0], Conv2d | MaxPool2d):
        layers.insert(0, _Unflatten(tuple(dataset.image_shape)))  # the engine's records are flat
    affine = [x for x in layers if x.shapes]
    name = "logreg" if len(affine) == 1 and isinstance(affine[0], Dense) else "custom"
    loss = "squared" if dataset.is_regression else "cross_entropy"
    converted = Model(name, (dataset.n_features,), tuple(layers), dataset.n_outputs, loss)
    params = torch.nn.utils.parameters_to_vector(model.parameters()).detach().to(torch.float32).cpu()
    if params.numel() != converted.n_params:
        raise ConfigError(f"model: the module has {params.numel()} parameters, its layers "
                          f"{converted.n_params} (a layer holds parameters the engine does not know)")
    _check_same(model, converted, params, dataset)
    return converted, params


def _check_same(module: torch.nn.Module, converted: Model, params: torch.Tensor, dataset: Dataset) -> None:
    """The converted model computes what the module computes, on the first few training records."""
    x = torch.as_tensor(dataset.x_train[:4], dtype=torch.float32)
    shaped = x.reshape(len(x), *dataset.image_shape) if dataset.image_shape and converted.layers and \
        isinstance(converted.layers[0], _Unflatten) else x
    import copy

    try:
        copied = copy.deepcopy(module).float().eval()  # the user's module is left as it is
        with torch.no_grad():
            want = copied(shaped)
            got = converted(params.unsqueeze(0), x.unsqueeze(0))[0]
    except RuntimeError as exc:
        raise ConfigError(f"model: the module cannot run on the data's records ({str(exc).splitlines()[0]})"
                          ) from None
    if tuple(want.shape) != tuple(got.shape) or not torch.allclose(want, got, rtol=1e-4, atol=1e-5):
        raise ConfigError("model: the engine's copy of the module computes other outputs than the module "
                          f"(shapes {tuple(want.shape)} and {tuple(got.shape)}): a layer's forward is not "
                          "the standard one")


def fingerprint(dataset: Dataset, model: Model, params: torch.Tensor | None) -> str:
    """A hash of the records, the architecture and the initial weights (a run's key includes it)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr((model.name, model.input_shape, model.layers, model.n_outputs, model.loss)).encode())
    if params is not None:
        h.update(params.numpy().tobytes())
    return h.hexdigest()
