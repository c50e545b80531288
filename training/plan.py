"""The noise plan: what the engine adds, where, and how the privacy of it is counted.

A :class:`NoisePlan` is data, built outside ``training/`` (``fedbound.validation.recipes.<algo>`` recipes turn
a config into one through ``fedbound.bounds`` / ``fedbound.accounting``) and handed to the engine.  It holds

* ``sigma``: per noise *stage* (``"uplink"``: each client's upload; ``"server"``: the server's top-up on the
  aggregate; ``"local"``: inside local DP-SGD steps; algorithms may name more), the Gaussian noise std per
  round, shape ``(rounds,)`` (same for all clients) or ``(rounds, N)`` (per client);
* ``sensitivity``: per stage, the L2 sensitivity of the quantity that stage noises (scalar or ``(N,)``);
* ``eps``, ``delta``: the budget the plan promises;
* ``views``: what an adversary observes (:class:`View`); the privacy ledger turns each round's views into
  Gaussian releases and counts them with a tight accountant and with the paper's own accountant;
* ``budget_accountant``: ``"paper"`` or ``"tight"``: the accountant the plan's sigma's were calibrated for
  (the paper's formulas, or their tight counterparts);
* ``paper_reproduction``: false (the default): the budget binds on the tight accountant, the least of the
  valid upper bounds on the mechanism's epsilon (``privacy.py``), whatever the sigma's were calibrated for;
  true (``[train] paper_reproduction``, for reproducing a paper): it binds on ``budget_accountant``'s, and
  every output of the run says whether it is (eps, delta)-DP at the stated budget.
  :attr:`NoisePlan.binding_accountant` is the one that binds; the engine raises ``PrivacyBudgetExceeded``
  *before* a round that would push its epsilon over ``eps``;
* ``paper_accountant``: the paper's composition rule (``"classic_linear"``, ``"udp_moments"``, ``"rdp"``,
  ``"none"``; see ``privacy.py``);
* ``orders``: the Renyi orders both RDP accountants of the ledger minimise over (None:
  ``fedbound.accounting.calibrate.CALIBRATION_ORDERS``, calibrate_noise's own); a paper that fixes its grid
  sets it (spec 000 Sec. 3.4: Opacus' 151 orders), so that a plan calibrated on that grid spends exactly its
  eps in the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from fedbound.errors import ParameterError

__all__ = ["View", "NoisePlan", "VIEW_KINDS"]

VIEW_KINDS = ("upload", "broadcast", "steps")


@dataclass(frozen=True)
class View:
    """One thing an adversary sees, released once (or ``releases_per_round`` times) per round.

    ``kind``:

    * ``"upload"``: each participant's noised upload (stage ``stage``); noise multiplier
      ``sigma[stage][t, i] / sensitivity[stage][i]``; only participants release.
    * ``"broadcast"``: the aggregate ``sum_i p_i w_i`` plus the ``"server"`` stage's noise.  Its noise std
      is ``sqrt(sigma_server^2 + sum_i p_i^2 sigma_stage,i^2)`` and its sensitivity ``max_i p_i Delta_i``
      (seed 002 Lemma 1, Thm 1 eq. (24)), both from the round's actual weights.
    * ``"steps"``: ``releases_per_round`` noised local steps of each participant (DP-SGD), each with noise
      multiplier ``sigma[stage][t, i] / sensitivity[stage][i]``.

    ``sample_rate`` q and ``hidden_sampling``: when the adversary cannot see who was sampled
    (``hidden_sampling=True``: the downlink eavesdropper of seed 002 Lemma 4, Poisson-sampled records in
    DP-SGD) every client accrues a q-subsampled release each round; otherwise only the actual participants
    accrue an unsampled release (the server of seed 003 sees who uploads, spec 003 E9).  The paper
    accountant may still use q (seed 003 eq. (16) does).  ``max_releases``: the adversary sees at most this
    many releases per client (seed 002's L).  ``group``: views in one group are seen by one adversary and
    compose; the reported epsilon is the maximum over groups.  ``paper_amplification``: ``"lemma4"`` uses
    seed 002 Lemma 4's one-sided amplification in the paper accountant.  ``sampling``: how the tight
    accountant models the sampling of a hidden view: ``"poisson"`` (each independently with probability q)
    or ``"without_replacement"`` (a uniform fixed-size subset, K of N).  ``hidden_scope``: who accrues a
    hidden view's q-subsampled release each round: ``"every_client"`` (the sampling of clients is hidden,
    as above) or ``"participants"`` (records are sampled inside each upload and the adversary sees who
    uploads: only the round's participants accrue; seed 004 Thm 1's mini-batch rate q).
    """

    name: str
    kind: Literal["upload", "broadcast", "steps"]
    stage: str = "uplink"
    sample_rate: float = 1.0
    hidden_sampling: bool = False
    releases_per_round: int = 1
    max_releases: int | None = None
    group: str | None = None
    paper_amplification: Literal["none", "lemma4"] = "none"
    sampling: Literal["poisson", "without_replacement"] = "poisson"
    hidden_scope: Literal["every_client", "participants"] = "every_client"

    def __post_init__(self) -> None:
        if self.kind not in VIEW_KINDS:
            raise ParameterError("view kind", self.kind, "one of " + ", ".join(VIEW_KINDS))
        if not 0.0 < self.sample_rate <= 1.0:
            raise ParameterError("sample_rate", self.sample_rate, "(0, 1]")
        if self.releases_per_round < 1:
            raise ParameterError("releases_per_round", self.releases_per_round, "integer in [1, inf)")
        if self.sampling not in ("poisson", "without_replacement"):
            raise ParameterError("sampling", self.sampling, "one of 'poisson', 'without_replacement'")
        if self.hidden_scope not in ("every_client", "participants"):
            raise ParameterError("hidden_scope", self.hidden_scope, "one of 'every_client', 'participants'")
        if self.max_releases is not None and self.max_releases < 1:
            raise ParameterError("max_releases", self.max_releases, "integer in [1, inf) or None")

    @property
    def group_name(self) -> str:
        return self.group or self.name


def _frozen_arrays(mapping: Mapping[str, object], name: str) -> Mapping[str, np.ndarray]:
    out = {}
    for key, value in mapping.items():
        arr = np.array(value, dtype=np.float64)
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ParameterError(f"{name}[{key!r}]", value, "finite values >= 0")
        arr.setflags(write=False)
        out[key] = arr
    return out


@dataclass(frozen=True)
class NoisePlan:
    """Per-round noise std per stage, sensitivities, the budget, and how to account (module docstring)."""

    rounds: int
    num_clients: int
    sigma: Mapping[str, np.ndarray]
    sensitivity: Mapping[str, np.ndarray]
    eps: float
    delta: float
    views: tuple[View, ...]
    budget_accountant: Literal["paper", "tight"] = "paper"
    paper_accountant: str = "classic_linear"
    source: str = ""
    notes: tuple[str, ...] = ()
    info: Mapping[str, float] = field(default_factory=dict)
    orders: tuple[float, ...] | None = None
    paper_reproduction: bool = False

    @property
    def binding_accountant(self) -> str:
        """``"tight"``, or ``"paper"`` in the paper-reproduction mode of a plan calibrated by the paper's
        formulas (module docstring)."""
        paper = self.budget_accountant == "paper" and self.paper_accountant != "none"
        return "paper" if paper and self.paper_reproduction else "tight"

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ParameterError("rounds", self.rounds, "integer in [1, inf)")
        if not self.eps > 0:
            raise ParameterError("eps", self.eps, "(0, inf)")
        if not 0 < self.delta < 1:
            raise ParameterError("delta", self.delta, "(0, 1)")
        if self.budget_accountant not in ("paper", "tight"):
            raise ParameterError("budget_accountant", self.budget_accountant, "one of 'paper', 'tight'")
        sigma = _frozen_arrays(self.sigma, "sigma")
        sens = _frozen_arrays(self.sensitivity, "sensitivity")
        for key, arr in sigma.items():
            ok = arr.shape in ((self.rounds,), (self.rounds, self.num_clients))
            if not ok:
                raise ParameterError(f"sigma[{key!r}].shape", arr.shape,
                                     f"({self.rounds},) or ({self.rounds}, {self.num_clients})")
        for key, arr in sens.items():
            if arr.shape not in ((), (self.num_clients,)) or np.any(arr <= 0):
                raise ParameterError(f"sensitivity[{key!r}]", arr,
                                     f"> 0, a scalar or shape ({self.num_clients},)")
        for view in self.views:
            needed = [view.stage] + (["server"] if view.kind == "broadcast" else [])
            for stage in needed:
                if stage not in sigma:
                    raise ParameterError(f"view {view.name!r} stage", stage, "a stage with a sigma")
            if view.stage not in sens:
                raise ParameterError(f"view {view.name!r} stage", view.stage, "a stage with a sensitivity")
        # zero noise at a finite budget is refused; an infinite budget promises nothing (the audit's copies)
        finite = math.isfinite(self.eps)
        silent = _silent_release(self.views, sigma, self.rounds, self.num_clients) if finite else None
        if silent is not None:
            view, stage, t, i = silent
            raise ParameterError(f"sigma[{stage!r}] in round {t + 1} (client {i})", 0.0,
                                 f"(0, inf): view {view!r} would release it without noise (eps = inf) at the "
                                 f"budget eps = {self.eps:g}")
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "sensitivity", sens)
        object.__setattr__(self, "info", dict(self.info))
        if self.orders is not None:
            orders = tuple(float(a) for a in np.ravel(self.orders))
            if not orders or not all(math.isfinite(a) and a > 1 for a in orders):
                raise ParameterError("orders", self.orders, "a non-empty set of finite Renyi orders > 1")
            object.__setattr__(self, "orders", orders)

    def stage_sigma(self, stage: str, round_: int, clients: np.ndarray | None = None) -> np.ndarray:
        """Noise std of ``stage`` in round ``round_`` (0-based) for ``clients`` (all when None); 0 if absent.

        A run longer than the plan keeps the last round's sigma (the ledger then stops it at the budget).
        """
        n = self.num_clients if clients is None else len(clients)
        if stage not in self.sigma:
            return np.zeros(n)
        row = self.sigma[stage][min(round_, self.rounds - 1)]
        if not row.ndim:
            return np.full(n, float(row))
        every = np.broadcast_to(row, (self.num_clients,))
        return np.array(every, dtype=np.float64) if clients is None else every[np.asarray(clients)].astype(
            np.float64)

    def stage_matrix(self, stage: str) -> np.ndarray:
        """``sigma[stage]`` as a ``(rounds, num_clients)`` array (a copy)."""
        arr = self.sigma[stage]
        column = arr[:, None] if arr.ndim == 1 else arr
        return np.array(np.broadcast_to(column, (self.rounds, self.num_clients)))

    def stage_sensitivity(self, stage: str, clients: np.ndarray | None = None) -> np.ndarray:
        every = np.broadcast_to(self.sensitivity[stage], (self.num_clients,))
        return np.array(every, dtype=np.float64) if clients is None else every[np.asarray(clients)].astype(
            np.float64)

    def with_sigma(self, stage: str, values: np.ndarray, rounds: int | None = None) -> NoisePlan:
        """A copy with ``stage``'s schedule replaced (and ``rounds`` changed), e.g. for UDP's CRD."""
        sigma = dict(self.sigma)
        sigma[stage] = values
        rounds = self.rounds if rounds is None else rounds
        sigma = {k: (v if k == stage else _resize(v, rounds)) for k, v in sigma.items()}
        return replace(self, sigma=sigma, rounds=rounds)

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "num_clients": self.num_clients, "eps": self.eps, "delta": self.delta,
                "sigma": {k: v.tolist() for k, v in self.sigma.items()},
                "sensitivity": {k: v.tolist() for k, v in self.sensitivity.items()},
                "views": [v.__dict__ for v in self.views], "budget_accountant": self.budget_accountant,
                "paper_accountant": self.paper_accountant, "source": self.source, "notes": list(self.notes),
                "info": dict(self.info), "orders": None if self.orders is None else list(self.orders),
                "paper_reproduction": self.paper_reproduction}


def _silent_release(views: tuple[View, ...], sigma: Mapping[str, np.ndarray], rounds: int, n: int
                    ) -> tuple[str, str, int, int] | None:
    """The first ``(view, stage, round, client)`` whose release carries no noise at all (eps = inf): a zero
    std of an upload's or a step's stage, or of a broadcast's stage where the server adds none either."""
    for view in views:
        noise = np.broadcast_to(_as_matrix(sigma[view.stage]), (rounds, n))
        stage = view.stage
        if view.kind == "broadcast":
            stage = "server" if not np.any(noise > 0) else stage  # the server is the broadcast's noise
            noise = np.maximum(noise, np.broadcast_to(_as_matrix(sigma["server"]), (rounds, n)))
        zero = np.argwhere(noise <= 0)
        if len(zero):
            t, i = (int(v) for v in zero[0])
            return view.name, stage, t, i
    return None


def _as_matrix(arr: np.ndarray) -> np.ndarray:
    """A ``(rounds,)`` schedule as a column (one std for every client), a ``(rounds, N)`` one unchanged."""
    return arr[:, None] if arr.ndim == 1 else arr


def _resize(arr: np.ndarray, rounds: int) -> np.ndarray:
    if len(arr) >= rounds:
        return arr[:rounds]
    return np.concatenate([arr, np.repeat(arr[-1:], rounds - len(arr), axis=0)])
