"""The ClientApp: one client's local update and noised upload for one round, exactly as fedbound's engine
computes them, with noise only this client can know.

A ``train`` message from the server (:mod:`fedbound.deploy.flower_server`) carries the model the client
starts from (``arrays``) and a ``config`` record: ``round`` (0-based), ``client`` (the fedbound client id,
which must be this SuperNode's ``partition-id``), ``private`` and one ``sigma.<stage>`` per noise stage the
client adds (the plan's std for this client and round: NbAFL's sigma_U, UDP's sigma_i, which CRD changes
between rounds).  The client runs the paper's own hooks, ``algorithm.local_update`` then
``algorithm.upload`` (clipping, uplink noise; per-sample clipping inside local DP-SGD steps), through a
:class:`~fedbound.training.engine.RoundContext` whose ``sigma`` is the message's.

**Randomness.**  The noise, and the sampling of records inside local steps (mini-batches, Poisson masks,
which the ledger's amplification assumes hidden from the server), come from the OS CSPRNG of the machine
the client runs on (:class:`fedbound.training.secure_noise.SecureStreams`): nothing in the run config, the
run seed or the messages determines them.  The run seed still fixes what every party must agree on: the
data split, the initial model (the server's) and, for DP-PFL, each client's query/support split.  Only a
run of fedbound's own on Flower's simulation engine may ask for the seeded streams of ``fedbound train``
(``fedbound.reproducible-noise``; the ClientApp refuses it unless built with ``simulation=True``).  Not
Flower's ``LocalDpMod``, which calibrates one release by the classic formula and draws from numpy's global
RNG.

**Repeated rounds.**  Each answer is kept before it is sent (:class:`fedbound.deploy.replay.UploadStore`,
on the client's disk: ``client_app(store=...)``, else the SuperNode's ``--node-config
"fedbound-store=PATH"``, else ``$FEDBOUND_FLOWER_STORE``, else ``~/.fedbound/flower-store``); the same
request again gets the same bytes, another request for an answered round is refused.

The reply holds the upload (``arrays``) and a ``metrics`` record: ``client``, ``num-examples``,
``clipped`` (when the algorithm logs it), ``sigma.<stage>``: the std the client actually added, which the
server checks against the plan, and ``replayed`` (1: the kept upload of an earlier identical request).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError
from fedbound.training.engine import Algorithm, RoundContext, RunState
from fedbound.training.noise import Streams

__all__ = ["client_update", "client_app", "check_deployable", "store_root", "STORE_ENV", "STORE_NODE_KEY"]

STORE_NODE_KEY = "fedbound-store"
"""The SuperNode ``--node-config`` key naming the folder of the client's kept uploads."""

STORE_ENV = "FEDBOUND_FLOWER_STORE"
"""The environment variable naming it when the node config does not."""


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
                  private: bool = True, streams: Streams | None = None
                  ) -> tuple[torch.Tensor, dict[str, float]]:
    """Client ``client``'s upload in round ``round_`` (0-based) from the global model ``start``, with the
    noise std ``sigma`` per stage; and its metrics (``clipped``, ``sigma.<stage>`` actually added).  One
    computation, nothing kept (the ClientApp keeps its answers: module docstring).

    ``side``: :func:`fedbound.deploy.flower_session.client_side` of the run config; ``streams``: where the
    noise and record sampling come from: default the OS CSPRNG
    (:class:`~fedbound.training.secure_noise.SecureStreams`); ``Streams(seed)`` gives ``fedbound train``'s
    seeded draws (simulation only)."""
    from fedbound.training.secure_noise import SecureStreams

    algorithm, options = side.algorithm, side.options
    check_deployable(algorithm)
    if not 0 <= client < side.data.num_clients:
        raise ConfigError(f"client = {client} is outside its valid range: 0 .. {side.data.num_clients - 1}")
    tiny = float(torch.finfo(options.dtype).tiny)
    for stage, value in sigma.items():
        if not (value == 0.0 or tiny <= value < float("inf")):
            raise ConfigError(f"sigma.{stage} = {value!r} is outside its valid range: 0 or [{tiny:.4g}, inf) "
                              f"(a noise std the client's {str(options.dtype).removeprefix('torch.')} model "
                              "can carry): the client refuses to upload with vanishing noise")
    streams = SecureStreams(options.seed, options.device) if streams is None else streams
    state = RunState(round=round_, rounds=side.prep.rounds,
                     global_params=start.to(device=options.device, dtype=options.dtype))
    ctx = _ClientContext(round_, state, side.model, side.data, streams, options, None, sigma=sigma,
                         private=private)
    clients = np.array([client], dtype=np.int64)
    ctx.participants, ctx.weights = clients, np.ones(1)
    start_rows = algorithm.start_models(ctx, clients)
    local = algorithm.local_update(ctx, clients, start_rows, side.data.gather(clients))
    upload = algorithm.upload(ctx, clients, local)
    metrics = {f"sigma.{stage}": float(np.mean(values)) for stage, values in ctx.noise_std.items()}
    metrics.update(ctx.logs)
    return upload[0].detach(), metrics


