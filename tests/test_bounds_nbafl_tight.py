"""Tight counterparts of NbAFL's noise formulas, against independent oracles.

Oracles: the Balle-Wang exact privacy profile of the Gaussian mechanism written out here with scipy, and
dp-accounting's PLD accountant for the T-fold composition.  The paper's sigma's must never be smaller than
the tight ones in the classic mechanism's own range (eps < 1), and are compared, not trusted, above it.
"""

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from fedbound.bounds import nbafl as nb
from fedbound.scheduling import nbafl as sched

TV1 = dict(nb.TV1)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def balle_wang_delta(eps: float, mu: float) -> float:
    """delta(eps) of a Gaussian mechanism with sensitivity/std ratio mu (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("eps, L", [(0.5, 1), (6.0, 1), (60.0, 1), (6.0, 3)])
def test_uplink_tight_is_exactly_eps_delta_for_L_exposures(eps, L):
    sigma = nb.sigma_uplink_tight(eps, 0.01, 20.0, 100, L)
    mu = math.sqrt(L) * nb.uplink_sensitivity(20.0,
        100) / sigma  # L composed exposures = one with sqrt(L) Delta
    assert balle_wang_delta(eps, mu) == pytest.approx(0.01, rel=1e-6)


def test_downlink_tight_composes_T_broadcasts_exactly_pld_oracle():
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    s = {**TV1, "eps": 6.0, "T": 200}
    args = [s[k] for k in "eps delta C m N T L".split()]
    sigma_a = nb.sigma_aggregate_tight(*args)
    ds_d = 2 * s["C"] / (s["m"] * s["N"])
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.GaussianDpEvent(sigma_a / ds_d), int(s["T"]))
    assert accountant.get_epsilon(s["delta"]) == pytest.approx(s["eps"], rel=2e-3)
    # server noise tops the client noise up to the aggregate, as in Theorem 1
    sd, su = nb.sigma_downlink_tight(*args), nb.sigma_uplink_tight(*args[:4], s["L"])
    assert sd**2 + su**2 / s["N"] == pytest.approx(sigma_a**2, rel=1e-12)


def test_tight_is_below_paper_in_the_classic_range_and_threshold_moves():
    args = dict(eps=0.5, delta=1e-5, C=20.0, m=100, L=1)
    assert nb.sigma_uplink_tight(**args) < nb.sigma_uplink(**args)
    # tight server noise starts at T > L N (the paper: T > L sqrt(N))
    T = np.array([49.0, 51.0])
    down = nb.sigma_downlink_tight(6.0, 0.01, 20.0, 100, 50, T, 1)
    assert down[0] == 0 and down[1] > 0


def test_tight_bound_variant_and_plan():
    z = nb.tight_noise_multiplier(6.0, 0.01)
    s = {**TV1, "eps": 6.0, "z": z}
    assert nb.BOUND(s, variant="tight") == pytest.approx(
        nb.recursive_bound(25, 2.0, 0.96875, 0.5, 0.5, 1.0, z * 5 * 20 / (100 * math.sqrt(50))), rel=1e-12)
    p = sched.plan({**TV1, "eps": 6.0, "T": None}).data
    assert p["sigma_uplink_tight"] == pytest.approx(float(nb.sigma_uplink_tight(6.0, 0.01, 20.0, 100, 1)))
    assert p["T_opt_tight"] >= 1 and p["bound_at_T_opt_tight"] < 2.0


def test_k_scheduling_tight_at_K_equals_N_is_the_full_participation_value():
    full = nb.sigma_aggregate_tight(6.0, 0.01, 20.0, 100, 50, 100, 1)
    assert nb.sigma_aggregate_k_tight(6.0, 0.01, 20.0, 100, 50, 50, 100, 1) == pytest.approx(full, rel=1e-9)
