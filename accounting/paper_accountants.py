"""The papers' own composition rules, as registered accountants (as dp-accounting and Opacus register theirs).

A run's privacy ledger (fedbound.training.privacy) counts every release twice: by a tight accountant and by
the accountant the paper itself uses.  Each paper accountant is an object with a ``name``, a sentence on what
it ``supports``, ``add`` (add one entry of a release history of one adversary view to the sums of a block
of client groups), ``writes`` (the fields ``add`` updates), ``reads`` (the ``ctx.info`` keys it uses),
``reads_z_all`` (whether it counts the multiplier of clients that sat out a round, so the ledger keeps it
in their histories) and ``epsilon`` (compose the sums of the views of one adversary into eps per group).

The ledger (``fedbound.training.privacy``) keeps each client's release history, the counts of its distinct
releases (``fedbound.training.ledger_history``), and derives the sums when an epsilon is asked for: it calls
``add`` once per entry column with an ``entry`` of per-group arrays (``q``, ``z``, ``z_all``, ``s``: the
release key; ``count``: how many such releases, 0 where a group has no entry; ``live``: releases the tight
accountant counts).  The sums live in a view account (fields ``paper_sum``, ``paper_max``, ``paper_count``,
``paper_rdp``, and the ledger's own ``sens``, the groups' sensitivity); ``ctx`` is the ledger (``delta``,
``orders``, ``info``, ``rdp_rows(sampling, q, z)``, ``rdp_to_dp(rdp)``).

Adding an accountant: a class here with those seven members and one line in :data:`PAPER_ACCOUNTANTS`;
``NoisePlan.paper_accountant`` names it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["PAPER_ACCOUNTANTS", "paper_accountant", "one_sided_amplification", "inverse_square",
           "ClassicLinear", "UdpMoments", "RenyiDP", "QuantizedGaussian"]


def one_sided_amplification(eps: np.ndarray, q: float) -> np.ndarray:
    """Per-round cost of a q-sampled eps-DP release as NbAFL's Lemma 4 counts it: -ln(1 - q + q e^{-eps}).

    Wei et al. 2020 (NbAFL), eq. (56); a one-sided bound (the standard amplification is ln(1 + q(e^eps - 1)),
    :func:`fedbound.accounting.amplify_by_subsampling`).  log1p where accurate, -ln((1 - q) + q e^{-eps})
    near q = 1 and large eps (exact there, where the log1p form rounds to infinity).
    """
    e = np.asarray(eps, dtype=np.float64)
    shrink = q * np.expm1(-e)  # in (-1, 0]: log1p is accurate unless it is close to -1 (q = 1, large eps)
    with np.errstate(divide="ignore"):
        return np.where(shrink > -0.5, -np.log1p(shrink), -np.log((1.0 - q) + q * np.exp(-e)))


def inverse_square(z: np.ndarray) -> np.ndarray:
    """``1/z^2`` of noise multipliers, 0 where ``z = inf`` (no release): what Gaussian releases add up."""
    with np.errstate(divide="ignore"):
        return np.where(np.isinf(z), 0.0, 1.0 / np.square(z))


@functools.lru_cache(maxsize=64)
def _classic_constant(delta: float) -> float:
    from fedbound.accounting import classic_gaussian_constant

    return float(classic_gaussian_constant(delta))


class ClassicLinear:
    """Classic Gaussian mechanism per release, eps = c(delta)/z with c = sqrt(2 ln(1.25/delta)), summed
    linearly (Dwork & Roth Thm A.1; NbAFL eqs. (6)-(10)); ``max_releases`` keeps a client's L largest; with
    ``paper_amplification="lemma4"`` a q-sampled release costs :func:`one_sided_amplification`."""

    name = "classic_linear"
    reads: tuple[str, ...] = ()
    reads_z_all = False
    writes = ("paper_sum", "paper_max", "paper_count")
    supports = "NbAFL and PADPFL: classic Gaussian per release, linear composition, Lemma 4 amplification"

    def add(self, acct: Any, view: Any, entry: Any, sampled: bool, ctx: Any) -> None:
        live = entry.live
        with np.errstate(divide="ignore"):
            per = np.where(live, _classic_constant(ctx.delta) / entry.z, 0.0)
        if view.paper_amplification == "lemma4" and sampled:
            per = one_sided_amplification(per, entry.q)
        acct.paper_sum += np.where(live, entry.count * per, 0.0)
        acct.paper_max = np.where(live, np.maximum(acct.paper_max, per), acct.paper_max)
        acct.paper_count += np.where(live, entry.count, 0.0)

    def epsilon(self, accounts: Sequence[Any], views: Sequence[Any], ctx: Any) -> np.ndarray:
        total = np.zeros(len(accounts[0].paper_sum))
        for a, view in zip(accounts, views, strict=True):
            capped = view.max_releases is not None
            total += np.minimum(a.paper_count, view.max_releases) * a.paper_max if capped else a.paper_sum
        return total


class UdpMoments:
    """UDP's moments accountant, eq. (16) with Theorem 1's closed form (Wei et al. 2021): every client accrues
    q/z_t^2 every round; eps = sqrt(2 ln(1/delta) sum_t q/z_t^2)
    (:func:`fedbound.accounting.udp_theorem1_epsilon` with the rounds' noise folded into one multiplier)."""

    name = "udp_moments"
    reads: tuple[str, ...] = ()
    reads_z_all = True
    writes = ("paper_sum",)
    supports = "UDP: moments accountant of Theorem 1, eq. (16), every client every round"

    def add(self, acct: Any, view: Any, entry: Any, sampled: bool, ctx: Any) -> None:
        with np.errstate(invalid="ignore"):
            per = entry.count * entry.q * inverse_square(entry.z_all)
        acct.paper_sum += np.where(entry.count > 0, per, 0.0)

    def epsilon(self, accounts: Sequence[Any], views: Sequence[Any], ctx: Any) -> np.ndarray:
        from fedbound.accounting import udp_theorem1_epsilon

        total = sum(a.paper_sum for a in accounts)
        out = np.zeros(len(total))
        live = total > 0
        if live.any():  # sum_t q/z_t^2 = q T / z_eff^2 with T = 1, q = 1: one folded release
            out[live] = udp_theorem1_epsilon(1.0 / np.sqrt(total[live]), ctx.delta, 1.0, 1)
        out[np.isinf(total)] = np.inf
        return out


class RenyiDP:
    """RDP of the (Poisson-)subsampled Gaussian for every release, converted at the plan's orders, as Opacus
    does (DP-PFL, Wei et al. 2023, App. A)."""

    name = "rdp"
    reads: tuple[str, ...] = ()
    reads_z_all = False
    writes = ("paper_rdp",)
    supports = "DP-PFL: RDP of each subsampled Gaussian step, Opacus' conversion"

    def add(self, acct: Any, view: Any, entry: Any, sampled: bool, ctx: Any) -> None:
        who = np.flatnonzero(entry.live)
        rate = entry.q[who] if sampled else 1.0
        acct.paper_rdp[who] += entry.count[who, None] * ctx.rdp_rows("poisson", rate, entry.z[who])

    def epsilon(self, accounts: Sequence[Any], views: Sequence[Any], ctx: Any) -> np.ndarray:
        return ctx.rdp_to_dp(sum(a.paper_rdp for a in accounts))


class QuantizedGaussian:
    """WPFL's Theorem 1 (Zhao et al. 2025) per upload, basic composition at delta_Q/n each: a client with n
    uploads spends n eps_1, eps_1 the smallest eps of one release's bound (46) at delta_Q/n, at the client's
    smallest sigma.  Needs ``info`` keys C, R, q."""

    name = "quantized_gaussian"
    reads: tuple[str, ...] = ("C", "R", "q")
    reads_z_all = False
    writes = ("paper_count", "paper_max")
    supports = "WPFL: quantization-assisted Gaussian mechanism, Theorem 1, basic composition"

    def add(self, acct: Any, view: Any, entry: Any, sampled: bool, ctx: Any) -> None:
        live = entry.live
        acct.paper_count += np.where(live, entry.count, 0.0)
        acct.paper_max = np.where(live, np.maximum(acct.paper_max, inverse_square(entry.z)), acct.paper_max)

    def epsilon(self, accounts: Sequence[Any], views: Sequence[Any], ctx: Any) -> np.ndarray:
        from fedbound.accounting import qa_gaussian_epsilon
        from fedbound.errors import ParameterError

        info = ctx.info
        if not {"C", "R", "q"} <= set(info):
            raise ParameterError("plan.info", sorted(info), "keys C, R, q (quantized_gaussian accountant)")
        count = sum(a.paper_count for a in accounts)
        sigma = np.full(len(count), np.inf)
        for a in accounts:
            with np.errstate(divide="ignore", invalid="ignore"):
                sigma = np.minimum(sigma, np.where(a.paper_max > 0, a.sens / np.sqrt(a.paper_max), np.inf))
        eps = np.zeros(len(count))
        eps[(count > 0) & (sigma == 0)] = np.inf
        live = (count > 0) & (sigma > 0) & np.isfinite(sigma)
        if live.any():
            pairs, where = np.unique(np.stack([count[live], sigma[live]]), axis=1, return_inverse=True)
            per = qa_gaussian_epsilon(ctx.delta / pairs[0], info["C"], pairs[1], int(info["R"]), info["q"], 1)
            eps[live] = (pairs[0] * np.atleast_1d(per))[np.asarray(where).ravel()]
        return eps


PAPER_ACCOUNTANTS = {a.name: a for a in (ClassicLinear(), UdpMoments(), RenyiDP(), QuantizedGaussian())}
"""Every paper accountant by name; ``"none"`` (no paper accounting) is not an accountant."""


def paper_accountant(name: str) -> Any:
    """The registered accountant ``name``; None for ``"none"``; ParameterError otherwise."""
    from fedbound.errors import ParameterError

    if name == "none":
        return None
    if name not in PAPER_ACCOUNTANTS:
        raise ParameterError("paper_accountant", name, "one of " + ", ".join([*PAPER_ACCOUNTANTS, "none"]))
    return PAPER_ACCOUNTANTS[name]


