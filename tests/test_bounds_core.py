"""The theorem-as-data core: domains, conditions, variants, cached vectorised lambdify, derivatives, LaTeX."""

import warnings

import numpy as np
import pytest
import sympy as sp

from fedbound.bounds import nbafl as nb
from fedbound.bounds.core import Condition, Definition, Notation, Param, Source, Theorem, Variant
from fedbound.errors import (
    ClassicGaussianRangeWarning,
    DomainError,
    FedboundWarning,
    ParameterError,
    VacuousBoundWarning,
)

TV1 = {**nb.TV1}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VacuousBoundWarning)
        warnings.simplefilter("ignore", ClassicGaussianRangeWarning)
        yield


def _toy() -> tuple[Notation, Theorem]:
    x = sp.Symbol("x", positive=True)
    n = sp.Symbol("n", positive=True)
    notation = Notation("toy", [Param("x", x, "a real", 0.0, low_open=True),
                                Param("n", n, "a count", 1, integer=True)])
    r = notation.define(Definition(sp.Symbol("r"), sp.log(x - 1) / n, "log part",
                                   (Condition("x>1", x > 1, "undefined", "log needs x > 1", "x", "x > 1"),)))
    notation.add_variant(Variant("squared", "r squared", "toy erratum", (Definition(r,
        (sp.log(x - 1) / n) ** 2),),
                                 drops=()))
    notation.add_variant(Variant("other", "conflicting", "toy", (Definition(r, x),)))
    th = Theorem(notation, "toy", r + 1, lhs="f", source=Source("000", "eq. (1)"), doc="toy theorem",
                 conditions=(Condition("small", r < 10, "caveat", "r is large", "r", "r < 10",
                     FedboundWarning),))
    return notation, th


def test_param_domain_errors_name_the_parameter():
    _, th = _toy()
    with pytest.raises(ParameterError, match=r"x = -1\.0 is outside its valid range \(0, inf\)"):
        th(x=-1.0, n=1)
    with pytest.raises(ParameterError, match="n = 1.5"):
        th(x=3.0, n=1.5)
    with pytest.raises(ParameterError, match="needs n"):
        th(x=3.0)
    with pytest.raises(TypeError, match="unknown parameter"):
        th(x=3.0, n=1, y=2)


def test_undefined_points_raise_or_are_flagged_never_silent_nan():
    _, th = _toy()
    with pytest.raises(DomainError, match=r"x = 0\.5 is outside its valid range x > 1") as info:
        th(x=0.5, n=1)
    assert info.value.name == "x"
    ev = th.evaluate(x=np.array([0.5, 2.0, 3.0]), n=1)
    assert ev.defined.tolist() == [False, True, True]
    assert np.isnan(ev.value[0]) and np.isfinite(ev.value[1:]).all()
    assert "at 1 of 3 points" in ev.warnings[0]
    with pytest.raises(DomainError):
        ev.require()


def test_caveat_warns_and_marks_invalid():
    _, th = _toy()
    big = float(np.exp(20) + 1)
    with pytest.warns(FedboundWarning, match="r is large"):
        assert th(x=big, n=1) == pytest.approx(21.0)
    assert th.evaluate(x=big, n=1).valid is False
    assert th.evaluate(x=3.0, n=1).valid is True


def test_variants_substitute_definitions_and_combine():
    _, th = _toy()
    assert th(x=3.0, n=2, variant="squared") == pytest.approx((np.log(2) / 2) ** 2 + 1)
    assert set(th.variants()) == {"squared", "other"}
    both = th.compare(x=3.0, n=2)
    assert both["paper"].value != both["squared"].value
    with pytest.raises(ParameterError, match="variant"):
        th(x=3.0, n=2, variant="nope")
    with pytest.raises(ParameterError, match="both redefine"):
        th(x=3.0, n=2, variant="squared+other")
    # nbafl: two variants touching different definitions combine
    value = nb.K_BOUND({**nb.TV1, "eps": 6.0, "K": 20}, variant="two_sided+regime_aware")
    assert np.isfinite(value)


