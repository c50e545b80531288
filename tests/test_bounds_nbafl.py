"""NbAFL formulas (seed 002) against spec 002's test vectors TV1-TV3 (section 8), both readings.

The expected numbers are copied from spec 002 section 8 (an independent mpmath implementation); they are
regression values, never produced by the code under test.
"""

import math
import warnings

import numpy as np
import pytest

from fedbound.bounds import nbafl as nb
from fedbound.errors import ClassicGaussianRangeWarning, DomainError, ParameterError, VacuousBoundWarning

CONST = {"Theta": 2.0, "l": 0.1, "beta": 1.0, "rho": 1.0, "B": 1.0, "mu": 4.0}
TV1 = {"N": 50, "T": 25, "eps": 60.0, "delta": 0.01, "C": 20.0, "m": 100, "L": 1, **CONST}
TV2 = {**TV1, "eps": 6.0, "m": 512}
TV3 = {**TV1, "eps": 6.0, "K": 20}
RTOL = 1e-9

# quantity: (TV1, TV2, TV3)
TABLE = {
    "gaussian_c": (3.10751146009224,) * 3,
    "sigma_uplink": (0.02071674307, 0.0404623888, 0.2071674307),
    "sigma_downlink": (0.009935400946, 0.01940507997, 0.09935400946),
    "sigma_aggregate": (0.01035837153, 0.0202311944, 0.1035837153),
    "kappa1": (1.122064382, 0.2191531996, 1.122064382),
    "kappa0": (0.1236048317, 0.004715150134, 0.1236048317),
    "bound": (1.172207265, 1.449420803, 4.641234497),
    "bound_dT": (-0.01050571052, 0.009170505803, 0.2657118282),
    "bound_d2T": (0.001312509341, 0.001838265591, 0.01186282072),
    "bound_d2T_eq15": (0.001312509341, 0.001838265591, 0.01186282072),
    "T_Theta": (91.55576395, 46.87655114, 9.155576395),
}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClassicGaussianRangeWarning)
        warnings.simplefilter("ignore", VacuousBoundWarning)
        yield


@pytest.mark.parametrize("name", sorted(TABLE))
@pytest.mark.parametrize("i", [0, 1, 2], ids=["TV1", "TV2", "TV3"])
def test_table_values(name, i):
    tv = (TV1, TV2, TV3)[i]
    assert nb.THEOREMS[name](tv) == pytest.approx(TABLE[name][i], rel=RTOL)


@pytest.mark.parametrize("i", [0, 1, 2])
def test_sensitivities_and_printed_eq13(i):
    tv = (TV1, TV2, TV3)[i]
    assert nb.uplink_sensitivity(tv["C"], tv["m"]) == pytest.approx((0.4, 0.078125, 0.4)[i], rel=RTOL)
    assert nb.global_downlink_sensitivity(tv["C"], tv["m"], np.full(50, 1 / 50)) == pytest.approx(
        (0.008, 0.0015625, 0.008)[i], rel=RTOL)
    args = [tv[k] for k in "eps delta C m N T L".split()]
    assert nb.sigma_aggregate_eq13_printed(*args) == pytest.approx(
        (0.001464894951, 0.002861122951, 0.01464894951)[i], rel=RTOL)
    assert nb.sigma_aggregate(*args, variant="eq13_printed") == nb.sigma_aggregate_eq13_printed(*args)


def test_plain_functions_match_the_contract_signatures():
    t = TV1
    assert nb.sigma_uplink(t["eps"], t["delta"], t["C"], t["m"], t["L"]) == pytest.approx(0.02071674307,
        rel=RTOL)
    assert nb.sigma_downlink(60, 0.01, 20, 100, 50, 25, 1) == pytest.approx(0.009935400946, rel=RTOL)
    assert nb.sigma_downlink_k(6, 0.01, 20, 100, 50, 20, 25, 1) == pytest.approx(0.06708478318, rel=RTOL)
    assert nb.sigma_aggregate_k(6, 0.01, 20, 100, 50, 20, 25, 1) == pytest.approx(0.081524753, rel=RTOL)
    k1, k0, P = nb.kappas(0.01, 50, 20, 100, 0.1, 1, 1, 1, 4)
    assert (k1, k0, P) == pytest.approx((1.122064382, 0.1236048317, 0.96875), rel=RTOL)
    assert nb.lambdas(4, 1, 1) == pytest.approx((0.5, 0.5, -0.15625), rel=RTOL)
    assert nb.bound(25, 60, 0.01, 50, 20, 100, 2, 0.1, 1, 1, 1, 4) == pytest.approx(1.172207265, rel=RTOL)


