"""dp_accounting interop: our settings as DpEvents, round-tripped through dp-accounting's accountants."""

import numpy as np
import pytest

from fedbound.accounting import (
    dp_event,
    epsilon,
    gaussian_event,
    make_accountant,
    neighboring_relation,
    poisson_gaussian_event,
    without_replacement_gaussian_event,
)
from fedbound.accounting.events import sample_fraction
from fedbound.errors import ParameterError, UnsupportedError

INT_ORDERS = np.arange(2.0, 65.0)


@pytest.mark.parametrize("z, q, steps", [(1.1, 0.01, 1000), (2.0, 1.0, 25), (0.9, 0.4, 25)])
def test_poisson_round_trip_through_dp_accounting(z, q, steps):
    event = dp_event(z, q, steps)
    pld = make_accountant("pld")
    pld.compose(event)
    assert pld.get_epsilon(1e-5) == pytest.approx(epsilon(z, q, steps, 1e-5, "pld"), rel=1e-12)
    rdp = make_accountant("rdp", orders=INT_ORDERS)
    rdp.compose(event)
    assert rdp.get_epsilon(1e-5) == pytest.approx(epsilon(z, q, steps, 1e-5, orders=INT_ORDERS), rel=1e-9)


def test_without_replacement_round_trip():
    event = dp_event(2.0, 0.4, 25, sampling="without_replacement")
    assert event.event.sample_size == 2 and event.event.source_dataset_size == 5 and event.count == 25
    acc = make_accountant("rdp", "without_replacement", orders=INT_ORDERS)
    acc.compose(event)
    ours = epsilon(2.0, 0.4, 25, 0.01, sampling="without_replacement", orders=INT_ORDERS)
    assert acc.get_epsilon(0.01) == pytest.approx(ours, rel=1e-12)
    k_of_n = without_replacement_gaussian_event(2.0, 20, 50, 25)
    assert k_of_n.event.sample_size == 20 and k_of_n.event.source_dataset_size == 50


def test_event_structure():
    import dp_accounting

    assert gaussian_event(1.5) == dp_accounting.GaussianDpEvent(1.5)
    full = poisson_gaussian_event(1.5, 1.0, 3)
    assert full == dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(1.5), 3)
    assert neighboring_relation("poisson").name == "ADD_OR_REMOVE_ONE"
    assert neighboring_relation("without_replacement").name == "REPLACE_ONE"
    assert sample_fraction(0.4) == (2, 5) and sample_fraction(1.0) == (1, 1)


def test_errors():
    with pytest.raises(UnsupportedError, match="sampling"):
        make_accountant("pld", "without_replacement")
    with pytest.raises(ParameterError, match="method"):
        make_accountant("gdp")
    with pytest.raises(ParameterError, match="noise_multiplier"):
        gaussian_event(np.array([1.0, 2.0]))
    with pytest.raises(ParameterError, match="sample_size"):
        without_replacement_gaussian_event(1.0, 60, 50)
    with pytest.raises(ParameterError, match="sampling"):
        dp_event(1.0, 0.5, sampling="shuffled")
