"""adaptive's theorems as sympy declarations: parameters, definitions, conditions, variants, theorems.

Imported only when a formula is not in the compiled cache or something symbolic is asked for;
:mod:`fedbound.bounds.adaptive` is the module to use (its theorem objects stand in for these,
:mod:`fedbound.bounds.lazy`), and its docstring cites the paper and records the decisions taken.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant

SEED = "001"
SHORT = "PADPFL (Talaei and Izadi 2024)"
RADICAND_RTOL = 1e-12  # the same as fedbound.bounds.adaptive.RADICAND_RTOL (tests/test_bounds_lazy.py)


def _src(eq: str, spec: str) -> Source:
    return Source(SEED, eq, f"001 {spec}", SHORT)


# ---------------------------------------------------------------------------------------------------------
# Parameters (spec 001, Sec. 2)
# ---------------------------------------------------------------------------------------------------------
_POS = {"low": 0.0, "low_open": True}
_NONNEG = {"low": 0.0}
PARAMS = (
    Param("eps", sp.Symbol("epsilon", positive=True), "privacy budget epsilon", **_POS),
    Param(
        "delta", sp.Symbol("delta", positive=True), "privacy failure probability delta", 0.0, 1.0, True, True
    ),
    Param("c", sp.Symbol("c", positive=True), "Gaussian constant c >= sqrt(2 ln(1.25/delta)) (F7)", **_POS),
    Param("B", sp.Symbol("B", positive=True), "clip bound on the model weights ||x_i|| <= B", **_POS),
    Param(
        "R",
        sp.Symbol("R", positive=True),
        "uplink exposures of a client's weights (NbAFL's L)",
        1,
        integer=True,
    ),
    Param(
        "T",
        sp.Symbol("T", nonnegative=True),
        "aggregation rounds (real: the bound is read as a function of a continuous T)",
        **_NONNEG,
    ),
    Param("N", sp.Symbol("N", positive=True), "number of clients", 1, integer=True),
    Param("m_min", sp.Symbol("m_min", positive=True), "smallest local dataset min_i m_i", 1, integer=True),
    Param("m_max", sp.Symbol("m_max", positive=True), "largest local dataset max_i m_i", 1, integer=True),
    Param(
        "p_max",
        sp.Symbol("p_max", positive=True),
        "largest impact factor max_i p_i (over rounds in Theorem 3)",
        0.0,
        1.0,
        True,
    ),
    Param("S2", sp.Symbol("S_2", positive=True), "sum of squared impact factors sum_i p_i^2", 0.0, 1.0, True),
    Param("A", sp.Symbol("A", positive=True), "A-local dissimilarity constant of Lemma 1 (>= 1)", 1.0),
    Param(
        "A_prime",
        sp.Symbol("A'", nonnegative=True),
        "dissimilarity constant under adaptive p, (56)",
        **_NONNEG,
    ),
    Param("gamma", sp.Symbol("gamma", nonnegative=True), "local inexactness of the FedProx solve", 0.0, 1.0),
    Param("rho", sp.Symbol("rho", positive=True), "smoothness constant of the local losses", **_POS),
    Param("mu", sp.Symbol("mu", positive=True), "FedProx proximal coefficient", **_POS),
    Param(
        "rho_minus",
        sp.Symbol("rho_-", nonnegative=True),
        "lower curvature bound (0 for convex losses)",
        **_NONNEG,
    ),
    Param("beta", sp.Symbol("beta", positive=True), "bound on ||grad L|| (Lipschitz constant of L)", **_POS),
    Param("Theta", sp.Symbol("Theta", nonnegative=True), "initial gap L(x0) - L(x*)", **_NONNEG),
    Param(
        "l_max",
        sp.Symbol("l_max", nonnegative=True),
        "largest local loss value over clients and rounds",
        **_NONNEG,
    ),
    Param(
        "d", sp.Symbol("d", positive=True), "noise dimension (number of model parameters)", 1, integer=True
    ),
)
NOTATION = Notation("PADPFL (Talaei and Izadi 2024)", PARAMS)
(
    eps,
    delta,
    c,
    B,
    R,
    T,
    N,
    m_min,
    m_max,
    p_max,
    S2,
    A,
    A_prime,
    gamma,
    rho,
    mu,
    rho_minus,
    beta,
    Theta,
    l_max,
    d,
) = NOTATION.symbols(
    "eps delta c B R T N m_min m_max p_max S2 A A_prime gamma rho mu rho_minus beta Theta l_max d"
)
_sym = sp.Symbol


def _define(name: str, expr: sp.Expr, doc: str = "", conditions: Sequence[Condition] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(_sym(name), expr, doc, tuple(conditions)))


# ---------------------------------------------------------------------------------------------------------
# Definitions (named sub-expressions)
# ---------------------------------------------------------------------------------------------------------
c_delta = _define("c_delta", sp.sqrt(2 * sp.log(sp.Rational(5, 4) / delta)), "sqrt(2 ln(1.25/delta)) (F7)")
sigma_C = _define(r"\sigma_C", 2 * B * R * c / (m_min * eps), "united client noise std (8), F12")
Df = _define(r"\Delta f", 2 * B * p_max / m_min, "server sensitivity (10), F14")
sigma_AC = _define(r"\sigma_{AC}", sigma_C * sp.sqrt(S2), "aggregated client noise std (12), F16")
sigma_A = _define(r"\sigma_A", c * T * Df / eps, "required total broadcast std, F17")
radicand = _define("r", T**2 * p_max**2 - R**2 * S2, "radicand of Theorem 1 (13)")
sigma_S = _define(
    r"\sigma_S",
    sp.Piecewise(
        (2 * B * c * sp.sqrt(radicand) / (m_min * eps), radicand > RADICAND_RTOL * T**2 * p_max**2), (0, True)
    ),
    "server top-up std, Theorem 1 (13), F19",
)
T_th = _define("T_th", R * sp.sqrt(S2) / p_max, "server-noise threshold, F20")
sigma_eff = _define(r"\sigma_{eff}", sp.sqrt(sigma_AC**2 + sigma_S**2), "effective broadcast std, F21")
MU_BAR_OK = Condition(
    "mu_bar>0",
    sp.Gt(mu - rho_minus, 0),
    "undefined",
    "h_i is strongly convex only for mu_bar = mu - rho_- > 0 (PADPFL eq. (4), E8)",
    "mu",
    "mu > rho_minus",
)
mu_bar = _define(r"\bar\mu", mu - rho_minus, "strong-convexity modulus of h_i, F30", [MU_BAR_OK])


def _lambdas(a: sp.Symbol) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    l2 = (
        -1 / mu
        + a / mu * (gamma + rho * (1 + gamma) / mu_bar)
        + rho * a**2 * (1 + gamma) ** 2 / (2 * mu_bar**2)
    )
    return l2, 1 + rho * a * (1 + gamma) / mu_bar, rho / 2


_l2, _l1, _l0 = _lambdas(A)
lam2 = _define(r"\lambda_2", _l2, "Lemma 2 (23), F37")
lam1 = _define(r"\lambda_1", _l1, "Lemma 2 (23), F38 (starts with 1, E12)")
lam0 = _define(r"\lambda_0", _l0, "Lemma 2 (23), F39")
_l2p, _l1p, _ = _lambdas(A_prime)
lam2p = _define(r"\lambda_2'", _l2p, "Lemma 3 (52), F53 (lambda_2 with A')")
lam1p = _define(r"\lambda_1'", _l1p, "Lemma 3 (52), F53 (lambda_1 with A')")

m_ref = _define("m_ref", m_max, "dataset size in Theorem 2/3's sensitivity: max m (printed; E2)")
n_k0 = _define("n_{k0}", sp.Integer(1), "factor N of E||n||^2 in k_0: dropped in the print (E1)")
k2_div = _define("k_{2,div}", m_max, "divisor of lambda_2' beta^2 in Theorem 3's k_2' (printed; E3)")
k2 = _define("k_2", lam2 * beta**2, "Theorem 2 (46), F44")
k1 = _define("k_1", 2 * lam1 * beta * B * c * p_max / m_ref * sp.sqrt(2 * N / sp.pi), "Theorem 2 (46), F45")
k0 = _define("k_0", 4 * lam0 * B**2 * c**2 * p_max**2 * n_k0 / m_ref**2, "Theorem 2 (46), F46")
k2p = _define("k_2'", lam2p * beta**2 / k2_div + l_max / 2, "Theorem 3 (69), F54")
k1p = _define("k_1'", 2 * lam1p * beta * B * c * p_max / m_ref * sp.sqrt(2 * N / sp.pi), "Theorem 3 (69)")
k0p = _define("k_0'", 4 * lam0 * B**2 * c**2 * p_max**2 * n_k0 / m_ref**2, "Theorem 3 (69)")
e1_factor = _define(
    "e_1", sp.sqrt(2 * N / sp.pi), "E||n|| / sigma in (49): sqrt(2N/pi), N as dimension (E11)"
)
e2_factor = _define("e_2", N, "E||n||^2 / sigma^2 in (49): N as dimension (E11)")
En1 = _define(r"\mathbb{E}\|n\|", sigma_A * e1_factor, "noise moment (49), F40")
En2 = _define(r"\mathbb{E}\|n\|^2", sigma_A**2 * e2_factor, "noise moment (49), F41")

_D = Definition
for _v in (
    Variant(
        "corrected",
        "k_0 with the factor N of (49), min m instead of max m, no 1/max m in k_2'",
        "E1-E4",
        (
            _D(m_ref, m_min, "E2: the sensitivity (10) of the noise (13)"),
            _D(n_k0, N, "E1"),
            _D(k2_div, sp.Integer(1), "E3"),
        ),
    ),
    Variant(
        "noise_dimension",
        "d-dimensional noise moments: E||n|| = sqrt(2) sigma Gamma((d+1)/2)/Gamma(d/2), E||n||^2 = d sigma^2",
        "E11",
        (
            _D(e1_factor, sp.sqrt(2) * sp.exp(sp.loggamma((d + 1) / 2) - sp.loggamma(d / 2)), "E11"),
            _D(e2_factor, d, "E11"),
        ),
    ),
    Variant(
        "sound",
        "k_2 = max(lambda_2, 0) beta^2 (the substitution ||grad L|| <= beta needs lambda_2 >= 0)",
        "E6",
        (_D(k2, sp.Max(lam2, 0) * beta**2, "E6"),),
    ),
):
    NOTATION.add_variant(_v)

h2 = _define("h", Theta + k2 * T + k1 * T**2 / eps + k0 * T**3 / eps**2, "Theorem 2 bound (46)/(50), F43")
h3 = _define("h'", Theta + k2p * T + k1p * T**2 / eps + k0p * T**3 / eps**2, "Theorem 3 bound (69), F54")


def _theorem(
    name: str, expr: sp.Expr, lhs: str, eq: str, spec: str, doc: str, conditions: Sequence[Condition] = ()
) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq, spec), doc=doc, conditions=conditions)


GAUSSIAN_C = _theorem("gaussian_c", c_delta, "c", "Sec. III-A", "F7", "Gaussian mechanism constant")
SIGMA_CLIENT = _theorem("sigma_client", sigma_C, r"\sigma_C", "eq. (8)", "F12", "united client noise std")
SERVER_SENSITIVITY = _theorem(
    "server_sensitivity", Df, r"\Delta f", "eq. (10)", "F14", "server (aggregate) sensitivity"
)
SIGMA_AGG_CLIENT = _theorem(
    "sigma_aggregated_client",
    sigma_AC,
    r"\sigma_{AC}",
    "eq. (12)",
    "F16",
    "std of the aggregated client noise sum_i p_i n_i",
)
SIGMA_TOTAL = _theorem(
    "sigma_total",
    sigma_A,
    r"\sigma_A",
    "proof of Theorem 1",
    "F17",
    "broadcast std that T linearly composed releases need",
)
SIGMA_SERVER = _theorem(
    "sigma_server", sigma_S, r"\sigma_S", "eq. (13), Theorem 1", "F19", "server top-up noise std"
)
THRESHOLD = _theorem(
    "server_noise_threshold",
    T_th,
    "T_{th}",
    "Theorem 1 condition",
    "F20",
    "rounds above which the server adds noise",
)
SIGMA_EFFECTIVE = _theorem(
    "sigma_effective",
    sigma_eff,
    r"\sigma_{eff}",
    "eqs. (11)-(14)",
    "F21",
    "std of the noise in the broadcast (max(sigma_A, sigma_AC))",
)
LAMBDA2 = _theorem("lambda2", lam2, r"\lambda_2", "eq. (23), Lemma 2", "F37", "Lemma 2 coefficient")
LAMBDA1 = _theorem("lambda1", lam1, r"\lambda_1", "eq. (23), Lemma 2", "F38", "Lemma 2 coefficient")
LAMBDA0 = _theorem("lambda0", lam0, r"\lambda_0", "eq. (23), Lemma 2", "F39", "Lemma 2 coefficient")
LAMBDA2_PRIME = _theorem(
    "lambda2_prime", lam2p, r"\lambda_2'", "eq. (52), Lemma 3", "F53", "Lemma 3 coefficient"
)
LAMBDA1_PRIME = _theorem(
    "lambda1_prime", lam1p, r"\lambda_1'", "eq. (52), Lemma 3", "F53", "Lemma 3 coefficient"
)
NOISE_MOMENT_1 = _theorem(
    "noise_moment_1", En1, r"\mathbb{E}\|n\|", "eq. (49)", "F40", "first noise moment used by Theorem 2"
)
NOISE_MOMENT_2 = _theorem(
    "noise_moment_2", En2, r"\mathbb{E}\|n\|^2", "eq. (49)", "F41", "second noise moment used by Theorem 2"
)
K2 = _theorem("k2", k2, "k_2", "eq. (46)", "F44", "Theorem 2 constant k_2")
K1 = _theorem("k1", k1, "k_1", "eq. (46)", "F45", "Theorem 2 constant k_1")
K0 = _theorem("k0", k0, "k_0", "eq. (46)", "F46", "Theorem 2 constant k_0")
K2_PRIME = _theorem("k2_prime", k2p, "k_2'", "eq. (69)", "F54", "Theorem 3 constant k_2'")
K1_PRIME = _theorem("k1_prime", k1p, "k_1'", "eq. (69)", "F54", "Theorem 3 constant k_1'")
K0_PRIME = _theorem("k0_prime", k0p, "k_0'", "eq. (69)", "F54", "Theorem 3 constant k_0'")
BOUND = _theorem(
    "bound",
    h2,
    "h(T)",
    "eqs. (46)/(50), Theorem 2",
    "F43",
    "Theorem 2: E[L(x_T) - L*] <= Theta + k_2 T + k_1 T^2/eps + k_0 T^3/eps^2",
)
BOUND_ADAPTIVE = _theorem(
    "bound_adaptive",
    h3,
    "h'(T)",
    "eq. (69), Theorem 3",
    "F54",
    "Theorem 3: the bound with adaptive impact factors",
)
BOUND_DT = BOUND.derivative("T")
BOUND_D2T = BOUND.derivative("T", 2)

THEOREMS: dict[str, Theorem] = {
    t.name: t
    for t in (
        GAUSSIAN_C,
        SIGMA_CLIENT,
        SERVER_SENSITIVITY,
        SIGMA_AGG_CLIENT,
        SIGMA_TOTAL,
        SIGMA_SERVER,
        THRESHOLD,
        SIGMA_EFFECTIVE,
        LAMBDA2,
        LAMBDA1,
        LAMBDA0,
        LAMBDA2_PRIME,
        LAMBDA1_PRIME,
        NOISE_MOMENT_1,
        NOISE_MOMENT_2,
        K2,
        K1,
        K0,
        K2_PRIME,
        K1_PRIME,
        K0_PRIME,
        BOUND,
        BOUND_ADAPTIVE,
    )
}
THEOREMS.update({"bound_dT": BOUND_DT, "bound_d2T": BOUND_D2T})
