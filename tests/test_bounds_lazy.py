"""Theorem stand-ins (fedbound.bounds.lazy): a cached plan imports no sympy; a stand-in is its theorem."""

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds.lazy import LazyTheorem

LAZY = ["nbafl", "udp", "dppfl", "adaptive", "wpfl"]


def _modules(paper):
    return (importlib.import_module(f"fedbound.bounds.{paper}"),
            importlib.import_module(f"fedbound.bounds.{paper}_theory"))


@pytest.mark.parametrize("paper", LAZY)
def test_every_declared_theorem_has_a_stand_in_that_mirrors_it(paper):
    facade, theory = _modules(paper)
    assert set(facade.THEOREMS) == set(theory.THEOREMS)
    for key, stand_in in facade.THEOREMS.items():
        real = theory.THEOREMS[key]
        assert isinstance(stand_in, LazyTheorem)
        assert stand_in.real is real
        assert (stand_in.name, stand_in.lhs, stand_in.doc, stand_in.source) == (real.name, real.lhs, real.doc,
                                                                                str(real.source))
        assert stand_in.variants() == real.variants()
        assert [p.name for p in stand_in.parameters()] == [p.name for p in real.parameters()]
        assert stand_in.expression() == real.expression()  # symbolic requests reach the declarations
    assert list(facade.NOTATION.params) == list(theory.NOTATION.params)
    assert list(facade.NOTATION.variants) == list(theory.NOTATION.variants)
    assert facade.NOTATION.fingerprint == theory.NOTATION.fingerprint


@pytest.mark.parametrize("paper", LAZY)
def test_declarations_are_reachable_through_the_module(paper):
    facade, theory = _modules(paper)
    assert facade.PARAMS is theory.PARAMS  # module __getattr__
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        facade.no_such_name  # noqa: B018


def test_a_stand_in_derivative_equals_the_declared_one():
    from fedbound.bounds import nbafl as nb
    from fedbound.bounds import nbafl_theory as nt

    point = {**nb.TV1, "T": 7.0}
    lazy = nb.BOUND.derivative("eps", 2)
    assert lazy.name == nt.BOUND.derivative("eps", 2).name
    assert lazy(point) == nt.BOUND.derivative("eps", 2)(point)
    with pytest.raises(ValueError, match="wrt"):
        nb.BOUND.derivative("nope")


def test_unchecked_is_the_compiled_value_in_the_named_order():
    from fedbound.bounds import nbafl as nb

    names = ("mu", "T", "eps", "delta", "N", "C", "m", "Theta", "l", "beta", "rho", "B", "unused")
    point = {**nb.TV1, "T": 7.0}
    fn = nb.BOUND.unchecked(names)
    assert fn(*(point.get(n, 0.0) for n in names)) == pytest.approx(nb.BOUND(point), rel=1e-15)
    with pytest.raises(ValueError, match="mu"):
        nb.BOUND.unchecked(names[1:])


def test_shared_constants_agree():
    from fedbound.bounds import adaptive, adaptive_theory, udp, udp_theory

    assert adaptive.RADICAND_RTOL == adaptive_theory.RADICAND_RTOL
    assert (udp.SEED, udp.SHORT) == (udp_theory.SEED, udp_theory.SHORT)


def test_a_cached_plan_imports_neither_sympy_nor_scipy(tmp_path):
    env = {**os.environ, "FEDBOUND_CACHE_DIR": str(tmp_path)}
    args = ["plan", "nbafl", "--set", "N=50", "--set", "m=100", "--set", "C=20", "--set", "eps=6",
            "--set", "delta=0.01", "--json"]
    probe = (f"import sys, json\nfrom fedbound.cli import main\nmain({args!r})\n"
             "print(json.dumps({m: m in sys.modules for m in ('sympy', 'scipy', 'torch', 'pandas')}))")
    run = [sys.executable, "-c", probe]
    first = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    second = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert json.loads(first.stdout.splitlines()[-1])["sympy"]  # the first plan fills the cache
    plan_1 = json.loads("\n".join(first.stdout.splitlines()[:-1]))
    plan_2 = json.loads("\n".join(second.stdout.splitlines()[:-1]))
    assert plan_1 == plan_2
    assert json.loads(second.stdout.splitlines()[-1]) == {"sympy": False, "scipy": False, "torch": False,
                                                          "pandas": False}


# -- helpers the cold path relies on -------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.floats(-1e4, 40.0, allow_nan=False))
def test_log_ndtr_equals_scipy(x):
    from scipy.special import log_ndtr as reference

    from fedbound.accounting._numerics import log_ndtr

    got, want = float(log_ndtr(np.array(x))), float(reference(x))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300)


def test_log_ndtr_of_a_few_values_equals_its_array_path_bit_for_bit():
    """Up to 32 values go element by element; the floats are the array path's (so a batch of runs and one
    run alone get the same eps whatever the count of distinct values)."""
    from fedbound.accounting._numerics import log_ndtr

    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-1e3, 40.0, 3000), np.linspace(-40.0, 10.0, 200),
                        [-np.inf, np.inf, np.nan, 0.0, -37.0, -37.0000001]])
    few = np.concatenate([log_ndtr(x[i:i + 16]) for i in range(0, x.size, 16)])
    np.testing.assert_array_equal(few, log_ndtr(x))


def test_log_ndtr_edges_and_shapes():
    from scipy.special import log_ndtr as reference

    from fedbound.accounting._numerics import log_ndtr

    x = np.array([[-np.inf, -1e200, -37.0, -36.999], [0.0, -0.0, 8.0, np.inf]])
    np.testing.assert_allclose(log_ndtr(x), reference(x), rtol=1e-13)
    grid = np.linspace(-60.0, 30.0, 10_001)  # large arrays take scipy's ufunc: the same values
    small = np.concatenate([log_ndtr(chunk) for chunk in np.array_split(grid, 10)])
    np.testing.assert_allclose(log_ndtr(grid), small, rtol=1e-12)
    assert np.isnan(log_ndtr(np.array(np.nan)))
    assert log_ndtr(np.array([])).shape == (0,)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20)),
       st.sampled_from([(None, None, False, False), (0.0, None, True, False), (1.0, 50.0, False, True),
                        (-3.0, 3.0, True, True)]))
def test_one_number_is_checked_as_an_array_of_one(value, bounds):
    """The scalar fast path of check_real / check_int accepts and rejects exactly what the array path does."""
    from fedbound.checks import check_int, check_real
    from fedbound.errors import ParameterError

    low, high, low_open, high_open = bounds

    def outcome(fn, v, **kw):
        try:
            return np.asarray(fn("x", v, **kw)).reshape(-1).tolist()
        except ParameterError as exc:
            return str(exc).replace(" (first offending element at index 0)", "")

    kw = {"low": low, "high": high, "low_open": low_open, "high_open": high_open}
    assert outcome(check_real, value, **kw) == outcome(check_real, [value], **kw)
    ikw = {"low": None if low is None else int(low), "high": None if high is None else int(high)}
    assert outcome(check_int, value, **ikw) == outcome(check_int, [value], **ikw)
