"""The compiled-function cache (fedbound.bounds.compiled): same numbers with and without it, never stale."""

import numpy as np
import pytest
import sympy as sp

from fedbound.bounds import compiled


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDBOUND_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cached_function_equals_lambdify_and_is_reused(cache):
    x, y = sp.symbols("x y", positive=True)
    expr = sp.Piecewise((sp.log(1 + x) * sp.pi, x > y), (sp.nan, True)) + sp.sqrt(y)
    direct = sp.lambdify([x, y], expr, modules=["numpy", "scipy"])
    fresh = compiled.cached_function("k1", lambda: ([x, y], expr))
    assert len(list(cache.glob("*.json"))) == 1
    reloaded = compiled.cached_function("k1", lambda: pytest.fail("built again instead of loaded"))
    args = (np.array([0.5, 2.0, 3.0]), np.array([1.0, 1.0, 4.0]))
    np.testing.assert_array_equal(direct(*args), fresh(*args))
    np.testing.assert_array_equal(direct(*args), reloaded(*args))


def test_a_corrupt_entry_is_rebuilt(cache):
    x = sp.Symbol("x")
    compiled.cached_function("k2", lambda: ([x], 2 * x))
    for path in cache.glob("*.json"):
        path.write_text("{not json")
    fn = compiled.cached_function("k2", lambda: ([x], 3 * x))
    assert fn(2.0) == 6.0


def test_the_key_changes_with_the_source(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1")
    b.write_text("x = 1")
    assert compiled.fingerprint(str(a)) != compiled.fingerprint(str(tmp_path / "c.py"))
    b.write_text("x = 2")
    assert compiled.fingerprint(str(a)) != compiled.fingerprint(str(b))


def test_theorems_give_the_same_numbers_with_and_without_the_cache(monkeypatch, tmp_path):
    from fedbound.bounds import nbafl as nb

    grid = {**nb.TV1, "T": np.linspace(1, 100, 7), "K": 20}
    values = {}
    for where in (str(tmp_path), "", str(tmp_path)):
        monkeypatch.setenv("FEDBOUND_CACHE_DIR", where)
        for th in (nb.BOUND, nb.K_BOUND, nb.BOUND_DT, nb.SIGMA_DOWNLINK_K):
            th.forget()
            values.setdefault(th.name, []).append(np.asarray(th.evaluate(grid).value))
    for name, runs in values.items():
        for run in runs[1:]:
            np.testing.assert_array_equal(runs[0], run, err_msg=name)