def test_plain_functions_broadcast_over_arrays():
    eps = np.array([[50.0], [60.0]])
    T = np.array([5.0, 25.0, 100.0])
    out = nb.sigma_downlink(eps, 0.01, 20, 100, 50, T, 1)
    assert out.shape == (2, 3)
    assert out[1, 1] == pytest.approx(0.009935400946, rel=RTOL)
    assert out[0, 0] == 0.0


def test_theorem2_variants():
    assert nb.BOUND(TV1, variant="dimensional_lambda1") == pytest.approx(1.556401564, rel=RTOL)
    assert nb.BOUND(TV2, variant="dimensional_lambda1") == pytest.approx(2.199800292, rel=RTOL)
    assert nb.BOUND(TV1, variant="thm1_noise") == pytest.approx(0.9777064226, rel=RTOL)
    assert nb.BOUND(TV2, variant="thm1_noise") == pytest.approx(1.049402171, rel=RTOL)
    assert nb.BOUND({**TV1, "T": 5}, variant="regime_aware") == pytest.approx(1.726092684, rel=RTOL)
    assert nb.BOUND({**TV1, "T": 5}) == pytest.approx(1.720281538, rel=RTOL)
    assert nb.lambdas(4, 1, 1, lambda1_variant="dimensional")[1] == pytest.approx(1.25)


def test_theorem2_sweeps():
    T = np.array([1, 5, 10, 20, 25, 34, 35, 50, 100], dtype=float)
    expected = [1.938085481, 1.720281538, 1.507757676, 1.24216324, 1.172207265, 1.125557213, 1.125628442,
                1.221068693, 2.204531775]
    np.testing.assert_allclose(nb.BOUND({**TV1, "T": T}), expected, rtol=RTOL)
    np.testing.assert_allclose(nb.BOUND({**TV1, "eps": np.array([50.0, 60, 80, 100])}),
                               [1.228605889, 1.172207265, 1.103031555, 1.0622315], rtol=RTOL)
    np.testing.assert_allclose(nb.BOUND({**TV1, "N": np.array([50, 60, 80, 100])}),
                               [1.172207265, 1.147931574, 1.114157342, 1.091310574], rtol=RTOL)
    np.testing.assert_allclose(nb.BOUND({**TV1, "C": np.array([10.0, 15, 20, 25])}),
                               [1.035325367, 1.103031555, 1.172207265, 1.242852498], rtol=RTOL)
    # F44: h depends on (C, eps) only through C/eps
    assert nb.BOUND({**TV1, "C": 15.0}) == pytest.approx(nb.BOUND({**TV1, "eps": 80.0}), rel=1e-12)


def test_sigma_vs_T_table():
    T = np.array([5, 7, 8, 10, 25, 50, 100], dtype=float)
    args = dict(eps=60.0, delta=0.01, C=20.0, m=100, N=50, L=1, T=T)
    np.testing.assert_allclose(nb.SIGMA_DOWNLINK(args), [0, 0, 0.001550299095, 0.002929789901, 0.009935400946,
                                                         0.02050852931, 0.04132977261], rtol=RTOL, atol=0)
    np.testing.assert_allclose(nb.SIGMA_AGGREGATE(args), [0.002929789901, 0.002929789901, 0.003314678891,
                                                          0.004143348613, 0.01035837153, 0.02071674307,
                                                          0.04143348613], rtol=RTOL)


