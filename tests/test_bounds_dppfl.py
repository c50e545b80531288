"""Seed 000 Theorem 1 (fedbound.bounds.dppfl): spec 000 Sec. 8.1 regression values and dp-accounting."""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest

from fedbound.bounds.dppfl import rdp_pfl_epsilon, rdp_pfl_noise_multiplier, rdp_pfl_rdp

SETTINGS = {  # (eps, delta, T, tau0, q): spec 000 Sec. 8.1 settings A, B, C
    "A": (2.0, 1e-3, 200, 1, 0.1),
    "B": (6.0, 1e-3, 200, 2, 0.1),
    "C": (4.0, 1e-3, 50, 3, 1.0),
}


@pytest.mark.parametrize("name,sigma,alpha", [("A", 3.34841371, 6.0), ("B", 1.9969362, 3.1),
                                              ("C", 15.6581817, 4.0)])
def test_sigma_star_reproduces_spec_vectors(name, sigma, alpha):
    """Spec 000 Sec. 8.1: sigma* (rtol 1e-6) and eps_DP(sigma*) = eps at alpha*."""
    eps, delta, T, tau0, q = SETTINGS[name]
    found = rdp_pfl_noise_multiplier(eps, delta, T, tau0, q, q)
    assert found == pytest.approx(sigma, rel=1e-6)
    spent, order = rdp_pfl_epsilon(T, tau0, q, found, q, found, delta)
    assert spent <= eps and spent == pytest.approx(eps, rel=1e-9)
    assert order == pytest.approx(alpha)
    assert rdp_pfl_epsilon(T, tau0, q, found * (1 - 1e-8), q, found * (1 - 1e-8), delta)[0] > eps


@pytest.mark.parametrize("name,eps,alpha", [("A", 12.2478752, 2.1), ("B", 18.9281859, 1.8),
                                            ("C", 211.835409, 1.2)])
def test_epsilon_at_sigma_one(name, eps, alpha):
    _, delta, T, tau0, q = SETTINGS[name]
    assert rdp_pfl_epsilon(T, tau0, q, 1.0, q, 1.0, delta) == pytest.approx((eps, alpha), rel=1e-6)


def test_fixed_order_rdp_table():
    """Spec 000 Sec. 8.1, fixed-alpha table at sigma = 1: eps' totals of A and C, each stage half of it."""
    orders = np.array([2.0, 8.0, 10.5, 32.0])
    total_a, inner_a, outer_a = rdp_pfl_rdp(orders, 200, 1, 0.1, 1.0, 0.1, 1.0)
    np.testing.assert_allclose(total_a, [6.81474529, 551.344565, 1082.3144, 5449.25519], rtol=1e-6)
    np.testing.assert_allclose(inner_a, total_a / 2, rtol=1e-12)
    np.testing.assert_allclose(outer_a, total_a / 2, rtol=1e-12)
    total_c, _, _ = rdp_pfl_rdp(orders, 50, 3, 1.0, 1.0, 1.0, 1.0)
    np.testing.assert_allclose(total_c, [300.0, 1200.0, 1575.0, 4800.0], rtol=1e-12)


@pytest.mark.parametrize("args,eps,alpha,inner,outer,share", [
    ((0.05, 1.5, 0.1, 1.5, 1e-3), 3.09628044, 4.3, 0.323933674, 1.38578470, 0.189466),   # D1
    ((0.1, 1.0, 0.1, 2.0, 1e-3), 6.04643467, 2.8, 2.81672256, 0.405913833, 0.874043),    # D2
    ((0.01, 1.0, 0.01, 1.0, 1e-5), 1.34011117, 8.6, None, None, 0.5),                     # D3
])
def test_budget_allocation_vectors(args, eps, alpha, inner, outer, share):
    """Spec 000 Sec. 8.1, extra privacy vectors (T = 100, tau0 = 1): unequal rates and noise."""
    q_in, s_in, q_out, s_out, delta = args
    assert rdp_pfl_epsilon(100, 1, q_in, s_in, q_out, s_out, delta) == pytest.approx((eps, alpha), rel=1e-6)
    _, e_in, e_out = rdp_pfl_rdp(np.array([alpha]), 100, 1, q_in, s_in, q_out, s_out)
    if inner is not None:
        np.testing.assert_allclose([e_in[0], e_out[0]], [inner, outer], rtol=1e-6)
    assert e_in[0] / (e_in[0] + e_out[0]) == pytest.approx(share, abs=1e-6)