def test_vectorised_evaluation_of_a_million_points():
    T = np.linspace(0.0, 200.0, 1_000_000)
    h = nb.BOUND({**TV1, "T": T})
    assert h.shape == T.shape and np.isfinite(h).all()
    assert h[0] == pytest.approx(TV1["Theta"])
    grid = nb.BOUND({**TV1, "eps": np.geomspace(1, 100, 50)[:, None], "N": np.arange(2, 52)[None, :]})
    assert grid.shape == (50, 50)
    assert grid[10, 20] == pytest.approx(nb.BOUND({**TV1, "eps": np.geomspace(1, 100, 50)[10], "N": 22}))


def test_lambdify_is_cached():
    nb.BOUND(TV1)
    fn1 = nb.BOUND.function("paper")[0]
    nb.BOUND({**TV1, "T": 3.0})
    assert nb.BOUND.function("paper")[0] is fn1
    assert nb.BOUND.derivative("T") is nb.BOUND.derivative("T")


@pytest.mark.parametrize("name, wrt", [("bound", "T"), ("bound", "eps"), ("bound", "mu"), ("bound", "delta"),
                                       ("k_bound", "T"), ("k_bound", "eps"), ("k_bound", "mu"),
                                       ("sigma_downlink", "T"), ("sigma_downlink_k", "T")])
@pytest.mark.parametrize("variant", ["paper", "regime_aware"])
def test_sympy_derivatives_match_finite_differences(name, wrt, variant):
    th = nb.THEOREMS[name]
    point = {**TV1, "eps": 6.0, "K": 20, "T": 60.0, "delta": 0.01}
    x0 = float(point[wrt])
    h = 1e-4 * x0
    up, down = th({**point, wrt: x0 + h}, variant=variant), th({**point, wrt: x0 - h}, variant=variant)
    fd = (up - down) / (2 * h)
    assert th.derivative(wrt)({**point, wrt: x0}, variant=variant) == pytest.approx(fd, rel=1e-6)
    d2 = (up - 2 * th(point, variant=variant) + down) / h**2
    assert th.derivative(wrt, 2)(point, variant=variant) == pytest.approx(d2, rel=1e-3)


def test_latex_and_description():
    text = nb.BOUND.latex()
    assert text.startswith("h(T) = ") and r"\kappa" not in text and r"\lambda_{1}" in text
    lam1_paper = r"\lambda_{1} = \frac{B \rho}{\mu} + \frac{1}{\mu}"
    lam1_dimensional = r"\lambda_{1} = \frac{B \rho}{\mu} + 1"
    assert lam1_paper in text and lam1_dimensional in nb.BOUND.latex("dimensional_lambda1")
    assert nb.BOUND._repr_latex_().startswith("$")
    assert "T" in nb.BOUND.latex(expand=True)
    desc = nb.K_BOUND.describe()
    assert "(60)" in desc and "NbAFL (Wei et al. 2020), eq. (17)" in desc and "two_sided" in desc
    assert "seed 0" not in desc and "spec" not in desc  # cited as a reader cites it, no internal ids


def test_parameters_follow_the_variant():
    names = [p.name for p in nb.BOUND.parameters()]
    assert "L" not in names and "d" not in names
    assert "L" in [p.name for p in nb.BOUND.parameters("regime_aware")]
    assert "d" in [p.name for p in nb.BOUND.parameters("noise_dimension")]
    with pytest.raises(ParameterError, match="needs d"):
        nb.BOUND(TV1, variant="noise_dimension")


def test_evaluation_to_dict_is_complete():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = nb.K_BOUND.evaluate({**TV1, "eps": 50.0, "K": 20}).to_dict()
    assert d["defined"] is False and d["theorem"] == "k_bound" and d["warnings"]
