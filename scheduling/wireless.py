"""WPFL's OFDMA channel model and its client/subchannel scheduling (min-max fair, Kuhn-Munkres).

Channel (WPFL Sec. III-B, eqs. (10)-(14); spec 004 F7-F10 and Sec. 6.1, whose reading of the unstated
parts is E16): client ``n`` sits at distance ``d_n ~ U[d_min, d_max]`` (fixed for a run); every round each
(client, subchannel) pair gets an independent Rayleigh block-fading power gain ``|h|^2 = PL(d_n) Exp(1)``
with path loss ``PL(d) = -30 - 28 log10(d / 1 m)`` dB, and each client an independent downlink gain of the
same law.  The noise power on a ``B``-wide channel is ``N0 B``.  SNR ``gamma = P |h|^2 / (N0 B)`` (12), rate
``B log2(1 + gamma)`` (11), 256-QAM bit error rate (13) as printed, element error probability
``rho = 1 - (1 - e)^R`` (14).  The downlink uses the BS power on one ``B``-wide channel.

Scheduling, one round (WPFL Alg. 2 lines 5-8; spec 004 Sec. 4.3-4.4, 6.3):

* power control: ``P_n = P_th`` for every selected client (closed form, spec Sec. 4.3);
* ``"km"``: the clients still allowed to upload (fewer than ``T0`` uploads, C7) are matched to subchannels
  by :func:`assign_channels`: a maximum-cardinality matching over the rate-feasible pairs (C5, E14) with the
  smallest total ``rho`` (P3 with the normative reading of spec E13), by ``linear_sum_assignment`` on
  ``rho`` with ``BIG = K + 1`` on infeasible pairs (audit A4);
* ``"round_robin"`` and ``"random"`` (spec Sec. 6.4): ``K`` allowed clients cyclically / uniformly at random
  on subchannels in order / a random permutation.  The spec's baselines say nothing about C5, so they
  transmit on their subchannel whatever its rate (their bit errors are counted, their delay is not).

The remaining steps of Alg. 2 (Theta_L,min, eta_F* of P5, per-client eta_P*, lambda* of P7 and the min-max
value) build on these in :mod:`fedbound.scheduling.wpfl` (``schedule_round_minmax`` for one round,
``schedule_rounds`` for a whole run in one call).

:func:`schedule_run` plays the whole run (rounds until every client has used its ``T0`` uploads) from one
seed and returns the per-round schedule that ``fedbound.training.wpfl`` consumes as data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment
from scipy.special import ndtr

from fedbound.checks import check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import InfeasibleError, ParameterError

__all__ = ["SCHEDULERS", "WirelessSetting", "RoundSchedule", "WirelessSchedule", "dbm_to_watt",
           "path_loss_gain", "snr", "uplink_rate", "min_rate", "ber_mqam", "element_error_prob",
           "assign_channels", "power_control", "schedule_round", "schedule_run"]

SCHEDULERS = ("km", "round_robin", "random")


def dbm_to_watt(dbm: ArrayLike) -> float | np.ndarray:
    """``10^((x - 30)/10)`` W (spec 004 conventions)."""
    return scalar_or_array(10.0 ** ((check_real("power_dbm", dbm) - 30.0) / 10.0))


def path_loss_gain(distance: ArrayLike, at_1m_db: float = -30.0, exponent: float = 2.8) -> float | np.ndarray:
    """Linear power gain of the path loss ``at_1m_db - 10 exponent log10(d / 1 m)`` dB (WPFL Table I:
    -30 dB at 1 m, exponent 2.8; spec 004 Sec. 6.1)."""
    d = check_real("distance", distance, 0.0, low_open=True)
    return scalar_or_array(10.0 ** ((at_1m_db - 10.0 * exponent * np.log10(d)) / 10.0))


def snr(power_w: ArrayLike, gain: ArrayLike, noise_w: ArrayLike) -> float | np.ndarray:
    """``gamma = P |h|^2 / sigma_0^2`` (WPFL eq. (12); spec 004 F8)."""
    p = check_real("power_w", power_w, 0.0)
    g = check_real("gain", gain, 0.0)
    n = check_real("noise_w", noise_w, 0.0, low_open=True)
    return scalar_or_array(p * g / n)


def uplink_rate(bandwidth: ArrayLike, gamma: ArrayLike) -> float | np.ndarray:
    """``r = B log2(1 + gamma)`` bit/s (WPFL eq. (11); spec 004 F8)."""
    b = check_real("bandwidth", bandwidth, 0.0, low_open=True)
    g = check_real("gamma", gamma, 0.0)
    return scalar_or_array(b * np.log1p(g) / math.log(2.0))


def min_rate(n_params: ArrayLike, R: ArrayLike, tau_max: ArrayLike) -> float | np.ndarray:
    """``r_min = |omega| R / tau_max`` (WPFL eq. (10); spec 004 F7)."""
    n = check_int("n_params", n_params, 1)
    r = check_int("R", R, 1)
    t = check_real("tau_max", tau_max, 0.0, low_open=True)
    return scalar_or_array(n * r / t)


def ber_mqam(gamma: ArrayLike, M: int = 256) -> float | np.ndarray:
    """Bit error rate of Gray-coded M-QAM, Cho-Yoon approximation as printed (WPFL eq. (13); spec F9):
    ``(2 sqrt(M) - 2)/(sqrt(M) log2 sqrt(M)) Q(sqrt(3 gamma log2(M) / (M - 1)))``; for 256-QAM
    ``0.46875 Q(sqrt(24 gamma / 255))``.  gamma is used as printed (a per-bit SNR convention, spec E16)."""
    g = check_real("gamma", gamma, 0.0, allow_inf=True)
    m = int(check_int("M", M, 4))
    root = math.isqrt(m)
    if root * root != m:
        raise ParameterError("M", M, "a perfect square >= 4 (square QAM)")
    prefactor = (2.0 * root - 2.0) / (root * math.log2(root))
    return scalar_or_array(prefactor * ndtr(-np.sqrt(3.0 * g * math.log2(m) / (m - 1.0))))


def element_error_prob(ber: ArrayLike, R: ArrayLike) -> float | np.ndarray:
    """``rho = 1 - (1 - e)^R``: an R-bit element is wrong if any bit is (WPFL eq. (14); spec F10),
    as ``-expm1(R log1p(-e))`` (no cancellation at e ~ 1e-12)."""
    e = check_probability("ber", ber, allow_zero=True, allow_one=True)
    r = check_int("R", R, 1)
    with np.errstate(divide="ignore"):
        return scalar_or_array(-np.expm1(r * np.log1p(-e)))


def assign_channels(rho: ArrayLike, feasible: ArrayLike, allowed: ArrayLike | None = None
                    ) -> list[tuple[int, int]]:
    """Client/subchannel pairs of P3 (WPFL eq. (33), Kuhn-Munkres; spec 004 Sec. 4.4): a maximum-
    cardinality matching of the ``allowed`` clients over the ``feasible`` pairs with the smallest ``sum rho``.

    ``rho``, ``feasible``: ``(N, K)``; ``allowed``: ``(N,)`` bool (default all).  Solved by
    ``scipy.optimize.linear_sum_assignment`` on ``rho`` with ``BIG = K + 1`` on infeasible pairs (more than
    any feasible total, and small enough that float64 still resolves ``rho`` ~ 1e-12; audit A4), whose
    infeasible pairs are then dropped by the mask.  Returns ``(client, subchannel)`` pairs sorted by client.
    """
    r = check_real("rho", rho, 0.0, 1.0)
    if r.ndim != 2:
        raise ParameterError("rho.shape", r.shape, "(N, K)")
    ok = np.asarray(feasible, dtype=bool)
    if ok.shape != r.shape:
        raise ParameterError("feasible.shape", ok.shape, f"{r.shape}, the shape of rho")
    n, k = r.shape
    allow = np.ones(n, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if allow.shape != (n,):
        raise ParameterError("allowed.shape", allow.shape, f"({n},)")
    rows = np.flatnonzero(allow)
    if rows.size == 0 or k == 0:
        return []
    cost = np.where(ok[rows], r[rows], k + 1.0)
    matched, channels = linear_sum_assignment(cost)
    keep = ok[rows[matched], channels]
    return sorted(zip(rows[matched][keep].tolist(), channels[keep].tolist(), strict=True))


def power_control(pairs: Sequence[tuple[int, int]], num_clients: int, P_th_w: float) -> np.ndarray:
    """Step 1 of the decomposition: ``P_n = P_th`` for every selected client and 0 otherwise.  Closed form:
    the rate increases and rho decreases in P (WPFL Sec. VI-A; spec 004 Sec. 4.3, S6)."""
    power = np.zeros(int(check_int("num_clients", num_clients, 1)))
    p = float(check_real("P_th_w", P_th_w, 0.0))
    for client, _ in pairs:
        power[client] = p
    return power


@dataclass(frozen=True)
class WirelessSetting:
    """The radio side of WPFL's system (Table I defaults; spec 004 Sec. 2, 7).

    ``n_params`` (|omega|) and ``R`` set the minimum rate ``r_min = |omega| R / tau_max`` (C5).
    """

    num_clients: int
    num_subchannels: int
    n_params: int
    R: int = 16
    tau_max: float = 0.01
    P_th_dbm: float = 23.0
    P_bs_dbm: float = 30.0
    total_bandwidth_hz: float = 10e6
    noise_dbm_per_hz: float = -169.0
    pathloss_1m_db: float = -30.0
    pathloss_exponent: float = 2.8
    qam_order: int = 256
    distance_min: float = 10.0
    distance_max: float = 100.0

    def __post_init__(self) -> None:
        check_int("num_clients", self.num_clients, 1)
        check_int("num_subchannels", self.num_subchannels, 1)
        check_int("n_params", self.n_params, 1)
        check_int("R", self.R, 1, 62)
        check_real("tau_max", self.tau_max, 0.0, low_open=True)
        check_real("total_bandwidth_hz", self.total_bandwidth_hz, 0.0, low_open=True)
        check_real("pathloss_exponent", self.pathloss_exponent, 0.0)
        check_real("distance_min", self.distance_min, 0.0, low_open=True)
        check_real("distance_max", self.distance_max, self.distance_min)
        ber_mqam(1.0, self.qam_order)  # validates the QAM order

    @property
    def subchannel_bandwidth(self) -> float:
        """``B = total / K`` (Table I: 10 MHz over K = 10 subchannels)."""
        return self.total_bandwidth_hz / self.num_subchannels

    @property
    def noise_w(self) -> float:
        """``sigma_0^2 = N0 B`` (spec 004 E16)."""
        return float(dbm_to_watt(self.noise_dbm_per_hz)) * self.subchannel_bandwidth

    @property
    def r_min(self) -> float:
        return float(min_rate(self.n_params, self.R, self.tau_max))

    def links(self, gain: np.ndarray, power_dbm: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ber, rho, feasible)`` of links with power gains ``gain`` at ``power_dbm`` (F8-F10, C5)."""
        gamma = np.asarray(snr(dbm_to_watt(power_dbm), gain, self.noise_w), dtype=np.float64)
        ber = np.asarray(ber_mqam(gamma, self.qam_order), dtype=np.float64)
        rho = np.asarray(element_error_prob(ber, self.R), dtype=np.float64)
        rate = np.asarray(uplink_rate(self.subchannel_bandwidth, gamma), dtype=np.float64)
        return ber, rho, rate >= self.r_min