def test_q_one_sigma_scales_with_sqrt_T():
    """Spec 000 Sec. 8.1, analytic cross-checks for q = 1 (setting C): sigma*(200)/sigma*(50) = 2 exactly,
    sigma*(T = 1) = 2.21440129."""
    s50, s200 = (rdp_pfl_noise_multiplier(4.0, 1e-3, t, 3, 1.0, 1.0) for t in (50, 200))
    assert s200 / s50 == pytest.approx(2.0, rel=1e-8)
    assert rdp_pfl_noise_multiplier(4.0, 1e-3, 1, 3, 1.0, 1.0) == pytest.approx(2.21440129, rel=1e-6)


@pytest.mark.parametrize("T,tau0,q_in,q_out,sigma,delta,expected", [
    (200, 1, 0.1, 0.1, 1.0, 1e-3, 12.3362062),        # spec: A at sigma = 1, integer orders (alpha 2)
    (200, 2, 0.1, 0.1, 1.9969362, 1e-3, 6.01052600),  # spec: B at sigma*, integer orders (alpha 3)
    (100, 1, 0.05, 0.1, 1.5, 1e-3, None),             # D1's unequal rates
    (7, 3, 0.3, 0.02, 0.9, 1e-5, None),
])
def test_composition_matches_dp_accounting_at_integer_orders(T, tau0, q_in, q_out, sigma, delta, expected):
    """Eq. (12)'s composition of both stages over T tau0 epochs against dp-accounting's RdpAccountant
    (exact at integer orders, spec 000 Sec. 3.4 backend caveat)."""
    orders = np.arange(2, 64, dtype=float)
    acc = dpa.rdp.RdpAccountant([float(a) for a in orders])
    acc.compose(dpa.PoissonSampledDpEvent(q_in, dpa.GaussianDpEvent(sigma)), T * tau0)
    acc.compose(dpa.PoissonSampledDpEvent(q_out, dpa.GaussianDpEvent(sigma)), T * tau0)
    ours, _ = rdp_pfl_epsilon(T, tau0, q_in, sigma, q_out, sigma, delta, orders=orders)
    assert ours == pytest.approx(acc.get_epsilon(delta), rel=1e-9)
    if expected is not None:
        assert ours == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------------------------------------------
# Lemmas 1-6, Theorems 2-3: spec 000 Sec. 8.2 (rtol 1e-6)
# ---------------------------------------------------------------------------------------------------------
from fedbound.bounds import dppfl as dp  # noqa: E402
from fedbound.errors import DomainError, ParameterError  # noqa: E402

CONSTS = {"L": 1.0, "rho": 1.0, "B": 1.0, "lam": 1.0, "l": 0.5, "eps_het": 0.1, "gamma_het": 0.1,
          "sigma_G": 1.0, "sigma_H": 1.0, "Delta0": 10.0}
SIGMA_STAR = {"A": 3.34841371, "B": 1.9969362, "C": 15.6581817}
POINTS = {
    "A": {**CONSTS, "T": 200, "tau0": 1, "eta": 0.01, "beta": 0.01, "C": 2.4, "S": 159010, "m": 300},
    "B": {**CONSTS, "T": 200, "tau0": 2, "eta": 0.05, "beta": 0.05, "C": 3.2, "S": 930826, "m": 300},
    "C": {**CONSTS, "T": 50, "tau0": 3, "eta": 0.01, "beta": 0.01, "C": 1.0, "S": 11, "m": 100},
}
CLIENTS_C = [100, 200, 700]
TABLE_82 = {  # quantity: (A, B, C)
    "meta_smoothness": (1.0301, 1.1525, 1.0301),
    "meta_strong_convexity": (0.4751, 0.3775, 0.4751),
    "contraction": (0.99054694, 0.963337672, 0.99054694),
    "noise_norm": (12818.0476, 24660.8644, 101.533838),
    "clipping_bias": (129.482481, 1294.80038, 1.05569176),
    "local_drift": (0.0, 0.0003169375, 3.16292928e-05),
    "local_step_weight": (1.0, 3.057625, 6.04131011),
}
TABLE_82_VARIANTS = {  # (theorem, variant): (A, B, C) -- C with its three clients
    ("noise_norm", "theta_exact"): (3204.5119, 6165.21611, 50.7669188),
    ("clipping_bias", "theta_exact"): (32.3857702, 323.778846, 0.54294588),
    ("clipping_bias", "theta_exact+tight"): (32.3655702, 323.673846, 0.52274588),
    ("per_round_error", "paper"): (1.30778478, 415.698707, 0.193464341),
    ("per_round_error", "outer_noise"): (130.770066, 8333.08464, 18.7794055),
    ("convex_bound", "paper"): (119.141135, 5775.15299, 7.63579306),
    ("nonconvex_bound", "paper"): (136.481426, 8561.65688, 39.5501371),
    ("convex_bound", "theta_exact"): (30.9220476, 1444.16278, 5.09846682),
    ("nonconvex_bound", "theta_exact"): (37.9060354, 2141.74165, 30.1156444),
}


