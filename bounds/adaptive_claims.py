"""Every claim of PADPFL (Talaei and Izadi 2024; spec 001 Sec. 4: M1-M25), as data for fedbound.bounds.claims.

The claims about the formulas are checked on scalar summaries of the weights (``p_max``, ``S2``) drawn so
that a simplex vector with those summaries exists; the claims about vectors (permutations, thresholds,
Lemma 1, A', the weight-shift term) draw seeded random impact factors inside a predicate.  Claims the paper
makes that are false somewhere carry ``fails_in`` and counterexamples (M16 under the tight sensitivity, M18
for the printed constants, M25 for every setting with lambda_2 < 0).  Lemma 2 (M20) and the inequalities
(36)-(43) are checked on random convex quadratics with gamma-inexact proximal steps and the exact
d-dimensional noise moments (:func:`quadratic_lemma2_check`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from fedbound.bounds import adaptive as ba
from fedbound.bounds.claims import Claim, Region

__all__ = ["CLAIMS", "CLAIMS_BY_ID", "PRIVACY", "LOSS", "TV1", "quadratic_lemma2_check", "random_impact"]

TV_LOSS = {"A": 1.2, "gamma": 0.1, "rho": 1.0, "mu": 4.0, "rho_minus": 0.0, "beta": 1.0, "Theta": 2.3}
"""Loss constants assumed by spec 001's test vectors TV1-TV3 (the paper states none, E24)."""
TV1 = {
    "eps": 5.0,
    "c": 3.10751146009224,
    "B": 20.0,
    "R": 1,
    "T": 30.0,
    "N": 60,
    "m_min": 150,
    "m_max": 150,
    "p_max": 1 / 30,
    "S2": 1 / 36,
    **TV_LOSS,
}


def _s2_range(pm: float, n: int) -> tuple[float, float]:
    """Smallest and largest sum p^2 of an n-vector on the simplex with max p = pm."""
    lo = pm**2 + (1 - pm) ** 2 / max(n - 1, 1)
    k = math.floor(1 / pm + 1e-12)
    hi = k * pm**2 + max(1 - k * pm, 0.0) ** 2
    return lo, max(hi, lo)


def _p_max(v: dict[str, Any]) -> float:
    return min(1.0, 1 / v["N"] + v["_u"] * (1 - 1 / v["N"]))


def _s2(v: dict[str, Any]) -> float:
    lo, hi = _s2_range(v["p_max"], v["N"])
    return min(1.0, lo + v["_s"] * (hi - lo))


_INTS = frozenset({"R", "N", "m_min", "m_max", "d", "draw"})
PRIVACY = Region(
    {
        "eps": (0.5, 100, "log"),
        "c": (0.5, 5.0),
        "B": (0.1, 50, "log"),
        "R": (1, 5),
        "m_min": (10, 500),
        "_mr": (1.0, 5.0),
        "N": (2, 200),
        "_u": (0.0, 1.0),
        "_s": (0.0, 1.0),
        "T": (1, 300),
    },
    derived=(("m_max", lambda v: int(round(v["m_min"] * v["_mr"]))), ("p_max", _p_max), ("S2", _s2)),
    integers=_INTS,
    doc="privacy settings; (p_max, S2) of some simplex vector with N entries",
)
LOSS = {
    "A": (1.0, 3.0),
    "gamma": (0.0, 1.0),
    "rho": (0.05, 2.0, "log"),
    "mu": (0.5, 40, "log"),
    "beta": (0.1, 5.0, "log"),
    "Theta": (0.1, 10, "log"),
}
FULL = Region(
    {**PRIVACY.ranges, **LOSS},
    fixed={"rho_minus": 0.0},
    derived=PRIVACY.derived,
    integers=_INTS,
    doc="privacy settings and convex loss constants (rho_- = 0)",
)


def _value(th: Any, v: dict[str, Any], variant: str = "paper", **kw: Any) -> np.ndarray:
    return np.asarray(
        th.evaluate({k: x for k, x in v.items() if k in ba.NOTATION.params}, variant=variant, **kw).value,
        dtype=float,
    )


def random_impact(rng: np.random.Generator, n: int, zeros: bool = True) -> np.ndarray:
    """A random simplex vector of length n (some entries exactly 0 when ``zeros``; never all)."""
    p = rng.dirichlet(np.full(n, rng.choice([0.3, 1.0, 5.0])))
    if zeros and n > 1:
        p[rng.random(n) < 0.3] = 0.0
        if p.sum() == 0:
            p[rng.integers(n)] = 1.0
    return p / p.sum()