def test_nonconvex_example_E14():
    tv = {**TV1, "beta": 10.0}
    assert nb.BOUND_D2T({**tv, "T": 100.0}) == pytest.approx(-1.377524314e-4, rel=1e-8)
    roots = [78.39978244, 179.1593649]
    d2 = nb.BOUND_D2T({**tv, "T": np.array([roots[0] - 1e-4, roots[0] + 1e-4, roots[1] - 1e-4,
        roots[1] + 1e-4])})
    assert d2[0] > 0 > d2[1] and d2[2] < 0 < d2[3]


K_TABLE = {
    "ksched_u": 0.7623479608, "ksched_b": 3.176449837, "ksched_gamma": 0.3501724806,
    "sigma_downlink_k": 0.06708478318, "sigma_aggregate_k": 0.081524753, "alpha0": 1.8,
    "alpha1": 1.54472136, "alpha2": -0.06927245084, "contraction_Q": 0.9861455098,
    "s_K": 0.0407623765,
    "k_bound": 2.542425237,
}


@pytest.mark.parametrize("name", sorted(K_TABLE))
def test_ksched_tv3(name):
    assert nb.THEOREMS[name](TV3) == pytest.approx(K_TABLE[name], rel=RTOL)


def test_ksched_thresholds_and_variants():
    assert TV3["eps"] / nb.KSCHED_GAMMA(TV3) == pytest.approx(17.13441328, rel=RTOL)
    q = 20 / 50
    assert nb.sampling_probability(50, 20) == q
    assert nb.ksched_domain(6.0, np.array([11.7, 11.8]), 50, 20).tolist() == [False, True]
    assert nb.ksched_gaussian_valid(6.0, np.array([20.5, 20.6]), 50, 20).tolist() == [False, True]
    assert nb.KSCHED_B(TV3, variant="two_sided") == pytest.approx(2.156982637, rel=RTOL)
    assert nb.K_BOUND(TV3, variant="two_sided") == pytest.approx(3.121376913, rel=RTOL)
    assert nb.K_BOUND(TV3, variant="regime_aware") == pytest.approx(2.542425237, rel=RTOL)
    assert nb.K_BOUND({**TV3, "K": 50}) == pytest.approx(2.634997417, rel=RTOL)


def test_k_sweeps():
    K = np.array([11, 12, 13, 15, 20, 30, 40, 50])
    expected = [2.116850657, 2.2835302, 2.364263332, 2.45278289, 2.542425237, 2.595548649, 2.617702656,
                2.634997417]
    np.testing.assert_allclose(nb.K_BOUND({**TV3, "K": K}), expected, rtol=RTOL)
    K = np.array([7, 8, 9, 10, 16, 24, 31, 32, 33, 40, 50])
    np.testing.assert_allclose(nb.K_BOUND({**TV3, "T": 60, "K": K}),
                               [7.836807732, 7.925584253, 7.935285433, 7.913061271, 7.696256759, 7.541836572,
                                7.505164984, 7.504738023, 7.50526356, 7.530783009, 7.61349996], rtol=RTOL)
    T = np.array([38, 39, 40, 45, 50, 60, 100, 150], dtype=float)
    np.testing.assert_allclose(nb.K_BOUND({**TV1, "K": 40, "T": T}),
                               [1.071065193, 1.078898016, 1.080943806, 1.076088871, 1.071895134, 1.084622028,
                                1.377585147, 2.027213739], rtol=RTOL)
    T = np.array([118, 150, 200, 300], dtype=float)
    np.testing.assert_allclose(nb.BOUND({**TV1, "T": T}), [2.668638675, 3.564208376, 5.108161534,
        8.699953352],
                               rtol=RTOL)
    np.testing.assert_allclose(nb.K_BOUND({**TV1, "K": 20, "T": T}),
                               [0.7839453939, 1.677173037, 2.716228886, 4.879638284], rtol=RTOL)


