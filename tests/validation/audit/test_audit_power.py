"""The audit's estimators against independent oracles (issue 33 item 6) and its power on a correct Gaussian
mechanism with the worst canary: thresholds fixed in advance keep the Clopper-Pearson level, Nasr et al.'s
Gaussian-DP estimate recovers mu, Steinke et al.'s one-run bound covers, the independent epsilon is
dp-accounting's and the tests' Balle-Wang oracle's, and on NbAFL's small provable setting the GDP estimate is
within 15 % of the exact epsilon and the lower bound at least half of it at 2,000 trials."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import optimize, stats

from fedbound.tests._accounting_oracles import balle_wang_delta
from fedbound.tests._audit import small_config
from fedbound.validation.audit import audit_from_config
from fedbound.validation.audit.stats import (
    epsilon_lower_bound_at,
    gdp_epsilon,
    gdp_estimate,
    one_run_epsilon,
    one_run_p_value,
    threshold_grid,
)

FULL = os.environ.get("FEDBOUND_AUDIT_SUITE") == "full"
SEEDS = range(4) if FULL else range(1)


def _epsilon(mu: float, delta: float) -> float:
    """epsilon at delta of the mu-GDP Gaussian mechanism: Balle & Wang's exact delta(eps) (the tests' oracle)
    solved by brentq."""
    return optimize.brentq(lambda eps: balle_wang_delta(eps, 1.0 / mu) - delta, 0.0, 80.0)


def _gaussian_scores(mu: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The likelihood-ratio scores of a Gaussian mechanism with mu = shift / sigma: N(0, mu^2) on D,
    N(mu^2, mu^2) on D' (a plain Monte Carlo, not the audit's code)."""
    rng = np.random.default_rng(seed)
    return mu * rng.standard_normal(n), mu * rng.standard_normal(n) + mu**2


def test_gdp_epsilon_is_the_balle_wang_curve():
    for mu in (0.3, 1.0, 2.5):
        assert gdp_epsilon(mu, 1e-3) == pytest.approx(_epsilon(mu, 1e-3), rel=1e-6)


def test_fixed_thresholds_keep_the_level_by_monte_carlo():
    # 400 correct Gaussian mechanisms at eps = 1: the lower bound exceeds 1 in at most alpha of them
    mu, delta, alpha = 1.0 / 1.88, 1e-2, 0.05
    true = _epsilon(mu, delta)
    above = 0
    for seed in range(400):
        out, inn = _gaussian_scores(mu, 300, seed)
        above += epsilon_lower_bound_at(out, inn, threshold_grid(mu), delta, alpha).epsilon > true
    assert above / 400 <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / 400)


@pytest.mark.parametrize("mu", [0.7, 1.5, 3.0])
def test_gdp_estimate_recovers_mu_and_its_bound_covers(mu):
    delta, alpha = 1e-2, 0.05
    est, low = [], []
    for seed in range(60):
        out, inn = _gaussian_scores(mu, 2000, seed)
        g = gdp_estimate(out, inn, threshold_grid(mu), delta, alpha)
        est.append(g.mu)
        low.append(g.mu_low)
    # unbiased to within the Monte Carlo error, and the lower bound under mu in >= 1 - alpha of the runs
    assert np.mean(est) == pytest.approx(mu, abs=4 * np.std(est) / math.sqrt(60) + 0.01)
    assert np.mean(np.array(low) > mu) <= alpha
    assert np.median(low) > 0.7 * mu


