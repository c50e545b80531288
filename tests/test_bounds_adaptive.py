"""Seed 001 (PADPFL) formulas, fedbound.bounds.adaptive: spec 001 Sec. 8 test vectors (TV0-TV4, both
variants), the NbAFL limit against fedbound.bounds.nbafl, Lemma 2 on quadratics, every claim, input checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds import adaptive as ba
from fedbound.bounds import nbafl
from fedbound.bounds.adaptive_claims import CLAIMS, quadratic_lemma2_check, random_impact
from fedbound.bounds.claims import check_all, check_point
from fedbound.errors import DomainError, ParameterError

C001 = 3.10751146009  # spec 001 Sec. 8: c = gaussian_c(0.01)
LOSS = {"A": 1.2, "gamma": 0.1, "rho": 1.0, "mu": 4.0, "rho_minus": 0.0, "beta": 1.0, "Theta": 2.3}

# --- spec 001 Sec. 8 test vectors (regression values, rel. tol. 1e-9) -----------------------------------
SETTINGS = {
    "TV1": ((0, 1, 2), (150, 150, 150), 5.0, 1),
    "TV2": ((1, 1, 1), (150, 150, 150), 20.0, 5),
    "TV3": ((1, 3, 5), (50, 120, 271), 20.0, 2),
}
NOISE = {  # sigma_C, Delta f, sigma_AC, sigma_A, T_th, sigma_S
    "TV1": (0.165733944538, 0.00888888888889, 0.0276223240897, 0.165733944538, 5.0, 0.163415873109),
    "TV2": (0.207167430673, 0.00444444444444, 0.0267452002957, 0.0207167430673, 38.7298334621, 0.0),
    "TV3": (0.248600916807, 0.0222222222222, 0.0365409000875, 0.103583715336, 10.5830052443, 0.0969244484312),
}
BOUND = {  # variant -> TV -> (k2, k1, k0, bound(30))
    "paper": {
        "TV1": (-0.08305, 0.227053156646, 0.000381496394058, 41.0900843019),
        "TV2": (-0.08305, 0.113526578323, 9.53740985146e-05, 4.92363377619),
        "TV3": (-0.08305, 0.104729315796, 8.11655772275e-05, 4.52679788729),
    },
    "corrected": {
        "TV1": (-0.08305, 0.227053156646, 0.0228897836435, 65.3990345313),
        "TV2": (-0.08305, 0.113526578323, 0.00572244591088, 5.30346112352),
        "TV3": (-0.08305, 0.567632891615, 0.143061147772, 35.0086075973),
    },
}


def _tv(name):
    ratios, sizes, eps, R = SETTINGS[name]
    p = ba.impact_factors_from_ratios(ratios, [20, 20, 20])
    m = np.repeat(sizes, 20)
    return p, m, eps, R


def _values(name, T=30.0):
    p, m, eps, R = _tv(name)
    return {
        "eps": eps,
        "c": float(ba.gaussian_c(0.01)),
        "B": 20.0,
        "R": R,
        "T": T,
        **ba.summaries(p, m),
        **LOSS,
    }


@pytest.mark.parametrize("name", sorted(NOISE))
def test_noise_vectors(name):
    p, m, eps, R = _tv(name)
    sigma_c = ba.client_noise_sigma(eps, 0.01, 20.0, R, m)
    got = (
        sigma_c,
        ba.server_sensitivity(20.0, p, m),
        ba.aggregated_client_noise_sigma(p, sigma_c),
        ba.total_noise_sigma(eps, 0.01, 30, 20.0, p, m),
        ba.server_noise_threshold(R, p),
        ba.server_noise_sigma(eps, 0.01, 30, R, p, 20.0, m),
    )
    np.testing.assert_allclose(got, NOISE[name], rtol=1e-9, atol=1e-15)
    assert ba.gaussian_c(0.01) == pytest.approx(C001, rel=1e-11)
    sigma_a, sigma_ac, sigma_s = got[3], got[2], got[5]
    assert ba.effective_noise_sigma(eps, 0.01, 30, R, p, 20.0, m) == pytest.approx(
        max(sigma_a, sigma_ac), rel=1e-12
    )
    if sigma_s > 0:  # F18: sigma_S^2 = sigma_A^2 - sigma_AC^2 (TV1, TV3)
        assert sigma_s**2 + sigma_ac**2 == pytest.approx(sigma_a**2, rel=1e-12)
        assert ba.server_noise_sigma_from_parts(sigma_a, sigma_ac) == pytest.approx(sigma_s, rel=1e-12)
    else:  # TV2: T = 30 < T_th = 5 sqrt(60), sigma_AC > sigma_A
        assert sigma_ac > sigma_a and got[4] == pytest.approx(5 * math.sqrt(60), rel=1e-12)


@pytest.mark.parametrize("variant", ["paper", "corrected"])
@pytest.mark.parametrize("name", sorted(NOISE))
def test_theorem2_vectors(name, variant):
    v = _values(name)
    assert (ba.LAMBDA2(v), ba.LAMBDA1(v), ba.LAMBDA0(v)) == pytest.approx((-0.08305, 1.33, 0.5), rel=1e-12)
    got = (
        ba.K2(v, variant=variant),
        ba.K1(v, variant=variant),
        ba.K0(v, variant=variant),
        ba.BOUND(v, variant=variant),
    )
    np.testing.assert_allclose(got, BOUND[variant][name], rtol=1e-9)
    p, m, eps, R = _tv(name)  # the plain-function route gives the same constants
    lam = ba.lemma2_lambdas(1.2, 0.1, 1.0, 4.0)
    k = ba.theorem2_constants(lam, 1.0, 20.0, v["c"], v["p_max"], m, 60, variant)
    np.testing.assert_allclose(k, got[:3], rtol=1e-12)
    assert ba.convergence_bound(2.3, 30, eps, k) == pytest.approx(BOUND[variant][name][3], rel=1e-12)


@pytest.mark.parametrize("name", sorted(NOISE))
def test_corrected_bound_is_theta_plus_T_increments(name):
    v = _values(name)
    lam = ba.lemma2_lambdas(1.2, 0.1, 1.0, 4.0)
    sigma_conv = 2 * 20.0 * v["p_max"] * 30 * v["c"] / (v["m_min"] * v["eps"])
    moments = ba.noise_moments(sigma_conv, 60)
    if name == "TV1":
        assert moments == pytest.approx((1.02429995479, 1.64806442233), rel=1e-9)
        assert (ba.NOISE_MOMENT_1(v), ba.NOISE_MOMENT_2(v)) == pytest.approx(moments, rel=1e-12)
    inc = ba.per_round_increment_bound(1.0, *moments, lam)
    assert 2.3 + 30 * inc == pytest.approx(BOUND["corrected"][name][3], rel=1e-9)
    assert 2.3 + 30 * inc != pytest.approx(BOUND["paper"][name][3], rel=1e-3)  # E1: the print breaks it


def test_hand_checkable_vectors():  # TV0
    assert ba.server_noise_sigma(1, 0.01, 2, 1, [1.0], 1, [1], c=1) == pytest.approx(3.46410161514, rel=1e-11)
    assert ba.client_noise_sigma(1, 0.01, 1, 1, [1], c=1) == 2.0
    boundary = ba.server_noise_sigma(1, 0.01, 9, 1, np.full(81, 1 / 81), 1, np.ones(81), c=1)
    assert boundary == 0.0  # F19 tolerance: a naive max(r, 0) clamp gives ~2.6e-9
    assert ba.lemma2_lambdas(1, 0, 1, 2) == pytest.approx((-0.125, 1.5, 0.5), rel=1e-14)
    assert ba.lemma2_lambdas(2, 0.5, 1, 5, 1) == pytest.approx((0.43125, 1.75, 0.5), rel=1e-14)
    assert ba.server_noise_threshold(2, [0, 1, 0]) == 2.0  # one-hot p: T_th = R


def test_optimum_vectors_of_the_bound():  # spec TV1-TV3 T* rows through the theorem's closed form
    for name, t_star in (("TV1", 0.914012341053), ("TV2", 7.31209872842), ("TV3", 7.92631502161)):
        v = _values(name, T=t_star)
        assert abs(ba.BOUND_DT(v)) < 1e-9  # the stationary point of the printed bound
    v = _values("TV3", T=1.42472478478)
    assert abs(ba.BOUND_DT(v, variant="corrected")) < 1e-9


def test_adaptive_vector_tv4():
    p_old = np.repeat([0, 1 / 60, 1 / 30], 20)
    p_new = np.repeat([1 / 30, 1 / 60, 0], 20)
    alpha = ba.impact_factor_change(p_old, p_new)
    np.testing.assert_allclose(ba.update_impact_factors(p_old, alpha), p_new, atol=1e-15)
    norms = np.repeat([3.0, 2.0, 1.0], 20)
    a = ba.empirical_dissimilarity(p_old, norms, 1.0)
    a_prime = ba.adaptive_dissimilarity(alpha, norms, 1.0, a)
    assert (a, a_prime) == pytest.approx((1.33333333333, 2.66666666667), rel=1e-10)
    assert a_prime == pytest.approx(ba.empirical_dissimilarity(p_new, norms, 1.0), rel=1e-12)
    lam_p = ba.lemma2_lambdas(a_prime, 0.1, 1.0, 4.0)
    assert lam_p == pytest.approx((0.268888888889, 1.73333333333, 0.5), rel=1e-10)
    m = np.full(60, 150)
    np.testing.assert_allclose(
        ba.server_noise_sigma(5, 0.01, 30, 1, np.stack([p_old, p_new]), 20, m), 0.163415873109, rtol=1e-9
    )
    moments = ba.noise_moments(float(ba.total_noise_sigma(5, 0.01, 30, 20, p_old, m)), 60)
    assert ba.per_round_increment_bound(1.0, *moments, lam_p, l_max=2.3) == pytest.approx(
        4.01837435503, rel=1e-9
    )
    c = float(ba.gaussian_c(0.01))
    v = {
        "eps": 5.0,
        "c": c,
        "B": 20.0,
        "T": 30.0,
        "N": 60,
        "m_min": 150,
        "m_max": 150,
        "p_max": 1 / 30,
        "A_prime": a_prime,
        "gamma": 0.1,
        "rho": 1.0,
        "mu": 4.0,
        "rho_minus": 0.0,
        "beta": 1.0,
        "Theta": 2.3,
        "l_max": 2.3,
    }
    expected = {
        "paper": ((1.15179259259, 0.29590887583, 0.000381496394058), 90.5293915327),
        "corrected": ((1.41888888889, 0.29590887583, 0.0228897836435), 122.851230651),
    }
    for variant, (k, bound30) in expected.items():
        got = (
            ba.K2_PRIME(v, variant=variant),
            ba.K1_PRIME(v, variant=variant),
            ba.K0_PRIME(v, variant=variant),
        )
        np.testing.assert_allclose(got, k, rtol=1e-9)
        np.testing.assert_allclose(
            ba.theorem3_constants(lam_p, 1.0, 20.0, c, 1 / 30, m, 60, 2.3, variant), k, rtol=1e-9
        )
        assert ba.BOUND_ADAPTIVE(v, variant=variant) == pytest.approx(bound30, rel=1e-9)
        assert ba.BOUND_ADAPTIVE.derivative("T")({**v, "T": 0.0}, variant=variant) > 0  # T* = 0: k2' > 0


def test_scenario_table_and_ratio_rule():  # spec 001 Sec. 6 table, F55 checks
    np.testing.assert_allclose(
        ba.impact_factors_from_ratios([0, 2, 1], [20, 35, 5])[[0, 20, 59]], [0, 2 / 75, 1 / 75], rtol=1e-15
    )
    p = ba.impact_factors_from_ratios([0, 2, 1], [20, 35, 5])
    assert ba.weight_summaries(p)[1] == pytest.approx(145 / 5625, rel=1e-12)
    assert ba.server_noise_threshold(1, p) == pytest.approx(6.02080, rel=1e-5)
    tv4 = ba.impact_schedule([20, 20, 20], [[0, 1, 2], [2, 1, 0]], [10], 30)
    np.testing.assert_array_equal(tv4[:10], np.tile(np.repeat([0, 1 / 60, 1 / 30], 20), (10, 1)))
    np.testing.assert_array_equal(tv4[10:], np.tile(np.repeat([1 / 30, 1 / 60, 0], 20), (20, 1)))
    assert ba.impact_factors_by_size([50, 150]) == pytest.approx([0.25, 0.75])
    assert ba.impact_factors_from_scores([1, 0, 3]) == pytest.approx([0.25, 0, 0.75])


# --- the NbAFL limit, against fedbound.bounds.nbafl ---------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    N=st.integers(1, 150),
    T=st.integers(1, 400),
    R=st.integers(1, 4),
    m=st.integers(1, 500),
    eps=st.floats(0.5, 100),
    delta=st.floats(1e-6, 0.5),
    B=st.floats(0.1, 50),
)
def test_equal_weights_equal_sizes_is_nbafl(N, T, R, m, eps, delta, B):
    if R > T:
        R = T
    p = ba.impact_factors_uniform(N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = float(nbafl.sigma_downlink(eps, delta, B, m, N, T, R))
        theirs_up = float(nbafl.sigma_uplink(eps, delta, B, m, R))
        theirs_agg = float(nbafl.sigma_aggregate(eps, delta, B, m, N, T, R))
    ours = float(ba.server_noise_sigma(eps, delta, T, R, p, B, [m]))
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12 * (1 + theirs))
    assert ba.client_noise_sigma(eps, delta, B, R, [m]) == pytest.approx(theirs_up, rel=1e-12)
    assert ba.effective_noise_sigma(eps, delta, T, R, p, B, [m]) == pytest.approx(theirs_agg, rel=1e-9)
    assert ba.server_noise_threshold(R, p) == pytest.approx(R * math.sqrt(N), rel=1e-12)


def test_nbafl_cross_check_vector_and_lambdas():
    uniform = ba.impact_factors_uniform(60)
    assert ba.server_noise_sigma(5, 0.01, 30, 1, uniform, 20, np.full(60, 150)) == pytest.approx(
        0.0800571009979, rel=1e-9
    )
    lam0, lam1, lam2 = nbafl.lambdas(4.0, 1.0, 1.2)  # gamma = 0: lambda_2 equal, lambda_1 differs by 1 - 1/mu
    ours = ba.lemma2_lambdas(1.2, 0.0, 1.0, 4.0)
    assert ours[0] == pytest.approx(float(lam2), rel=1e-12)
    assert ours[1] - float(lam1) == pytest.approx(1 - 1 / 4.0, rel=1e-12)  # E12
    assert ours[2] == float(lam0)


# --- Lemma 2 and (36)-(43) on random convex quadratics (spec 001 M20, a CI-sized count) ----------------
def test_lemma2_on_random_quadratics():
    worst = {}
    for seed in range(1500):
        for key, slack in quadratic_lemma2_check(seed).items():
            worst[key] = min(worst.get(key, np.inf), slack)
    assert all(v >= 0 for v in worst.values()), worst


def test_lemma2_check_detects_a_wrong_lambda(monkeypatch):
    """The quadratic oracle can fail: with lambda_2 lowered by 1 Lemma 2 is violated on some instance."""
    real = ba.lemma2_lambdas
    monkeypatch.setattr(ba, "lemma2_lambdas", lambda *a: (real(*a)[0] - 1.0, *real(*a)[1:]))
    assert any(quadratic_lemma2_check(seed)["F36"] < 0 for seed in range(50))


# --- properties ----------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 80), T=st.integers(1, 200), R=st.integers(1, 5))
def test_server_noise_on_random_vectors(seed, n, T, R):
    rng = np.random.default_rng(seed)
    p = random_impact(rng, n)
    R = min(R, T)
    sizes = rng.integers(1, 300, n)
    s = float(ba.server_noise_sigma(3.0, 0.01, T, R, p, 2.0, sizes))
    a = float(ba.total_noise_sigma(3.0, 0.01, T, 2.0, p, sizes))
    ac = float(ba.aggregated_client_noise_sigma(p, ba.client_noise_sigma(3.0, 0.01, 2.0, R, sizes)))
    assert np.isfinite(s) and s >= 0
    assert math.sqrt(s**2 + ac**2) == pytest.approx(max(a, ac), rel=1e-9)
    if T <= ba.server_noise_threshold(R, p) * (1 - 1e-9):
        assert s == 0.0
    tight = float(ba.server_sensitivity_tight(2.0, p, sizes))
    assert tight <= float(ba.server_sensitivity(2.0, p, sizes)) * (1 + 1e-12)
    assert ba.redistribute_impact(p, [int(np.argmax(p))]).sum() == pytest.approx(1.0) if p.max() < 1 else True


def test_tight_noise_and_the_noise_function():
    p, m, eps, R = _tv("TV1")
    setting = {"eps": eps, "delta": 0.01, "C": 20.0, "R": R, "p": p, "m": m}
    paper = ba.noise_details(setting, 30, "paper")
    tight = ba.noise_details(setting, 30, "tight")
    assert paper["uplink"][0] == pytest.approx(0.165733944538, rel=1e-9)
    assert paper["server"][0] == pytest.approx(0.163415873109, rel=1e-9)
    z = ba.tight_noise_multiplier(eps, 0.01)
    assert tight["uplink"][0] == pytest.approx(z * 2 * 20 / 150, rel=1e-12)
    assert tight["total"][0] == pytest.approx(math.sqrt(30) * z * 2 * 20 / 30 / 150, rel=1e-12)
    assert tight["server"][0] ** 2 + tight["aggregated_client"][0] ** 2 == pytest.approx(
        tight["total"][0] ** 2
    )
    assert tight["total"][0] < paper["total"][0]  # exact composition: sqrt(T) instead of T
    from fedbound.accounting import analytic_gaussian_std  # oracle: one release at sqrt(T) z Delta f

    assert analytic_gaussian_std(eps, 0.01, math.sqrt(30) * 2 * 20 / 30 / 150) == pytest.approx(
        tight["total"][0]
    )
    schedule = ba.impact_schedule([20, 20, 20], [[0, 1, 2], [1, 1, 1]], [10], 30)
    per_round = ba.noise({**setting, "p": schedule}, 30, "paper")["server"]
    assert per_round[0] > per_round[-1] > 0  # uniform p needs less server noise at T = 30 > sqrt(60)
    with pytest.raises(ParameterError, match="method"):
        ba.noise(setting, 30, "rdp")


def test_variants_noise_dimension_and_sound():
    v = _values("TV1")
    d = {**v, "d": 60}
    e1 = ba.NOISE_MOMENT_1(d, variant="noise_dimension")
    assert e1 == pytest.approx(ba.noise_moments(float(ba.SIGMA_TOTAL(v)), 60, dim=60)[0], rel=1e-12)
    assert e1 / float(ba.SIGMA_TOTAL(v)) == pytest.approx(7.7138, rel=1e-4)  # the chi_60 mean (E11)
    assert ba.NOISE_MOMENT_1(v) / float(ba.SIGMA_TOTAL(v)) == pytest.approx(6.1804, rel=1e-4)
    nonprivate = {**v, "eps": 1e12, "T": 28.0}
    assert ba.BOUND(nonprivate) < 0 < ba.BOUND(nonprivate, variant="sound")  # E6, M25
    assert ba.BOUND(v, variant="corrected+sound") >= ba.BOUND(v, variant="corrected")


def test_every_claim_through_the_shared_checker():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reports = check_all(CLAIMS, n=10)
    bad = [r for r in reports if r.status == "CONTRADICTED"]
    assert not bad, [(r.id, r.detail) for r in bad]
    assert {r.id for r in reports if r.status == "fails in region"} == {"M16", "M18", "M25"}
    assert {f"M{i}" for i in range(1, 26)} - {"M12"} <= {c.id.rstrip("abcdes") for c in CLAIMS}


def test_claims_on_more_points_with_another_seed():
    """40 more seeded points of every region (the registry's generic test draws its own with hypothesis)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reports = check_all(CLAIMS, n=40, seed=1)
    assert all(r.region_ok and r.counterexamples_ok for r in reports), [
        (r.id, r.detail) for r in reports if not (r.region_ok and r.counterexamples_ok)
    ]


def test_a_false_claim_is_caught():
    m18 = next(c for c in CLAIMS if c.id == "M18")
    from fedbound.bounds.adaptive_claims import TV1

    assert not check_point(m18, TV1, "paper").holds
    assert check_point(m18, TV1, "corrected").holds


# --- input checks -------------------------------------------------------------------------------------
def test_bad_inputs_name_the_parameter():
    with pytest.raises(ParameterError, match="R = 31"):
        ba.server_noise_sigma(5, 0.01, 30, 31, [1.0], 1, [1])
    with pytest.raises(ParameterError, match="eps"):
        ba.client_noise_sigma(0.0, 0.01, 1, 1, [1])
    with pytest.raises(ParameterError, match="ratios"):
        ba.impact_factors_from_ratios([0, 0], [2, 2])
    with pytest.raises(ParameterError, match="sum_i p_i = 0.9"):
        ba.server_noise_sigma(5, 0.01, 30, 1, [0.5, 0.4], 1, [1])
    with pytest.raises(ParameterError, match="sum_i alpha_i"):
        ba.update_impact_factors([0.5, 0.5], [0.1, 0.0])
    with pytest.raises(ParameterError, match="dropped"):
        ba.redistribute_impact([1.0, 0.0], [0])
    with pytest.raises(DomainError, match="mu"):
        ba.lemma2_lambdas(1.0, 0.0, 1.0, 1.0, rho_minus=2.0)
    with pytest.raises(ParameterError, match="gamma"):
        ba.lemma2_lambdas(1.0, 1.5, 1.0, 1.0)
    with pytest.raises(ParameterError, match="grad_norm_L"):
        ba.empirical_dissimilarity([1.0], [1.0], 0.0)
