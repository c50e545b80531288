"""Partitions of a training set over clients: each returns one index array per client (disjoint): a list, or
the rows of one 2-D array where every client has the same size.

* :func:`iid`: a random split into equal parts (or ``samples_per_client`` each): NbAFL's 100 samples per
  client (NbAFL Sec. VI), UDP's 800 (UDP Sec. 5).
* :func:`shards`: sort by label, cut into ``num_clients * shards_per_client`` shards, deal them out
  (McMahan et al. 2017's pathological non-IID split).
* :func:`dirichlet`: per class, client shares ~ Dirichlet(alpha) (Hsu et al. 2019).
* :func:`quantity_skew`: IID labels, client sizes ~ Dirichlet(alpha) x n (at least ``min_size``).
* :func:`classes_per_client`: every client gets its own distinct set of ``classes_per_client`` classes with
  ``samples_per_class`` samples of each: DP-PFL's 50 clients x 3 classes x 200 (spec 000 Sec. 6); UDP's
  non-IID MNIST (4 classes per MT).
* :func:`groups`: consecutive groups of clients with their own sizes: the quality/size splits of PADPFL
  Table I (e.g. 20 x 50, 20 x 120, 20 x 271 samples; quality noise is applied by the caller with
  :func:`fedbound.training.data.salt_and_pepper`).

All take an explicit ``numpy.random.Generator``; not enough data raises a ConfigError saying what is missing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from fedbound.errors import ConfigError, ParameterError

__all__ = ["PARTITION_NAMES", "iid", "shards", "dirichlet", "quantity_skew", "classes_per_client", "groups"]

PARTITION_NAMES = ("iid", "shards", "dirichlet", "quantity_skew", "classes", "groups")


def _check_clients(num_clients: int, n: int) -> None:
    if num_clients < 1:
        raise ParameterError("num_clients", num_clients, "integer in [1, inf)")
    if n < num_clients:
        raise ConfigError(f"partition: {n} training samples cannot give {num_clients} clients one each")


def iid(n: int, num_clients: int, rng: np.random.Generator, samples_per_client: int | None = None
        ) -> list[np.ndarray] | np.ndarray:
    """Random equal split of ``n`` samples (the first ``num_clients * samples_per_client`` of a shuffle).

    With ``samples_per_client`` the parts are the rows of one ``(num_clients, samples_per_client)`` array
    (a sequence of index arrays like the others, without one Python object per client)."""
    _check_clients(num_clients, n)
    order = rng.permutation(n)
    if samples_per_client is None:
        return [np.sort(part) for part in np.array_split(order, num_clients)]
    need = num_clients * samples_per_client
    if samples_per_client < 1 or need > n:
        raise ConfigError(f"partition iid: {num_clients} clients x {samples_per_client} samples = {need} > "
                          f"{n} training samples available; lower samples_per_client or test_fraction")
    return np.sort(order[:need].reshape(num_clients, samples_per_client), axis=1)


def shards(labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator
           ) -> list[np.ndarray]:
    """Label-sorted shards, ``shards_per_client`` random ones per client."""
    _check_clients(num_clients, len(labels))
    n_shards = num_clients * shards_per_client
    if shards_per_client < 1 or n_shards > len(labels):
        raise ConfigError(f"partition shards: {n_shards} shards need at least as many samples "
                          f"({len(labels)} available)")
    order = np.argsort(labels, kind="stable")
    pieces = np.array_split(order, n_shards)
    deal = rng.permutation(n_shards).reshape(num_clients, shards_per_client)
    return [np.sort(np.concatenate([pieces[s] for s in row])) for row in deal]


def dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator,
              min_size: int = 1, max_tries: int = 100) -> list[np.ndarray]:
    """Per class, proportions over clients ~ Dir(alpha); redrawn until every client has ``min_size``."""
    _check_clients(num_clients, len(labels))
    if alpha <= 0:
        raise ParameterError("dirichlet_alpha", alpha, "(0, inf)")
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            cuts = (np.cumsum(rng.dirichlet(np.full(num_clients, alpha))) * len(idx)).astype(int)[:-1]
            for i, piece in enumerate(np.split(idx, cuts)):
                parts[i].append(piece)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in out) >= min_size:
            return out
    raise ConfigError(f"partition dirichlet: no draw in {max_tries} gave every client {min_size} samples; "
                      "raise dirichlet_alpha or lower the number of clients")


def quantity_skew(n: int, num_clients: int, alpha: float, rng: np.random.Generator, min_size: int = 1
                  ) -> list[np.ndarray]:
    """IID samples, sizes ``min_size + Dir(alpha) * (n - num_clients * min_size)``."""
    _check_clients(num_clients, n)
    if alpha <= 0:
        raise ParameterError("quantity_alpha", alpha, "(0, inf)")
    spare = n - num_clients * min_size
    if spare < 0:
        raise ConfigError(f"partition quantity_skew: {num_clients} x {min_size} > {n} samples")
    sizes = min_size + np.floor(rng.dirichlet(np.full(num_clients, alpha)) * spare).astype(int)
    order = rng.permutation(n)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(order[bounds[i]:bounds[i + 1]]) for i in range(num_clients)]


def classes_per_client(labels: np.ndarray, num_clients: int, classes: int, samples_per_class: int,
                       rng: np.random.Generator) -> list[np.ndarray]:
    """Each client its own distinct ``classes``-subset of the labels (drawn without replacement from all
    ``C(n_classes, classes)`` subsets) and ``samples_per_class`` disjoint samples of each (spec 000
    Sec. 6)."""
    values = np.unique(labels)
    combos = list(itertools.combinations(values.tolist(), classes))
    if classes < 1 or classes > len(values):
        raise ParameterError("classes_per_client", classes, f"integer in [1, {len(values)}]")
    if num_clients > len(combos):
        raise ConfigError(f"partition classes: only {len(combos)} distinct {classes}-class sets exist for "
                          f"{num_clients} clients")
    chosen = [combos[i] for i in rng.choice(len(combos), num_clients, replace=False)]
    pools = {c: list(rng.permutation(np.flatnonzero(labels == c))) for c in values.tolist()}
    demand = {c: sum(c in s for s in chosen) * samples_per_class for c in pools}
    short = {c: (demand[c], len(pools[c])) for c in pools if demand[c] > len(pools[c])}
    if short:
        c, (need, have) = next(iter(short.items()))
        raise ConfigError(f"partition classes: class {c} needs {need} samples ({samples_per_class} per "
                          f"client) but has {have}; lower samples_per_class")
    out = []
    for s in chosen:
        mine = []
        for c in s:
            mine.extend(pools[c][:samples_per_class])
            del pools[c][:samples_per_class]
        out.append(np.sort(np.asarray(mine, dtype=np.int64)))
    return out


def groups(n: int, clients_per_group: Sequence[int], samples_per_client: Sequence[int],
           rng: np.random.Generator) -> list[np.ndarray]:
    """Consecutive client groups, group ``g`` having ``clients_per_group[g]`` clients of
    ``samples_per_client[g]`` IID samples each (PADPFL Table I, scenario 3: 20/20/20 x 50/120/271)."""
    if len(clients_per_group) != len(samples_per_client) or not clients_per_group:
        raise ConfigError("partition groups: group_clients and group_samples need the same, non-zero length")
    sizes = [s for c, s in zip(clients_per_group, samples_per_client, strict=True) for _ in range(c)]
    if min(sizes) < 1 or sum(sizes) > n:
        raise ConfigError(f"partition groups: the groups need {sum(sizes)} samples, {n} available")
    order = rng.permutation(n)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(order[bounds[i]:bounds[i + 1]]) for i in range(len(sizes))]
