"""UDP (seed 003): Theorems 1-4 against spec 003's section 8 test vectors, oracles and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from fedbound.bounds import udp
from fedbound.bounds import udp_moments as um
from fedbound.bounds.claims import check_all, check_point
from fedbound.errors import ParameterError, PrivacyBudgetExceeded

CLOSED, NUMERIC = 1e-9, 1e-6
LAM = 6.907755279

# spec 003 section 8.1/8.2: (eps, q, T, sens) -> sigma_paper, rho, lambda*, sigma_corrected,
# delta_ach (continuous / integer approx / integer exact / integer release),
# sigma_numeric (approx/exact/release)
TV = {
    "TV1": (
        (4.0, 1.0, 200, 1e-4),
        0.001314130442,
        0.5790593092,
        2.953877639,
        0.001482737496,
        (0.00639320158, 0.006401081685, 0.006401081685, 0.006401081685),
        (0.001483130751, 0.001483130751, 0.001483130751),
    ),
    "TV2": (
        (8.0, 0.6, 200, 1e-4),
        0.0005089605318,
        2.316237237,
        1.22693882,
        0.0006283254287,
        (0.03059818492, 0.03447483897, 0.0005646967846, 0.03572683651),
        (0.0006292390869, 0.0004930559355, 0.0006338954063),
    ),
    "TV3": (
        (2.0, 0.6, 100, 1.5625e-4),
        0.002249309021,
        0.1447648273,
        6.407755279,
        0.002401783598,
        (0.002621662853, 0.002685529796, 3.096643334e-05, 0.003035045105),
        (0.002404821304, 0.001874227651, 0.002432226733),
    ),
}


@pytest.mark.parametrize("name", sorted(TV))
def test_theorem1_and_accountants_tv(name):
    (eps, q, T, sens), sigma, rho, lam_star, corrected, deltas, numeric = TV[name]
    got = udp.SIGMA(eps=eps, delta=1e-3, q=q, T=T, sens=sens)
    assert got == pytest.approx(sigma, rel=CLOSED)
    assert T * q * sens**2 / (2 * got**2) == pytest.approx(rho, rel=CLOSED)
    assert eps * got**2 / (T * q * sens**2) - 0.5 == pytest.approx(lam_star, rel=CLOSED)
    assert udp.SIGMA_CORRECTED(eps=eps, delta=1e-3, q=q, T=T, sens=sens) == pytest.approx(
        corrected, rel=CLOSED
    )
    assert um.delta_achieved_paper(eps, 1e-3) == pytest.approx(deltas[0], rel=CLOSED)
    for acc, want in zip(um.ACCOUNTANTS, deltas[1:], strict=True):
        assert um.delta_from_sigmas(eps, q, [got] * T, sens, acc) == pytest.approx(want, rel=NUMERIC)
    for acc, want in zip(um.ACCOUNTANTS, numeric, strict=True):
        assert um.sigma_numeric(eps, 1e-3, q, T, sens, acc) == pytest.approx(want, rel=NUMERIC)


def test_correction_factor_values():
    for eps, want in ((4.0, 1.128303133), (8.0, 1.234526824), (2.0, 1.067787296)):
        assert udp.CORRECTION_RATIO(eps=eps, delta=1e-3) == pytest.approx(want, rel=CLOSED)


SWEEP = {  # (q, eps): z_paper, z_corrected, z_numeric(exact), delta_ach approx, delta_ach exact
    (1.0, 4): (13.141304, 14.827375, 14.831308, 0.00640108, 0.00640108),
    (1.0, 8): (6.570652, 8.111646, 8.123442, 0.0344748, 0.0344748),
    (1.0, 12): (4.380435, 5.813805, 5.924832, 0.206608, 0.206608),
    (1.0, 16): (3.285326, 4.634041, 4.690071, 12.5522, 12.5522),
    (1.0, 20): (2.628261, 3.907765, 3.908480, 7730.78, 7730.78),
    (0.6, 4): (10.179211, 11.485235, 8.956781, 0.00640108, 7.8922e-05),
    (0.6, 8): (5.089605, 6.283254, 4.930559, 0.0344748, 0.000564697),
    (0.6, 12): (3.393070, 4.503354, 3.631246, 0.206608, 0.00380679),
    (0.6, 16): (2.544803, 3.589513, 2.868811, 12.5522, 0.0132308),
    (0.6, 20): (2.035842, 3.026942, 2.409784, 7730.78, 0.28382),
}
RELEASE_SWEEP = {
    4: (0.00693528, 11.573294),
    8: (0.0357268, 6.338954),
    12: (0.247347, 4.651920),
    16: (22.1045, 3.659797),
    20: (30478.2, 3.059429),
}


@pytest.mark.parametrize("key", sorted(SWEEP))
def test_eps_sweep(key):
    q, eps = key
    z_paper, z_corr, z_exact, d_approx, d_exact = SWEEP[key]
    assert udp.SIGMA(eps=eps, delta=1e-3, q=q, T=200, sens=1.0) == pytest.approx(z_paper, abs=1e-6)
    assert udp.SIGMA_CORRECTED(eps=eps, delta=1e-3, q=q, T=200, sens=1.0) == pytest.approx(z_corr, abs=1e-6)
    assert um.sigma_numeric(eps, 1e-3, q, 200, 1.0, "exact") == pytest.approx(z_exact, abs=1e-6)
    z = udp.SIGMA(eps=eps, delta=1e-3, q=q, T=200, sens=1.0)
    assert um.delta_from_sigmas(eps, q, [z] * 200, 1.0, "approx") == pytest.approx(d_approx, rel=1e-5)
    assert um.delta_from_sigmas(eps, q, [z] * 200, 1.0, "exact") == pytest.approx(d_exact, rel=1e-4)
    if q == 0.6:
        d_rel, z_rel = RELEASE_SWEEP[eps]
        assert um.delta_from_sigmas(eps, q, [z] * 200, 1.0, "release") == pytest.approx(d_rel, rel=1e-5)
        assert um.sigma_numeric(eps, 1e-3, q, 200, 1.0, "release") == pytest.approx(z_rel, abs=1e-6)


@pytest.mark.parametrize(
    "lam,q,sens,exact,reverse,approx,release",
    [
        (1, 0.6, 1.0, 0.4815501226, 0.2614486698, 0.6, 0.7085130669),
        (4, 0.6, 0.5, 1.170461273, 0.7039069604, 1.5, 2.042452865),
        (8, 0.1, 0.5, 0.1284903874, 0.08157783322, 0.9, 6.698524979),
        (3, 1.0, 1.0, 6.0, 6.0, 6.0, 6.0),
    ],
)
def test_lemma1_moments(lam, q, sens, exact, reverse, approx, release):
    assert um.log_moment_exact(lam, q, 1.0, sens) == pytest.approx(exact, rel=CLOSED)
    assert um.log_moment_reverse(lam, q, 1.0, sens) == pytest.approx(reverse, rel=NUMERIC)
    assert um.log_moment_approx(lam, q, 1.0, sens) == pytest.approx(approx, rel=CLOSED)
    assert um.log_moment_release(lam, q, 1.0, sens) == pytest.approx(release, rel=CLOSED)


def test_exact_moment_against_monte_carlo():
    rng = np.random.default_rng(0)
    q, s, lam = 0.6, 0.5, 4
    x = rng.standard_normal(2_000_000)
    ratio = 1 - q + q * np.exp(x * s - s * s / 2)
    assert math.log(np.mean(ratio ** (lam + 1))) == pytest.approx(
        um.log_moment_exact(lam, q, 1.0, s), rel=5e-3
    )


def test_theorem4_vectors():
    phi = um.budget_phi(4.0, 1e-3, 1.0, 1e-4)
    assert phi == pytest.approx(115811861.8, rel=CLOSED)
    s0 = um.sigma_crd(0, 200, phi, 0.0)
    assert s0 == pytest.approx(0.001314130442, rel=CLOSED)
    s50 = um.sigma_crd(50, 150, phi, 50 / s0**2)
    assert s50 == pytest.approx(0.001072983013, rel=CLOSED)
    assert s50 == pytest.approx(s0 * math.sqrt(100 / 150), rel=CLOSED)
    assert um.eps_spent([s0] * 50, 1e-3, 1.0, 1e-4) == pytest.approx(2.0, rel=CLOSED)
    assert um.sigma_crd(50, 200, phi, 50 / (1.1 * s0) ** 2) == pytest.approx(0.001277692002, rel=CLOSED)
    assert um.sigma_crd(50, 200, phi, 50 / s0**2) == pytest.approx(s0, rel=CLOSED)  # (30)-(31)
    corr = um.budget_phi_corrected(4.0, 1e-3, 1.0, 1e-4)
    assert um.sigma_crd(0, 200, corr, 0.0) == pytest.approx(0.001482737496, rel=CLOSED)


def test_theorem4_from_past_sigmas():
    s0 = 0.001314130442439233
    assert um.sigma_after(0, 200, 4.0, 1e-3, 1.0, 1e-4, []) == pytest.approx(s0, rel=CLOSED)
    after = um.sigma_after(50, 150, 4.0, 1e-3, 1.0, 1e-4, [s0] * 50)
    assert after == pytest.approx(0.001072983013, rel=CLOSED)
    per_client = um.sigma_after(50, 150, [4.0, 8.0], 1e-3, 1.0, 1e-4, np.full((50, 2), s0))
    assert per_client.shape == (2,) and per_client[0] == pytest.approx(0.001072983013, rel=CLOSED)
    with pytest.raises(ParameterError, match="past_sigmas"):
        um.sigma_after(3, 10, 4.0, 1e-3, 1.0, 1e-4, [s0])


def test_corrected_closed_form_against_the_numeric_calibration():
    """Spec 003 D4: the continuous-order closed form slightly under-shoots the integer-order calibration."""
    for eps, q in ((4.0, 1.0), (8.0, 0.6), (2.0, 0.6), (12.0, 1.0)):
        corr = udp.SIGMA_CORRECTED(eps=eps, delta=1e-3, q=q, T=200, sens=1.0)
        num = um.sigma_numeric(eps, 1e-3, q, 200, 1.0, "approx")
        assert corr <= num <= corr * 1.03
    corr = udp.SIGMA_CORRECTED(eps=4.0, delta=1e-3, q=1.0, T=200, sens=1e-4)
    assert um.delta_from_sigmas(4.0, 1.0, [corr] * 200, 1e-4, "approx") == pytest.approx(0.00100484, rel=1e-5)


def test_theorem4_budget_exhaustion_is_an_error():
    phi = um.budget_phi(4.0, 1e-3, 1.0, 1e-4)
    with pytest.raises(PrivacyBudgetExceeded, match="eq. \\(25\\)"):
        um.sigma_crd(10, 20, phi, phi * 1.01)
    with pytest.raises(ParameterError, match="T = 10"):
        um.sigma_crd(10, 10, phi, 0.0)


B = {
    "B1": dict(N=50, K=30, eps=2.0, delta=1e-3, L=1.0, mu=0.1, eta=0.1, sens=0.0078125, div=0.5, theta0=1.0),
    "B2": dict(N=50, K=50, eps=4.0, delta=1e-3, L=2.0, mu=0.2, eta=0.25, sens=0.0025, div=0.5, theta0=2.0),
    "B3": dict(
        N=50,
        K=30,
        eps=np.array([2.0] * 20 + [4.0] * 20 + [8.0] * 10),
        delta=1e-3,
        L=1.0,
        mu=0.1,
        eta=0.1,
        sens=0.0078125,
        div=0.5,
        theta0=1.0,
    ),
}
B_COEFFS = {
    "B1": (0.981, 86.34694099, 0.0006103515625, 0.025, 0.0006324238842, 0.01700680272),
    "B2": (0.925, 21.58673525, 0.000125, 0.3125, 5.396683812e-05, 0.0),
    "B3": (0.981, 44.25280726, 0.0006103515625, 0.025, 0.0003241172406, 0.01700680272),
}
B_VALUES = {  # h(1), h(50), h(100), h(200), T*, T*_int, h(T*_int), T_c, h''(100)
    "B1": (
        0.9813351453,
        0.4132146249,
        0.2153229285,
        0.1619643959,
        172.7724358,
        173,
        0.1580420338,
        1658.586453,
        5.32678e-05,
    ),
    "B2": (
        1.850004048,
        0.04320536238,
        0.006217091668,
        0.01079370416,
        102.1828733,
        102,
        0.006206540975,
        37085.44946,
        4.9899e-06,
    ),
    "B3": (
        0.9813292875,
        0.4037067863,
        0.1890200264,
        0.101632953,
        209.061088,
        209,
        0.1013570737,
        3137.09214,
        5.31968e-05,
    ),
}


def _coeffs(name):
    b = B[name]
    return udp.bound_coeffs(
        b["N"], b["K"], b["eps"], b["delta"], b["L"], b["mu"], b["eta"], b["sens"], b["div"], b["theta0"]
    )


@pytest.mark.parametrize("name", sorted(B))
def test_theorem2_3_vectors(name):
    co = _coeffs(name)
    for key, want in zip(("A", "S", "kappa0", "kappa1", "a", "b"), B_COEFFS[name], strict=True):
        assert co[key] == pytest.approx(want, rel=CLOSED, abs=1e-15)
    h1, h50, h100, h200, t_star, t_int, h_int, t_c, d2 = B_VALUES[name]
    np.testing.assert_allclose(udp.bound([1, 50, 100, 200], co), [h1, h50, h100, h200], rtol=CLOSED)
    assert udp.optimal_T(co) == pytest.approx(t_star, rel=CLOSED)
    assert udp.optimal_T_int(co) == t_int
    assert udp.bound(t_int, co) == pytest.approx(h_int, rel=CLOSED)
    assert udp.convexity_limit(co) == pytest.approx(t_c, rel=CLOSED)
    assert udp.bound_d2(100, co) == pytest.approx(d2, rel=1e-5)
    brute = np.arange(1, 5001)
    assert int(brute[np.argmin(udp.bound(brute, co))]) == t_int
    g = lambda t: co["a"] * np.expm1(co["c"] * t) + co["a"] * co["c"] * t - co["c"] * (co["theta0"] - co["b"])  # noqa: E731
    assert brentq(g, 0.0, (co["theta0"] - co["b"]) / co["a"], xtol=1e-12) == pytest.approx(t_star, rel=1e-9)
    if name != "B3":  # the sympy theorem takes uniform budgets
        assert udp.BOUND(T=[1, 50, 100, 200], **B[name]) == pytest.approx([h1, h50, h100, h200], rel=CLOSED)
        assert udp.BOUND_D2(T=100, **B[name]) == pytest.approx(udp.bound_d2(100, co), rel=1e-12)


def test_printed_second_derivative_is_wrong_by_the_spec_value():
    co = _coeffs("B1")
    assert udp.bound_d2_printed(100, co, 50, 30) == pytest.approx(8.96e-3, rel=1e-3)
    assert udp.BOUND_D2_PRINTED(T=100, **B["B1"]) == pytest.approx(8.96e-3, rel=1e-3)
    t, step = 100.0, 1e-2
    fd = (udp.bound(t + step, co) - 2 * udp.bound(t, co) + udp.bound(t - step, co)) / step**2
    assert fd == pytest.approx(udp.bound_d2(t, co), rel=1e-4)


@pytest.mark.parametrize(
    "name,points",
    [
        (
            "B1",
            (
                (1, 98.1463, 0.37709275),
                (2, 172.7724, 0.15804203),
                (4, 247.5866, 0.0643227),
                (8, 320.9527, 0.03174909),
                (16, 393.6075, 0.02141116),
            ),
        ),
        (
            "B2",
            (
                (1, 66.3504, 0.06830854),
                (2, 84.3327, 0.02097065),
                (4, 102.1829, 0.00620654),
                (8, 119.9863, 0.00179186),
                (16, 137.7747, 0.00050797),
            ),
        ),
    ],
)
def test_T_opt_against_eps(name, points):
    for eps, t_star, h_int in points:
        b = {**B[name], "eps": float(eps)}
        co = udp.bound_coeffs(
            *(b[k] for k in ("N", "K", "eps", "delta", "L", "mu", "eta", "sens", "div", "theta0"))
        )
        assert udp.optimal_T(co) == pytest.approx(t_star, abs=1e-4)
        assert udp.bound(udp.optimal_T_int(co), co) == pytest.approx(h_int, abs=5e-9)  # printed digits


def test_noise_term_identity_d6_on_b3():
    co = _coeffs("B3")
    sig = udp.noise({**B["B3"], "eta": 0.1, "C": 5.0, "m": 128}, 137)["uplink"]
    assert co["a"] * 137 == pytest.approx(0.0444040619683, rel=CLOSED)
    assert co["a"] * 137 == pytest.approx(1.0**2 / (2 * 0.1) * np.mean(sig**2), rel=CLOSED)


def test_noise_methods_per_client():
    setting = {"N": 50, "K": 30, "eps": 8.0, "delta": 1e-3, "eta": 0.002, "C": 20.0, "sizes": [800] * 50}
    paper = udp.noise(setting, 200)["uplink"]
    assert paper.shape == (50,) and paper[0] == pytest.approx(0.0005089605318, rel=CLOSED)
    assert udp.noise(setting, 200, "corrected")["uplink"][7] == pytest.approx(0.0006283254287, rel=CLOSED)
    assert udp.noise(setting, 200, "numeric")["uplink"][3] == pytest.approx(0.0006292390869, rel=NUMERIC)
    assert udp.noise(setting, 200, "numeric_release")["uplink"][0] == pytest.approx(
        0.0006338954063, rel=NUMERIC
    )
    tight = udp.noise(setting, 200, "tight")["uplink"]
    assert np.all(tight < udp.noise(setting, 200, "numeric_release")["uplink"])
    uneven = udp.noise({**setting, "sizes": [400, 800] * 25}, 200)["uplink"]
    assert uneven[0] == pytest.approx(2 * uneven[1], rel=CLOSED)
    with pytest.raises(ParameterError, match="method"):
        udp.noise(setting, 200, "classic")
    with pytest.raises(ParameterError, match="eps"):
        udp.noise({**setting, "eps": [1.0, 2.0, 3.0]}, 200)


def test_tight_sigma_meets_eps_under_release_rdp_and_beats_the_moments_tail():
    from fedbound.accounting import rdp_to_dp

    # the RDP calibration of the release (the "tight" sigma before issue 23) meets eps exactly under RDP ...
    z_rdp = um.sigma_tight_rdp(8.0, 1e-3, 0.6, 200, 1.0)
    orders = um.tight_orders()
    rdp = 200 * np.logaddexp(np.log(0.6) + orders * (orders - 1) / (2 * z_rdp**2), np.log(0.4)) / (orders - 1)
    assert rdp_to_dp(orders, rdp, 1e-3) == pytest.approx(8.0, rel=1e-9)
    assert z_rdp <= um.sigma_numeric(8.0, 1e-3, 0.6, 200, 1.0, "release")
    # ... and the exact calibration (now "tight") needs less: RDP is an upper bound on the privacy loss
    z = um.sigma_tight(8.0, 1e-3, 0.6, 200, 1.0)
    assert z < z_rdp / 1.05
    # at q = 1 the release is the plain Gaussian: the exact calibration is the analytic Gaussian's
    from fedbound.accounting import calibrate_noise

    assert um.sigma_tight(4.0, 1e-3, 1.0, 200, 1.0) == pytest.approx(
        calibrate_noise(4.0, 1e-3, 1.0, 200, method="analytic"), rel=1e-8)


def test_validity_x():
    z = udp.SIGMA(eps=4.0, delta=1e-3, q=1.0, T=200, sens=1.0)
    assert um.validity_x(4.0, 1.0, [z] * 200, 1.0) == pytest.approx(2.953877639 / (2 * z * z), rel=CLOSED)


def test_every_claim_through_the_shared_checker():
    reports = check_all(udp.CLAIMS, n=10)
    bad = [(r.id, r.detail) for r in reports if r.status == "CONTRADICTED"]
    assert not bad
    ids = {r.id for r in reports}
    assert {"P1a", "P2", "P4", "P6", "P13", "P14b", "P18", "P20a"} <= ids
    assert {r.id for r in reports if r.status == "fails in region"} >= {"P4", "P6", "P14b", "P14d"}


@settings(max_examples=40, deadline=None)
@given(lam=st.integers(1, 40), q=st.floats(0.01, 1.0), s=st.floats(0.01, 1.2))
def test_moment_orderings_property(lam, q, s):
    exact = um.log_moment_exact(lam, q, 1.0, s)
    release = um.log_moment_release(lam, q, 1.0, s)
    approx = um.log_moment_approx(lam, q, 1.0, s)
    assert 0.0 <= exact <= release * (1 + 1e-12) + 1e-300
    assert approx <= release * (1 + 1e-12) + 1e-300
    for claim in udp.CLAIMS:
        if claim.id in ("P4", "P5") and lam * s * s / 2 <= 0.75:
            assert check_point(claim, {"lam": lam, "q": q, "s": s}).holds


@settings(max_examples=40, deadline=None)
@given(
    eps=st.floats(0.1, 30.0),
    delta=st.floats(1e-9, 0.5),
    q=st.floats(0.01, 1.0),
    T=st.integers(1, 2000),
    acc=st.sampled_from(["approx", "release"]),
)
def test_sigma_numeric_is_the_smallest_sigma_meeting_delta(eps, delta, q, T, acc):
    z = um.sigma_numeric(eps, delta, q, T, 1.0, acc)
    lam_max = max(256, math.ceil(4 * math.log(1 / delta) / eps))
    assert np.isfinite(z) and z > 0
    assert um.log_delta_from_sigmas(eps, q, [z] * T, 1.0, acc, lam_max)[0] <= math.log(delta) + 1e-9
    assert um.log_delta_from_sigmas(eps, q, [z * (1 - 1e-6)] * T, 1.0, acc, lam_max)[0] > math.log(delta)


@pytest.mark.parametrize("bad", [dict(eps=0.0), dict(delta=1.0), dict(q=1.5), dict(T=-1.0), dict(sens=-1.0)])
def test_bad_input_names_the_parameter(bad):
    args = {"eps": 1.0, "delta": 1e-3, "q": 0.5, "T": 10.0, "sens": 1e-3, **bad}
    with pytest.raises(ParameterError, match=next(iter(bad))):
        udp.SIGMA(**args)


def test_assumptions_checked():
    with pytest.raises(ParameterError, match="mu"):
        udp.check_assumptions(1.0, 2.0, 0.5)
    with pytest.raises(ParameterError, match="eta"):
        udp.check_assumptions(1.0, 0.5, 2.0)
    with pytest.raises(ParameterError, match="A = 0"):
        udp.bound_coeffs(10, 5, 1.0, 1e-3, 1.0, 1.0, 1.0, 1e-3, 0.1, 1.0)


@pytest.mark.parametrize(
    "q,size,lam,exact,bound",
    [
        (0.9, 800, 1, 5.0628e-4, 5.625e-4),
        (0.9, 800, 10, 0.0278595, 0.0309375),
        (0.9, 800, 50, 0.647278, 0.717187),
        (0.9, 800, 100, 2.57081, 2.84062),
        (0.1, 800, 1, 6.25193e-6, 6.25e-5),
        (0.1, 800, 100, 0.0317494, 0.315625),
        (0.9, 400, 100, 10.4475, 11.3625),
    ],
)
def test_fig2_reproduction(q, size, lam, exact, bound):
    """Spec 003 section 6, Fig. 2 with sigma = 0.01 and the assumed eta C = 0.1: ln of the exact moment (14)
    against the paper's bound (15); the bound is 10x too large at q = 0.1."""
    sens = 2 * 0.1 / size
    assert um.log_moment_exact(lam, q, 0.01, sens) == pytest.approx(exact, rel=1e-5)
    assert um.log_moment_approx(lam, q, 0.01, sens) == pytest.approx(bound, rel=1e-5)


@pytest.mark.parametrize(
    "q,T,eps,approx,release,exact",
    [(0.01, 10**4, 1.0, 49.02, 50.36, 4.974), (0.1, 10**3, 2.0, 24.99, 25.66, 7.997)],
)
def test_small_q_calibrations(q, T, eps, approx, release, exact):
    """Spec 003 E10 table (delta = 1e-5): eq. (16)'s numeric z, the release moment's, the hidden pair's.
    Printed to 2 (3) decimals; the release z is 50.35499, which the spec prints as 50.36."""
    assert um.sigma_numeric(eps, 1e-5, q, T, 1.0, "approx") == pytest.approx(approx, abs=0.0051)
    assert um.sigma_numeric(eps, 1e-5, q, T, 1.0, "release") == pytest.approx(release, abs=0.0051)
    assert um.sigma_numeric(eps, 1e-5, q, T, 1.0, "exact") == pytest.approx(exact, abs=0.0005)