@dataclass(frozen=True)
class RoundSchedule:
    """One round: ``pairs`` (client, subchannel) sorted by client; per client (0 when not selected)
    ``uplink_ber``/``uplink_rho`` and, for the broadcast that ends the round, ``downlink_ber``/
    ``downlink_rho``; ``power_w`` (``P_th`` for selected clients, spec Sec. 4.3); ``feasible_pairs``: how
    many allowed (client, subchannel) pairs met C5."""

    pairs: list[tuple[int, int]]
    uplink_ber: np.ndarray
    uplink_rho: np.ndarray
    downlink_ber: np.ndarray
    downlink_rho: np.ndarray
    power_w: np.ndarray
    feasible_pairs: int

    @property
    def clients(self) -> np.ndarray:
        return np.array([n for n, _ in self.pairs], dtype=np.int64)


def _baseline_pairs(scheduler: str, allowed: np.ndarray, k: int, cursor: int, rng: np.random.Generator | None
                    ) -> tuple[list[tuple[int, int]], int]:
    n = len(allowed)
    if scheduler == "round_robin":
        order = [(cursor + j) % n for j in range(n)]
        chosen = [i for i in order if allowed[i]][:k]
        cursor = (chosen[-1] + 1) % n if chosen else cursor
        return sorted((c, j) for j, c in enumerate(chosen)), cursor
    if rng is None:
        raise ParameterError("rng", rng, "a numpy Generator for the random scheduler")
    pool = np.flatnonzero(allowed)
    m = min(k, pool.size)
    chosen = rng.choice(pool, size=m, replace=False)
    channels = rng.permutation(k)[:m]
    return sorted(zip(chosen.tolist(), channels.tolist(), strict=True)), cursor


