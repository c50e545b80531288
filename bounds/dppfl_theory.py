"""dppfl's theorems as sympy declarations: parameters, definitions, conditions, variants, theorems.

Imported only when a formula is not in the compiled cache or something symbolic is asked for;
:mod:`fedbound.bounds.dppfl` is the module to use (its theorem objects stand in for these,
:mod:`fedbound.bounds.lazy`), and its docstring cites the paper and records the decisions taken.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant

SEED = "000"
SHORT = "DP-PFL (Wei et al. 2023)"
_POS = {"low": 0.0, "low_open": True}
_NONNEG = {"low": 0.0}
PARAMS = (
    Param("T", sp.Symbol("T", nonnegative=True), "communication rounds (real >= 0 in the bounds)", 0.0),
    Param("tau0", sp.Symbol("tau_0", positive=True), "local epochs per round (one inner + one outer "
          "step each)",
          1, integer=True),
    Param("eta", sp.Symbol("eta", positive=True), "inner (adaptation) learning rate", **_POS),
    Param("beta", sp.Symbol("beta", positive=True), "outer (meta) learning rate", **_POS),
    Param("C", sp.Symbol("C", positive=True), "clipping threshold (inner gradient to C, outer factors to "
          "sqrt(C))", **_POS),
    Param("S", sp.Symbol("S", positive=True), "model size (number of parameters, noise dimension)", 1,
          integer=True),
    Param("sigma", sp.Symbol("sigma", nonnegative=True), "noise multiplier of the inner stage", **_NONNEG),
    Param("sigma_out", sp.Symbol("sigma_out", nonnegative=True), "noise multiplier of the outer stage "
          "(outer_noise variant)", **_NONNEG),
    Param("m", sp.Symbol("m", positive=True), "smallest support-set size |D_i^S|", 1, integer=True),
    Param("Dbar", sp.Symbol(r"\bar{D}", nonnegative=True), "weighted data bias sum_i p_i D_i (client_sizes "
          "variant)", **_NONNEG),
    Param("L", sp.Symbol("L", positive=True), "smoothness constant of F_i (16)", **_POS),
    Param("rho", sp.Symbol("rho", nonnegative=True), "Hessian Lipschitz constant (17)", **_NONNEG),
    Param("B", sp.Symbol("B", nonnegative=True), "gradient-norm bound (Assumption 1)", **_NONNEG),
    Param("lam", sp.Symbol("lambda", positive=True), "Lipschitz constant of F_i (15)", **_POS),
    Param("l", sp.Symbol("l", positive=True), "strong-convexity constant (29), Theorem 2 only", **_POS),
    Param("eps_het", sp.Symbol(r"\varepsilon_{het}", nonnegative=True), "gradient dissimilarity (18)",
          **_NONNEG),
    Param("gamma_het", sp.Symbol("gamma", nonnegative=True), "Hessian dissimilarity (19)", **_NONNEG),
    Param("sigma_G", sp.Symbol(r"\sigma_G", nonnegative=True), "per-sample gradient std (20)", **_NONNEG),
    Param("sigma_H", sp.Symbol(r"\sigma_H", nonnegative=True), "per-sample Hessian std (21)", **_NONNEG),
    Param("Delta0", sp.Symbol(r"\Delta_0", nonnegative=True), "initial gap G(w^0) - G(w*)", **_NONNEG),
)
NOTATION = Notation("DP-PFL (Wei et al. 2023)", PARAMS)
(T, tau0, eta, beta, C, S, sigma, sigma_out, m, Dbar_p, L, rho, B, lam, l, eps_het, gamma_het, sigma_G,
 sigma_H, Delta0) = NOTATION.symbols("T tau0 eta beta C S sigma sigma_out m Dbar L rho B lam l eps_het "
                                     "gamma_het sigma_G sigma_H Delta0")


def _define(name: str, expr: sp.Expr, doc: str = "", conditions: Sequence[Condition] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(sp.Symbol(name), expr, doc, tuple(conditions)))


ETA_L = Condition("eta*L<1", sp.Lt(eta * L, 1), "required",
                  "Lemma 6 needs eta L < 1 (I - eta grad^2 F >= (1 - eta L) I; unstated in the paper)", "eta",
                  "eta < 1/L")
a = _define("a", 1 + eta * L, "1 + eta L, the bound on ||I - eta grad^2 F|| (Lemma 4)")
Lp = _define("L'", L * a**2 + eta * rho * B, "Lemma 1 (22): smoothness of G_i")
LP_POS = Condition("l'>0", sp.Gt(sp.Symbol("l'"), 0), "required",
                   "Lemma 6 needs l' = (1 - eta L)(l - eta L^2) - eta rho B > 0 (e.g. eta < l/L^2 and small "
                   "eta rho B; unstated in the paper)", "l'", "l' > 0")
lp = _define("l'", (1 - eta * L) * (l - eta * L**2) - eta * rho * B, "Lemma 6 (30): strong convexity of G_i",
             [ETA_L, LP_POS])
dissim = _define(r"\bar\varepsilon_G", eps_het * a + eta * B * gamma_het, "Lemma 2 (23), averaged over p_i")
D_m = _define("D", eta * a * L * sigma_G / sp.sqrt(m) + eta * B * sigma_H / sp.sqrt(m)
              + eta**2 * L * sigma_G * sigma_H / m, "Lemma 3 (25) at |D_i^S| = m")
Dbar = _define(r"\bar D_m", D_m, "sum_i p_i D_i, bounded by D(m) for the smallest support set m")
theta_unit = _define(r"\Theta_1", sp.sqrt(2) * C * sp.exp(sp.loggamma((S + 1) / 2) - sp.loggamma(S / 2)),
                     "E||N(0, C^2 I_S)|| (exact, E14)")
k_par = _define("k_S", sp.Piecewise((2, sp.Eq(sp.Mod(S, 2), 1)), (4, True)),
                "(27)/exact: 2 for odd S, 4 for even S (E14)")
Theta = _define(r"\Theta", k_par * theta_unit * sigma, "Lemma 4 (27): bound on E||n^Q||")
Theta_out = _define(r"\Theta^S", k_par * theta_unit * sigma_out, "the same bound on E||n^S|| (E18)")
f_clip = _define("f_C", sp.Max(B, sp.sqrt(C)) - sp.Min(C / a, sp.sqrt(C)), "clipping term of (26)")
clip_grad = _define(r"\kappa_{clip}", 2 * eta * L * B, "Lemma 4's bound on eta L ||clip_C(grad F) - grad F||")
Xi = _define(r"\Xi", a * (clip_grad + eta * L * Theta + f_clip), "Lemma 4 (26)")
u = _define("u", beta * Lp, "beta L'")
h = _define("h", beta * dissim * (expm1(tau0 * log1p(u)) / u - tau0), "Lemma 5 (28)")
W = _define("W", (expm1((tau0 + 1) * log1p(u)) - (tau0 + 1) * u) / u**2,
            "sum_j (tau0 - j)(1 + beta L')^j (closed form)")
bracket = _define(r"\Xi_D", Xi + Dbar, "Xi + sum_i p_i D_i")
E = _define(r"\mathcal{E}", lam * (a * h + beta * tau0 * a * W * bracket), "per-round error of (31), (32)")
zeta = _define(r"\zeta", 1 - 2 * lp * beta + Lp * lp * beta**2, "Theorem 2 contraction factor")
c3 = _define("c", beta * (1 - beta * Lp / 2), "Theorem 3 denominator beta (1 - beta L'/2)")

_D = Definition
for _v in (
    Variant("theta_exact", "Theta = E||N(0, C^2 sigma^2 I_S)|| (the printed (27) is 2x (odd S) / 4x "
            "(even S))",
            "E14", (_D(k_par, sp.Integer(1), "exact"),)),
    Variant("tight", "Lemma 4 with eta L max(0, B - C) instead of 2 eta L B", "E15",
            (_D(clip_grad, eta * L * sp.Max(0, B - C), "E15"),)),
    Variant("outer_noise", "the outer noise beta n^S (omitted in (227)) adds Theta(S, sigma_out, C)", "E18",
            (_D(bracket, Xi + Theta_out + Dbar, "E18"),)),
    Variant("client_sizes", "D-bar given (parameter Dbar = sum_i p_i D_i) instead of D(m)", "Lemma 3, (31)",
            (_D(Dbar, Dbar_p, "given"),)),
):
    NOTATION.add_variant(_v)

BETA_RANGE = Condition("beta<2/L'", sp.Lt(beta * Lp, 2), "required",
                       "Theorems 2 and 3 need 0 < beta < 2/L' (zeta < 1, 1 - beta L'/2 > 0; the paper "
                       "only says 'select a proper beta')", "beta", "beta < 2/L'")
ZETA_RANGE = Condition("0<=zeta<1", sp.And(sp.Ge(zeta, 0), sp.Lt(zeta, 1)), "required",
                       "Theorem 2 needs 0 <= zeta < 1 (l' <= L' and 0 < beta < 2/L')", r"\zeta", "[0, 1)")


def _src(eq: str) -> Source:
    return Source(SEED, eq, short=SHORT)


def _theorem(name: str, expr: sp.Expr, lhs: str, eq: str, doc: str,
             conditions: Sequence[Condition] = ()) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq), doc=doc, conditions=conditions)


zeta_T = sp.exp(T * tau0 * sp.log(zeta))
META_SMOOTHNESS = _theorem("meta_smoothness", Lp, "L'", "Lemma 1, eq. (22)", "smoothness of G_i")
META_STRONG_CONVEXITY = _theorem("meta_strong_convexity", lp, "l'", "Lemma 6, eq. (30)",
                                 "strong convexity of G_i")
META_DISSIMILARITY = _theorem("meta_dissimilarity", dissim, r"\bar\varepsilon_G", "Lemma 2, eq. (23)",
                              "meta-gradient dissimilarity averaged over p_i")
DATA_BIAS = _theorem("data_bias", D_m, "D_i", "Lemma 3, eq. (25)", "finite-sample bias of the MAML gradient")
NOISE_NORM = _theorem("noise_norm", Theta, r"\Theta", "Lemma 4, eq. (27)", "bound on E||n^Q||")
CLIPPING_BIAS = _theorem("clipping_bias", Xi, r"\Xi", "Lemma 4, eq. (26)", "clipping + noise bias")
LOCAL_DRIFT = _theorem("local_drift", h, r"h(\tau_0)", "Lemma 5, eq. (28)", "multi-local-step drift")
LOCAL_STEP_WEIGHT = _theorem("local_step_weight", W, r"W(\tau_0)", "Theorems 2-3 (App. G)",
                             "weight sum_j (tau0 - j)(1 + beta L')^j")
PER_ROUND_ERROR = _theorem("per_round_error", E, r"\mathcal{E}", "eqs. (31)-(32)", "per-round error bracket")
CONTRACTION = _theorem("contraction", zeta, r"\zeta", "Theorem 2, eq. (31)", "contraction per local step",
                       [BETA_RANGE])
CONVEX_BOUND = _theorem("convex_bound", zeta_T * Delta0 + (-expm1(T * tau0 * sp.log(zeta)))
                        / (-expm1(tau0 * sp.log(zeta))) * E, "E[G(w^T)] - G(w*)", "Theorem 2, eq. (31)",
                        "strongly convex bound", [BETA_RANGE, ZETA_RANGE])
NONCONVEX_BOUND = _theorem("nonconvex_bound", Delta0 / (T * c3) + E / c3,
                           r"\frac{1}{T}\sum_t\sum_\tau\|\nabla G(\hat w^{t,\tau})\|^2",
                           "Theorem 3, eq. (32)",
                           "non-convex bound", [BETA_RANGE])

THEOREMS: dict[str, Theorem] = {t.name: t for t in (
    META_SMOOTHNESS, META_STRONG_CONVEXITY, META_DISSIMILARITY, DATA_BIAS, NOISE_NORM, CLIPPING_BIAS,
    LOCAL_DRIFT, LOCAL_STEP_WEIGHT, PER_ROUND_ERROR, CONTRACTION, CONVEX_BOUND, NONCONVEX_BOUND)}