def test_one_run_bound_by_hand_and_by_monte_carlo():
    # every guess right, delta = 0: P[Bin(r, q) >= r] = q^r <= beta/F, eps = log(q / (1 - q)) in closed form
    m, beta = 100, 0.05
    sure = one_run_epsilon(np.arange(m, dtype=float), np.arange(m) >= m // 2, 0.0, beta)
    r = sure.guesses
    q = (beta / 4) ** (1.0 / r)
    assert sure.correct == r == 50 and sure.epsilon == pytest.approx(math.log(q / (1 - q)), rel=1e-6)
    # Thm 5.2's bound is the binomial tail plus the delta term (scipy's binomial)
    v, r, eps, delta = 40, 50, 1.0, 1e-5
    p = 1 / (1 + math.exp(-eps))
    tail = stats.binom.sf(v - 1, r, p)
    extra = max((stats.binom.cdf(v - 1, r, p) - stats.binom.cdf(v - i - 1, r, p)) / i
                for i in range(1, v + 1))
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(tail + 2 * m * delta * extra, rel=1e-9)
    # randomized response with eps = 1.5 (exactly eps-DP per canary): the bound exceeds 1.5 rarely
    above, runs = 0, 120
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        inc = rng.random(400) < 0.5
        says = np.where(rng.random(400) < 1 / (1 + math.exp(-1.5)), inc, ~inc)
        above += one_run_epsilon(says + 0.1 * rng.random(400), inc, 0.0, beta).epsilon > 1.5
    assert above / runs <= beta + 2 * math.sqrt(beta * (1 - beta) / runs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_power_on_a_correct_gaussian_mechanism_with_the_worst_canary(seed, tmp_path):
    # NbAFL's small provable setting: one clipped step, the canary moves the upload by exactly the
    # sensitivity, so the uplink is a Gaussian mechanism whose exact epsilon is the reported one
    result = audit_from_config("nbafl", small_config(tmp_path, "nbafl"), seed=seed, control=False)
    up = next(v for v in result.views if v.kind == "upload")
    assert up.shift_measured == pytest.approx(up.sensitivity_assumed, rel=1e-3)
    exact = _epsilon(up.sensitivity_assumed / up.noise_std_planned, result.delta)
    assert up.epsilon_reported_tight == pytest.approx(exact, rel=1e-6)
    assert abs(up.gdp_epsilon / exact - 1) <= 0.15
    assert up.epsilon_lower >= 0.5 * exact or (not FULL and up.epsilon_lower >= 0.45 * exact)
    assert up.gdp_epsilon_low <= exact


def test_independent_epsilon_is_the_oracles_for_a_sampled_view(tmp_path):
    # NbAFL scheduled (K of N clients, hidden): RDP of sampling without replacement; and DP-PFL with Poisson
    # sampled records: PLD, whose bracket holds the ledger's value
    result = audit_from_config("nbafl", small_config(tmp_path, "nbafl", nbafl={"K": 5}), trials=40, rounds=2,
                               control=False)
    down = next(v for v in result.views if v.kind == "broadcast")
    assert "RDP" in down.independent_method and not down.under_reported
    assert down.epsilon_independent == pytest.approx(down.epsilon_reported_tight, rel=0.05)
    dppfl = audit_from_config("dppfl", small_config(tmp_path, "dppfl", dppfl={"q_in": 0.5, "q_out": 0.5}),
                              trials=40, control=False)
    v = dppfl.views[0]
    assert "PLD" in v.independent_method and not v.under_reported
    assert v.epsilon_independent_low <= v.epsilon_independent
    # the ledger counts a replaced record as removed and added (sensitivity 2C): at least the exact
    # replace-one PLD of dp-accounting
    assert v.epsilon_reported_tight >= v.epsilon_independent_low


def test_one_run_estimate_for_a_run_with_many_canaries(tmp_path):
    # 40 participants, each with its own canary in with probability 1/2, in ONE run: in paper mode (crafted
    # outliers move the upload far past 2C/m) every guess is right and the bound is positive; a correct
    # mechanism stays under the plan's epsilon at the same delta
    train = {"synthetic_samples": 2000}
    paper = small_config(tmp_path, "nbafl", nbafl={"N": 40, "sensitivity": "paper"},
                         train={**train, "lr": 0.1})
    leaky = audit_from_config("nbafl", paper, trials=40, control=False)
    correct = audit_from_config("nbafl", small_config(tmp_path, "nbafl", nbafl={"N": 40}, train=train),
                                trials=40, control=False)
    for result in (leaky, correct):
        up = next(v for v in result.views if v.kind == "upload")
        down = next(v for v in result.views if v.kind == "broadcast")
        assert up.one_run_canaries == 40 and up.one_run_delta == 1e-5 and down.one_run_epsilon is None
        assert up.one_run_epsilon <= up.one_run_reference
    assert next(v for v in leaky.views if v.kind == "upload").one_run_epsilon > 1.0
    small = audit_from_config("nbafl", small_config(tmp_path, "nbafl"), trials=40, control=False)
    assert small.views[0].one_run_epsilon is None  # 10 participants: too few canaries for one run