def schedule_round(uplink_gain: ArrayLike, downlink_gain: ArrayLike, uploads: ArrayLike, T0: int,
                   setting: WirelessSetting, scheduler: str = "km", *, cursor: int = 0,
                   rng: np.random.Generator | None = None) -> tuple[RoundSchedule, int]:
    """WPFL Alg. 2 lines 5-8 for one round (spec 004 Sec. 6.3 without the P4-P7 configuration).

    ``uplink_gain`` ``(N, K)`` and ``downlink_gain`` ``(N,)``: channel power gains ``|h|^2``; ``uploads``
    ``(N,)``: uploads so far (clients with ``T0`` are not allowed, C7).  ``cursor`` is the round-robin
    position, ``rng`` the random scheduler's Generator.  Returns the round and the next cursor.
    """
    if scheduler not in SCHEDULERS:
        raise ParameterError("scheduler", scheduler, "one of " + ", ".join(SCHEDULERS))
    n, k = setting.num_clients, setting.num_subchannels
    up = check_real("uplink_gain", uplink_gain, 0.0)
    down = check_real("downlink_gain", downlink_gain, 0.0)
    if up.shape != (n, k) or down.shape != (n,):
        raise ParameterError("gain shapes", (up.shape, down.shape), f"({n}, {k}) and ({n},)")
    allowed = check_int("uploads", uploads, 0, T0) < T0
    ber, rho, feasible = setting.links(up, setting.P_th_dbm)
    if scheduler == "km":
        pairs = assign_channels(rho, feasible, allowed)
    else:
        pairs, cursor = _baseline_pairs(scheduler, allowed, k, cursor, rng)
    ber_up, rho_up = np.zeros(n), np.zeros(n)
    for client, channel in pairs:
        ber_up[client], rho_up[client] = ber[client, channel], rho[client, channel]
    power = power_control(pairs, n, float(dbm_to_watt(setting.P_th_dbm)))
    ber_down, rho_down, _ = setting.links(down, setting.P_bs_dbm)
    return RoundSchedule(pairs, ber_up, rho_up, ber_down, rho_down, power,
                         int(feasible[allowed].sum())), cursor