def store_root(node_config: Mapping[str, Any], store: str | os.PathLike | None = None) -> Path:
    """The folder of the client's kept uploads: ``store``, else the node config's ``fedbound-store``, else
    ``$FEDBOUND_FLOWER_STORE``, else ``~/.fedbound/flower-store`` (module docstring)."""
    for value in (store, node_config.get(STORE_NODE_KEY), os.environ.get(STORE_ENV)):
        if value is not None and str(value).strip():
            return Path(str(value)).expanduser()
    return Path.home() / ".fedbound" / "flower-store"


def client_app(defaults: Mapping[str, Any] | None = None, *, store: str | os.PathLike | None = None,
               simulation: bool = False) -> Any:
    """The Flower ClientApp (``train``: :func:`client_update`, its answer kept in the client's store;
    ``query``: this node's ``partition-id``).  ``defaults``: run config under the run's
    ``context.run_config`` (an in-process simulation has none); ``store``: the folder of kept uploads
    (:func:`store_root`); ``simulation``: built by fedbound for Flower's simulation engine, the one place it
    accepts ``fedbound.reproducible-noise`` (module docstring)."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from fedbound.deploy.flower_session import client_side, reproducible_noise
    from fedbound.deploy.replay import UploadStore, request_digest, run_id

    app = ClientApp()

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        pid = int(context.node_config.get("partition-id", -1))
        return Message(RecordDict({"node": ConfigRecord({"partition-id": pid})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        cfg = {**(defaults or {}), **context.run_config}
        seeded = reproducible_noise(cfg, simulation, "ClientApp")
        side = client_side(cfg)
        conf = msg.content["config"]
        client, round_ = int(conf["client"]), int(conf["round"])
        own = context.node_config.get("partition-id")
        if own is not None and int(own) != client:
            raise ConfigError(f"this SuperNode holds partition-id {own}, the server asked it for "
                              f"client {client}")
        sigma = {k.removeprefix("sigma."): float(v) for k, v in conf.items() if k.startswith("sigma.")}
        start = msg.content["arrays"].to_numpy_ndarrays()[0]
        streams = Streams(side.options.seed, side.options.device) if seeded else None

        def compute() -> tuple[np.ndarray, dict[str, float]]:
            upload, metrics = client_update(side, round_, client, torch.as_tensor(start), sigma,
                                            bool(conf["private"]), streams)
            metrics.update({"client": client, "num-examples": int(side.data.sizes[client])})
            return upload.cpu().numpy(), metrics

        kept = UploadStore(store_root(context.node_config, store)).answer(
            run_id(cfg), round_, client, request_digest(start, dict(conf)), compute)
        metrics = {**kept.metrics, "replayed": int(kept.replayed)}
        content = RecordDict({"arrays": ArrayRecord([kept.upload]), "metrics": MetricRecord(metrics)})
        return Message(content, reply_to=msg)

    return app