def test_fig4_setting_is_outside_60_and_says_so():
    fig4 = {**TV1, "eps": 50.0, "K": 20}
    with pytest.raises(DomainError, match=r"\(60\)") as info:
        nb.k_bound(25, 20, 50.0, 0.01, 50, 20.0, 100, **CONST)
    assert info.value.name == "T"
    ev = nb.K_BOUND.evaluate(fig4)
    assert ev.defined is False and math.isnan(ev.value)
    assert any("(60)" in w for w in ev.warnings)
    assert fig4["eps"] / nb.KSCHED_GAMMA(fig4) == pytest.approx(97.88254092, rel=RTOL)
    assert nb.sigma_downlink_k(50.0, 0.01, 20, 100, 50, 20, 25, 1) == 0.0
    assert nb.sigma_aggregate_k(50.0, 0.01, 20, 100, 50, 20, 25, 1) == pytest.approx(0.005558885493, rel=RTOL)
    with pytest.raises(DomainError):
        nb.ksched_u(50.0, 25, 50, 20)


def test_K_above_N_and_Q_outside_unit_interval_are_errors():
    with pytest.raises(DomainError, match="K <= N"):
        nb.K_BOUND({**TV3, "K": 51})
    with pytest.raises(DomainError, match="0 < Q"):
        nb.K_BOUND({**TV3, "T": 60, "K": 5})
    with pytest.raises(ParameterError, match="K <= N"):
        nb.sampling_probability(10, 11)


def test_P_outside_unit_interval_raises_naming_P():
    with pytest.raises(DomainError) as info:
        nb.bound(25, 60, 0.01, 50, 20, 100, 2, 0.1, 1, 1, 1, mu=1.0)
    assert info.value.name == "P" and "mu > rho B" in str(info.value)
    with pytest.raises(DomainError):
        nb.check_thm2_conditions(l=0.1, mu=1.0, rho=1.0, B=1.0)
    nb.check_thm2_conditions(l=0.1, mu=4.0, rho=1.0, B=1.0)


@pytest.mark.parametrize("key, value, match", [
    ("delta", 1.5, r"delta = 1\.5 is outside its valid range \(0, 1\)"),
    ("eps", 0.0, r"eps = 0\.0 is outside its valid range \(0, inf\)"),
    ("N", 2.5, "N = 2.5 is outside its valid range integer"),
    ("m", 0, "m = 0"),
    ("T", -1.0, "T = -1.0"),
])
def test_bad_parameters_name_themselves(key, value, match):
    with pytest.raises(ParameterError, match=match):
        nb.BOUND({**TV1, key: value})


def test_classic_gaussian_warning_is_explicit():
    with pytest.warns(ClassicGaussianRangeWarning, match="per-exposure eps/L"):
        warnings.simplefilter("always")
        nb.sigma_uplink(6.0, 0.01, 20, 100, 1)
    ev = nb.SIGMA_UPLINK.evaluate(eps=np.array([0.5, 6.0]), delta=0.01, C=20, m=100, L=1)
    assert ev.valid.tolist() == [True, False] and ev.defined.all()
    assert "at 1 of 2 points" in ev.warnings[0]


def test_vacuous_bound_is_flagged_not_hidden():
    ev = nb.BOUND.evaluate({**TV3})  # h = 4.64 > Theta = 2
    assert ev.vacuous is True and ev.valid is True and ev.value == pytest.approx(4.641234497, rel=RTOL)
    assert any("Theta" in w for w in ev.warnings)


def test_sensitivity_helpers_and_remark1():
    assert nb.client_uplink_sensitivity(20, 200) == 0.2
    assert nb.downlink_sensitivity(20, 100, 0.02) == pytest.approx(0.008)
    p = np.array([0.5, 0.3, 0.2])
    assert nb.global_downlink_sensitivity(20, 100, p) == pytest.approx(2 * 20 * 0.5 / 100)
    assert nb.global_downlink_sensitivity(20, 100, p) > 2 * 20 / (100 * 3)  # S6
    np.testing.assert_allclose(nb.fl_weights([100, 300]), [0.25, 0.75])
    np.testing.assert_allclose(nb.fl_aggregate(np.array([[1.0, 0], [0, 1]]), np.array([0.25, 0.75])), [0.25,
        0.75])
    assert nb.dp_inequality_holds(0.5, 0.1, math.log(4), 0.1)
    assert not nb.dp_inequality_holds(0.6, 0.1, math.log(4), 0.1)


