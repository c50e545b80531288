"""The ClientApp: one client's local update and noised upload for one round, exactly as fedbound's engine
computes them.

A ``train`` message from the server (:mod:`fedbound.deploy.flower_server`) carries the model the client
starts from (``arrays``) and a ``config`` record: ``round`` (0-based), ``client`` (the fedbound client id,
which must be this SuperNode's ``partition-id``), ``private`` and one ``sigma.<stage>`` per noise stage the
client adds (the plan's std for this client and round: NbAFL's sigma_U, UDP's sigma_i, which CRD changes
between rounds).  The client runs the paper's own hooks, ``algorithm.local_update`` then
``algorithm.upload`` (clipping, uplink noise; per-sample clipping inside local DP-SGD steps), through a
:class:`~fedbound.training.engine.RoundContext` whose ``sigma`` is the message's, so the noise is drawn from
the same seeded per-client stream as in ``fedbound train`` (``training/noise.py``: keyed by seed, stage,
round and client).  Not Flower's ``LocalDpMod``, which calibrates one release by the classic formula and
draws from numpy's global RNG.  The reply holds the upload (``arrays``) and a ``metrics`` record:
``client``, ``num-examples``, ``clipped`` (when the algorithm logs it) and ``sigma.<stage>``: the std the
client actually added, which the server checks against the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError
from fedbound.training.engine import Algorithm, RoundContext, RunState
from fedbound.training.noise import Streams

__all__ = ["client_update", "client_app", "check_deployable"]


def check_deployable(algorithm: Algorithm) -> None:
    """ConfigError for an algorithm whose clients need state the server keeps (per-client start models or
    client state): a Flower client here receives only the global model."""
    cls = type(algorithm)
    base = Algorithm
    if cls.start_models is not base.start_models or cls.init_client_state is not base.init_client_state:
        raise ConfigError(f"{algorithm.name} keeps per-client state on the server (start_models / "
                          "init_client_state): fedbound flower deploys algorithms whose clients start from "
                          "the global model")


class _ClientContext(RoundContext):
    """A one-client RoundContext whose noise std per stage is the one the server sent."""

    def __init__(self, *args: Any, sigma: Mapping[str, float], private: bool) -> None:
        super().__init__(*args)
        self._sigma = dict(sigma)
        self._private = private

    def sigma(self, stage: str, clients: np.ndarray | None = None) -> torch.Tensor:
        n = 1 if clients is None else len(clients)
        if stage not in self._sigma:
            if self._private:
                raise ConfigError(f"the server sent no sigma for noise stage {stage!r} in round "
                                  f"{self.round + 1}: the client refuses to upload without the planned noise")
            return torch.zeros(n, dtype=self.dtype, device=self.device)
        return torch.full((n,), float(self._sigma[stage]), dtype=self.dtype, device=self.device)


def client_update(side: Any, round_: int, client: int, start: torch.Tensor, sigma: Mapping[str, float],
                  private: bool = True) -> tuple[torch.Tensor, dict[str, float]]:
    """Client ``client``'s upload in round ``round_`` (0-based) from the global model ``start``, with the
    noise std ``sigma`` per stage; and its metrics (``clipped``, ``sigma.<stage>`` actually added).

    ``side``: :func:`fedbound.deploy.flower_session.client_side` of the run config."""
    algorithm, options = side.algorithm, side.options
    check_deployable(algorithm)
    if not 0 <= client < side.data.num_clients:
        raise ConfigError(f"client = {client} is outside its valid range: 0 .. {side.data.num_clients - 1}")
    state = RunState(round=round_, rounds=side.prep.rounds,
                     global_params=start.to(device=options.device, dtype=options.dtype))
    ctx = _ClientContext(round_, state, side.model, side.data, Streams(options.seed, options.device), options,
                         None, sigma=sigma, private=private)
    clients = np.array([client], dtype=np.int64)
    ctx.participants, ctx.weights = clients, np.ones(1)
    start_rows = algorithm.start_models(ctx, clients)
    local = algorithm.local_update(ctx, clients, start_rows, side.data.gather(clients))
    upload = algorithm.upload(ctx, clients, local)
    metrics = {f"sigma.{stage}": float(np.mean(values)) for stage, values in ctx.noise_std.items()}
    metrics.update(ctx.logs)
    return upload[0].detach(), metrics


def client_app(defaults: Mapping[str, Any] | None = None) -> Any:
    """The Flower ClientApp (``train``: :func:`client_update`; ``query``: this node's ``partition-id``);
    ``defaults``: run config under the run's ``context.run_config`` (an in-process simulation has none)."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from fedbound.deploy.flower_session import client_side

    app = ClientApp()

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        pid = int(context.node_config.get("partition-id", -1))
        return Message(RecordDict({"node": ConfigRecord({"partition-id": pid})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        side = client_side({**(defaults or {}), **context.run_config})
        conf = msg.content["config"]
        client = int(conf["client"])
        own = context.node_config.get("partition-id")
        if own is not None and int(own) != client:
            raise ConfigError(f"this SuperNode holds partition-id {own}, the server asked it for "
                              f"client {client}")
        sigma = {k.removeprefix("sigma."): float(v) for k, v in conf.items() if k.startswith("sigma.")}
        start = torch.as_tensor(msg.content["arrays"].to_numpy_ndarrays()[0])
        upload, metrics = client_update(side, int(conf["round"]), client, start, sigma, bool(conf["private"]))
        metrics.update({"client": client, "num-examples": int(side.data.sizes[client])})
        content = RecordDict({"arrays": ArrayRecord([upload.cpu().numpy()]),
                              "metrics": MetricRecord(metrics)})
        return Message(content, reply_to=msg)

    return app
