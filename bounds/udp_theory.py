"""udp's theorems as sympy declarations: parameters, definitions, conditions, variants, theorems.

Imported only when a formula is not in the compiled cache or something symbolic is asked for;
:mod:`fedbound.bounds.udp` is the module to use (its theorem objects stand in for these,
:mod:`fedbound.bounds.lazy`), and its docstring cites the paper and records the decisions taken.
"""

from __future__ import annotations

import sympy as sp

from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem

SEED = "003"
SHORT = "UDP (Wei et al. 2021)"
_POS = {"low": 0.0, "low_open": True}
PARAMS = (
    Param("eps", sp.Symbol("epsilon", positive=True), "each client's privacy budget epsilon_i", **_POS),
    Param("delta", sp.Symbol("delta", positive=True), "each client's delta_i", 0.0, 1.0, True, True),
    Param("q", sp.Symbol("q", positive=True), "sampling ratio K/N", 0.0, 1.0, True, False),
    Param(
        "T",
        sp.Symbol("T", nonnegative=True),
        "communication rounds (real: Theorem 3 treats T as continuous)",
        0.0,
    ),
    Param(
        "sens",
        sp.Symbol(r"\Delta\ell", positive=True),
        "L2 sensitivity 2 eta C/|D_i| of one local pass (eq. (13))",
        **_POS,
    ),
    Param("N", sp.Symbol("N", positive=True), "number of clients (the paper's U)", 1, integer=True),
    Param("K", sp.Symbol("K", positive=True), "clients per round", 1, integer=True),
    Param("L", sp.Symbol("L", positive=True), "smoothness constant of F_i", **_POS),
    Param("mu", sp.Symbol("mu", positive=True), "Polyak-Lojasiewicz constant (0 < mu <= L)", **_POS),
    Param("eta", sp.Symbol("eta", positive=True), "learning rate (0 < eta <= 1/L)", **_POS),
    Param(
        "div",
        sp.Symbol(r"\bar\xi", nonnegative=True),
        "mean gradient divergence xi-bar (the paper's second epsilon)",
        0.0,
    ),
    Param("theta0", sp.Symbol("Theta", positive=True), "initial gap F(w0) - F(w*)", **_POS),
)
NOTATION = Notation("UDP (Wei et al. 2021)", PARAMS)
eps, delta, q, T, sens, N, K, L, mu, eta, div, theta0 = NOTATION.symbols(
    "eps delta q T sens N K L mu eta div theta0"
)


def _src(eq: str) -> Source:
    return Source(SEED, eq, short=SHORT)


def _define(name: str, expr: sp.Expr, doc: str, conditions: tuple[Condition, ...] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(sp.Symbol(name), expr, doc, conditions))


_MU_LE_L = Condition(
    "mu<=L", sp.Le(mu, L), "required", f"{SHORT} Assumption 1 needs 0 < mu <= L", "mu", "mu <= L"
)
_ETA_LE = Condition(
    "eta<=1/L",
    sp.Le(eta * L, 1),
    "required",
    f"{SHORT} Assumption 1 needs 0 < eta <= 1/L",
    "eta",
    "eta <= 1/L",
)
_K_LE_N = Condition("K<=N", sp.Le(K, N), "required", "at most N clients can be scheduled", "K", "K <= N")
_A_IN = Condition(
    "0<A<1",
    sp.And(sp.Symbol("A") > 0, sp.Symbol("A") < 1),
    "required",
    f"{SHORT} Theorem 2 needs the contraction factor A = 1 - 2 mu eta + mu eta^2 L in (0, 1)",
    "A",
    "(0, 1)",
)

Lam = _define(r"\Lambda", sp.log(1 / delta), "ln(1/delta)")
A = _define(
    "A", 1 - 2 * mu * eta + mu * eta**2 * L, "contraction factor (Theorem 2)", (_MU_LE_L, _ETA_LE, _A_IN)
)
kappa0 = _define(r"\kappa_0", L**2 * sens**2 / mu, "Theorem 2")
kappa1 = _define(r"\kappa_1", eta**2 * L**2 * div / (2 * mu), "Theorem 2")
S = _define("S", N * Lam / eps**2, "sum_i ln(1/delta_i)/eps_i^2 for uniform budgets")
a = _define("a", kappa0 * K * S / N**2, "coefficient of T in (22)", (_K_LE_N,))
b = _define(
    "b",
    sp.Piecewise((0, sp.Eq(K, N)), (kappa1 * N * (N - K) / (K * (N - 1)), True)),
    "constant of (22): sampling error",
    (_K_LE_N,),
)
c = _define("c", -sp.log(A), "-ln A")


