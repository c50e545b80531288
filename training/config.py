"""The ``[train]`` section: everything the simulator needs on top of an algorithm's setting section.

One config file drives both ``fedbound plan`` and ``fedbound train``: the setting (privacy target, T, K,
clients, ...) sits in the algorithm's own section (``[nbafl]``, ``[udp]``, ...); ``[train]`` adds data,
partition, model, local optimiser, seed, device and evaluation.  :data:`TRAIN_SECTION` declares every key
with its type, range and default; :func:`build_data`, :func:`build_model_for`, :func:`run_options` turn the
validated table into engine objects.  Algorithm-specific construction lives in each algorithm module
(``from_config``), called by that algorithm's recipe in ``fedbound.validation.recipes.<algo>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedbound.config import Field, Section
from fedbound.errors import ConfigError
from fedbound.training import partitions as parts_mod
from fedbound.training.data import DATASET_NAMES, Dataset, load_dataset, salt_and_pepper
from fedbound.training.engine import RunOptions
from fedbound.training.federation import ClientData
from fedbound.training.local import LocalSGD
from fedbound.training.models import MODEL_NAMES, Model, build_model
from fedbound.training.noise import Streams

__all__ = ["TRAIN_SECTION", "MAX_ROUNDS", "MAX_LOCAL_STEPS", "MAX_CLIENTS", "MAX_SAMPLES",
           "MAX_WIDTH", "MAX_MEMORY_MB", "MAX_STEP_SIZE", "check_rounds", "TrainingSetup", "build_data",
           "build_model_for", "run_options", "local_sgd", "resolve_device", "parse_int_list", "dump_toml"]

# Documented maxima of the simulator's sizes, checked before anything is allocated or trained: far beyond
# what this compact simulator is for (a run at a maximum would take days), small enough that no size
# overflows or exhausts memory before the check.
MAX_ROUNDS = 1_000_000
"""Communication rounds of one run (T, T0 x tau0, ...)."""
MAX_LOCAL_STEPS = 100_000
"""Local gradient steps per round (local_steps, tau0, ...)."""
MAX_CLIENTS = 1_000_000
"""Clients of one federation (N, U, chunk_size)."""
MAX_SAMPLES = 10_000_000
"""Samples of a dataset, a client or a batch."""
MAX_WIDTH = 65_536
"""Hidden units of the mlp, features of the synthetic tasks, classes per client."""
MAX_MEMORY_MB = 1_048_576.0
"""memory_mb: 1 TiB."""
MAX_STEP_SIZE = 1e6
"""Learning rates and weight decay (larger ones diverge at once; the engine stops a diverged run anyway)."""

TRAIN_SECTION = Section("train", (
    Field("dataset", str, "mnist_subset", "training data (mnist: the full MNIST of `fedbound data mnist`)",
          choices=DATASET_NAMES),
    Field("data_path", str, None, "folder with the IDX files (dataset = idx) or CIFAR-10 batches (cifar10; "
          "default: the data cache)", optional=True),
    Field("test_fraction", float, 0.2, "share of the embedded / synthetic data held out for testing (mnist, "
          "cifar10: 0 drops the official test set, else it is kept)", low=0.0, high=0.9),
    Field("synthetic_samples", int, 2000, "samples of the synthetic convex tasks", low=2, high=MAX_SAMPLES),
    Field("synthetic_dim", int, 20, "features of the synthetic convex tasks", low=1, high=MAX_WIDTH),
    Field("partition", str, "iid", "how the training set is split over clients",
          choices=parts_mod.PARTITION_NAMES),
    Field("samples_per_client", int, None, "iid: samples per client (default: the setting's m, else an "
          "equal split of everything)", low=1, high=MAX_SAMPLES, optional=True),
    Field("shards_per_client", int, 2, "partition = shards: label-sorted shards per client", low=1,
          high=MAX_SAMPLES),
    Field("dirichlet_alpha", float, 0.5, "partition = dirichlet: concentration", low=0.0, low_open=True),
    Field("quantity_alpha", float, 1.0, "partition = quantity_skew: Dirichlet concentration of the sizes",
          low=0.0, low_open=True),
    Field("min_samples", int, 1, "dirichlet / quantity_skew: smallest allowed client dataset", low=1,
          high=MAX_SAMPLES),
    Field("classes_per_client", int, 3, "partition = classes: distinct classes per client", low=1,
          high=MAX_WIDTH),
    Field("samples_per_class", int, 200, "partition = classes: samples of each of a client's classes", low=1,
          high=MAX_SAMPLES),
    Field("group_clients", str, None, "partition = groups: clients per group, e.g. \"20,20,20\"",
          optional=True),
    Field("group_samples", str, None, "partition = groups: samples per client in each group, e.g. "
          "\"50,120,271\"", optional=True),
    Field("group_noise", str, None, "salt-and-pepper density per group, e.g. \"0.3,0.1,0\" (PADPFL)",
          optional=True),
    Field("model", str, "mlp", "model architecture", choices=MODEL_NAMES),
    Field("hidden", int, 256, "hidden units of the mlp", low=1, high=MAX_WIDTH),
    Field("last_hidden", int, None, "width of the CNNs' last hidden layer (default: the papers' 512 / 256; "
          "DP-PFL, Wei et al. 2023, Fig. 6(b) sweeps it)", low=1, high=MAX_WIDTH, optional=True),
    Field("width", int, 64, "resnet18: channels of its first stage", low=1, high=4096),
    Field("local_steps", int, 1, "local gradient steps per round", low=1, high=MAX_LOCAL_STEPS),
    Field("lr", float, None, "local learning rate (default: the algorithm's; UDP uses [udp] eta)",
          low=0.0, low_open=True, high=MAX_STEP_SIZE, optional=True),
    Field("batch_size", int, 0, "local mini-batch size; 0 = the full local dataset", low=0, high=MAX_SAMPLES),
    Field("weight_decay", float, 0.0, "L2 term lambda/2 ||w||^2 in every local objective", low=0.0,
          high=MAX_STEP_SIZE),
    Field("noise", str, "paper", "which sigma's to train with: the paper's formulas (paper), their tight "
          "counterparts (tight: calibrated exactly to the budget), or another method of the paper's noise "
          "function (e.g. UDP's corrected, numeric); whichever, the tight accountant holds the budget "
          "unless paper_reproduction = true"),
    Field("private", bool, True, "false: same algorithm without noise and without accounting"),
    Field("paper_reproduction", bool, False, "true: reproduce a paper as published: the budget binds on "
          "the paper's own accountant and a noise that spends more than the budget under exact accounting "
          "runs anyway, every output saying it is not (eps, delta)-DP at the stated budget; false (the "
          "default): the budget binds on the tight accountant and such a setting is refused before "
          "training"),
    Field("seed", int, 0, "one seed fixes data split, sampling and noise", low=0, high=2**32 - 1),
    Field("device", str, "cpu", "cpu, cuda, cuda:N or auto"),
    Field("dtype", str, "float32", "floating point precision", choices=("float32", "float64")),
    Field("chunk_size", int, 0, "clients trained together; 0 = as many as memory_mb allows", low=0,
          high=MAX_CLIENTS),
    Field("memory_mb", float, 1024.0, "working-set budget of one chunk, MiB", low=1.0, high=MAX_MEMORY_MB),
    Field("eval_every", int, 1, "evaluate every this many rounds (and after the last)", low=1,
          high=MAX_ROUNDS),
    Field("eval_clients", bool, True, "also write one metrics row per client"),
    Field("probe_records", int, 4, "records of the smallest client the sensitivity probe replaces before and "
          "after training (algorithms that clip the whole model); 0 = no probe", low=0, high=MAX_SAMPLES),
), doc="simulator settings (fedbound train)")


def check_rounds(name: str, rounds: int) -> int:
    """``rounds`` as an int in [1, MAX_ROUNDS]; ConfigError naming ``name`` (the key the user set) if not."""
    if not (isinstance(rounds, int | np.integer) and 1 <= rounds <= MAX_ROUNDS):
        raise ConfigError(f"{name} = {float(rounds):.6g} is outside its valid range integer in "
                          f"[1, {MAX_ROUNDS}] (the simulator's documented maximum of rounds)")
    return int(rounds)


def parse_int_list(key: str, text: str | None, kind: type = int) -> list:
    """``"20,20,20"`` -> ``[20, 20, 20]`` (ConfigError naming ``key`` otherwise)."""
    if text is None:
        raise ConfigError(f"[train] {key} is required for this partition")
    try:
        return [kind(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError as exc:
        raise ConfigError(f"[train] {key} = {text!r}: expected comma-separated numbers") from exc


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when available else ``cpu``; a CUDA device without CUDA is a ConfigError."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device = {name!r}: CUDA is not available on this machine (use cpu or auto)")
        return name
    if name != "cpu":
        raise ConfigError(f"device = {name!r} is outside its valid range cpu, cuda, cuda:N or auto")
    return name


@dataclass(frozen=True)
class TrainingSetup:
    """The data side of a run: dataset, partition, client data on the device, test arrays, model."""

    dataset: Dataset
    parts: list[np.ndarray]
    data: ClientData
    test: tuple[np.ndarray, np.ndarray] | None
    model: Model

    @property
    def client_sizes(self) -> np.ndarray:
        return self.data.sizes


def _partition(train: Mapping[str, Any], dataset: Dataset, num_clients: int, samples_per_client: int | None,
               rng: np.random.Generator) -> list[np.ndarray]:
    kind, y, n = train["partition"], dataset.y_train, len(dataset.y_train)
    if kind in ("shards", "dirichlet", "classes") and dataset.is_regression:
        raise ConfigError(f"partition = {kind!r} splits by label; {dataset.name} is a regression task")
    if kind == "iid":
        return parts_mod.iid(n, num_clients, rng, train["samples_per_client"] or samples_per_client)
    if kind == "shards":
        return parts_mod.shards(y, num_clients, train["shards_per_client"], rng)
    if kind == "dirichlet":
        return parts_mod.dirichlet(y, num_clients, train["dirichlet_alpha"], rng, train["min_samples"])
    if kind == "quantity_skew":
        return parts_mod.quantity_skew(n, num_clients, train["quantity_alpha"], rng, train["min_samples"])
    if kind == "classes":
        return parts_mod.classes_per_client(y, num_clients, train["classes_per_client"],
                                            train["samples_per_class"], rng)
    clients = parse_int_list("group_clients", train["group_clients"])
    sizes = parse_int_list("group_samples", train["group_samples"])
    if sum(clients) != num_clients:
        raise ConfigError(f"[train] group_clients = {train['group_clients']!r} sums to {sum(clients)}, "
                          f"but the setting has {num_clients} clients")
    return parts_mod.groups(n, clients, sizes, rng)


def build_data(train: Mapping[str, Any], num_clients: int, samples_per_client: int | None = None,
               device: str = "cpu", custom: tuple[Dataset, Model] | None = None) -> TrainingSetup:
    """Load the dataset (refused with a one-line error naming its file and row if a feature or label is
    NaN or infinite, ``fedbound.training.finite``), partition it over ``num_clients`` (seeded by
    ``train["seed"]``), build the model.  ``custom``: ``(dataset, model)`` given in Python instead
    (``fedbound.training.custom``)."""
    seed = train["seed"]
    dataset = custom[0] if custom is not None else dataset_for(train)
    streams = Streams(seed)
    parts = _partition(train, dataset, num_clients, samples_per_client, streams.numpy("partition"))
    x = dataset.x_train
    if train["group_noise"] is not None:
        if train["partition"] != "groups":
            raise ConfigError("[train] group_noise needs partition = \"groups\"")
        densities = parse_int_list("group_noise", train["group_noise"], float)
        counts = parse_int_list("group_clients", train["group_clients"])
        if len(densities) != len(counts):
            raise ConfigError("[train] group_noise needs one density per group")
        x = x.copy()
        per_client = np.repeat(densities, counts)
        for i, part in enumerate(parts):
            if per_client[i] > 0:
                x[part] = salt_and_pepper(x[part], per_client[i], streams.numpy("quality", i))
    dtype = torch.float64 if train["dtype"] == "float64" else torch.float32
    data = ClientData.from_partition(x, dataset.y_train, parts, device=device, dtype=dtype)
    test = (dataset.x_test, dataset.y_test) if len(dataset.y_test) else None
    model = custom[1] if custom is not None else build_model_for(train, dataset)
    return TrainingSetup(dataset, parts, data, test, model)


def dataset_for(train: Mapping[str, Any]) -> Dataset:
    """The ``[train]`` dataset, split and seeded as ``[train]`` says; a NaN or infinite feature or label is
    refused in one line naming its file and row (``fedbound.training.finite``)."""
    from fedbound.training.finite import check_dataset

    return check_dataset(load_dataset(train["dataset"], data_path=train["data_path"],
                                      test_fraction=train["test_fraction"], seed=train["seed"],
                                      synthetic_samples=train["synthetic_samples"],
                                      synthetic_dim=train["synthetic_dim"]), train["data_path"])


def build_model_for(train: Mapping[str, Any], dataset: Dataset) -> Model:
    return build_model(train["model"], (dataset.n_features,), dataset.n_outputs,
                       image_shape=dataset.image_shape, hidden=train["hidden"],
                       last_hidden=train["last_hidden"], width=train["width"],
                       loss="squared" if dataset.is_regression else "cross_entropy")


def run_options(train: Mapping[str, Any], progress: bool = False) -> RunOptions:
    return RunOptions(seed=train["seed"], device=resolve_device(train["device"]),
                      dtype=torch.float64 if train["dtype"] == "float64" else torch.float32,
                      chunk_size=train["chunk_size"], memory_budget_mb=train["memory_mb"],
                      eval_every=train["eval_every"], eval_clients=train["eval_clients"], progress=progress)


def local_sgd(train: Mapping[str, Any], default_lr: float, **extra: Any) -> LocalSGD:
    """The ``[train]`` local optimiser (``lr`` falls back to ``default_lr``)."""
    return LocalSGD(steps=train["local_steps"], lr=train["lr"] or default_lr,
                    batch_size=train["batch_size"] or None, weight_decay=train["weight_decay"], **extra)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dump_toml(sections: Mapping[str, Mapping[str, Any]], header: str = "") -> str:
    """A flat TOML document of scalar sections (unset optional keys are left out)."""
    lines = [f"# {line}" for line in header.splitlines()]
    for name, table in sections.items():
        lines.append(f"\n[{name}]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None)
    return "\n".join(lines).lstrip("\n") + "\n"
