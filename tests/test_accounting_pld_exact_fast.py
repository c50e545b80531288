"""The cheaper PLD eps (accounting/pld.py: pld_epsilon_fast, subsampled_gaussian_epsilon and their helpers)
gives the same floats as dp-accounting's own code paths it replaces, and WPFL's calibrated z's are unchanged
(issue 25: the explorer's WPFL T0 curve)."""

import math

import numpy as np
import pytest
from dp_accounting.pld import common
from dp_accounting.pld.pld_pmf import DensePLDPmf
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.accounting import calibrate_noise
from fedbound.accounting import pld as P
from fedbound.bounds import wpfl as wb
from fedbound.errors import DomainError, ParameterError


def _pmf(draw_probs, disc, lower, inf_mass):
    return DensePLDPmf(disc, lower, np.asarray(draw_probs, dtype=float), inf_mass, True)


@settings(max_examples=25, deadline=None)
@given(z=st.floats(0.4, 6.0), q=st.floats(1e-3, 0.95), t=st.integers(1, 40),
       disc=st.sampled_from([2e-3, 5e-3, 2e-2]), delta=st.sampled_from([1e-2, 1e-3, 1e-6, 1e-10]))
def test_fast_eps_is_dp_accountings_float(z, q, t, disc, delta):
    """Bitwise: the same eps as subsampled_gaussian_pld(...).get_epsilon_for_delta (dp-accounting's
    self-composition, identity composition and eps scan)."""
    ref = P.subsampled_gaussian_pld(z, q, t, disc).get_epsilon_for_delta(delta)
    assert P.subsampled_gaussian_epsilon(z, q, t, delta, disc) == ref


@pytest.mark.parametrize("z, q, t, disc", [(0.05, 0.99, 1, 0.05), (0.2, 0.999999, 2, 0.05),
                                           (3.0, 1e-9, 1, 1e-4), (50.0, 1e-6, 5, 1e-4), (0.3, 0.5, 3, 0.02),
                                           (2.0, 0.3, 2, 0.02), (2.0, 0.3, 9, 0.02), (5.0, 0.5, 30, 0.02)])
def test_fast_eps_at_extreme_inputs(z, q, t, disc):
    """Tiny or huge noise (losses past exp's underflow), q near 0 or 1, sparse one-step pmfs (210 and 101
    points) composed 2-30 times (dense past 1,000 points, as in dp-accounting): still the same float."""
    for delta in (1e-5, 0.3):
        assert P.subsampled_gaussian_epsilon(z, q, t, delta, disc) == \
            P.subsampled_gaussian_pld(z, q, t, disc).get_epsilon_for_delta(delta)


_PROBS = st.lists(st.one_of(st.just(0.0), st.floats(1e-300, 1.0), st.floats(1e-18, 1e-12)), min_size=1,
                  max_size=300)


@settings(max_examples=60, deadline=None)
@given(probs=_PROBS, t=st.integers(1, 2000), tail=st.sampled_from([0.0, 1e-15, 1e-3]))
def test_chernoff_bounds_are_dp_accountings(probs, t, tail):
    """The same integer truncation bounds as common.compute_self_convolve_bounds (40 logsumexp calls)."""
    p = np.asarray(probs)
    assert P._self_convolve_bounds(p, t, tail) == common.compute_self_convolve_bounds(p, t, tail)


def test_chernoff_bounds_on_real_pmfs():
    for z, q, disc in [(0.7, 0.3, 1e-3), (2.0, 0.01, 1e-4), (1.0, 0.9, 5e-3)]:
        for p in P._one_step_pld(z, q, disc):
            probs = p.to_dense_pmf()._probs
            for t in (1, 7, 100, 10**5):
                assert P._self_convolve_bounds(probs, t, 1e-15) == common.compute_self_convolve_bounds(
                    probs, t, 1e-15)


@settings(max_examples=80, deadline=None)
@given(probs=_PROBS, lower=st.integers(-2000, 2000), inf_mass=st.sampled_from([0.0, 1e-12, 1e-4, 0.5]),
       disc=st.sampled_from([1e-4, 0.01, 0.5, 4.0]), delta=st.sampled_from([1e-9, 1e-4, 0.1, 0.6]))
def test_eps_scan_is_dp_accountings(probs, lower, inf_mass, disc, delta):
    """The same float as DensePLDPmf.get_epsilon_for_delta, also where losses exceed exp's range
    (disc 4 x 2000 points), errors included, and with infinity mass above delta."""
    pmf = _pmf(probs, disc, lower, inf_mass)

    def outcome(fn):  # the float, or the error dp-accounting raises (exp(-loss) overflows below -709)
        try:
            return fn(pmf, delta)
        except ArithmeticError as exc:
            return type(exc).__name__

    assert outcome(P._dense_epsilon_for_delta) == outcome(lambda p, d: p.get_epsilon_for_delta(d))