def _theorem(
    name: str, expr: sp.Expr, lhs: str, eq: str, doc: str, conditions: tuple[Condition, ...] = ()
) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq), doc=doc, conditions=conditions)


_EPS_RANGE = Condition(
    "lambda*>=1",
    sp.Le(eps, 4 * Lam / 3),
    "caveat",
    f"{SHORT} eq. (19) uses the continuous order lambda* = 2 ln(1/delta)/eps - 1/2, below 1 "
    "here; over integer orders the achieved delta is larger",
    "eps",
    "eps <= 4 ln(1/delta)/3",
)
SIGMA = _theorem(
    "sigma",
    sens * sp.sqrt(2 * q * T * Lam) / eps,
    r"\sigma_i",
    "eq. (10), Theorem 1",
    "noise std per client and round, as printed (it does not meet its delta, see DELTA_ACHIEVED)",
)
SIGMA_CORRECTED = _theorem(
    "sigma_corrected",
    sens * sp.sqrt(q * T / 2) * (sp.sqrt(Lam + eps) + sp.sqrt(Lam)) / eps,
    r"\sigma_i^{corr}",
    "eqs. (18)-(19) solved for rho (Theorem 1 corrected)",
    "noise std meeting (eps, delta) under the paper's accountant (16), continuous order",
)
DELTA_ACHIEVED = _theorem(
    "delta_achieved",
    sp.exp(-Lam * (1 - eps / (4 * Lam)) ** 2),
    r"\delta_{ach}",
    "eqs. (16)-(19) at sigma of (10)",
    "delta that (10)'s sigma achieves under (16)",
    (_EPS_RANGE,),
)
CORRECTION_RATIO = _theorem(
    "correction_ratio",
    (1 + sp.sqrt(1 + eps / Lam)) / 2,
    "ratio",
    "eq. (10) vs (18)-(19)",
    "sigma_corrected / sigma",
)
CONTRACTION_A = _theorem("contraction_A", A, "A", "Theorem 2", "contraction factor 1 - 2 mu eta + mu eta^2 L")
COEFF_A = _theorem("a", a, "a", "eq. (22)", "coefficient of T in the bound")
COEFF_B = _theorem("b", b, "b", "eq. (22)", "constant of the bound")
h = A**T * theta0 + (1 - A**T) * (a * T + b)
BOUND = _theorem("bound", h, "h(T)", "eq. (22), Theorem 2", "E F(w^T) - F* <= h(T)")
BOUND_D1 = _theorem(
    "bound_d1",
    a * (1 - A**T) - c * A**T * (theta0 - b - a * T),
    "h'(T)",
    "Theorem 3, derived",
    "first derivative of (22) in T",
)
BOUND_D2 = _theorem(
    "bound_d2",
    A**T * c**2 * (theta0 - b - a * T + 2 * a / c),
    "h''(T)",
    "eq. (23) corrected",
    "second derivative of (22) in T",
)
BOUND_D2_PRINTED = _theorem(
    "bound_d2_printed",
    A**T
    * sp.log(A) ** 2
    * (
        theta0
        - kappa0 * T * K * S / N**2
        - sp.Piecewise((0, sp.Eq(K, N)), (kappa1 * (N - K) / (K * (N - 1)), True))
        - kappa0 * T * K * S / (N * sp.log(A))
    ),
    "h''(T) printed",
    "eq. (23) as printed",
    "the paper's second derivative (wrong, see P14b)",
)
T_CONVEXITY = _theorem(
    "T_convexity",
    (theta0 - b) / a + 2 / c,
    "T_c",
    "eq. (23) corrected: h'' = 0",
    "h is convex on [0, T_c) and concave after",
)
NOISE_TERM = _theorem("noise_term", a * T, "aT", "eq. (22)", "privacy term of the bound")
THEOREMS: dict[str, Theorem] = {
    t.name: t
    for t in (
        SIGMA,
        SIGMA_CORRECTED,
        DELTA_ACHIEVED,
        CORRECTION_RATIO,
        CONTRACTION_A,
        COEFF_A,
        COEFF_B,
        BOUND,
        BOUND_D1,
        BOUND_D2,
        BOUND_D2_PRINTED,
        T_CONVEXITY,
        NOISE_TERM,
    )
}
