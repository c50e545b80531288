"""The audit tests' configuration (a paper's ``AuditViews.small`` sections, with changes, written as TOML)
and the positive-control suite's injected bugs.

A bug is injected into the MECHANISM, never into the ledger: what the engine hands the algorithm's hooks
(``RoundContext.sigma``, the std its ``add_noise`` uses) or the clipping every algorithm calls
(``fedbound.training.clipping.clip_factors``); the plan, and so the reported epsilon, stay as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch

from fedbound.registry import get
from fedbound.training import clipping
from fedbound.training.config import dump_toml
from fedbound.training.engine import RoundContext

_MISSING = object()


@contextlib.contextmanager
def _patch(owner: object, name: str, make) -> Iterator[None]:
    """``owner.name`` replaced by ``make(original)`` inside the block (original: None when absent)."""
    original = getattr(owner, name, _MISSING)
    setattr(owner, name, make(None if original is _MISSING else original))
    try:
        yield
    finally:
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def toy_federation(clients: int, records: int) -> tuple:
    """``clients`` x ``records`` standard normal records (3 features, binary labels), float64, a 2-class
    logistic model and its seeded initial parameters: the trial engine's test federation."""
    import numpy as np

    from fedbound.training.federation import ClientData
    from fedbound.training.models import build_model

    rng = np.random.default_rng(0)
    x = rng.standard_normal((clients * records, 3))
    y = (rng.random(clients * records) < 0.5).astype(np.int64)
    parts = np.split(np.arange(clients * records), clients)
    data = ClientData.from_partition(x, y, parts, dtype=torch.float64)
    model = build_model("logreg", (3,), 2)
    return data, model, model.init(torch.Generator().manual_seed(1), torch.float64)


def small_config(tmp_path: Path, paper: str, **changes: dict) -> Path:
    """``paper``'s small audit setting with ``changes`` (``{section: {key: value}}``) at ``tmp_path``."""
    sections = {name: dict(table) for name, table in get(paper).load("audit").small.items()}
    for name, table in changes.items():
        sections[name].update(table)
    path = tmp_path / f"{paper}.toml"
    path.write_text(dump_toml(sections))
    return path


def _sigma_scaled(factor: float, hit) -> contextlib.AbstractContextManager:
    """``RoundContext.sigma`` times ``factor`` where ``hit(ctx, stage, clients)`` (a bool tensor or bool)."""
    def make(original):
        def sigma(self, name, clients=None):
            out = original(self, name, clients)
            mask = torch.as_tensor(hit(self, name, clients), device=out.device)
            return torch.where(mask, out * factor, out)
        return sigma
    return _patch(RoundContext, "sigma", make)


def scaled_noise(stage: str, factor: float) -> contextlib.AbstractContextManager:
    """Every ``stage`` noise the mechanism adds scaled by ``factor`` (0: dropped)."""
    return _sigma_scaled(factor, lambda ctx, name, clients: name == stage)


def no_clipping() -> contextlib.AbstractContextManager:
    """Every clip (model rows, per-sample gradients) a no-op."""
    return _patch(clipping, "clip_factors", lambda original: lambda norms, clip_norm: torch.ones_like(norms))


def bugs(stages: list[str]) -> dict[str, object]:
    """The suite's bugs for a mechanism whose plan adds noise in ``stages``: half of each stage's noise, the
    server's noise dropped (when it has one), the clipping dropped."""
    out = {f"half {stage} noise": (lambda s=stage: scaled_noise(s, 0.5)) for stage in stages}
    if "server" in stages:
        out["server noise dropped"] = lambda: scaled_noise("server", 0.0)
    out["clipping dropped"] = no_clipping
    return out


# --- issue 33's misses: bugs the audit must also see (mechanism or ledger) ------------------------------
def scaled_client_noise(client: int, factor: float) -> contextlib.AbstractContextManager:
    """Every noise the mechanism adds for ``client`` (an original client id) scaled by ``factor``."""
    import numpy as np

    return _sigma_scaled(factor, lambda ctx, name, clients: False if clients is None
                         else np.asarray(clients) == client)


def scaled_clipping(factor: float) -> contextlib.AbstractContextManager:
    """Every clip (model rows, per-sample gradients) at ``factor`` times its bound, the ledger unchanged."""
    return _patch(clipping, "clip_factors",
                  lambda original: lambda norms, clip_norm: original(norms, factor * clip_norm))


def ledger_reads_sigma_times(factor: float) -> contextlib.AbstractContextManager:
    """A LEDGER bug: every release's noise multiplier read as ``factor`` times the plan's (factor > 1: the
    ledger under-reports epsilon); the mechanism unchanged."""
    from fedbound.training.privacy import PrivacyLedger, Release

    def make(original):
        def releases(self, *args, **kw):
            return [Release(r.view, r.z * factor, r.z_all * factor, r.count)
                    for r in original(self, *args, **kw)]
        return releases
    return _patch(PrivacyLedger, "releases", make)


def ledger_skips_round(index: int = 1) -> contextlib.AbstractContextManager:
    """A LEDGER bug: the ``index``-th round a ledger commits (0-based) is not counted."""
    from fedbound.training.privacy import PrivacyLedger

    def make(original):
        def commit(self, releases):
            seen = getattr(self, "_bug_commits", 0)
            self._bug_commits = seen + 1
            if seen != index:
                original(self, releases)
        return commit
    return _patch(PrivacyLedger, "commit", make)


def noise_ignores_round(stage: str | None = None) -> contextlib.AbstractContextManager:
    """The mechanism's noise for ``stage`` (None: every stage) drawn from a stream keyed without the round:
    the same draws every round (e.g. the server's noise reused across rounds)."""
    def make(original):
        def noise(self, name, clients, shape, *key):
            if stage is not None and name != stage:
                return original(self, name, clients, shape, *key)
            clients = [-1] if clients is None else clients
            return self.streams.normal((name, "no round", *key), clients, shape, self.dtype)
        return noise
    return _patch(RoundContext, "noise", make)


def stream_ignores_round() -> contextlib.AbstractContextManager:
    """The production noise streams (``Streams.normal``) drop the round from every key: each round redraws
    the first round's noise."""
    from fedbound.training.noise import Streams

    return _patch(Streams, "normal", lambda original: lambda self, key, clients, shape, dtype=torch.float32:
                  original(self, (key[0], *key[2:]), clients, shape, dtype))


def scaled_noise_in_round(stage: str, round_: int, factor: float) -> contextlib.AbstractContextManager:
    """``stage``'s noise in round ``round_`` (0-based) scaled by ``factor``, the other rounds as planned."""
    return _sigma_scaled(factor, lambda ctx, name, clients: name == stage and ctx.round == round_)


def ledger_keeps_first_plan() -> contextlib.AbstractContextManager:
    """A LEDGER bug: a plan changed mid-run (CRD) is not read; the ledger keeps counting the first one."""
    from fedbound.training.privacy import PrivacyLedger

    def set_(self, plan):
        self.__dict__.setdefault("plan", plan)

    return _patch(PrivacyLedger, "plan", lambda original: property(lambda self: self.__dict__["plan"], set_))
