"""Functional models over a flat parameter vector, batched over clients.

A :class:`Model` is a stack of layers.  Its parameters live in one flat vector of length ``n_params``;
``k`` clients' models are a ``(k, n_params)`` tensor, and :meth:`Model.forward` runs all ``k`` models on
their own inputs ``(k, b, *input_shape)`` with batched matrix products (``torch.baddbmm``), no loop over
clients or samples.  The flat layout is exactly ``torch.nn.utils.parameters_to_vector`` of the equivalent
``torch.nn`` module (:meth:`Model.to_module`: weight then bias, layer by layer), so a plain per-client
reference loop can run the same model as an ordinary ``nn.Module``.

Every parametrised layer is *affine over tokens*: a dense layer (one token per sample) or a convolution
(one token per output pixel, via ``unfold``).  That is what lets per-sample gradient norms be computed
layer by layer without materialising per-sample gradients (see ``clipping.py``); the forward pass can
record each layer's input and output on a ``tape`` for that purpose.

Architectures (all from the seed papers' experiment sections):

* ``logreg``: multinomial logistic regression (a linear layer; with squared loss on regression tasks,
  linear/ridge regression).  WPFL Sec. VII "MLR".
* ``mlp``: one hidden ReLU layer of ``hidden`` units: 784-256-10 in NbAFL Sec. VI and UDP
  Sec. 5, 784-200-10 in spec 000 Sec. 6 (DP-PFL; width assumed there), 784-100-10 in WPFL ("DNN").
* ``cnn_1conv``: one 5x5 convolution (padding 4), ReLU, a linear softmax layer.  UDP Sec. 5 (CIFAR-10).
* ``cnn_2conv``: conv5(32)-ReLU-pool2-conv5(64)-ReLU-pool2-FC(512)-ReLU-FC.  WPFL Sec. VII (the FC
  input widths 1024 on 28x28 and 1600 on 32x32 inputs match the paper).
* ``cnn_3conv``: three 3x3 convolutions (64, 128, 256; padding 1) each followed by 2x2 max-pooling and
  ReLU, then FC 128, FC 256 (ReLU) and the output layer.  Spec 000 Sec. 6 (DP-PFL, 930,826 parameters on
  CIFAR-10).
* ``svm``: a linear support vector machine for a 2-class task: one output ``f(x) = w.x + b`` and the hinge
  loss ``max(0, 1 - y f(x))`` with ``y = +-1`` (class 1 is +1); the paper's kappa/2 ||w||^2 is ``[train]
  weight_decay``.  UDP Sec. 5, eq. (32) read as the standard hinge (spec 003 E20) (:func:`svm_model`).
* ``resnet18``: the CIFAR variant of ResNet-18 with parameter-free group normalisation (per-sample, unlike
  batch normalisation).  DP-PFL Sec. V, Fig. 4 (the paper's "33.16 M parameters" is not a ResNet-18 count,
  spec 000 E28; S is the count of the model built).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from fedbound.errors import ConfigError

__all__ = ["Dense", "Conv2d", "ReLU", "MaxPool2d", "Flatten", "Model", "build_model", "MODEL_NAMES",
           "TapeEntry", "GroupNorm", "GlobalAvgPool", "BasicBlock", "resnet18_layers", "svm_model"]

MODEL_NAMES = ("logreg", "mlp", "cnn_1conv", "cnn_2conv", "cnn_3conv", "resnet18", "svm")


@dataclass
class TapeEntry:
    """What one affine layer saw in a forward pass: its input tokens ``a`` ``(k, b, L, in)`` and its output
    ``z`` ``(k, b*L, out)`` (the graph node per-sample gradients are taken with respect to)."""

    a: torch.Tensor
    z: torch.Tensor
    tokens: int


def _track(z: torch.Tensor) -> torch.Tensor:
    """Make a layer output a node autograd can differentiate to, even when nothing before it needs grad."""
    if not z.requires_grad:
        z.requires_grad_(True)
    return z


@dataclass(frozen=True)
class Dense:
    in_features: int
    out_features: int

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.out_features, self.in_features), (self.out_features,)

    @property
    def fan_in(self) -> int:
        return self.in_features

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if in_shape != (self.in_features,):
            raise ConfigError(f"model: a dense layer expects {self.in_features} inputs, got shape {in_shape}")
        return (self.out_features,)

    def __call__(self, params: Sequence[torch.Tensor], x: torch.Tensor, tape: list | None) -> torch.Tensor:
        weight, bias = params
        k, b = x.shape[:2]
        z = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
        if tape is not None:
            tape.append(TapeEntry(a=x.unsqueeze(2), z=_track(z), tokens=1))
        return z

    def module(self) -> torch.nn.Module:
        return torch.nn.Linear(self.in_features, self.out_features)


@dataclass(frozen=True)
class Conv2d:
    in_channels: int
    out_channels: int
    kernel: int
    padding: int = 0
    stride: int = 1

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return (self.out_channels, self.in_channels, self.kernel, self.kernel), (self.out_channels,)

    @property
    def fan_in(self) -> int:
        return self.in_channels * self.kernel * self.kernel

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) != 3 or in_shape[0] != self.in_channels:
            raise ConfigError(f"model: a convolution expects ({self.in_channels}, H, W) inputs, "
                              f"got {in_shape}")
        h, w = ((s + 2 * self.padding - self.kernel) // self.stride + 1 for s in in_shape[1:])
        if h < 1 or w < 1:
            raise ConfigError(f"model: input {in_shape} is too small for a {self.kernel}x{self.kernel} "
                              "convolution; use a smaller CNN or an MLP for this dataset")
        return self.out_channels, h, w

    def __call__(self, params: Sequence[torch.Tensor], x: torch.Tensor, tape: list | None) -> torch.Tensor:
        weight, bias = params
        k, b, c, h, w = x.shape
        cols = F.unfold(x.reshape(k * b, c, h, w), self.kernel, padding=self.padding, stride=self.stride)
        tokens = cols.shape[-1]
        a = cols.transpose(1, 2).reshape(k, b * tokens, -1)
        z = torch.baddbmm(bias.unsqueeze(1), a, weight.reshape(k, self.out_channels, -1).transpose(1, 2))
        if tape is not None:
            tape.append(TapeEntry(a=a.view(k, b, tokens, -1), z=_track(z), tokens=tokens))
        ho, wo = self.out_shape((c, h, w))[1:]
        return z.view(k, b, ho, wo, self.out_channels).permute(0, 1, 4, 2, 3)

    def module(self) -> torch.nn.Module:
        return torch.nn.Conv2d(self.in_channels, self.out_channels, self.kernel, self.stride, self.padding)


@dataclass(frozen=True)
class ReLU:
    shapes: tuple = ()

    def out_shape(self, in_shape):
        return in_shape

    def __call__(self, params, x, tape):
        return torch.relu(x)

    def module(self) -> torch.nn.Module:
        return torch.nn.ReLU()


@dataclass(frozen=True)
class MaxPool2d:
    size: int = 2
    shapes: tuple = ()

    def out_shape(self, in_shape):
        c, h, w = in_shape
        if h < self.size or w < self.size:
            raise ConfigError(f"model: input {in_shape} is too small for {self.size}x{self.size} pooling")
        return c, h // self.size, w // self.size

    def __call__(self, params, x, tape):
        k, b = x.shape[:2]
        y = F.max_pool2d(x.reshape(k * b, *x.shape[2:]), self.size)
        return y.view(k, b, *y.shape[1:])

    def module(self) -> torch.nn.Module:
        return torch.nn.MaxPool2d(self.size)


@dataclass(frozen=True)
class Flatten:
    shapes: tuple = ()

    def out_shape(self, in_shape):
        return (math.prod(in_shape),)

    def __call__(self, params, x, tape):
        return x.reshape(*x.shape[:2], -1)

    def module(self) -> torch.nn.Module:
        return torch.nn.Flatten()


@dataclass(frozen=True)
class _Unflatten:
    shape: tuple[int, ...]
    shapes: tuple = ()

    def out_shape(self, in_shape):
        if math.prod(in_shape) != math.prod(self.shape):
            raise ConfigError(f"model: cannot view inputs of shape {in_shape} as images {self.shape}")
        return self.shape

    def __call__(self, params, x, tape):
        return x.reshape(*x.shape[:2], *self.shape)

    def module(self) -> torch.nn.Module:
        return torch.nn.Unflatten(1, self.shape)


@dataclass(frozen=True)
class GroupNorm:
    """Parameter-free group normalisation over (channel group, H, W) of each sample: per-sample, so DP-SGD's
    per-example clipping stays valid (batch normalisation mixes samples).  Used by ``resnet18``."""

    channels: int
    shapes: tuple = ()

    @property
    def groups(self) -> int:
        return math.gcd(self.channels, 32)

    def out_shape(self, in_shape):
        if math.prod(in_shape) // self.groups < 2:
            raise ConfigError(f"model: input {in_shape} is too small for group normalisation (one value per "
                              "group); use larger images (resnet18: at least 16x16)")
        return in_shape

    def __call__(self, params, x, tape):
        k, b = x.shape[:2]
        y = F.group_norm(x.reshape(k * b, *x.shape[2:]), self.groups)
        return y.view(k, b, *y.shape[1:])

    def module(self) -> torch.nn.Module:
        return torch.nn.GroupNorm(self.groups, self.channels, affine=False)


@dataclass(frozen=True)
class GlobalAvgPool:
    """Mean over the spatial positions: (C, H, W) -> (C,)."""

    shapes: tuple = ()

    def out_shape(self, in_shape):
        return (in_shape[0],)

    def __call__(self, params, x, tape):
        return x.mean(dim=(-2, -1))

    def module(self) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())


class _BasicBlockModule(torch.nn.Module):
    """torch.nn twin of :class:`BasicBlock` (same parameter order: conv1, conv2, shortcut)."""

    def __init__(self, block: BasicBlock) -> None:
        super().__init__()
        self.conv1, self.conv2 = block.conv1.module(), block.conv2.module()
        norm = GroupNorm(block.out_channels)
        self.norm1, self.norm2 = norm.module(), norm.module()
        self.shortcut = block.shortcut.module() if block.shortcut is not None else None
        self.norm_s = norm.module() if block.shortcut is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(x)))))
        skip = x if self.shortcut is None else self.norm_s(self.shortcut(x))
        return torch.relu(h + skip)


@dataclass(frozen=True)
class BasicBlock:
    """ResNet basic block (He et al. 2016): conv3x3(stride)-GN-ReLU-conv3x3-GN, plus the identity or a
    1x1(stride) convolution + GN, then ReLU.  Its convolutions are ordinary :class:`Conv2d` layers, recorded
    on the tape in parameter order (conv1, conv2, shortcut), so per-sample clipping works unchanged.
    ``fan_in`` (used by :meth:`Model.init` for all of a layer's tensors) is conv1's."""

    in_channels: int
    out_channels: int
    stride: int = 1

    @property
    def conv1(self) -> Conv2d:
        return Conv2d(self.in_channels, self.out_channels, 3, padding=1, stride=self.stride)

    @property
    def conv2(self) -> Conv2d:
        return Conv2d(self.out_channels, self.out_channels, 3, padding=1)

    @property
    def shortcut(self) -> Conv2d | None:
        if self.stride == 1 and self.in_channels == self.out_channels:
            return None
        return Conv2d(self.in_channels, self.out_channels, 1, stride=self.stride)

    def _convs(self) -> tuple[Conv2d, ...]:
        return (self.conv1, self.conv2) + (() if self.shortcut is None else (self.shortcut,))

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(s for conv in self._convs() for s in conv.shapes)

    @property
    def fan_in(self) -> int:
        return self.conv1.fan_in

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return GroupNorm(self.out_channels).out_shape(self.conv2.out_shape(self.conv1.out_shape(in_shape)))

    def __call__(self, params: Sequence[torch.Tensor], x: torch.Tensor, tape: list | None) -> torch.Tensor:
        norm = GroupNorm(self.out_channels)
        h = torch.relu(norm(None, self.conv1(params[0:2], x, tape), None))
        h = norm(None, self.conv2(params[2:4], h, tape), None)
        skip = x if self.shortcut is None else norm(None, self.shortcut(params[4:6], x, tape), None)
        return torch.relu(h + skip)

    def module(self) -> torch.nn.Module:
        return _BasicBlockModule(self)


def resnet18_layers(image_shape: Sequence[int], n_outputs: int, width: int = 64) -> list:
    """ResNet-18, CIFAR variant (3x3 stem, no max-pool; He et al. 2016): 17 convolutions in a stem and 8 basic
    blocks of widths (1, 2, 4, 8) x ``width``, global average pooling and one dense layer (DP-PFL Sec. V,
    Fig. 4).  Group normalisation without parameters replaces batch normalisation (per-sample, so DP-SGD
    clipping holds); convolutions carry biases, so S differs from the usual 11,173,962."""
    c = int(image_shape[0])
    layers: list = [_Unflatten(tuple(int(s) for s in image_shape)), Conv2d(c, width, 3, padding=1),
                    GroupNorm(width), ReLU()]
    channels = width
    for i, mult in enumerate((1, 2, 4, 8)):
        out = width * mult
        layers += [BasicBlock(channels, out, 1 if i == 0 else 2), BasicBlock(out, out, 1)]
        channels = out
    return [*layers, GlobalAvgPool(), Dense(channels, n_outputs)]


@dataclass(frozen=True)
class Model:
    """A functional model: ``layers`` applied to per-sample inputs of ``input_shape``.

    ``loss`` is ``"cross_entropy"`` (classification, ``n_outputs`` classes), ``"squared"`` (regression,
    per-sample loss ``(f(x) - y)^2 / 2``, one output) or ``"hinge"`` (2 classes, one output, :func:`hinge`).
    """

    name: str
    input_shape: tuple[int, ...]
    layers: tuple
    n_outputs: int
    loss: str = "cross_entropy"
    slices: tuple[tuple[int, int, tuple[int, ...]], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shape = tuple(self.input_shape)
        slices, offset = [], 0
        for layer in self.layers:
            shape = layer.out_shape(shape)
            for s in layer.shapes:
                n = math.prod(s)
                slices.append((offset, offset + n, tuple(s)))
                offset += n
        if shape != (self.n_outputs,):
            raise ConfigError(f"model {self.name}: output shape {shape}, expected ({self.n_outputs},)")
        object.__setattr__(self, "slices", tuple(slices))

    @property
    def n_params(self) -> int:
        return self.slices[-1][1] if self.slices else 0

    def init(self, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """PyTorch's default initialisation (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases)."""
        parts = []
        for layer in self.layers:
            for s in layer.shapes:
                bound = 1.0 / math.sqrt(layer.fan_in)
                u = torch.rand(s, generator=generator, dtype=torch.float64, device=generator.device)
                parts.append(((2 * u - 1) * bound).reshape(-1))
        return torch.cat(parts).to(dtype) if parts else torch.zeros(0, dtype=dtype)

    def split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Per-tensor views ``(k, *shape)`` of a flat ``(k, n_params)`` batch of models."""
        k = flat.shape[0]
        return [flat[:, lo:hi].view(k, *shape) for lo, hi, shape in self.slices]

    def forward(self, params: Sequence[torch.Tensor], x: torch.Tensor, tape: list | None = None
                ) -> torch.Tensor:
        """Outputs ``(k, b, n_outputs)`` of ``k`` models (``params`` from :meth:`split`) on ``x``.

        With ``tape`` (a list), each affine layer appends a :class:`TapeEntry`.
        """
        it = iter(params)
        for layer in self.layers:
            mine = [next(it) for _ in layer.shapes]
            x = layer(mine, x, tape)
        return x

    def __call__(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.forward(self.split(flat), x)

    def per_sample_loss(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Loss of every sample, ``(k, b)``: cross-entropy with logits, or ``(f(x) - y)^2 / 2``."""
        if self.loss == "squared":
            return 0.5 * (outputs[..., 0] - y) ** 2
        if self.loss == "hinge":
            return hinge(outputs[..., 0], y)
        k, b, c = outputs.shape
        return F.cross_entropy(outputs.reshape(k * b, c), y.reshape(k * b), reduction="none").view(k, b)

    def correct(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        """1.0 where the predicted class is right (classification only; None for regression)."""
        if self.loss == "squared":
            return None
        if self.loss == "hinge":
            return ((outputs[..., 0] > 0) == (y > 0)).to(outputs.dtype)
        return (outputs.argmax(-1) == y).to(outputs.dtype)

    def to_module(self) -> torch.nn.Module:
        """The equivalent ``torch.nn.Sequential`` (same flat parameter layout), for reference loops."""
        return torch.nn.Sequential(*(layer.module() for layer in self.layers))


def build_model(name: str, input_shape: Sequence[int], n_outputs: int, *,
                image_shape: Sequence[int] | None = None, hidden: int = 256,
                loss: str = "cross_entropy", last_hidden: int | None = None, width: int = 64) -> Model:
    """One of :data:`MODEL_NAMES` for inputs of ``input_shape`` (flat features) and ``n_outputs`` outputs.

    CNNs need ``image_shape`` (channels, height, width) of the dataset.  ``last_hidden``: width of the CNNs'
    last hidden (fully connected) layer (default: cnn_2conv 512, cnn_3conv 256 as in the papers); DP-PFL
    Fig. 6(b) sweeps it: cnn_3conv on CIFAR-10 has S(n) = 895,242 + 139 n parameters (spec 000 Sec. 6).
    ``width``: resnet18's first stage width (64 as in the paper; smaller for tests).
    """
    input_shape = tuple(int(s) for s in input_shape)
    d = math.prod(input_shape)
    flat: list = [] if len(input_shape) == 1 else [Flatten()]
    if name == "logreg":
        layers = [*flat, Dense(d, n_outputs)]
    elif name == "mlp":
        if hidden < 1:
            raise ConfigError(f"model mlp: hidden = {hidden} is outside its valid range integer in [1, inf)")
        layers = [*flat, Dense(d, hidden), ReLU(), Dense(hidden, n_outputs)]
    elif name in ("cnn_1conv", "cnn_2conv", "cnn_3conv"):
        if image_shape is None:
            raise ConfigError(f"model {name} needs an image dataset (mnist_subset, idx, cifar10)")
        image_shape = tuple(int(s) for s in image_shape)
        c = image_shape[0]
        if name == "cnn_1conv":
            body = [Conv2d(c, 32, 5, padding=4), ReLU()]
        elif name == "cnn_2conv":
            body = [Conv2d(c, 32, 5), ReLU(), MaxPool2d(2), Conv2d(32, 64, 5), ReLU(), MaxPool2d(2)]
        else:
            body = [Conv2d(c, 64, 3, padding=1), MaxPool2d(2), ReLU(), Conv2d(64, 128, 3, padding=1),
                    MaxPool2d(2), ReLU(), Conv2d(128, 256, 3, padding=1), MaxPool2d(2), ReLU()]
        shape = image_shape
        for layer in body:
            shape = layer.out_shape(shape)
        width = math.prod(shape)
        if last_hidden is not None and (name == "cnn_1conv" or int(last_hidden) < 1):
            raise ConfigError(f"model {name}: last_hidden = {last_hidden!r} is outside its valid range "
                              "integer in [1, inf) (cnn_2conv and cnn_3conv only)")
        if name == "cnn_1conv":
            head = [Flatten(), Dense(width, n_outputs)]
        elif name == "cnn_2conv":
            n = 512 if last_hidden is None else int(last_hidden)
            head = [Flatten(), Dense(width, n), ReLU(), Dense(n, n_outputs)]
        else:
            n = 256 if last_hidden is None else int(last_hidden)
            head = [Flatten(), Dense(width, 128), ReLU(), Dense(128, n), ReLU(), Dense(n, n_outputs)]
        layers = [_Unflatten(image_shape), *body, *head]
    elif name == "svm":
        return svm_model(input_shape, n_outputs)
    elif name == "resnet18":
        if image_shape is None:
            raise ConfigError("model resnet18 needs an image dataset (mnist_subset, idx, cifar10)")
        if int(width) < 1:
            raise ConfigError(f"model resnet18: width = {width!r} is outside its valid range integer in "
                              "[1, inf)")
        layers = resnet18_layers(image_shape, n_outputs, int(width))
    else:
        raise ConfigError(f"model = {name!r} is outside its valid range one of {', '.join(MODEL_NAMES)}")
    return Model(name=name, input_shape=input_shape, layers=tuple(layers), n_outputs=n_outputs, loss=loss)


def hinge(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample hinge loss ``max(0, 1 - s f)`` with ``s = 2 y - 1`` (class index 0 -> -1, 1 -> +1): the
    data term of the SVM loss of UDP eq. (32), read as the standard hinge (spec 003 E20)."""
    return torch.relu(1.0 - (2.0 * y.to(f.dtype) - 1.0) * f)


def svm_model(input_shape: Sequence[int], n_outputs: int) -> Model:
    """The linear SVM of UDP Sec. 5 (its IPUMS-US experiment, eq. (32)): one linear output, hinge loss.
    ``n_outputs`` is the dataset's number of classes, which must be 2."""
    if n_outputs != 2:
        raise ConfigError(f"model svm: the dataset has {n_outputs} classes; svm needs exactly 2 (a binary "
                          "task such as synthetic_logistic or a csv with a 0/1 label)")
    shape = tuple(int(s) for s in input_shape)
    flat: list = [] if len(shape) == 1 else [Flatten()]
    return Model(name="svm", input_shape=shape, layers=(*flat, Dense(math.prod(shape), 1)), n_outputs=1,
                 loss="hinge")
