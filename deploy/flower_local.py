"""An in-process stand-in for Flower's Grid: the real ClientApp, called in this process, without Ray.

flwr 1.42 ships one simulation backend, Ray (``run_simulation``'s ``backend_name`` accepts only
``"ray"``); starting it costs ~40 s on 2 CPU cores.  :class:`InProcessGrid` offers the two Grid calls the
fedbound ServerApp uses (``get_node_ids``, ``send_and_receive``) and answers each message by calling the
ClientApp object itself (``client_app(message, context)``: Flower's own dispatch to the ``query`` and
``train`` handlers) with a Context whose ``node_config`` holds that node's ``partition-id``.  Everything but
the transport is Flower's and fedbound's code; tests and ``bench/flower_round.py`` use it, ``fedbound
flower --run`` uses Flower's simulation engine.  ``drop(round, client)``: a message never delivered (a
client that is down); ``lose(round, client)``: a reply lost after the client computed (and kept) it; for
the tests of refused and repeated rounds.  It is a simulation Grid (``fedbound_simulation``): a ServerApp
served over it with ``simulation=True`` may run with reproducible noise, like one on Flower's simulation
engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["InProcessGrid"]


class InProcessGrid:
    """``num_nodes`` SuperNodes (ids 1000 + partition-id) served by ``client_app`` in this process."""

    fedbound_simulation = True

    def __init__(self, client_app: Any, num_nodes: int, run_config: Mapping[str, Any],
                 drop: Callable[[int, int], bool] | None = None,
                 lose: Callable[[int, int], bool] | None = None) -> None:
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity

        for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 0)):  # what a ServerApp process has
            if getattr(TaskIdentity, name) is None:
                setattr(TaskIdentity, name, value)
        self.app = client_app
        self.drop, self.lose = drop, lose
        self.contexts = {1000 + i: Context(run_id=1, node_id=1000 + i, node_config={"partition-id": i},
                                           state=RecordDict(), run_config=dict(run_config))
                         for i in range(num_nodes)}

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> Iterable[Any]:
        from flwr.app import Error, Message

        replies = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            conf = msg.content.get("config") if msg.content is not None else None
            who = (int(conf["round"]), int(conf["client"])) if conf is not None else None
            if who is not None and self.drop is not None and self.drop(*who):
                continue
            try:
                reply = self.app(msg, self.contexts[node])
            except Exception as exc:  # Flower replies with an Error message when a ClientApp raises
                reply = Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
            if who is None or self.lose is None or not self.lose(*who):
                replies.append(reply)
        return replies
