"""A per-process memo of the last results of a pure function, by key, safe to share between threads (the
explorer's server answers requests on several): what a planner keeps so that a plan and its figures, or a
figure drawn twice, compute once."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable
from typing import Any


class LastKept:
    """The last ``size`` results by key (least recently used goes first); :meth:`get` computes on a miss.
    Two threads missing the same key may both compute it: the answer is the same (a pure function)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = compute()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)