def _point(name):
    s = SIGMA_STAR[name]
    return {**POINTS[name], "sigma": s, "sigma_out": s}


@pytest.mark.parametrize("quantity", list(TABLE_82))
@pytest.mark.parametrize("i,name", list(enumerate("ABC")))
def test_spec_82_paper_quantities(quantity, i, name):
    value = dp.THEOREMS[quantity](_point(name))
    assert value == pytest.approx(TABLE_82[quantity][i], rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("key", list(TABLE_82_VARIANTS))
@pytest.mark.parametrize("i,name", list(enumerate("ABC")))
def test_spec_82_variants_and_bounds(key, i, name):
    theorem, variant = key
    theta = "exact" if "theta_exact" in variant else "paper"
    fn = {"per_round_error": dp.per_round_error, "convex_bound": dp.convex_bound,
          "nonconvex_bound": dp.nonconvex_bound}.get(theorem)
    if fn is None:
        value = dp.THEOREMS[theorem](_point(name), variant=variant)
    else:
        value = fn(_point(name), n_support=CLIENTS_C if name == "C" else None, theta=theta,
                   outer_noise="outer_noise" in variant)
    assert value == pytest.approx(TABLE_82_VARIANTS[key][i], rel=1e-6)


def test_data_bias_vectors():
    """Spec 000 Sec. 8.2: D_i at |D^S| = 300 (A, B) and setting C's three clients and D-bar."""
    assert dp.DATA_BIAS(_point("A"), m=300) == pytest.approx(0.00116080737, rel=1e-6)
    assert dp.DATA_BIAS(_point("B"), m=300) == pytest.approx(0.00592617359, rel=1e-6)
    np.testing.assert_allclose(dp.DATA_BIAS(_point("C"), m=np.array(CLIENTS_C)),
                               [0.002011, 0.00142178463, 0.000759851448], rtol=1e-6)
    np.testing.assert_allclose(dp.aggregation_weights(CLIENTS_C), [0.1, 0.2, 0.7], rtol=1e-12)
    assert dp.META_DISSIMILARITY(_point("A")) == pytest.approx(0.102, rel=1e-9)
    assert dp.META_DISSIMILARITY(_point("B")) == pytest.approx(0.11, rel=1e-9)


THETA_SMALL = {1: (1.595769122, 0.797884561), 2: (5.013256549, 1.253314137), 3: (3.191538243, 1.595769122),
               4: (7.519884824, 1.879971206), 5: (4.255384324, 2.127692162), 6: (9.399856030, 2.349964007),
               11: (6.484395161, 3.242197580), 159010: (1595.039812, 398.7599529),
               930826: (3859.171933, 964.7929832)}


@pytest.mark.parametrize("S", list(THETA_SMALL))
def test_theta_tables(S):
    paper, exact = THETA_SMALL[S]
    assert dp.noise_norm_paper(S, 1.0, 1.0) == pytest.approx(paper, rel=1e-9)
    assert dp.noise_norm_exact(S, 1.0, 1.0) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("S", range(1, 61))
def test_theta_paper_equals_printed_product(S):
    """Independent oracle for (27): the explicit double-factorial product P(S), not log-gamma."""
    P = 1.0
    for k in range(1, (S - 1) // 2 + 1):
        P *= (S - 2 * k + 1) / (S - 2 * k)
    printed = 2 * np.sqrt(2 / np.pi) * P if S % 2 else 2 * np.sqrt(2 * np.pi) * P
    assert dp.noise_norm_paper(S, 1.7, 0.3) == pytest.approx(printed * 1.7 * 0.3, rel=1e-11)


def test_theta_exact_monte_carlo():
    """E||N(0, C^2 sigma^2 I_S)|| by Monte Carlo (200k draws) for S = 7, sigma = 1.3, C = 0.8."""
    rng = np.random.default_rng(0)
    draws = np.linalg.norm(rng.normal(0, 1.3 * 0.8, size=(200_000, 7)), axis=1)
    assert dp.noise_norm_exact(7, 1.3, 0.8) == pytest.approx(draws.mean(), rel=3e-3)


def test_local_step_weight_matches_its_sum():
    for tau0 in (1, 2, 3, 7):
        for beta in (1e-4, 0.01, 0.3):
            x = 1 + beta * 1.0301
            direct = sum((tau0 - j) * x**j for j in range(tau0))
            got = dp.LOCAL_STEP_WEIGHT({**_point("A"), "tau0": tau0, "beta": beta})
            assert got == pytest.approx(direct, rel=1e-9)


def test_unstated_conditions_are_reported_not_nan():
    """E26: eta L < 1, l' > 0 and beta < 2/L' are checked; flags instead of NaN, DomainError on a plain
    call."""
    bad_beta = {**_point("A"), "beta": 2.5}
    ev = dp.CONVEX_BOUND.evaluate(bad_beta)
    assert not ev.admissible and any("beta" in w for w in ev.warnings)
    with pytest.raises(DomainError, match="beta"):
        dp.NONCONVEX_BOUND(bad_beta)
    with pytest.raises(DomainError, match="l'"):
        dp.CONVEX_BOUND({**_point("A"), "l": 0.005})
    with pytest.raises(DomainError, match="eta"):
        dp.CONVEX_BOUND({**_point("A"), "eta": 1.5})
    assert dp.NONCONVEX_BOUND.evaluate({**_point("A"), "eta": 1.5, "beta": 1e-4}).admissible
    with pytest.raises(ParameterError, match="S"):
        dp.NOISE_NORM(S=0, sigma=1.0, C=1.0)


def test_noise_function_methods():
    setting = {"eps": 2.0, "delta": 1e-3, "tau0": 1, "q_in": 0.1, "q_out": 0.1, "C": 2.4}
    paper = dp.noise(setting, 200)
    assert paper["inner"] == pytest.approx(2.4 * 3.34841371, rel=1e-6) and paper["outer"] == paper["inner"]
    tight = dp.noise(setting, 200, "tight")
    assert tight["inner"] <= paper["inner"] * (1 + 1e-9)
    split = dp.noise({**setting, "sigma_ratio": 2.0}, 200, "split")
    assert split["outer"] == pytest.approx(2 * split["inner"], rel=1e-12)
    assert split["inner"] < paper["inner"] < split["outer"]
    with pytest.raises(ParameterError, match="method"):
        dp.noise(setting, 200, "classic")
    q1 = {**setting, "q_in": 1.0, "q_out": 1.0}
    assert dp.noise(q1, 50, "tight")["inner"] < dp.noise(q1, 50)["inner"]


def test_theorem1_calibration_explains_the_calibrate_difference():
    """Setting A: Theorem 1 on Opacus' orders gives 3.34841; a 2 T tau0-step calibration on fedbound's default
    orders gives 3.3581 (no order near alpha* = 6 there); the union grid is never worse."""
    out = dp.theorem1_calibration(2.0, 1e-3, 200, 1, 0.1, 0.1)
    assert out["sigma"] == pytest.approx(3.34841371, rel=1e-6)
    assert out["sigma_default_orders"] == pytest.approx(3.3581, rel=1e-4)
    assert out["steps_equivalent"] == 400 and out["inner_share"] == pytest.approx(0.5)
    assert out["sigma_tight"] <= out["sigma"] * (1 + 1e-9)
    from fedbound.accounting import DEFAULT_ORDERS, calibrate_noise
    assert float(calibrate_noise(2.0, 1e-3, 0.1, 400, method="rdp", orders=DEFAULT_ORDERS)) == pytest.approx(
        out["sigma_default_orders"], rel=1e-4)
    # calibrate_noise's own default (a superset of Opacus' orders) is never looser than Opacus' grid
    assert float(calibrate_noise(2.0, 1e-3, 0.1, 400, method="rdp")) <= 3.34841371 * (1 + 1e-6)


@pytest.mark.parametrize("q,sigma,alpha,expected", [
    (0.1, 1.0, 8.0, 9.64852988), (0.1, 1.0, 10.5, 25.7049671),
    (0.05, 0.8, 3.3, 0.0583308095), (0.2, 2.0, 32.0, 72.5534980),
    (0.1, 0.7, 1.5, 0.0184746366), (1.0, 1.0, 8.0, 28.0)])
def test_log_integral_vectors(q, sigma, alpha, expected):
    """Spec 000 Sec. 8.1 quadrature checks of (13), and P7 (E1): not the q^2 value 0.006255507."""
    assert dp.sgm_log_integral(q, sigma, alpha) == pytest.approx(expected, rel=1e-8)


def test_log_integral_against_quadrature():
    from scipy.integrate import quad

    for q, s, a in [(0.1, 1.0, 2.5), (0.3, 1.7, 4.2), (0.02, 0.9, 1.3)]:
        def integrand(z, q=q, s=s, a=a):
            return np.exp(-z * z / (2 * s * s)) / (s * np.sqrt(2 * np.pi)) * (
                1 - q + q * np.exp((2 * z - 1) / (2 * s * s))) ** a
        val, _ = quad(integrand, -50 * s, 50 * s, limit=400)
        assert dp.sgm_log_integral(q, s, a) == pytest.approx(np.log(val), rel=1e-8, abs=1e-12)


def test_classic_conversion_is_larger():
    """Spec 000 Sec. 8.1 fixed-alpha table: A at alpha = 2, classic conversion 13.7225006 vs (34)
    12.3362062."""
    orders = np.array([2.0])
    improved = dp.rdp_pfl_epsilon(200, 1, 0.1, 1.0, 0.1, 1.0, 1e-3, orders)[0]
    assert improved == pytest.approx(12.3362062, rel=1e-6)
    assert dp.rdp_pfl_epsilon(200, 1, 0.1, 1.0, 0.1, 1.0, 1e-3, orders, conversion="classic")[0] == \
        pytest.approx(13.7225006, rel=1e-6)


def test_theorem1_against_opacus():
    """eq. (12) with one q and sigma equals Opacus' RDP accountant for 2 T tau0 DP-SGD steps (signed series,
    fractional orders included; spec 000 P2)."""
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    for T, tau0, q, s in [(200, 2, 0.1, 1.9969362), (100, 1, 0.01, 1.0), (30, 3, 0.25, 2.2)]:
        rdp = compute_rdp(q=q, noise_multiplier=s, steps=2 * T * tau0, orders=list(dp.OPACUS_ORDERS))
        eps, _ = get_privacy_spent(orders=list(dp.OPACUS_ORDERS), rdp=rdp, delta=1e-3)
        assert dp.rdp_pfl_epsilon(T, tau0, q, s, q, s, 1e-3)[0] == pytest.approx(eps, rel=1e-8)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(S=st.integers(1, 10**7), sigma=st.floats(0.01, 50), C=st.floats(0.01, 50))
def test_theta_parity_ratio_property(S, sigma, C):
    """E14 for any S: the printed Theta is exactly 2x (odd S) or 4x (even S) E||n||, and linear in sigma C."""
    ratio = dp.noise_norm_paper(S, sigma, C) / dp.noise_norm_exact(S, sigma, C)
    assert ratio == pytest.approx(2.0 if S % 2 else 4.0, rel=1e-12)
    assert dp.noise_norm_exact(S, sigma, C) == pytest.approx(sigma * C * dp.noise_norm_exact(S, 1.0, 1.0),
                                                             rel=1e-12)


@settings(max_examples=6, deadline=None)
@given(Ts=st.lists(st.integers(1, 300), min_size=1, max_size=4), q=st.floats(0.01, 0.6),
       eps=st.floats(0.5, 10), ratio=st.sampled_from([1.0, 0.5, 3.0]))
def test_vectorised_sigma_star_is_the_smallest_feasible_sigma(Ts, q, eps, ratio):
    """sigma*(T) for an array of T: each entry meets eps (eq. (12)) and 1 - 1e-8 of it does not."""
    sig = dp.noise_multiplier_curve(eps, 1e-4, np.array(Ts), 2, q, q / 2, ratio, rtol=1e-10)
    assert sig.shape == (len(Ts),)
    for T, s in zip(Ts, sig, strict=True):
        assert dp.rdp_pfl_epsilon(T, 2, q, s, q / 2, ratio * s, 1e-4)[0] <= eps
        low = s * (1 - 1e-8)
        assert dp.rdp_pfl_epsilon(T, 2, q, low, q / 2, ratio * low, 1e-4)[0] > eps
