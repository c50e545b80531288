"""The clients' data on the device, stored once; ``k`` clients' batches padded to a common size on demand.

The samples sit once in ``rows`` (for a partition of a training set: the dataset's own array, not a copy);
``index[i, :n_i]`` are client ``i``'s rows.  :meth:`ClientData.gather` pads just the clients of one chunk
into ``(k, n_max, ...)`` with ``mask`` marking the real samples, so memory stays near the data's size for
any number of clients (issue 25: 10^5 clients x 20 samples).  A gathered :class:`ClientBatch` carries
``weight = mask / n_i``, so ``sum_b weight_b * loss_b`` is each client's mean loss and padding contributes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fedbound.training.data import Dataset
from fedbound.training.finite import check_records

__all__ = ["ClientData", "ClientBatch"]


@dataclass(frozen=True)
class ClientBatch:
    """Data of ``k`` clients: ``x`` ``(k, n, *features)``; ``y``, ``mask``, ``weight``: ``(k, n)``."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    sizes: torch.Tensor

    @property
    def weight(self) -> torch.Tensor:
        return self.mask / self.sizes.unsqueeze(1)


class ClientData:
    """All clients' training data; ``sizes`` is the numpy array of ``n_i``.

    Stored once, flat: ``rows`` ``(n, *features)`` and ``row_y`` ``(n,)`` hold the samples (for a partition of
    a dataset, its own arrays, shared, not copied) and ``index`` ``(N, n_max)`` says which rows are client
    ``i``'s, in order.  :meth:`gather` pads only the clients asked for, so memory stays near the data's size
    however many clients there are.  ``x``, ``y``, ``mask`` (the padded ``(N, n_max, ...)`` tensors, zeros in
    the padding) are built on first use, for the few callers that want every client at once; a ClientData
    built from padded tensors (``ClientData(x, y, mask, sizes)``) keeps them as given.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, sizes: np.ndarray) -> None:
        self.sizes = np.asarray(sizes)
        self._padded: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = (x, y, mask)
        self.rows, self.row_y = x.reshape(-1, *x.shape[2:]), y.reshape(-1)  # views: dtype, device, shape
        self.index = np.broadcast_to(np.int64(0), tuple(x.shape[:2]))  # its shape only: gather uses x

    @classmethod
    def from_rows(cls, rows: torch.Tensor, row_y: torch.Tensor, index: np.ndarray, sizes: np.ndarray
                  ) -> ClientData:
        """Clients whose samples are ``rows[index[i, :sizes[i]]]`` (the rest of ``index`` is ignored)."""
        data = cls.__new__(cls)
        data.sizes, data.rows, data.row_y = np.asarray(sizes), rows, row_y
        data.index, data._padded = np.asarray(index, dtype=np.int64), None
        return data

    @property
    def num_clients(self) -> int:
        return len(self.sizes)

    @property
    def n_max(self) -> int:
        return int(self.index.shape[1])

    @property
    def feature_shape(self) -> tuple[int, ...]:
        return tuple(self.rows.shape[1:])

    @property
    def padded_shape(self) -> tuple[int, ...]:
        """The shape of :attr:`x`, ``(N, n_max, *features)``, without building it."""
        return (self.num_clients, self.n_max, *self.feature_shape)

    def padded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x, y, mask)`` of every client, padded (built afresh, not kept, unless given padded)."""
        if self._padded is not None:
            return self._padded
        batch = self.gather(np.arange(self.num_clients))
        return batch.x, batch.y, batch.mask > 0

    def _pad(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._padded is None:
            self._padded = self.padded()
        return self._padded

    @property
    def x(self) -> torch.Tensor:
        return self._pad()[0]

    @property
    def y(self) -> torch.Tensor:
        return self._pad()[1]

    @property
    def mask(self) -> torch.Tensor:
        return self._pad()[2]

    @classmethod
    def from_partition(cls, x: np.ndarray, y: np.ndarray, parts: Sequence[np.ndarray],
                       device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> ClientData:
        """Client ``i`` holds samples ``parts[i]`` of ``(x, y)``.  The arrays are used as they are when they
        are already in ``dtype`` and most of their rows belong to some client (a partition of the whole
        training set: no copy); otherwise the clients' rows are copied once, in ``dtype``.  A NaN or
        infinite feature or label (in ``dtype``) is a ConfigError naming its row
        (``fedbound.training.finite.check_records``)."""
        sizes = np.array([len(p) for p in parts], dtype=np.int64)
        n_max = int(sizes.max())
        index = np.zeros((len(parts), n_max), dtype=np.int64)
        for i, p in enumerate(parts):
            index[i, :len(p)] = p
        staging = np.float64 if dtype == torch.float64 else np.float32
        keep = None  # the original row of each row of x (None: x is the original)
        if sizes.sum() * 3 < 2 * len(x):  # a small part of the rows is used: keep only those
            used = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
            keep, where = np.unique(used, return_inverse=True)
            x, y = np.asarray(x)[keep], np.asarray(y)[keep]
            starts = np.concatenate([[0], np.cumsum(sizes)])
            for i in range(len(parts)):
                index[i, :sizes[i]] = where[starts[i]:starts[i + 1]]
        ydtype = dtype if np.issubdtype(y.dtype, np.floating) else torch.long
        with np.errstate(over="ignore"):  # beyond the dtype's range: the infinity check_records refuses
            staged = np.asarray(x, dtype=staging)
        check_records(staged, np.asarray(y), "the federation's training data", rows=keep)
        rows = torch.as_tensor(staged, dtype=dtype, device=device)
        return cls.from_rows(rows, torch.as_tensor(y, dtype=ydtype, device=device), index, sizes)

    @classmethod
    def from_dataset(cls, dataset: Dataset, parts: Sequence[np.ndarray], device: torch.device | str = "cpu",
                     dtype: torch.dtype = torch.float32) -> ClientData:
        return cls.from_partition(dataset.x_train, dataset.y_train, parts, device, dtype)

    def to(self, device: torch.device | str, dtype: torch.dtype) -> ClientData:
        """This data on ``device``, features (and regression targets) in ``dtype`` (self if already so)."""
        device = torch.device(device)
        if self.rows.dtype == dtype and self.rows.device == device:
            return self
        ydtype = dtype if self.row_y.is_floating_point() else self.row_y.dtype
        if self._padded is not None:
            x, y, mask = self._padded
            return ClientData(x.to(device, dtype), y.to(device, ydtype), mask.to(device), self.sizes)
        return ClientData.from_rows(self.rows.to(device, dtype), self.row_y.to(device, ydtype), self.index,
                                    self.sizes)

    def gather(self, clients: Sequence[int] | np.ndarray) -> ClientBatch:
        """The batch of the given clients (in that order), padded to ``n_max`` with zeros."""
        clients = np.asarray(clients, dtype=np.int64)
        device, dtype = self.rows.device, self.rows.dtype
        sizes = torch.as_tensor(self.sizes[clients], dtype=dtype, device=device)
        if self._padded is not None:
            x, y, mask = self._padded
            idx = torch.as_tensor(clients, dtype=torch.long, device=device)
            return ClientBatch(x[idx], y[idx], mask[idx].to(dtype), sizes)
        mask = torch.as_tensor(np.arange(self.n_max)[None, :] < self.sizes[clients][:, None], device=device)
        idx = torch.as_tensor(self.index[clients].reshape(-1), device=device)
        shape = (len(clients), self.n_max)
        x = self.rows.index_select(0, idx).view(*shape, *self.feature_shape)
        y = self.row_y.index_select(0, idx).view(shape)
        if not bool(mask.all()):
            x[~mask] = 0
            y[~mask] = 0
        return ClientBatch(x, y, mask.to(dtype), sizes)
