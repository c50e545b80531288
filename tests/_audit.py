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


def small_config(tmp_path: Path, paper: str, **changes: dict) -> Path:
    """``paper``'s small audit setting with ``changes`` (``{section: {key: value}}``) at ``tmp_path``."""
    sections = {name: dict(table) for name, table in get(paper).load("audit").small.items()}
    for name, table in changes.items():
        sections[name].update(table)
    path = tmp_path / f"{paper}.toml"
    path.write_text(dump_toml(sections))
    return path


@contextlib.contextmanager
def scaled_noise(stage: str, factor: float) -> Iterator[None]:
    """Every ``stage`` noise the mechanism adds scaled by ``factor`` (0: dropped)."""
    original = RoundContext.sigma

    def sigma(self, name, clients=None):
        out = original(self, name, clients)
        return out * factor if name == stage else out

    RoundContext.sigma = sigma
    try:
        yield
    finally:
        RoundContext.sigma = original


@contextlib.contextmanager
def no_clipping() -> Iterator[None]:
    """Every clip (model rows, per-sample gradients) a no-op."""
    original = clipping.clip_factors
    clipping.clip_factors = lambda norms, clip_norm: torch.ones_like(norms)
    try:
        yield
    finally:
        clipping.clip_factors = original


def bugs(stages: list[str]) -> dict[str, object]:
    """The suite's bugs for a mechanism whose plan adds noise in ``stages``: half of each stage's noise, the
    server's noise dropped (when it has one), the clipping dropped."""
    out = {f"half {stage} noise": (lambda s=stage: scaled_noise(s, 0.5)) for stage in stages}
    if "server" in stages:
        out["server noise dropped"] = lambda: scaled_noise("server", 0.0)
    out["clipping dropped"] = no_clipping
    return out


# --- issue 33's misses: bugs the audit must also see (mechanism or ledger) ------------------------------
@contextlib.contextmanager
def scaled_client_noise(client: int, factor: float) -> Iterator[None]:
    """Every noise the mechanism adds for ``client`` (an original client id) scaled by ``factor``."""
    import numpy as np

    original = RoundContext.sigma

    def sigma(self, name, clients=None):
        out = original(self, name, clients)
        if clients is None:
            return out
        hit = torch.as_tensor(np.asarray(clients) == client, device=out.device)
        return torch.where(hit, out * factor, out)

    RoundContext.sigma = sigma
    try:
        yield
    finally:
        RoundContext.sigma = original


@contextlib.contextmanager
def scaled_clipping(factor: float) -> Iterator[None]:
    """Every clip (model rows, per-sample gradients) at ``factor`` times its bound, the ledger unchanged."""
    original = clipping.clip_factors
    clipping.clip_factors = lambda norms, clip_norm: original(norms, factor * clip_norm)
    try:
        yield
    finally:
        clipping.clip_factors = original


@contextlib.contextmanager
def ledger_reads_sigma_times(factor: float) -> Iterator[None]:
    """A LEDGER bug: every release's noise multiplier read as ``factor`` times the plan's (factor > 1: the
    ledger under-reports epsilon); the mechanism unchanged."""
    from fedbound.training.privacy import PrivacyLedger, Release

    original = PrivacyLedger.releases

    def releases(self, *args, **kw):
        return [Release(r.view, r.z * factor, r.z_all * factor, r.count) for r in original(self, *args, **kw)]

    PrivacyLedger.releases = releases
    try:
        yield
    finally:
        PrivacyLedger.releases = original


@contextlib.contextmanager
def ledger_skips_round(index: int = 1) -> Iterator[None]:
    """A LEDGER bug: the ``index``-th round a ledger commits (0-based) is not counted."""
    from fedbound.training.privacy import PrivacyLedger

    original = PrivacyLedger.commit

    def commit(self, releases):
        seen = getattr(self, "_bug_commits", 0)
        self._bug_commits = seen + 1
        if seen != index:
            original(self, releases)

    PrivacyLedger.commit = commit
    try:
        yield
    finally:
        PrivacyLedger.commit = original


@contextlib.contextmanager
def noise_ignores_round(stage: str | None = None) -> Iterator[None]:
    """The mechanism's noise for ``stage`` (None: every stage) drawn from a stream keyed without the round:
    the same draws every round (e.g. the server's noise reused across rounds)."""
    original = RoundContext.noise

    def noise(self, name, clients, shape, *key):
        if stage is not None and name != stage:
            return original(self, name, clients, shape, *key)
        clients = [-1] if clients is None else clients
        return self.streams.normal((name, "no round", *key), clients, shape, self.dtype)

    RoundContext.noise = noise
    try:
        yield
    finally:
        RoundContext.noise = original


@contextlib.contextmanager
def stream_ignores_round() -> Iterator[None]:
    """The production noise streams (``Streams.normal``) drop the round from every key: each round redraws
    the first round's noise."""
    from fedbound.training.noise import Streams

    original = Streams.normal

    def normal(self, key, clients, shape, dtype=torch.float32):
        return original(self, (key[0], *key[2:]), clients, shape, dtype)

    Streams.normal = normal
    try:
        yield
    finally:
        Streams.normal = original


@contextlib.contextmanager
def scaled_noise_in_round(stage: str, round_: int, factor: float) -> Iterator[None]:
    """``stage``'s noise in round ``round_`` (0-based) scaled by ``factor``, the other rounds as planned."""
    original = RoundContext.sigma

    def sigma(self, name, clients=None):
        out = original(self, name, clients)
        return out * factor if name == stage and self.round == round_ else out

    RoundContext.sigma = sigma
    try:
        yield
    finally:
        RoundContext.sigma = original


@contextlib.contextmanager
def ledger_keeps_first_plan() -> Iterator[None]:
    """A LEDGER bug: a plan changed mid-run (CRD) is not read; the ledger keeps counting the first one."""
    from fedbound.training.privacy import PrivacyLedger

    def get(self):
        return self.__dict__["plan"]

    def set_(self, plan):
        self.__dict__.setdefault("plan", plan)

    PrivacyLedger.plan = property(get, set_)
    try:
        yield
    finally:
        del PrivacyLedger.plan