def test_B_estimate_lemma2():
    rng = np.random.default_rng(0)
    same = np.tile(rng.normal(size=5), (4, 1))
    assert nb.estimate_B(same) == pytest.approx(1.0)  # S7: B = 1 iff gradients are equal
    g = rng.normal(size=(6, 5)) + 3
    B = nb.estimate_B(g)
    mean = g.mean(axis=0)
    assert B > 1
    assert B == pytest.approx(float(nb.B_from_divergence(mean @ mean, np.mean(np.sum((g - mean) ** 2,
        axis=1)))))
    with pytest.raises(DomainError):
        nb.estimate_B(np.array([[1.0, 0.0], [-1.0, 0.0]]))


def test_recursive_bound_and_lemma3():
    P = nb.contraction_P(0.1, 4, 1, 1)
    s = 20 * 3.10751146009224 * 25 / (100 * math.sqrt(50) * 60)  # F18's s_Thm2 at TV1
    assert s == pytest.approx(0.03662237377, rel=RTOL)
    assert nb.recursive_bound(25, 2.0, P, 0.5, 0.5, 1.0, s) == pytest.approx(1.172207265, rel=RTOL)
    assert nb.lemma3_rhs(1.0, 2.0, 3.0, 4, 1, 1) == pytest.approx(-0.15625 + 1.0 + 1.5)


def test_noise_dimension_variant_E5():
    d = 203_530
    base = nb.BOUND(TV1)
    big = nb.BOUND({**TV1, "d": d}, variant="noise_dimension")
    assert big > base
    assert nb.BOUND({**TV1, "d": 1}, variant="noise_dimension") == pytest.approx(base, rel=1e-12)


def test_privacy_loss_helpers():
    assert nb.privacy_loss_ratio(0.0, 0.0, 1.0, 0.4) == pytest.approx(1.0)
    tail = nb.gaussian_tail_bound(3.0, 1.0)
    from scipy.stats import norm
    assert norm.sf(3.0) <= tail <= 2 * norm.sf(3.0)


def test_compare_without_extra_arguments_skips_variants_that_need_a_parameter():
    out = nb.BOUND.compare(TV1)
    assert "paper" in out and "regime_aware" in out
    assert set(out.skipped) == {"noise_dimension", "tight"}
    assert out.skipped["noise_dimension"].startswith("needs d")
    assert out["paper"].value == pytest.approx(nb.BOUND(TV1), rel=1e-15)


def test_a_missing_input_says_needs_and_what_it_is():
    from fedbound.bounds.core import MissingInputError

    with pytest.raises(MissingInputError, match=r"needs d \(noise dimension"):
        nb.BOUND(TV1, variant="noise_dimension")
    try:
        nb.BOUND(TV1, variant="noise_dimension")
    except MissingInputError as exc:
        assert "None" not in str(exc)


def test_variant_tight_computes_its_own_z():
    z = nb.tight_noise_multiplier(TV1["eps"], TV1["delta"])
    s = nb.with_tight_z(TV1, "tight")
    assert s["z"] == z and "z" not in nb.with_tight_z(TV1, "paper")
    expected = nb.BOUND({**TV1, "z": z}, variant="tight")
    assert nb.BOUND(s, variant="tight") == pytest.approx(expected, rel=1e-15)


def test_lemma4_is_exact_at_K_equals_N_for_any_eps_over_T():
    """u = eps/T and gamma = eps/(L sqrt(N)) at K = N, also where the printed log1p form overflows."""
    for eps_over_T in (0.5, 37.0, 40.0, 400.0):
        T = 2.0
        eps = eps_over_T * T
        assert nb.ksched_u(eps, T, 50, 50) == pytest.approx(eps_over_T, rel=1e-12)
        assert nb.ksched_gamma(eps, 50, 50, 1) == pytest.approx(eps / np.sqrt(50), rel=1e-12)
