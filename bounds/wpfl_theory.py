"""wpfl's theorems as sympy declarations: parameters, definitions, conditions, variants, theorems.

Imported only when a formula is not in the compiled cache or something symbolic is asked for;
:mod:`fedbound.bounds.wpfl` is the module to use (its theorem objects stand in for these,
:mod:`fedbound.bounds.lazy`), and its docstring cites the paper and records the decisions taken.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant

SEED = "004"
SHORT = "WPFL (Zhao et al. 2025)"


def _src(eq: str, spec: str) -> Source:
    return Source(SEED, eq, f"004 {spec}", SHORT)


_POS = {"low": 0.0, "low_open": True}
_NONNEG = {"low": 0.0}
PARAMS = (
    Param("C", sp.Symbol("C", positive=True), "clipping threshold on the model L2 norm", **_POS),
    Param("sigma_dp", sp.Symbol(r"\sigma_{DP}", nonnegative=True), "DP noise std per element (0: no DP)",
          **_NONNEG),
    Param("R", sp.Symbol("R", positive=True), "quantization bits per element", 1, 52, integer=True),
    Param("n_params", sp.Symbol(r"|\omega|", positive=True), "model size |omega|", 1, integer=True),
    Param("rho_L", sp.Symbol(r"\bar\rho_L", nonnegative=True), "mean uplink element-error probability of "
          "the selected clients (F19)", 0.0, 1.0),
    Param("rho_G", sp.Symbol(r"\rho_{n,G}", nonnegative=True), "downlink element-error probability of "
          "client n", 0.0, 1.0),
    Param("theta_L", sp.Symbol(r"\Theta_L", nonnegative=True), "uplink error term of Lemma 1 (F19)",
          **_NONNEG),
    Param("mu", sp.Symbol(r"\mu", positive=True), "strong-convexity constant", **_POS),
    Param("L", sp.Symbol("L", positive=True), "smoothness constant", **_POS),
    Param("G0", sp.Symbol("G_0", positive=True), "bound on the expected gradient norm", **_POS),
    Param("M", sp.Symbol("M", nonnegative=True), "bound ||u_n* - w*|| <= M", **_NONNEG),
    Param("phi1", sp.Symbol(r"\phi_1", positive=True), "Young constant of Lemma 1", **_POS),
    Param("phi2", sp.Symbol(r"\phi_2", positive=True), "Young constant of Lemma 1", **_POS),
    Param("vphi1", sp.Symbol(r"\varphi_1", positive=True), "Young constant of Theorem 2", **_POS),
    Param("vphi2", sp.Symbol(r"\varphi_2", positive=True), "Young constant of Theorem 2", **_POS),
    Param("eta_F", sp.Symbol(r"\eta_F", positive=True), "FL local learning rate", **_POS),
    Param("eta_P", sp.Symbol(r"\eta_P", positive=True), "PL learning rate", **_POS),
    Param("lam", sp.Symbol(r"\lambda", positive=True), "PL-FL weighting coefficient", 0.0, 2.0, True),
    Param("D", sp.Symbol("D", nonnegative=True), "E||w_hat_{n,G} - w*||^2 of the selected clients",
          **_NONNEG),
    Param("Gamma_n", sp.Symbol(r"\Gamma_{n,t+1}", nonnegative=True), "Gamma_{t+1} of client n (F22)",
          **_NONNEG),
    Param("eps_F_mean", sp.Symbol(r"\bar\varepsilon_F", positive=True), "mean FL contraction factor of the "
          "selected clients", **_POS),
    Param("eps_P", sp.Symbol(r"\varepsilon_P", positive=True), "common PL contraction target (C1)", 0.0, 1.0,
          True, True),
    Param("rate", sp.Symbol("r", positive=True), "contraction factor of a geometric bound", **_POS),
    Param("steps", sp.Symbol("s", nonnegative=True), "number of rounds unrolled", **_NONNEG),
    Param("init", sp.Symbol("I_0", nonnegative=True), "initial distance E||. - .*||^2", **_NONNEG),
    Param("const", sp.Symbol("c", nonnegative=True), "per-round additive term", **_NONNEG),
    Param("B_max", sp.Symbol("B^{max}", nonnegative=True), "max of (1 + lambda^3) eta_P^2 G_n", **_NONNEG),
    Param("Psi_max", sp.Symbol(r"\Psi^{max}", nonnegative=True), "max of Psi", **_NONNEG),
    Param("Gamma_max", sp.Symbol(r"\Gamma^{max}", nonnegative=True), "max of Gamma_{t+1}", **_NONNEG),
    Param("eps_F_max", sp.Symbol(r"\varepsilon_F^{max}", positive=True), "max of eps_F", **_POS),
)
NOTATION = Notation("WPFL (Zhao et al. 2025)", PARAMS)
(C, sigma, R, n_params, rho_L, rho_G, theta, mu, L, G0, M, phi1, phi2, vphi1, vphi2, eta_F, eta_P, lam, D,
 Gamma_n, eps_F_mean, eps_P, rate, steps, init, const, B_max, Psi_max, Gamma_max,
 eps_F_max) = NOTATION.symbols(
    "C sigma_dp R n_params rho_L rho_G theta_L mu L G0 M phi1 phi2 vphi1 vphi2 eta_F eta_P lam D Gamma_n "
    "eps_F_mean eps_P rate steps init const B_max Psi_max Gamma_max eps_F_max")


def _define(name: str, expr: sp.Expr, doc: str, conditions: Sequence[Condition] = ()) -> sp.Symbol:
    return NOTATION.define(Definition(sp.Symbol(name), expr, doc, tuple(conditions)))


MU_BELOW_2 = Condition("mu<2", sp.Lt(mu, 2), "undefined", "lambda(eta) of (37) divides by 1 - mu/2: it needs "
                       "mu < 2", "mu", "(0, 2)")
THEOREM5 = Condition("Thm5", sp.Ge(eps_P, 1 - mu**2 / 4), "required", "Theorem 5 (and the feasible set (38)) "
                     "needs eps_P >= 1 - mu^2/4", "eps_P", "[1 - mu^2/4, 1)")

beta = _define(r"\beta", 1 / (2**R - 1), "beta_L = beta_G = 1/(2^R - 1), eq. (7)")
E_L = _define("E_L^{max}", beta * (C + 3 * sigma), "largest local quantization error Delta_L/2, eq. (7)")
E_G = _define("E_G^{max}", beta * C, "largest global quantization error Delta_G/2, eq. (7) with E1")
theta_coef = _define(r"\theta_c", 2 * C**2 + (2 - beta**2) * n_params * (C + 3 * sigma)**2
                     - n_params * sigma**2, "coefficient of the mean rho in Theta_L (F19)")
young = _define(r"\Upsilon", 1 + 1 / phi1 + 1 / phi2, "1 + 1/phi1 + 1/phi2 (Lemma 1)")
noise_q = _define(r"\nu", n_params * (sigma**2 + E_L**2), "|omega| (sigma^2 + (E_L^max)^2)")
fl_coef = _define(r"a_F", (1 + phi2) + (1 + phi1) * L**2 * eta_F**2 - mu * eta_F,
                  "(1 + phi2) + (1 + phi1) L^2 eta_F^2 - mu eta_F (Lemma 1, E2)")
epsF = _define(r"\varepsilon_F", (1 + vphi1) * fl_coef, "FL contraction factor (28b)")
h1 = _define("h_1", 2 * (1 + 1 / vphi1) * (1 + vphi2) * rho_G + (1 + vphi1) * young, "(28c)")
E_star = _define("E_*^{max}", E_L, "E_L^max as printed in (28d) (E4: E_G^max by (54c))")
gamma0 = _define(r"\Gamma_0", (1 + 1 / vphi1) * (2 * (1 + 1 / vphi2) * C**2 + 2 * (1 + vphi2) * noise_q
                                                 + 2 * n_params * (C**2 - E_star**2)), "(28d)")
gamma1 = _define(r"\Gamma_1", (1 + vphi1) * young * noise_q + 2 * n_params * (1 + 1 / vphi1) * E_G**2,
                 "(28e)")
gamma_t1 = _define(r"\Gamma_{t+1}", h1 * theta + gamma0 * rho_G + gamma1, "(28a)")


def _psi(weight: sp.Expr, power: int = 3) -> sp.Expr:
    return (eta_P**2 + 1) * weight**2 + eta_P**power / weight


def _gn(weight: sp.Expr) -> sp.Expr:
    return ((1 - weight / 2) * G0 + weight * (G0 / mu + M))**2


lam_eta = _define(r"\lambda(\eta)", ((1 - eps_P) / eta_P + eta_P - mu) / (1 - mu / 2),
                  "lambda from the equality eps_P,n = eps_P (37)", [MU_BELOW_2])
Psi_ = _define(r"\Psi", _psi(lam), "(30b)")
Psi7 = _define(r"\Psi(\eta)", _psi(lam_eta), "(30b) at lambda(eta)")
G_n_ = _define("G_n", _gn(lam), "(30c)")
G_n7 = _define(r"G_n(\eta)", _gn(lam_eta), "(30c) at lambda(eta)")
kappa = _define(r"\kappa", (G0**2 + M * mu)**2 / mu**2, "drift constant of (30a) as printed (E6)")
Phi_expr = (1 + lam**3) * eta_P**2 * G_n_ + Psi_ * (Gamma_n + kappa * eps_F_mean)
Phi7_expr = (1 + lam_eta**3) * eta_P**2 * G_n7 + Psi7 * (Gamma_n + kappa * eps_F_mean)

for _v in (
    Variant("corrected", "Gamma_0 with E_G^max (E4, eq. (54c)) and kappa = (G0 + M mu)^2/mu^2 (E6, eqs. "
            "(62)-(63))", "fedbound's correction of App. C, eqs. (54c), (62)-(63)",
            (Definition(E_star, E_G, "E4"), Definition(kappa, (G0 + M * mu)**2 / mu**2, "E6"))),
    Variant("psi_young", "Psi with eta^2/lambda (Young's inequality on the cross term) instead of the "
            "printed eta^3/lambda", "fedbound's reading of Theorem 4's cross term",
            (Definition(Psi_, _psi(lam, 2), "E7"), Definition(Psi7, _psi(lam_eta, 2), "E7"))),
):
    NOTATION.add_variant(_v)


def _theorem(name: str, expr: sp.Expr, lhs: str, eq: str, spec: str, doc: str,
             conditions: Sequence[Condition] = ()) -> Theorem:
    return Theorem(NOTATION, name, expr, lhs=lhs, source=_src(eq, spec), doc=doc, conditions=conditions)


FL_CONTRACTION = Condition("0<eps_F<1", sp.And(epsF > 0, epsF < 1), "caveat",
                           "the FL recursion contracts only for 0 < eps_F < 1 (C11)", r"\varepsilon_F",
                           "(0, 1)")
GEOM_CONTRACTION = Condition("0<r<1", sp.Lt(rate, 1), "vacuous",
                             "with a contraction factor >= 1 the unrolled bound grows without limit "
                             "(Theorems 2 and 4 need it in (0, 1))", "rate", "(0, 1)")

E_L_MAX = _theorem("E_L_max", E_L, "E_L^{max}", "eq. (7)", "F3", "largest local quantization error")
E_G_MAX = _theorem("E_G_max", E_G, "E_G^{max}", "eq. (7), E1", "F3, E1", "largest global quantization error")
THETA_L = _theorem("theta_L", theta_coef * rho_L, r"\Theta_L^t", "Lemma 1, eq. (26)", "F19",
                   "uplink error term of Lemma 1")
LEMMA1 = _theorem("lemma1", young * (theta + noise_q) + fl_coef * D,
                  r"\mathbb{E}\|\tilde\omega_L^t-\omega^*\|^2", "Lemma 1, eq. (26) with E2", "F18",
                  "Lemma 1 with a common eta_F and distance D")
EPS_F = _theorem("eps_F", epsF, r"\varepsilon_{F,n}^t", "eq. (28b)", "F22", "FL contraction factor")
H1 = _theorem("h1", h1, "h_1", "eq. (28c)", "F22", "coefficient of Theta_L in Gamma_{t+1}")
GAMMA0 = _theorem("gamma0", gamma0, r"\Gamma_0", "eq. (28d)", "F22, E4",
                  "coefficient of rho_G in Gamma_{t+1}")
GAMMA1 = _theorem("gamma1", gamma1, r"\Gamma_1", "eq. (28e)", "F22", "constant of Gamma_{t+1}")
GAMMA_NEXT = _theorem("gamma_next", gamma_t1, r"\Gamma_{n,t+1}", "eq. (28a)", "F22",
                      "additive term of Theorem 2 for client n")
THM2_STEP = _theorem("thm2_one_step", epsF * D + gamma_t1, r"\mathbb{E}\|\hat\omega_{n,G}^{t+1}-\omega^*\|^2",
                     "Theorem 2, eq. (27a)", "F20", "one step of Theorem 2 (common eta_F and D)",
                     [FL_CONTRACTION])
GEOMETRIC = _theorem("geometric", sp.Piecewise((rate**steps * init + (rate**steps - 1) / (rate - 1) * const,
                                                sp.Ne(rate, 1)), (init + steps * const, True)),
                     r"r^s I_0 + \frac{r^s-1}{r-1} c", "eqs. (27b), (31)", "F21, F26",
                     "unrolled geometric bound of Theorems 2 and 4", [GEOM_CONTRACTION])
ETA_F_STAR = _theorem("eta_F_star", mu / (2 * (1 + phi1) * L**2), r"\eta_F^*", "Sec. VI-C1 (P5)", "F28",
                      "optimal FL learning rate (closed form)")
EPS_F_STAR = _theorem("eps_F_star", (1 + vphi1) * (1 + phi2 - mu**2 / (4 * (1 + phi1) * L**2)),
                      r"\varepsilon_F^*", "Sec. VI-C1 (P5)", "F28", "FL contraction factor at eta_F*")
EPS_P = _theorem("eps_P", 1 - eta_P * ((1 - lam / 2) * mu + lam) + eta_P**2, r"\varepsilon_{P,n}^{t+1}",
                 "eq. (30a)", "F24", "PL contraction factor")
PSI = _theorem("Psi", Psi_, r"\Psi_n^{t+1}", "eq. (30b)", "F24, E7", "coefficient of the FL error in Phi")
G_N = _theorem("G_n", G_n_, r"G_n^{t+1}", "eq. (30c)", "F24", "gradient bound of the PL loss")
KAPPA = _theorem("kappa", kappa, r"\kappa", "eq. (30a), (34)", "F25, E6", "drift constant")
PHI = _theorem("Phi", Phi_expr, r"\Phi_n^{t+1}", "Theorem 3, eq. (30a)", "F25",
               "additive term of the PL bound")
PHI_MAX = _theorem("Phi_max", B_max + Psi_max * (Gamma_max + kappa * eps_F_max), r"\Phi^{max}",
                   "App. E, eq. (67)", "F27, E6", "explicit Phi^max of Theorem 4")
LAM_OF_ETA = _theorem("lam_of_eta", lam_eta, r"\lambda_n^{t+1}(\eta)", "eq. (37)", "F29",
                      "lambda that makes eps_P,n equal the target")
ETA1 = _theorem("eta1", 1 - sp.sqrt(eps_P), r"\eta_1", "eq. (38)", "F30", "lambda(eta_1) = 2")
ETA2 = _theorem("eta2", (mu - sp.sqrt(mu**2 - 4 * (1 - eps_P))) / 2, r"\eta_2", "eq. (38)", "F30",
                "lambda(eta_2) = 0", [THEOREM5])
ETA3 = _theorem("eta3", (mu + sp.sqrt(mu**2 - 4 * (1 - eps_P))) / 2, r"\eta_3", "eq. (38)", "F30",
                "lambda(eta_3) = 0", [THEOREM5])
PHI_P7 = _theorem("Phi_P7", Phi7_expr, r"\Phi_n^{t+1}(\eta, \lambda(\eta))",
                  "P7, eq. (39); Theorem 5", "F31", "objective of P7 (lambda eliminated by (37))")
GAMMA2 = _theorem("gamma2", 2 * (1 + 1 / vphi1) * (1 + vphi2) * theta + gamma0, r"\Gamma_2", "eqs. (34)-(35)",
                  "F32", "coefficient of rho_G after P2")
GAMMA3 = _theorem("gamma3", (1 + vphi1) * young * theta + gamma1, r"\Gamma_3", "eqs. (34)-(35)", "F32",
                  "constant after P2")

THEOREMS: dict[str, Theorem] = {t.name: t for t in (
    E_L_MAX, E_G_MAX, THETA_L, LEMMA1, EPS_F, H1, GAMMA0, GAMMA1, GAMMA_NEXT, THM2_STEP, GEOMETRIC,
    ETA_F_STAR, EPS_F_STAR, EPS_P, PSI, G_N, KAPPA, PHI, PHI_MAX, LAM_OF_ETA, ETA1, ETA2, ETA3, PHI_P7,
    GAMMA2,
    GAMMA3)}
PHI_P7_D1 = PHI_P7.derivative("eta_P")
PHI_P7_D2 = PHI_P7.derivative("eta_P", 2)
PSI_D_LAM = PSI.derivative("lam")
THEOREMS.update({"Phi_P7_d1": PHI_P7_D1, "Phi_P7_d2": PHI_P7_D2, "Psi_dlam": PSI_D_LAM})
