"""Interop with Google's ``dp_accounting``: our mechanisms as DpEvents, and the accountant for each sampling.

A DpEvent is an immutable description of a mechanism; any dp_accounting accountant can consume it.  So a user
can hand our settings to dp-accounting directly::

    acc = make_accountant("pld", sampling="poisson")
    acc.compose(dp_event(noise_multiplier=1.1, sample_rate=0.01, steps=1000))
    acc.get_epsilon(1e-5)

Neighbouring relations (``neighboring_relation``):

* ``sampling="poisson"``: each record (client) is included independently with probability q; the relation is
  add/remove-one (``ADD_OR_REMOVE_ONE``), the noise multiplier is std / add-remove sensitivity (for a sum of
  clipped updates: C).
* ``sampling="without_replacement"``: a fixed-size subset of K out of N (K-of-N client scheduling, q =
K/N); the
  relation is replace-one (``REPLACE_ONE``, the dataset size is public), the noise multiplier is std /
  replace-one sensitivity (for a sum of clipped updates: 2C).  dp-accounting 0.6 accounts it with RDP only
  (Wang, Balle & Kasiviswanathan 2019, Thm 27); its PLD accountant has no SampledWithoutReplacementDpEvent.

The builders take scalars (events are single objects); use numpy loops for grids.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import ParameterError, UnsupportedError

if TYPE_CHECKING:  # dp_accounting takes ~1 s to import; load it only when an event is built
    import dp_accounting as dpa

__all__ = ["SAMPLINGS", "gaussian_event", "poisson_gaussian_event", "without_replacement_gaussian_event",
           "dp_event", "neighboring_relation", "make_accountant", "sample_fraction"]

SAMPLINGS = ("poisson", "without_replacement")

_MAX_DENOMINATOR = 10**9


def _dpa():
    import dp_accounting

    return dp_accounting


def _scalar(name: str, arr: np.ndarray) -> Any:
    if arr.ndim:
        raise ParameterError(name, arr, "a scalar (DpEvents describe one mechanism; loop over grids)")
    return arr.item()


def check_sampling(sampling: str) -> None:
    if sampling not in SAMPLINGS:
        raise ParameterError("sampling", sampling, f"one of {SAMPLINGS}")


def gaussian_event(noise_multiplier: float) -> dpa.GaussianDpEvent:
    """One Gaussian release with std = noise_multiplier * sensitivity."""
    z = _scalar("noise_multiplier", check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True))
    return _dpa().GaussianDpEvent(z)


def poisson_gaussian_event(noise_multiplier: float, sample_rate: float, steps: int = 1) -> dpa.DpEvent:
    """``steps`` rounds of the Poisson-subsampled Gaussian (a plain Gaussian composition when q = 1)."""
    q = _scalar("sample_rate", check_probability("sample_rate", sample_rate, allow_one=True))
    t = _scalar("steps", check_int("steps", steps, 1))
    inner: dpa.DpEvent = gaussian_event(noise_multiplier)
    if q < 1.0:
        inner = _dpa().PoissonSampledDpEvent(q, inner)
    return _dpa().SelfComposedDpEvent(inner, int(t))


def without_replacement_gaussian_event(noise_multiplier: float, sample_size: int, population_size: int,
                                       steps: int = 1) -> dpa.DpEvent:
    """``steps`` rounds of a Gaussian on a uniformly random subset of ``sample_size`` out of
    ``population_size``."""
    n = _scalar("population_size", check_int("population_size", population_size, 1))
    k = _scalar("sample_size", check_int("sample_size", sample_size, 1, int(n)))
    t = _scalar("steps", check_int("steps", steps, 1))
    inner: dpa.DpEvent = gaussian_event(noise_multiplier)
    if k < n:
        inner = _dpa().SampledWithoutReplacementDpEvent(int(n), int(k), inner)
    return _dpa().SelfComposedDpEvent(inner, int(t))


def sample_fraction(sample_rate: float) -> tuple[int, int]:
    """(K, N) with K/N = sample_rate (exact for rationals with denominator <= 1e9, else within 1e-18)."""
    frac = Fraction(float(sample_rate)).limit_denominator(_MAX_DENOMINATOR)
    return frac.numerator, frac.denominator


def dp_event(noise_multiplier: float, sample_rate: float, steps: int = 1, sampling: str = "poisson"
             ) -> dpa.DpEvent:
    """The DpEvent of ``steps`` rounds of a (subsampled) Gaussian with rate ``sample_rate`` and
    ``sampling``."""
    check_sampling(sampling)
    if sampling == "poisson":
        return poisson_gaussian_event(noise_multiplier, sample_rate, steps)
    q = _scalar("sample_rate", check_probability("sample_rate", sample_rate, allow_one=True))
    k, n = sample_fraction(q)
    if k == 0:  # q below 1 / (largest N): no K-of-N subset has this rate
        raise ParameterError("sample_rate", q, f"[{1 / _MAX_DENOMINATOR:g}, 1] for sampling without "
                             f"replacement (K of N clients, N <= {_MAX_DENOMINATOR:g})")
    return without_replacement_gaussian_event(noise_multiplier, k, n, steps)


def neighboring_relation(sampling: str = "poisson") -> dpa.NeighboringRelation:
    """ADD_OR_REMOVE_ONE for Poisson sampling, REPLACE_ONE for sampling without replacement."""
    check_sampling(sampling)
    rel = _dpa().NeighboringRelation
    return rel.ADD_OR_REMOVE_ONE if sampling == "poisson" else rel.REPLACE_ONE


def make_accountant(method: str = "rdp", sampling: str = "poisson", orders: ArrayLike | None = None,
                    pld_discretization: float = 1e-4) -> dpa.PrivacyAccountant:
    """A fresh dp_accounting accountant (``"rdp"`` or ``"pld"``) with the relation that fits ``sampling``."""
    relation = neighboring_relation(sampling)
    if method == "rdp":
        from dp_accounting.rdp import RdpAccountant

        from fedbound.accounting.rdp import check_orders

        return RdpAccountant(list(check_orders(orders).ravel()), relation)
    if method == "pld":
        if sampling != "poisson":
            raise UnsupportedError("sampling", sampling, "'poisson' for method='pld'",
                                 "dp-accounting 0.6 has no PLD for SampledWithoutReplacementDpEvent; "
                                 "use method='rdp'")
        from dp_accounting.pld import PLDAccountant

        return PLDAccountant(relation, value_discretization_interval=pld_discretization)
    raise ParameterError("method", method, "'rdp' or 'pld'")