@dataclass(frozen=True)
class WirelessSchedule:
    """A whole run's schedule (:func:`schedule_run`).

    ``rounds``: the non-empty rounds, in order (rounds where no pair was feasible are skipped, spec Sec.
    4.4, and counted in ``skipped_rounds``); ``initial_downlink_ber``/``rho``: the broadcast of the initial
    model; ``distances`` of the clients; ``uploads``: per client at the end (``T0`` each).
    """

    rounds: list[RoundSchedule]
    initial_downlink_ber: np.ndarray
    initial_downlink_rho: np.ndarray
    distances: np.ndarray
    uploads: np.ndarray
    skipped_rounds: int
    scheduler: str
    setting: WirelessSetting
    T0: int
    seed: int
    channel_errors: bool = True
    stats: dict = field(default_factory=dict)

    @property
    def clients(self) -> list[np.ndarray]:
        """Selected clients per round (sorted)."""
        return [r.clients for r in self.rounds]

    @property
    def uplink_ber(self) -> list[np.ndarray]:
        """Per round, the BER of each selected client's subchannel (aligned with :attr:`clients`)."""
        return [r.uplink_ber[r.clients] for r in self.rounds]

    @property
    def downlink_ber(self) -> np.ndarray:
        """``(rounds + 1, N)``: row 0 the initial broadcast, row ``t + 1`` the one ending round ``t``."""
        return np.vstack([self.initial_downlink_ber] + [r.downlink_ber for r in self.rounds])


