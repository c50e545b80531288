"""Shared certificate helpers: exact re-accounting of a stage, the scan that stops once the bound turns."""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from fedbound.scheduling.certificate import reaccount, scan_until_turned


def _delta(eps: float, mu: float) -> float:  # Balle & Wang 2018, Thm 8, written from the paper
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("steps", [1, 7, 50])
def test_reaccount_composed_gaussian_is_exact(steps: int) -> None:
    sigma, sens, delta = 3.0, 0.4, 1e-3
    mu = np.sqrt(steps) * sens / sigma  # T Gaussians = one Gaussian with sensitivity sqrt(T) Delta (GDP)
    expected = brentq(lambda e: _delta(e, mu) - delta, 1e-9, 200)
    chk = reaccount("uplink", sigma, sens, expected, delta, steps=steps)
    assert chk.eps_achieved == pytest.approx(expected, rel=1e-7)
    assert chk.tight and chk.label == "tight"
    loose = reaccount("uplink", sigma, sens, expected * 1.05, delta, steps=steps, sigma_exact=sigma * 0.9)
    assert loose.label == "valid" and "more noise" in loose.describe()
    assert reaccount("uplink", sigma, sens, expected * 0.95, delta, steps=steps).label == "VIOLATED"


def test_reaccount_pld_agrees_with_analytic_at_full_sampling() -> None:
    exact = reaccount("s", 2.0, 1.0, 1.0, 1e-4, steps=4)
    pld = reaccount("s", 2.0, 1.0, 1.0, 1e-4, steps=4, method="pld")
    assert "PLD" in pld.method
    assert exact.eps_achieved <= pld.eps_achieved <= exact.eps_achieved * 1.01


def test_scan_until_turned_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, r, c = rng.uniform(0.5, 5), rng.uniform(0.01, 0.3), rng.uniform(1e-4, 1e-2)

        def f(T: np.ndarray, a: float = a, r: float = r, c: float = c) -> np.ndarray:
            return a * np.exp(-r * T) + c * T

        res = scan_until_turned(f, lambda T, c=c: c * T, chunk=16)
        grid = np.arange(1, 20_001)
        assert res.x == int(grid[np.argmin(f(grid))])
        assert res.fun == pytest.approx(float(f(grid).min()))
        assert not res.capped


def test_scan_until_turned_says_when_capped() -> None:
    res = scan_until_turned(lambda T: 1.0 / T, lambda T: 0 * T, maximum=500)
    assert res.x == 500 and "maximum 500" in res.capped
