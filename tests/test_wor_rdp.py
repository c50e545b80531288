"""Issue 25 item 1 (helper h25c): the vectorised K-of-N RDP (Wang, Balle & Kasiviswanathan 2019, Thm 27)
against dp-accounting's RdpAccountant, the independent oracle, at rtol 1e-9, including z > 6 where the
forward differences of exp(cgf) are rounding noise (the earlier numpy version was up to 1.3 % low there);
and the NbAFL plan with K set unchanged when fedbound's K-of-N RDP is dp-accounting's own."""

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.accounting import DEFAULT_ORDERS, rdp_sampled_without_replacement
from fedbound.accounting.wor_rdp import _log_forward_diffs, wor_rdp_pairs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nbafl_mnist.toml"


def _dp_accounting(orders, q, z):
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    return np.asarray(ra._compute_rdp_sample_wor_gaussian(q, z, list(orders)), dtype=float)


def test_pairs_match_dp_accounting_where_the_differences_are_noise():
    """Every default order (fractional by Cor. 10, > 256 by the cgf-only bound), several pairs at once."""
    pairs = [(0.1, 10.0), (0.1, 30.0), (0.5, 10.0), (0.5, 30.0), (0.01, 50.0), (0.2, 0.7), (1.0, 3.0)]
    q, z = (np.array(v) for v in zip(*pairs, strict=True))
    got = wor_rdp_pairs(DEFAULT_ORDERS, q, z)
    for row, (qi, zi) in zip(got, pairs, strict=True):
        np.testing.assert_allclose(row, _dp_accounting(DEFAULT_ORDERS, qi, zi), rtol=1e-9, atol=0)


@pytest.mark.parametrize("z", [0.7, 8.0, 40.0])
def test_forward_differences_repeat_dp_accounting_bit_for_bit(z):
    """At z = 8 and 40 the high differences are cancellation noise: only the same float operations agree."""
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    want, _ = ra._get_forward_diffs(lambda x: x * 1.0 * (x + 1) / (2.0 * z**2), 256)
    got = _log_forward_diffs(np.array([z]), 256)[0]
    np.testing.assert_array_equal(got, want)


@settings(max_examples=15, deadline=None)
@given(st.floats(math.log(1e-3), 0.0), st.floats(math.log(1e-3), math.log(1e6)))
def test_fedbound_wor_rdp_matches_dp_accounting(logq, logz):
    """The public rdp_sampled_without_replacement (fast path on z in [1e-3, 1e6]) against dp-accounting."""
    q, z = min(math.exp(logq), 1.0), math.exp(logz)
    orders = np.array([1.5, 2.0, 3.0, 7.5, 20.0, 64.0, 300.0])
    got = np.asarray(rdp_sampled_without_replacement(orders, q, z), dtype=float)
    want = _dp_accounting(orders, q, z)
    assert np.all(got >= 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)


def test_k_set_plan_is_unchanged_when_dp_accounting_answers(monkeypatch):
    """NbAFL with K set: sigma's and T through the fast path equal those through dp-accounting itself."""
    from fedbound.accounting import rdp
    from fedbound.bounds import nbafl as nb
    from fedbound.scheduling import nbafl as planner
    from fedbound.scheduling import nbafl_design as nbd

    setting = {**tomllib.loads(EXAMPLE.read_text())["nbafl"], "K": 20, "eps": 0.93}

    def fresh_plan():
        nb._k_of_n_multiplier.cache_clear()
        nbd.KofNCalibration._SHARED.clear()
        return planner.plan(dict(setting))

    fast = fresh_plan()
    monkeypatch.setattr(rdp, "_WOR_FAST", (math.inf, -math.inf))  # every z through dp-accounting
    slow = fresh_plan()
    nb._k_of_n_multiplier.cache_clear()
    nbd.KofNCalibration._SHARED.clear()
    assert fast.recommendation.T == slow.recommendation.T and fast.recommendation.K == slow.recommendation.K
    for key, value in slow.recommendation.sigma.items():
        assert fast.recommendation.sigma[key] == pytest.approx(value, rel=1e-9), key
    assert fast.data["T_opt"] == slow.data["T_opt"]