def test_pld_epsilon_fast_is_pld_epsilon_with_its_errors():
    assert P.pld_epsilon_fast(0.77, 0.01, 20, 1e-3, 5e-4) == P.pld_epsilon(0.77, 0.01, 20, 1e-3, 5e-4)
    assert P.pld_epsilon_fast(1.3, 1.0, 4, 1e-5, 1e-3) == P.pld_epsilon(1.3, 1.0, 4, 1e-5, 1e-3)  # q = 1
    with pytest.raises(DomainError, match="delta"):  # below dp-accounting's e^-50 truncation
        P.pld_epsilon_fast(0.5, 0.5, 10, 1e-300, 1e-2)
    with pytest.raises(DomainError, match="noise_multiplier"):  # too costly: as pld_epsilon
        P.pld_epsilon_fast(1e-3, 0.5, 10**5, 1e-5, 1e-4)
    with pytest.raises(ParameterError, match="sample_rate"):
        P.pld_epsilon_fast(1.0, 1.5, 10, 1e-5)


@pytest.mark.parametrize("eps, delta, q, T", [(1.0, 1e-3, 0.5, 20), (2.0, 1e-5, 0.1, 50),
                                               (0.5, 1e-3, 0.5, 3)])
def test_calibrated_z_unchanged(eps, delta, q, T, monkeypatch):
    """pld_calibrate with the fast evaluation returns the same (z, eps) as with pld_epsilon, cold."""
    disc, upper = P.discretization_for_target(eps, T), float(calibrate_noise(eps, delta, q, T))
    got = []
    for evaluate in (None, P.pld_epsilon_fast):
        monkeypatch.setattr(P, "_STARTS", {})
        got.append(P.pld_calibrate(eps, delta, q, T, disc, upper, evaluate=evaluate))
    assert got[0] == got[1]
    assert (1 - 1e-3) * eps <= got[1][1] <= eps and math.isfinite(got[1][0])


def test_wpfl_tight_record_uses_the_same_calibration(monkeypatch):
    """WPFL's exact calibration (now through pld_epsilon_fast) is the one pld_epsilon's search gives."""
    monkeypatch.setattr(P, "_STARTS", {})
    rec = wb._calibrate_tight(1.21, 1e-3, 0.5, 8)
    monkeypatch.setattr(P, "_STARTS", {})
    disc = P.discretization_for_target(1.21, 8)
    z, eps = P.pld_calibrate(1.21, 1e-3, 0.5, 8, disc, rec["z_rdp"])
    assert (rec["z"], rec["eps_achieved"]) == (z, eps)


@pytest.mark.parametrize("z, q, disc", [(0.7, 0.3, 1e-3), (2.0, 0.01, 1e-4), (1.0, 0.9, 5e-3),
                                        (5.0, 0.5, 2e-2), (0.3, 0.99, 1e-2)])
def test_one_step_pmfs_are_dp_accountings(z, q, disc):
    """The one-step pmfs (dense ones made without dp-accounting's dict) have the same type, offset, masses
    and infinity mass as dp-accounting's construction."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType

    for got, adjacency in zip(P._one_step_pld(z, q, disc), (AdjacencyType.REMOVE, AdjacencyType.ADD),
                              strict=True):
        ref = pld_lib._create_pld_pmf_from_monotone_privacy_loss(
            P._gaussian_loss_class()(z, sampling_prob=q, adjacency_type=adjacency), pessimistic_estimate=True,
            value_discretization_interval=disc, use_connect_dots=True)
        assert type(got) is type(ref) and got._infinity_mass == ref._infinity_mass
        if isinstance(ref, DensePLDPmf):
            assert got._lower_loss == ref._lower_loss and np.array_equal(got._probs, ref._probs)
        else:
            assert got._loss_probs == ref._loss_probs


@settings(max_examples=40, deadline=None)
@given(a=_PROBS, b=_PROBS, la=st.integers(-50, 50), lb=st.integers(-50, 50),
       inf=st.sampled_from([0.0, 1e-16, 1e-3]), tail=st.sampled_from([1e-15, 1e-2]))
def test_dense_compose_is_dp_accountings(a, b, la, lb, inf, tail):
    """The same pmf (offset, masses bit for bit, infinity mass) as DensePLDPmf.compose with its tail
    truncation, also with the identity's pmf (what subsampled_gaussian_epsilon composes onto)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    one = pld_lib.identity(0.01)._pmf_remove.to_dense_pmf()
    for x, y in ((_pmf(a, 0.01, la, inf), _pmf(b, 0.01, lb, 0.0)), (one, _pmf(b, 0.01, lb, inf))):
        try:
            ref = x.compose(y, tail)
        except IndexError:  # dp-accounting's truncation of an all-zero pmf: the same error
            with pytest.raises(IndexError):
                P._dense_compose(x, y, tail)
            continue
        got = P._dense_compose(x, y, tail)
        assert (got._lower_loss, got._infinity_mass) == (ref._lower_loss, ref._infinity_mass)
        assert np.array_equal(got._probs, ref._probs)
