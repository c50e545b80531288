"""NbAFL's theorems as sympy declarations (NbAFL): parameters, definitions, conditions, variants.

K. Wei et al., "Federated Learning With Differential Privacy: Algorithms and Performance Analysis",
IEEE TIFS 15 (2020).  Imported only when a formula is not in the compiled cache or something symbolic is
asked for; :mod:`fedbound.bounds.nbafl` is the module to use (its theorem objects stand in for these,
:mod:`fedbound.bounds.lazy`), and its docstring describes the variants and the decisions recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant
from fedbound.errors import ClassicGaussianRangeWarning

SEED = "002"
SHORT = "NbAFL (Wei et al. 2020)"


def _src(eq: str, spec: str) -> Source:
    return Source(SEED, eq, f"002 {spec}", SHORT)


# ---------------------------------------------------------------------------------------------------------
# Parameters (spec 002, section 2)
# ---------------------------------------------------------------------------------------------------------
_POS = {"low": 0.0, "low_open": True}
PARAMS = (
    Param("eps", sp.Symbol("epsilon", positive=True), "total privacy budget epsilon", **_POS),
    Param("delta", sp.Symbol("delta", positive=True), "privacy failure probability delta", 0.0, 1.0,
          True, True),
    Param("C", sp.Symbol("C", positive=True), "clipping threshold on the model norm", **_POS),
    Param("m", sp.Symbol("m", positive=True), "smallest local dataset size", 1, integer=True),
    Param("N", sp.Symbol("N", positive=True), "number of clients", 1, integer=True),
    Param("K", sp.Symbol("K", positive=True), "clients scheduled per round", 1, integer=True),
    Param("T", sp.Symbol("T", nonnegative=True), "aggregation rounds (real: the paper treats T as "
          "continuous)", 0.0),
    Param("L", sp.Symbol("L", positive=True), "uplink exposures per client seen by the adversary", 1,
          integer=True),
    Param("Theta", sp.Symbol("Theta", positive=True), "initial gap F(w0) - F(w*)", **_POS),
    Param("l", sp.Symbol("l", positive=True), "Polyak-Lojasiewicz constant", **_POS),
    Param("beta", sp.Symbol("beta", positive=True), "Lipschitz constant of F_i", **_POS),
    Param("rho", sp.Symbol("rho", positive=True), "smoothness constant of F_i", **_POS),
    Param("B", sp.Symbol("B", positive=True), "gradient dissimilarity constant (>= 1)", 1.0),
    Param("mu", sp.Symbol("mu", positive=True), "proximal coefficient of the local problem", **_POS),
    Param("d", sp.Symbol("d", positive=True), "noise dimension (number of model parameters)", 1,
          integer=True),
    Param("z", sp.Symbol("z", positive=True), "noise multiplier sigma/Delta of one (eps, delta)-DP Gaussian "
          "release (fedbound.accounting.analytic_gaussian_std(eps, delta))", **_POS),
)
NOTATION = Notation("NbAFL (Wei et al. 2020)", PARAMS)
eps, delta, C, m, N, K, T, L, Theta, l, beta, rho, B, mu, d, z = NOTATION.symbols(
    "eps delta C m N K T L Theta l beta rho B mu d z")

_sym = sp.Symbol


def _define(name: str, expr: sp.Expr, doc: str = "", conditions: Sequence[Condition] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(_sym(name), expr, doc, tuple(conditions)))


def _classic(name: str, per_release: sp.Expr, what: str) -> Condition:
    return Condition(name, sp.Lt(per_release, 1), "caveat",
                     "the classic Gaussian mechanism NbAFL (Wei et al. 2020) uses (Sec. II-C) is proven "
                     f"only for a per-release epsilon < 1 ({what}): the privacy guarantee is heuristic "
                     "here, compare the tight sigma",
                     "eps", f"{what} < 1", ClassicGaussianRangeWarning)


# ---------------------------------------------------------------------------------------------------------
# Definitions (named sub-expressions)
# ---------------------------------------------------------------------------------------------------------
c = _define("c", sp.sqrt(2 * sp.log(sp.Rational(5, 4) / delta)), "Gaussian constant sqrt(2 ln(1.25/delta))")
ds_U = _define(r"\Delta s_U", 2 * C / m, "uplink sensitivity 2C/m (6)")
ds_D = _define(r"\Delta s_D", 2 * C / (m * N), "downlink sensitivity 2C/(mN) (9)")
UPLINK_CLASSIC = _classic("classic_uplink", eps / L, "per-exposure eps/L")
DOWNLINK_CLASSIC = Condition(
    "classic_downlink", sp.Or(T <= L * sp.sqrt(N), eps < T), "caveat",
    "the classic Gaussian mechanism of NbAFL (Wei et al. 2020), eq. (10), is proven only for a per-release "
    "epsilon < 1 (per-broadcast eps/T): the privacy guarantee is heuristic here, compare the tight sigma",
    "eps",
    "eps/T < 1 where the server adds noise", ClassicGaussianRangeWarning)
sigma_U = _define(r"\sigma_U", c * L * ds_U / eps, "uplink noise std (F10)", [UPLINK_CLASSIC])
sigma_D = _define(r"\sigma_D", sp.Piecewise((2 * c * C * sp.sqrt(T**2 - L**2 * N) / (m * N * eps),
                                             T > L * sp.sqrt(N)), (0, True)),
                  "server noise std, Theorem 1 (10)", [DOWNLINK_CLASSIC])
sigma_A = _define(r"\sigma_A", sp.Max(c * T * ds_D / eps, sigma_U / sp.sqrt(N)),
                  "aggregate noise std, (13) corrected (F12)", [DOWNLINK_CLASSIC])
lam0 = _define(r"\lambda_0", rho / 2, "Lemma 3 (12)")
lam1 = _define(r"\lambda_1", 1 / mu + rho * B / mu, "Lemma 3 (12)")
lam2 = _define(r"\lambda_2", -1 / mu + rho * B / mu**2 + rho * B**2 / (2 * mu**2), "Lemma 3 (12)")
P_REQUIRED = Condition("0<P<1", sp.And(_sym("P") > 0, _sym("P") < 1), "required",
                       "Theorem 2 of NbAFL (Wei et al. 2020), eq. (14), needs 0 < P = 1 + 2 l lambda_2 < 1, "
                       "i.e. mu > rho B (1 + B/2) and 2 l |lambda_2| < 1", "P", "(0, 1)")
P = _define("P", 1 + 2 * l * lam2, "contraction factor of Theorem 2", [P_REQUIRED])
kappa1 = _define(r"\kappa_1", lam1 * beta * c * C / (m * (1 - P)) * sp.sqrt(2 / (N * sp.pi)),
                 "Theorem 2 (14)")
kappa0 = _define(r"\kappa_0", lam0 * c**2 * C**2 / (m**2 * (1 - P) * N), "Theorem 2 (14)")
s_thm2 = _define("s", c * C * T / (m * sp.sqrt(N) * eps), "scalar noise std implicit in (14) (F18)")
En1 = _define(r"\mathbb{E}\|n\|", s_thm2 * sp.sqrt(2 / sp.pi), "half-normal first moment (F18)")
En2 = _define(r"\mathbb{E}\|n\|^2", s_thm2**2, "second moment (F18)")
one_minus_PT = -expm1(T * sp.log(P))
h = _define("h", P**T * Theta + one_minus_PT / (1 - P) * (lam1 * beta * En1 + lam0 * En2),
            "Theorem 2 bound in recursive form (F18)")
# eps (-k1 + sqrt(k1^2 + 4 k0 Theta)) / (2 k0), written without the cancellation for small k0 Theta / k1^2
T_Theta = _define("T_Theta", 2 * eps * Theta / (kappa1 + sp.sqrt(kappa1**2 + 4 * kappa0 * Theta)),
                  "g(T_Theta) = Theta: the bracket of T* (F21)")

DOMAIN_60 = Condition("(60)", sp.Or(K > N, eps / T + sp.log(1 - K / N) < 0), "undefined",
                      "Lemma 4's amplification factor b (and Theorem 3's bound) of NbAFL (Wei et al. 2020) "
                      "is defined only for T > eps/(-ln(1 - K/N)) (condition (60))", "T",
                      "T > eps/(-ln(1 - K/N))")
K_LE_N = Condition("K<=N", sp.Le(K, N), "required", "at most N clients can be scheduled", "K", "K <= N")
q = _define("q", K / N, "sampling probability K/N (F24)", [K_LE_N])
# u = -ln(1 + (e^{-eps/T} - 1)/q), written as eps/T + ln q - ln(1 - (1 - q) e^{eps/T}) so that q = 1 (K = N)
# gives exactly eps/T at any eps/T (the printed form rounds 1 + (e^{-x} - 1) to 0 for x > 37)
u = _define("u", eps / T + sp.log(q) - log1p(-sp.exp(eps / T + sp.log(1 - q))),
            "per-round amplified budget b eps/T (F25)")
b = _define("b", T * u / eps, "Lemma 4 amplification factor (16)")
# gamma = -ln(1 + q (e^{-y} - 1)) = -ln((1 - q) + q e^{-y}): a sum of two non-negative terms, exact at q = 1
# for any y (the printed log1p form rounds 1 + (-1 + e^{-y}) to 0 there once y > 37)
gamma = _define(r"\gamma", -sp.log((N - K) / N + q * sp.exp(-eps / (L * sp.sqrt(K)))),
                "Lemma 4 threshold (16)")
ds_DK = _define(r"\Delta s_D^{(K)}", 2 * C / (m * K), "downlink sensitivity with p_i = 1/K")
K_CLASSIC = Condition("(64)", sp.Or(T <= eps / gamma, u < 1), "caveat",
                      "the classic Gaussian constant of NbAFL (Wei et al. 2020), Lemma 4, is proven per "
                      "round only for b eps/T < 1 (condition (64))", "T", "T > eps/(-ln(1 - q + q/e))",
                      ClassicGaussianRangeWarning)
sigma_DK = _define(r"\sigma_D^{(K)}", sp.Piecewise(
    (2 * c * C * sp.sqrt(T**2 / b**2 - L**2 * K) / (m * K * eps), T > eps / gamma), (0, True)),
    "server noise std under K-scheduling, Lemma 4 (16)", [K_CLASSIC])
sigma_AK = _define(r"\sigma_A^{(K)}", sp.Piecewise(
    (2 * c * C / (m * K * u), T > eps / gamma), (2 * c * C * L / (m * sp.sqrt(K) * eps), True)),
    "aggregate noise std under K-scheduling (F29)", [K_CLASSIC])
alpha0 = _define(r"\alpha_0", 2 * rho * K / N + rho, "Theorem 3 (85)")
alpha1 = _define(r"\alpha_1", 1 + 2 * rho * B / mu + 2 * rho * B * sp.sqrt(K) / (mu * N), "Theorem 3 (85)")
alpha2 = _define(r"\alpha_2", (rho * B**2 / 2 + rho * B + rho * B**2 / K + 2 * rho * B**2 / sp.sqrt(K)
                              + mu * B / sp.sqrt(K) - mu) / mu**2, "Theorem 3 (84)")
Q_REQUIRED = Condition("0<Q<1", sp.And(_sym("Q") > 0, _sym("Q") < 1), "required",
                       "Theorem 3 of NbAFL (Wei et al. 2020), eq. (17), needs 0 < Q = 1 + 2 l alpha_2 < 1 "
                       "(alpha_2 < 0 needs K > B^2)", "Q", "(0, 1)")
Q = _define("Q", 1 + 2 * l * alpha2, "contraction factor of Theorem 3", [Q_REQUIRED])
s_K = _define("s_K", c * C / (m * K * u), "scalar noise std implicit in (17) (F32)")
h_K = _define("h_K", Q**T * Theta + (-expm1(T * sp.log(Q))) / (1 - Q)
              * (alpha1 * beta * sp.sqrt(2 / sp.pi) * s_K + alpha0 * s_K**2), "Theorem 3 bound (17)")

# ---------------------------------------------------------------------------------------------------------
# Variants (spec 002, section 7)
# ---------------------------------------------------------------------------------------------------------
_D = Definition
for _v in (
    Variant("eq13_printed", "sigma_A as printed in (13), with the extra sqrt(N) in the first branch", "E1",
            (_D(sigma_A, sp.Piecewise((c * T * ds_D / (sp.sqrt(N) * eps), T > L * sp.sqrt(N)),
                                      (c * L * ds_U / (sp.sqrt(N) * eps), True)), "(13) as printed",
                (DOWNLINK_CLASSIC,)),)),
    Variant("thm1_noise", "the bound uses Theorem 1's aggregate noise std sigma_A (F12) as its scalar noise",
            "E2", (_D(s_thm2, sigma_A, "s = sigma_A (F12)"),)),
    Variant("dimensional_lambda1", "lambda_1 = 1 + rho B / mu (dimensionally consistent)", "E4",
            (_D(lam1, 1 + rho * B / mu, "E4"),)),
    Variant("noise_dimension", "d-dimensional noise moments: E||n||^2 = d s^2, E||n|| = sqrt(2) s "
            "Gamma((d+1)/2)/Gamma(d/2)", "E5",
            (_D(En1, sp.sqrt(2) * s_thm2 * sp.exp(sp.loggamma((d + 1) / 2) - sp.loggamma(d / 2)), "E5"),
             _D(En2, d * s_thm2**2, "E5"))),
    Variant("regime_aware", "constant noise where no server noise is added (T <= L sqrt(N) in Theorem 2, "
            "T <= eps/gamma in Theorem 3)", "E8, E9",
            (_D(s_thm2, c * C * sp.Max(T, L * sp.sqrt(N)) / (m * sp.sqrt(N) * eps), "E8"),
             _D(s_K, sp.Piecewise((c * C / (m * K * u), T > eps / gamma),
                                  (c * C * L / (m * sp.sqrt(K) * eps), True)), "E9")),
            drops=("(60)",)),
    Variant("two_sided", "two-sided amplification by subsampling: u = ln(1 + (N/K)(e^{eps/T} - 1))", "E9",
            (_D(u, log1p(expm1(eps / T) / q), "E9 two-sided"),
             _D(gamma, log1p(q * expm1(eps / (L * sp.sqrt(K)))), "E9 two-sided")),
            drops=("(60)",)),
    Variant("tight", "exact T-fold Gaussian composition: s = z sqrt(T) C / (m sqrt(N)) (noise ~ sqrt(T))",
            "fedbound.accounting (analytic Gaussian)",
            (_D(s_thm2, z * sp.sqrt(T) * C / (m * sp.sqrt(N)), "tight"),)),
):
    NOTATION.add_variant(_v)

VACUOUS_H = Condition("informative", sp.Lt(h, Theta), "vacuous",
                      "the bound is not below the initial gap Theta: it says nothing useful", "h",
                      "h < Theta")
VACUOUS_HK = Condition("informative", sp.Lt(h_K, Theta), "vacuous",
                       "the bound is not below the initial gap Theta: it says nothing useful", "h_K",
                       "h_K < Theta")


def _theorem(name: str, expr: sp.Expr, lhs: str, eq: str, spec: str, doc: str,
             conditions: Sequence[Condition] = ()) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq, spec), doc=doc, conditions=conditions)


GAUSSIAN_C = _theorem("gaussian_c", c, "c", "Sec. II-C", "F4", "Gaussian mechanism constant")
SIGMA_UPLINK = _theorem("sigma_uplink", sigma_U, r"\sigma_U", "Sec. III-A, App. B", "F10", "uplink noise std")
SIGMA_DOWNLINK = _theorem("sigma_downlink", sigma_D, r"\sigma_D", "eq. (10), Theorem 1", "F11",
                          "server (downlink) noise std")
SIGMA_AGGREGATE = _theorem("sigma_aggregate", sigma_A, r"\sigma_A", "eq. (13) corrected, (24)", "F12, E1",
                           "aggregate noise std")
CONTRACTION_P = _theorem("contraction_P", P, "P", "eq. (14), P = 1 + 2 l lambda_2", "F16",
                         "contraction factor of Theorem 2")
BOUND = _theorem("bound", h, "h(T)", "eq. (14), Theorem 2", "F17, F18",
                 "Theorem 2: E[F(w_T) - F*] <= h(T)", [VACUOUS_H])
_g = kappa1 * T / eps + kappa0 * T**2 / eps**2
BOUND_EQ14 = _theorem("bound_eq14", P**T * Theta + _g * one_minus_PT, "h(T)", "eq. (14) as printed", "F17",
                      "Theorem 2 in the printed kappa form (equals BOUND)", [VACUOUS_H])
BOUND_D2T_EQ15 = _theorem(
    "bound_d2T_eq15",
    (Theta - _g) * P**T * sp.log(P)**2 - 2 * sp.diff(_g, T) * P**T * sp.log(P) + sp.diff(_g, T, 2)
    * one_minus_PT, "h''(T)", "eq. (15)", "F19", "second derivative of (14) as printed in (15)")
KAPPA1 = _theorem("kappa1", kappa1, r"\kappa_1", "eq. (14)", "F17", "Theorem 2 noise constant kappa_1")
KAPPA0 = _theorem("kappa0", kappa0, r"\kappa_0", "eq. (14)", "F17", "Theorem 2 noise constant kappa_0")
ALPHA0 = _theorem("alpha0", alpha0, r"\alpha_0", "eq. (85)", "F33", "Theorem 3 coefficient alpha_0")
ALPHA1 = _theorem("alpha1", alpha1, r"\alpha_1", "eq. (85)", "F33", "Theorem 3 coefficient alpha_1")
ALPHA2 = _theorem("alpha2", alpha2, r"\alpha_2", "eq. (84)", "F33", "Theorem 3 coefficient alpha_2")
T_THETA = _theorem("T_Theta", T_Theta, r"T_\Theta", "our analysis", "F21",
                   "bracket of the optimal T: g(T_Theta) = Theta")
KSCHED_U = _theorem("ksched_u", u, "u", "eq. (16)/(58)", "F25", "per-round amplified budget b eps/T",
                    [DOMAIN_60])
KSCHED_B = _theorem("ksched_b", b, "b", "eq. (16)/(58)", "F25", "Lemma 4 amplification factor", [DOMAIN_60])
KSCHED_GAMMA = _theorem("ksched_gamma", gamma, r"\gamma", "eq. (16)/(68)", "F26",
                        "Lemma 4 threshold constant")
SIGMA_DOWNLINK_K = _theorem("sigma_downlink_k", sigma_DK, r"\sigma_D^{(K)}", "eq. (16), Lemma 4", "F27",
                            "server noise std under K-client scheduling")
SIGMA_AGGREGATE_K = _theorem("sigma_aggregate_k", sigma_AK, r"\sigma_A^{(K)}", "eqs. (65)-(66)", "F29",
                             "aggregate noise std under K-client scheduling")
S_K = _theorem("s_K", s_K, "s_K", "eq. (17)", "F32, S21", "scalar noise std implicit in (17)", [DOMAIN_60])
CONTRACTION_Q = _theorem("contraction_Q", Q, "Q", "eq. (84)", "F33", "contraction factor of Theorem 3")
K_BOUND = _theorem("k_bound", h_K, "h_K(T, K)", "eq. (17), Theorem 3", "F32",
                   "Theorem 3: E[F(w_T) - F*] <= h_K(T, K)", [DOMAIN_60, VACUOUS_HK])

THEOREMS: dict[str, Theorem] = {t.name: t for t in (
    GAUSSIAN_C, SIGMA_UPLINK, SIGMA_DOWNLINK, SIGMA_AGGREGATE, CONTRACTION_P, BOUND, BOUND_EQ14,
    BOUND_D2T_EQ15, KAPPA1, KAPPA0, ALPHA0, ALPHA1, ALPHA2, T_THETA, KSCHED_U, KSCHED_B, KSCHED_GAMMA,
    SIGMA_DOWNLINK_K, SIGMA_AGGREGATE_K, S_K,
    CONTRACTION_Q, K_BOUND)}
BOUND_DT = BOUND.derivative("T")
BOUND_D2T = BOUND.derivative("T", 2)
K_BOUND_DT = K_BOUND.derivative("T")
THEOREMS.update({"bound_dT": BOUND_DT, "bound_d2T": BOUND_D2T, "k_bound_dT": K_BOUND_DT})
