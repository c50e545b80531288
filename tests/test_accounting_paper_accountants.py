"""The papers' accountants as registered objects (fedbound.accounting.paper_accountants)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedbound.accounting.paper_accountants import (
    PAPER_ACCOUNTANTS,
    inverse_square,
    one_sided_amplification,
    paper_accountant,
)
from fedbound.errors import ParameterError


@given(st.floats(1e-6, 30.0), st.floats(1e-6, 1.0))
def test_one_sided_amplification_is_lemma4s_formula(eps, q):
    """NbAFL eq. (56): -ln(1 - q + q e^{-eps}), against the printed log1p form where that is accurate."""
    got = float(one_sided_amplification(np.array(eps), q))
    assert got == pytest.approx(-np.log1p(q * np.expm1(-eps)), rel=1e-9, abs=1e-300)
    assert 0 <= got <= eps * (1 + 1e-12)


def test_one_sided_amplification_is_exact_at_q_one_for_large_eps():
    assert float(one_sided_amplification(np.array(400.0), 1.0)) == pytest.approx(400.0, rel=1e-15)


def test_inverse_square_and_the_registry():
    np.testing.assert_array_equal(inverse_square(np.array([2.0, np.inf])), [0.25, 0.0])
    assert set(PAPER_ACCOUNTANTS) == {"classic_linear", "udp_moments", "rdp", "quantized_gaussian"}
    assert paper_accountant("none") is None
    with pytest.raises(ParameterError, match="paper_accountant"):
        paper_accountant("nope")