def schedule_run(setting: WirelessSetting, T0: int, scheduler: str = "km", seed: int = 0, *,
                 max_rounds: int | None = None, channel_errors: bool = True) -> WirelessSchedule:
    """Rounds of :func:`schedule_round` until every client has uploaded ``T0`` times (WPFL Alg. 2's
    loop with the ``< T0`` condition of spec E10), channels drawn as in spec 004 Sec. 6.1 from ``seed``.

    The channel draws come from their own stream, so every scheduler sees the same channels for one seed;
    the random scheduler has a second stream.  ``channel_errors=False`` is the error-free reference (spec
    Sec. 6.4): the same schedule with every BER set to 0.  InfeasibleError if the run has not finished after
    ``max_rounds`` (default ``10 ceil(N T0 / K) + 10``) rounds.
    """
    t0 = int(check_int("T0", T0, 1))
    if scheduler not in SCHEDULERS:
        raise ParameterError("scheduler", scheduler, "one of " + ", ".join(SCHEDULERS))
    n, k = setting.num_clients, setting.num_subchannels
    limit = max_rounds if max_rounds is not None else 10 * math.ceil(n * t0 / k) + 10
    channels = np.random.default_rng([int(seed), 0])
    picker = np.random.default_rng([int(seed), 1])
    distances = channels.uniform(setting.distance_min, setting.distance_max, n)
    loss = np.asarray(path_loss_gain(distances, setting.pathloss_1m_db, setting.pathloss_exponent))
    initial_ber, initial_rho, _ = setting.links(loss * channels.exponential(size=n), setting.P_bs_dbm)
    uploads = np.zeros(n, dtype=np.int64)
    rounds: list[RoundSchedule] = []
    skipped, cursor, attempts = 0, 0, 0
    while uploads.min() < t0:
        if attempts >= limit:
            raise InfeasibleError(f"schedule_run: after {limit} rounds some clients still have fewer than "
                                  f"T0 = {t0} uploads (uploads = {uploads.tolist()}); the rate constraint C5 "
                                  f"(r_min = {setting.r_min:.4g} bit/s) is rarely met: raise tau_max")
        attempts += 1
        up_gain = loss[:, None] * channels.exponential(size=(n, k))
        down_gain = loss * channels.exponential(size=n)
        rnd, cursor = schedule_round(up_gain, down_gain, uploads, t0, setting, scheduler, cursor=cursor,
                                     rng=picker)
        if not rnd.pairs:
            skipped += 1
            continue
        uploads[rnd.clients] += 1
        rounds.append(rnd)
    if not channel_errors:
        zero = np.zeros(n)
        rounds = [RoundSchedule(r.pairs, zero, zero, zero, zero, r.power_w, r.feasible_pairs) for r in rounds]
        initial_ber = initial_rho = zero
    stats = _stats(rounds)
    return WirelessSchedule(rounds, initial_ber, initial_rho, distances, uploads, skipped, scheduler, setting,
                            t0, int(seed), channel_errors, stats)


def _stats(rounds: Sequence[RoundSchedule]) -> dict:
    rho = np.concatenate([r.uplink_rho[r.clients] for r in rounds]) if rounds else np.zeros(0)
    return {"rounds": len(rounds), "mean_uplink_rho": float(rho.mean()) if rho.size else 0.0,
            "max_uplink_rho": float(rho.max()) if rho.size else 0.0,
            "max_downlink_rho": float(max((r.downlink_rho.max() for r in rounds), default=0.0)),
            "mean_clients_per_round": float(np.mean([len(r.pairs) for r in rounds])) if rounds else 0.0}