_VECTORS = Region(
    {"draw": (0, 10**6), "N": (1, 120), "R": (1, 5)},
    integers=_INTS,
    doc="seeded random impact-factor vectors (entries may be 0)",
)


# --- predicates on vectors ------------------------------------------------------------------------------
def _threshold_facts(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n, r = v["N"], v["R"]
    p = random_impact(rng, n)
    n_plus = int(np.count_nonzero(p))
    t = float(ba.server_noise_threshold(r, p))
    ok = r * (1 - 1e-12) <= t <= r * math.sqrt(n_plus) * (1 + 1e-12)
    ok &= math.isclose(
        float(ba.server_noise_threshold(r, ba.impact_factors_uniform(n))), r * math.sqrt(n), rel_tol=1e-12
    )
    ok &= float(ba.server_noise_threshold(r, np.eye(n)[rng.integers(n)])) == r
    ok &= float(ba.server_noise_threshold(r + 1, p)) > t
    return bool(ok), f"T_th = {t:.6g} in [R, R sqrt(N+)] = [{r}, {r * math.sqrt(n_plus):.6g}]"


def _zero_iff_below(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    s = int(rng.integers(1, 12))
    r, n = v["R"], s * s
    uniform = ba.impact_factors_uniform(n)
    at = float(ba.server_noise_sigma(1.0, 0.01, r * s, r, uniform, 1.0, [1], c=1.0))  # T = T_th exactly
    p = random_impact(rng, v["N"])
    t_th = float(ba.server_noise_threshold(r, p))
    below = (
        float(ba.server_noise_sigma(1.0, 0.01, max(r, math.floor(t_th)), r, p, 1.0, [1], c=1.0))
        if math.floor(t_th) >= r
        else 0.0
    )
    above = float(ba.server_noise_sigma(1.0, 0.01, math.floor(t_th) + 1, r, p, 1.0, [1], c=1.0))
    near = ba.SIGMA_SERVER.evaluate(
        eps=1.0, c=1.0, B=1.0, R=r, m_min=1, p_max=float(p.max()), S2=float(np.sum(p**2)), T=t_th * (1 + 1e-7)
    ).value
    ok = (
        at == 0.0
        and below == 0.0
        and (above > 0 or math.floor(t_th) + 1 <= t_th * (1 + 1e-9))
        and near < 1e-2
    )
    return bool(ok), (
        f"sigma_S(T = T_th = {r * s}) = {at}, below: {below}, above: {above:.4g}, "
        f"at T_th(1 + 1e-7): {float(near):.3g}"
    )


def _permutation(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    p = random_impact(rng, v["N"])
    T = float(rng.uniform(1, 200))
    r = min(v["R"], int(T))
    a = float(ba.server_noise_sigma(5.0, 0.01, T, r, p, 20.0, [150]))
    b = float(ba.server_noise_sigma(5.0, 0.01, T, r, rng.permutation(p), 20.0, [150]))
    return a == b or math.isclose(a, b, rel_tol=1e-12), f"sigma_S = {a:.12g} and {b:.12g} after a permutation"


def _monte_carlo(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n = int(min(v["N"], 30))
    p = random_impact(rng, n, zeros=False)
    sig = rng.uniform(0.1, 2.0, n)
    draws = rng.standard_normal((20000, n)) * sig
    sd = float(np.std(draws @ p))
    ref = float(ba.aggregated_client_noise_sigma(p, sig))
    return abs(
        sd / ref - 1
    ) < 0.03, f"Monte Carlo SD {sd:.5g} vs sqrt(sum p^2 sigma^2) = {ref:.5g} (20000 draws)"


def _uniform_minimises(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n = v["N"]
    sizes = (
        rng.integers(10, 300, n) if v.get("reading") == "tight" else np.full(n, int(rng.integers(10, 300)))
    )
    p = random_impact(rng, n)
    if v.get("reading") == "tight":
        uni = float(ba.server_sensitivity_tight(1.0, ba.impact_factors_uniform(n), sizes))
        best = float(ba.server_sensitivity_tight(1.0, ba.impact_factors_by_size(sizes), sizes))
        return uni <= best * (1 + 1e-12), f"tight sensitivity: uniform {uni:.6g}, p ~ m {best:.6g}"
    uni = float(ba.server_sensitivity(1.0, ba.impact_factors_uniform(n), sizes))
    other = float(ba.server_sensitivity(1.0, p, sizes))
    return uni <= other * (1 + 1e-12), f"sensitivity (10): uniform {uni:.6g}, random p {other:.6g}"


def _lemma1(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n, dim = v["N"], int(rng.integers(1, 6))
    p = random_impact(rng, n)
    g = rng.standard_normal((n, dim)) * rng.uniform(0.1, 3.0, (n, 1)) + rng.standard_normal(dim)
    gl = p @ g
    norm = float(np.linalg.norm(gl))
    if norm < 1e-6:
        return True, "grad L = 0: A undefined (skipped)"
    norms = np.linalg.norm(g, axis=1)
    a_emp = ba.empirical_dissimilarity(p, norms, norm)
    second = float(p @ norms**2)
    spread = float(p @ np.sum((g - gl) ** 2, axis=1))
    zeta = float(np.max(np.linalg.norm(g - gl, axis=1)[p > 0]))
    ok = a_emp >= 1 - 1e-12 and math.isclose(second, norm**2 + spread, rel_tol=1e-9, abs_tol=1e-12)
    ok &= second <= norm**2 + zeta**2 + 1e-9 and a_emp <= float(ba.dissimilarity_A1(norm, zeta)) + 1e-9
    return bool(ok), f"A_emp = {a_emp:.6g}, A_1 = {float(ba.dissimilarity_A1(norm, zeta)):.6g}"


def _a_prime(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n = v["N"]
    p_old, p_new = random_impact(rng, n), random_impact(rng, n)
    norms = rng.uniform(0, 3, n)
    g = float(rng.uniform(0.1, 2))
    a = ba.empirical_dissimilarity(p_old, norms, g)
    a_p = ba.adaptive_dissimilarity(p_new - p_old, norms, g, a)
    same = ba.adaptive_dissimilarity(np.zeros(n), norms, g, a)
    ok = math.isclose(a_p, ba.empirical_dissimilarity(p_new, norms, g), rel_tol=1e-9, abs_tol=1e-12)
    return bool(ok and same == a and a_p >= -1e-12), f"A = {a:.6g}, A' = {a_p:.6g}"


def _shift_term(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    rng = np.random.default_rng(v["draw"])
    n = max(v["N"], 2)
    p_old, p_new = random_impact(rng, n), random_impact(rng, n)
    losses = rng.uniform(0, 5, n)
    lhs = ba.adaptive_weight_shift_term(p_new - p_old, losses) / n
    mid = (losses.max() - losses.min()) / 2
    return bool(lhs <= mid + 1e-12 and mid <= losses.max() / 2 + 1e-12), f"{lhs:.6g} <= {mid:.6g}"


def quadratic_lemma2_check(seed: int) -> dict[str, float]:
    """One random instance of PADPFL's Lemma 2 setting, with exact arithmetic where it matters.

    N convex quadratics ``l_i(x) = 1/2 (x - b_i)' H_i (x - b_i)`` in d dimensions (rho = the largest
    eigenvalue), a random anchor ``x~``, gamma-inexact proximal steps (``||grad h_i(x_i)|| = gamma ||grad
    l_i(x~)||``, random direction), the aggregate ``sum p_i x_i`` plus ``N(0, s^2 I_d)``.  Returns the slack
    (bound minus quantity; >= 0 where the inequality holds) of (36), (37), (39), (40) (one noise draw),
    (42)/(43) and Lemma 2's (23) with the tight A at ``x~`` and the exact d-dimensional noise moments
    (E11), the expectation over the noise taken in closed form.  Spec 001 F31-F36, claim M20.
    """
    rng = np.random.default_rng(seed)
    n, dim = int(rng.integers(2, 6)), int(rng.integers(1, 6))
    p = random_impact(rng, n, zeros=False)
    hs = []
    for _ in range(n):
        q = rng.standard_normal((dim, dim))
        hs.append(q @ q.T / dim * rng.uniform(0.1, 2.0))
    hs = np.stack(hs)
    b = rng.standard_normal((n, dim)) * 2
    rho = float(max(np.linalg.eigvalsh(h).max() for h in hs))
    mu = float(rng.uniform(0.5, 10.0)) * rho
    gamma = float(rng.choice([0.0, rng.uniform(0, 1)]))
    anchor = rng.standard_normal(dim) * 2
    s = float(rng.uniform(0, 1))
    grads = np.einsum("nij,nj->ni", hs, anchor - b)
    exact = np.stack(
        [np.linalg.solve(hs[i] + mu * np.eye(dim), hs[i] @ b[i] + mu * anchor) for i in range(n)]
    )
    dirs = rng.standard_normal((n, dim))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    g_norms = np.linalg.norm(grads, axis=1)
    resid = dirs * (gamma * g_norms)[:, None]  # grad h_i at x_i
    x_i = exact + np.stack([np.linalg.solve(hs[i] + mu * np.eye(dim), resid[i]) for i in range(n)])
    grad_l = p @ grads
    gl = float(np.linalg.norm(grad_l))
    a_emp = float(p @ g_norms) / gl if gl > 0 else 1.0
    agg = p @ x_i
    noise = rng.standard_normal(dim) * s
    chi = math.sqrt(2) * math.exp(math.lgamma((dim + 1) / 2) - math.lgamma(dim / 2))
    e1, e2 = s * chi, s**2 * dim
    h = np.einsum("n,nij->ij", p, hs)

    def loss(x: np.ndarray) -> float:
        diff = x - b
        return float(0.5 * p @ np.einsum("ni,nij,nj->n", diff, hs, diff))

    lhs = loss(agg) + 0.5 * s**2 * float(np.trace(h)) - loss(anchor)  # E over the noise, exact
    lam = ba.lemma2_lambdas(max(a_emp, 1.0), gamma, rho, mu)
    grads_at_x = np.einsum("nij,nj->ni", hs, x_i - b)
    inner = float(grad_l @ (p @ (resid + grads - grads_at_x)))
    out = {
        "F31": float(np.min(gamma / mu * g_norms - np.linalg.norm(x_i - exact, axis=1))),
        "F32": float(np.min(g_norms / mu - np.linalg.norm(exact - anchor, axis=1))),
        "F33": float(np.min((1 + gamma) / mu * g_norms - np.linalg.norm(x_i - anchor, axis=1))),
        "F34": float(
            a_emp * (1 + gamma) / mu * gl + np.linalg.norm(noise) - np.linalg.norm(agg + noise - anchor)
        ),
        "F35": float((a_emp * gamma + rho * a_emp * (1 + gamma) / mu) * gl**2 - inner),
        "F36": float(ba.per_round_increment_bound(gl, e1, e2, lam)) - lhs,
    }
    scale = 1e-9 * (1 + abs(lhs) + gl**2 + e2)
    return {k: v + scale for k, v in out.items()}


def _lemma2(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    slack = quadratic_lemma2_check(int(v["draw"]))
    bad = {k: x for k, x in slack.items() if x < 0}
    return not bad, (f"violated: {bad}" if bad else f"F31-F36 hold (min slack {min(slack.values()):.3g})")


# --- predicates on the formulas -----------------------------------------------------------------------
def _variance_identity(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    a, ac, s = _value(ba.SIGMA_TOTAL, v), _value(ba.SIGMA_AGG_CLIENT, v), _value(ba.SIGMA_SERVER, v)
    if s > 0:
        return bool(
            np.isclose(ac**2 + s**2, a**2, rtol=1e-9)
        ), f"sigma_AC^2 + sigma_S^2 = {ac**2 + s**2:.10g}"
    return bool(
        ac >= a * (1 - 1e-6)
    ), f"sigma_S = 0 and sigma_AC = {float(ac):.6g} >= sigma_A = {float(a):.6g}"


def _sigma_c_independent(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    used = {p.name for p in ba.SIGMA_CLIENT.parameters()}
    return not used & {"p_max", "S2", "N", "T"}, f"sigma_C depends on {sorted(used)}"


def _nbafl_limit(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    from fedbound.bounds import nbafl

    n, t, r = v["N"], v["T"], v["R"]
    ours = float(
        ba.server_noise_sigma(v["eps"], v["delta"], t, r, ba.impact_factors_uniform(n), v["B"], [v["m_min"]])
    )
    theirs = float(nbafl.sigma_downlink(v["eps"], v["delta"], v["B"], v["m_min"], n, t, r))
    ok = math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12 * (1 + abs(theirs)))
    lam_ours = ba.lemma2_lambdas(v["A"], 0.0, v["rho"], v["mu"])
    lam_nb = nbafl.lambdas(v["mu"], v["rho"], v["A"])
    ok &= math.isclose(lam_ours[0], float(lam_nb[2]), rel_tol=1e-9, abs_tol=1e-12)
    ok &= math.isclose(lam_ours[1] - 1, float(lam_nb[1]) - 1 / v["mu"], rel_tol=1e-9, abs_tol=1e-12)
    return bool(ok), f"sigma_S = {ours:.12g}, NbAFL sigma_D = {theirs:.12g}; lambda_2 {lam_ours[0]:.6g}"


def _corrected_identity(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    lam = (float(_value(ba.LAMBDA2, v)), float(_value(ba.LAMBDA1, v)), float(_value(ba.LAMBDA0, v)))
    sig = 2 * v["B"] * v["p_max"] * v["T"] * v["c"] / (v["m_min"] * v["eps"])
    inc = ba.per_round_increment_bound(v["beta"], *ba.noise_moments(sig, v["N"]), lam)
    rhs = v["Theta"] + v["T"] * float(inc)
    lhs = float(_value(ba.BOUND, v, variant))
    return math.isclose(
        lhs, rhs, rel_tol=1e-9, abs_tol=1e-12
    ), f"bound = {lhs:.12g}, Theta + T inc = {rhs:.12g}"


def _uniform_k(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    n, m = v["N"], v["m_min"]
    u = {**v, "p_max": 1 / n, "S2": 1 / n, "m_max": m}
    l1, l0 = float(_value(ba.LAMBDA1, u)), float(_value(ba.LAMBDA0, u))
    k1_ = float(_value(ba.K1, u, variant))
    k0_ = float(_value(ba.K0, u, variant))
    e1 = 2 * l1 * v["beta"] * v["B"] * v["c"] / m * math.sqrt(2 / (n * math.pi))
    e0 = 4 * l0 * v["B"] ** 2 * v["c"] ** 2 / (m**2 * n)
    return math.isclose(k1_, e1, rel_tol=1e-9) and math.isclose(
        k0_, e0, rel_tol=1e-9
    ), f"k1 = {k1_:.10g} (expected {e1:.10g}), k0 = {k0_:.10g} (expected {e0:.10g})"


def _theorem3_vs_2(v: dict[str, Any], variant: str) -> tuple[bool, str]:
    k2p_ = float(_value(ba.K2_PRIME, v, variant))
    l2p = float(_value(ba.LAMBDA2_PRIME, v))
    ok = math.isclose(k2p_ - l2p * v["beta"] ** 2, v["l_max"] / 2, rel_tol=1e-9, abs_tol=1e-12)
    if v["A_prime"] >= v["A"]:
        for a, b in ((ba.K2_PRIME, ba.K2), (ba.K1_PRIME, ba.K1), (ba.K0_PRIME, ba.K0)):
            ok &= float(_value(a, v, variant)) >= float(_value(b, v, variant)) - 1e-12
    return bool(
        ok
    ), f"k2' - lambda2' beta^2 = {k2p_ - l2p * v['beta'] ** 2:.10g}, l_max/2 = {v['l_max'] / 2:.10g}"


def _uniform_sigma(name: str) -> Any:
    from fedbound.bounds.claims import Computed

    th = ba.SIGMA_TOTAL if name == "sigma_A" else ba.SIGMA_SERVER

    def fn(values: dict[str, Any], variant: str) -> np.ndarray:
        n = np.asarray(values["N"], dtype=float)
        return _value(th, {**values, "p_max": 1 / n, "S2": 1 / n}, variant)

    return Computed(f"{name}(uniform p)", fn, f"{name} at p_i = 1/N")


_UNIFORM = Region(
    {
        "eps": (0.5, 100, "log"),
        "delta": (1e-6, 0.5, "log"),
        "B": (0.1, 50, "log"),
        "R": (1, 3),
        "m_min": (10, 500),
        "N": (2, 100),
        "T": (1, 300),
        **LOSS,
    },
    derived=(("c", lambda v: float(ba.gaussian_c(v["delta"]))),),
    where=(("R <= T", lambda v: v["R"] <= v["T"]),),
    integers=_INTS,
    doc="uniform p, equal sizes (the NbAFL setting)",
)
_LAMBDA = Region({k: LOSS[k] for k in ("A", "gamma", "rho", "mu")}, fixed={"rho_minus": 0.0})
_TV_NONPRIVATE = {**TV1, "eps": 1e12}
_ADAPTIVE = replace(FULL, ranges={**FULL.ranges, "A_prime": (0.0, 4.0), "l_max": (0.0, 5.0)})
_SEVERE = replace(FULL, ranges={**FULL.ranges, "A": (2.0, 3.0), "gamma": (0.5, 1.0)}, doc="A gamma >= 1")
_DRAWS = Region({"draw": (0, 10**6)}, integers=_INTS, doc="seeded random convex quadratic instances")

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "M1a",
        "sigma_C is linear in B",
        ba.SIGMA_CLIENT,
        "homogeneous",
        PRIVACY,
        wrt="B",
        degree=1,
        source="eq. (8), F12",
    ),
    Claim(
        "M1b",
        "sigma_C is linear in R",
        ba.SIGMA_CLIENT,
        "homogeneous",
        PRIVACY,
        wrt="R",
        degree=1,
        source="eq. (8), F12",
    ),
    Claim(
        "M1c",
        "sigma_C is linear in c",
        ba.SIGMA_CLIENT,
        "homogeneous",
        PRIVACY,
        wrt="c",
        degree=1,
        source="eq. (8), F12",
    ),
    Claim(
        "M1d",
        "sigma_C is proportional to 1/m_min and to 1/eps",
        ba.SIGMA_CLIENT,
        "homogeneous",
        PRIVACY,
        wrt="eps",
        degree=-1,
        source="eq. (8), F12",
    ),
    Claim(
        "M1e",
        "sigma_C does not depend on p, N or T (eq. (8))",
        ba.SIGMA_CLIENT,
        "predicate",
        PRIVACY,
        other=_sigma_c_independent,
        source="eq. (8), E15",
    ),
    Claim(
        "M2a",
        "sigma_A is linear in T",
        ba.SIGMA_TOTAL,
        "homogeneous",
        PRIVACY,
        wrt="T",
        degree=1,
        source="F17",
    ),
    Claim(
        "M2b",
        "sigma_A is proportional to 1/m_min",
        ba.SIGMA_TOTAL,
        "homogeneous",
        PRIVACY,
        wrt="m_min",
        degree=-1,
        source="F17",
    ),
    Claim(
        "M2c",
        "sigma_A is strictly increasing in p_max",
        ba.SIGMA_TOTAL,
        "increasing",
        PRIVACY,
        wrt="p_max",
        line=(0.01, 1.0),
        source="F17",
    ),
    Claim(
        "M3",
        "R <= T_th <= R sqrt(N+); R sqrt(N) for uniform p, R for one-hot p; increasing in R",
        ba.THRESHOLD,
        "predicate",
        _VECTORS,
        other=_threshold_facts,
        source="Theorem 1, F20",
    ),
    Claim(
        "M4",
        "sigma_S = 0 iff T <= T_th (exactly 0 at the boundary), continuous at T_th",
        ba.SIGMA_SERVER,
        "predicate",
        _VECTORS,
        other=_zero_iff_below,
        source="Theorem 1, F19",
    ),
    Claim(
        "M5a",
        "sigma_S is non-decreasing in T",
        ba.SIGMA_SERVER,
        "increasing",
        PRIVACY,
        wrt="T",
        strict=False,
        line=(1.0, 400.0),
        source="Theorem 1",
    ),
    Claim(
        "M5b",
        "sigma_S is non-increasing in R",
        ba.SIGMA_SERVER,
        "decreasing",
        PRIVACY,
        wrt="R",
        strict=False,
        line=(1, 5),
        source="Theorem 1",
    ),
    Claim(
        "M5c",
        "sigma_S is proportional to 1/eps",
        ba.SIGMA_SERVER,
        "homogeneous",
        PRIVACY,
        wrt="eps",
        degree=-1,
        source="Theorem 1",
    ),
    Claim(
        "M5d",
        "sigma_S is proportional to B",
        ba.SIGMA_SERVER,
        "homogeneous",
        PRIVACY,
        wrt="B",
        degree=1,
        source="Theorem 1",
    ),
    Claim(
        "M5e",
        "sigma_S is non-increasing in m_min",
        ba.SIGMA_SERVER,
        "decreasing",
        PRIVACY,
        wrt="m_min",
        strict=False,
        line=(1, 1000),
        source="Theorem 1",
    ),
    Claim(
        "M6",
        "sigma_S is invariant under permutations of p (the S4 switch keeps it)",
        ba.SIGMA_SERVER,
        "predicate",
        _VECTORS,
        other=_permutation,
        source="Theorem 1, E25",
    ),
    Claim(
        "M7",
        "sigma_AC^2 + sigma_S^2 = sigma_A^2 above T_th; sigma_AC >= sigma_A below",
        ba.SIGMA_SERVER,
        "predicate",
        PRIVACY,
        other=_variance_identity,
        source="eqs. (12)-(14), F16-F19",
    ),
    Claim(
        "M8a",
        "uniform p, equal m: sigma_S equals NbAFL's Theorem 1; lambda_2 equals NbAFL's (gamma = 0)",
        ba.SIGMA_SERVER,
        "predicate",
        _UNIFORM,
        other=_nbafl_limit,
        source="Theorem 1, NbAFL eq. (10)",
    ),
    Claim(
        "M8b",
        "uniform p: sigma_A decreases in N",
        _uniform_sigma("sigma_A"),
        "decreasing",
        _UNIFORM,
        wrt="N",
        line=(2, 400),
        source="Theorem 1 discussion",
    ),
    Claim(
        "M8c",
        "uniform p: sigma_S is non-increasing in N",
        _uniform_sigma("sigma_S"),
        "decreasing",
        _UNIFORM,
        wrt="N",
        strict=False,
        line=(2, 400),
        source="Theorem 1 discussion",
    ),
    Claim(
        "M9",
        "the Monte Carlo SD of sum p_i n_i equals sqrt(sum p_i^2 sigma_i^2)",
        ba.SIGMA_AGG_CLIENT,
        "predicate",
        _VECTORS,
        other=_monte_carlo,
        source="eq. (12), F16",
    ),
    Claim(
        "M10a", "lambda_0 = rho/2", ba.LAMBDA0, "compare", _LAMBDA, other=lambda v: v["rho"] / 2, source="F39"
    ),
    Claim("M10b", "lambda_1 > 1", ba.LAMBDA1, "compare", _LAMBDA, other=1.0, op=">", source="F38"),
    Claim("M10c", "lambda_1 is increasing in A", ba.LAMBDA1, "increasing", _LAMBDA, wrt="A", source="F38"),
    Claim(
        "M10d",
        "lambda_1 is increasing in gamma",
        ba.LAMBDA1,
        "increasing",
        _LAMBDA,
        wrt="gamma",
        source="F38",
    ),
    Claim("M10e", "lambda_1 is decreasing in mu", ba.LAMBDA1, "decreasing", _LAMBDA, wrt="mu", source="F38"),
    Claim("M11a", "lambda_2 is increasing in A", ba.LAMBDA2, "increasing", _LAMBDA, wrt="A", source="F37"),
    Claim(
        "M11b",
        "lambda_2 is increasing in gamma",
        ba.LAMBDA2,
        "increasing",
        _LAMBDA,
        wrt="gamma",
        source="F37",
    ),
    Claim(
        "M11c", "lambda_2 is increasing in rho", ba.LAMBDA2, "increasing", _LAMBDA, wrt="rho", source="F37"
    ),
    Claim(
        "M13",
        "the bound is convex in T >= 0",
        ba.BOUND_D2T,
        "compare",
        FULL,
        other=0.0,
        op=">=",
        source="eq. (46), F47",
    ),
    Claim(
        "M14a",
        "the bound is strictly decreasing in eps (larger eps, lower loss)",
        ba.BOUND,
        "decreasing",
        FULL,
        wrt="eps",
        source="eq. (46), Remark after Theorem 2",
    ),
    Claim(
        "M14b",
        "non-private limit: the bound tends to Theta + k_2 T as eps -> infinity",
        ba.BOUND,
        "compare",
        replace(
            FULL,
            fixed={**FULL.fixed, "eps": 1e20},
            ranges={k: r for k, r in FULL.ranges.items() if k != "eps"},
        ),
        other=lambda v: v["Theta"] + float(_value(ba.K2, v)) * v["T"],
        rtol=1e-6,
        source="eq. (46)",
    ),
    Claim(
        "M15a",
        "the bound is non-decreasing in p_max",
        ba.BOUND,
        "increasing",
        FULL,
        wrt="p_max",
        line=(0.01, 1.0),
        source="eq. (46)",
    ),
    Claim(
        "M15b", "the bound is non-decreasing in B", ba.BOUND, "increasing", FULL, wrt="B", source="eq. (46)"
    ),
    Claim(
        "M15c",
        "the bound is non-decreasing in N at fixed p_max",
        ba.BOUND,
        "increasing",
        FULL,
        wrt="N",
        strict=False,
        line=(2, 400),
        source="eq. (46)",
    ),
    Claim(
        "M15d",
        "the corrected bound is non-increasing in m_min",
        ba.BOUND,
        "decreasing",
        FULL,
        wrt="m_min",
        variant="corrected",
        line=(1, 2000),
        source="eq. (46), E2",
    ),
    Claim(
        "M16",
        "uniform p minimises the sensitivity (10), hence sigma_A, k_1, k_0 and the bound",
        ba.SERVER_SENSITIVITY,
        "predicate",
        _VECTORS,
        other=_uniform_minimises,
        source="Sec. 3.10, E26",
        fails_in="the tight sensitivity max_i 2B p_i/m_i with unequal sizes (p ~ m is better)",
        counterexamples=(({"draw": 1, "N": 20, "R": 1, "reading": "tight"}, "paper"),),
    ),
    Claim(
        "M17",
        "uniform p, equal m (corrected): k_1 ~ 1/sqrt(N), k_0 ~ 1/N (NbAFL (52) with 2B/(mN))",
        ba.K1,
        "predicate",
        FULL,
        variant="corrected",
        other=_uniform_k,
        source="eq. (46), NbAFL (52)",
    ),
    Claim(
        "M18",
        "bound(T) = Theta + T * (Lemma 2's per-round increment at beta with the moments (49))",
        ba.BOUND,
        "predicate",
        FULL,
        variant="corrected",
        other=_corrected_identity,
        source="eqs. (48)-(50)",
        fails_in="the printed constants of eq. (46): k_0 misses the N of eq. (49), and max m replaces the "
        "min m of eq. (10)",
        counterexamples=((TV1, "paper"),),
    ),
    Claim(
        "M19",
        "Lemma 1: A_emp >= 1, the second-moment identity, A_emp <= A_1",
        ba.LAMBDA1,
        "predicate",
        _VECTORS,
        other=_lemma1,
        source="Lemma 1, eqs. (15)-(22)",
    ),
    Claim(
        "M20",
        "Lemma 2 and (36)-(43) hold on convex quadratics with gamma-inexact prox steps",
        ba.LAMBDA2,
        "predicate",
        _DRAWS,
        other=_lemma2,
        source="Lemma 2, eqs. (23)-(45)",
    ),
    Claim(
        "M21",
        "A' = A_emp(p^(t+1)) when A = A_emp(p^(t)) (same grad L); alpha = 0 gives A' = A",
        ba.LAMBDA2_PRIME,
        "predicate",
        _VECTORS,
        other=_a_prime,
        source="eq. (56)",
    ),
    Claim(
        "M22",
        "(1/N) sum alpha_i l_i <= (max l - min l)/2 <= max l / 2",
        ba.K2_PRIME,
        "predicate",
        _VECTORS,
        other=_shift_term,
        source="eq. (60), E16",
    ),
    Claim(
        "M23",
        "Theorem 3 vs 2: k_2' - lambda_2' beta^2 = l_max/2; A' >= A gives k' >= k",
        ba.K2_PRIME,
        "predicate",
        _ADAPTIVE,
        variant="corrected",
        other=_theorem3_vs_2,
        source="eq. (69)",
    ),
    Claim(
        "M24",
        "k_2 >= 0 (A gamma >= 1): the bound is increasing in T from T = 0",
        ba.BOUND,
        "increasing",
        _SEVERE,
        wrt="T",
        line=(0.0, 300.0),
        source="F47",
    ),
    Claim(
        "M25",
        "the bound of an optimality gap is non-negative",
        ba.BOUND,
        "compare",
        _SEVERE,
        other=0.0,
        op=">=",
        source="eq. (46), E6",
        fails_in="lambda_2 < 0 and large T: Theta + lambda_2 beta^2 T < 0 (A = 1.2, gamma = 0.1, rho = 1, "
        "mu = 4, beta = 1, non-private: T >= 28)",
        counterexamples=(
            ({**_TV_NONPRIVATE, "T": 28.0}, "paper"),
            ({**_TV_NONPRIVATE, "T": 28.0}, "corrected"),
        ),
    ),
    Claim(
        "M25s",
        "with the sound k_2 = max(lambda_2, 0) beta^2 the bound is never negative",
        ba.BOUND,
        "compare",
        FULL,
        variant="sound",
        other=0.0,
        op=">=",
        source="E6",
    ),
)
"""Every declared claim of PADPFL about its formulas (M12/M13's optimiser parts are in
fedbound.scheduling.adaptive)."""
CLAIMS_BY_ID = {c.id: c for c in CLAIMS}
