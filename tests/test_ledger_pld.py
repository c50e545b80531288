"""The training ledger's tight column by min(RDP, PLD) (issue 23): PLD against dp-accounting's PLDAccountant
computed here, the RDP fallbacks, resume, and a WPFL run at the plan's exact sigma."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dp_accounting import dp_event, rdp
from dp_accounting.pld import pld_privacy_accountant

from fedbound.errors import CheckpointError
from fedbound.training.plan import NoisePlan, View
from fedbound.training.privacy import PrivacyLedger

N = 3


def _dp_pld(events: list[tuple[float, float, int]], delta: float, disc: float) -> float:
    """dp-accounting's PLDAccountant (Poisson, add/remove): ``(q, z, k)`` events, q = 1 unsampled."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=disc)
    for q, z, k in events:
        event = dp_event.GaussianDpEvent(z)
        acc.compose(event if q == 1.0 else dp_event.PoissonSampledDpEvent(q, event), k)
    return acc.get_epsilon(delta)


def _dp_rdp(events: list[tuple[float, float, int]], delta: float, orders: tuple[float, ...],
            sampling: str = "poisson") -> float:
    """dp-accounting's RdpAccountant at integer orders (exact there, DESIGN's known traps)."""
    relation = (rdp.rdp_privacy_accountant.NeighborRel.ADD_OR_REMOVE_ONE if sampling == "poisson"
                else rdp.rdp_privacy_accountant.NeighborRel.REPLACE_ONE)
    acc = rdp.RdpAccountant(list(orders), relation)
    for q, z, k in events:
        event = dp_event.GaussianDpEvent(z)
        if q < 1.0:
            event = (dp_event.PoissonSampledDpEvent(q, event) if sampling == "poisson" else
                     dp_event.SampledWithoutReplacementDpEvent(1000, int(round(1000 * q)), event))
        acc.compose(event, k)
    return acc.get_epsilon(delta)


def _disc(budget: float, releases: int) -> float:
    """The discretisation whose stated error releases x disc is 1 % of the budget, in [1e-4, 1e-2]."""
    return min(max(0.01 * budget / releases, 1e-4), 1e-2)


ORDERS = tuple(float(a) for a in range(2, 97))


def _plan(q: float, z: float, k: int, eps: float = 2.0, delta: float = 1e-5, sampling: str = "poisson",
          unsampled_z: float | None = None, rounds: int = 4) -> NoisePlan:
    """One client group: a q-sampled view of k steps per round at multiplier z (sensitivity 1), and
    optionally an unsampled upload of multiplier ``unsampled_z`` in the same group."""
    views = [View("steps", "steps", stage="inner", sample_rate=q, hidden_sampling=True, releases_per_round=k,
                  group="g", hidden_scope="participants", sampling=sampling)]
    sigma = {"inner": np.full(rounds, z)}
    if unsampled_z is not None:
        views.append(View("up", "upload", stage="uplink", group="g"))
        sigma["uplink"] = np.full(rounds, unsampled_z)
    return NoisePlan(rounds=rounds, num_clients=N, sigma=sigma, sensitivity={s: 1.0 for s in sigma}, eps=eps,
                     delta=delta, views=tuple(views), orders=ORDERS)


def _run(ledger: PrivacyLedger, rounds: range, participants=(0, 1, 2)) -> np.ndarray:
    for t in rounds:
        ledger.commit(ledger.releases(t, np.array(participants), np.full(len(participants), 1.0)))
    return ledger.epsilons()["tight"]["g"]


@pytest.mark.parametrize("q, z, k", [(0.01, 0.9, 200), (0.1, 1.5, 60), (0.3, 3.0, 12)])
def test_pld_column_is_dp_accountings_pld_and_below_rdp(q, z, k):
    """One round of k Poisson-sampled steps: the tight eps is min(RDP, PLD), PLD being dp-accounting's
    PLDAccountant at the discretisation whose stated error is 1 % of the budget, and below RDP here."""
    budget, delta = 2.0, 1e-5
    eps = _run(PrivacyLedger(_plan(q, z, k, budget, delta)), range(1))
    pld = _dp_pld([(q, z, k)], delta, _disc(budget, k))
    by_rdp = _dp_rdp([(q, z, k)], delta, ORDERS)
    assert pld < by_rdp  # PLD is the tighter one at these settings, so the column must be PLD's
    np.testing.assert_allclose(eps, pld, rtol=1e-6)
    # the stated error: a 4x finer PLD is lower by at most 1 % of the budget
    assert 0 <= pld - _dp_pld([(q, z, k)], delta, _disc(budget, k) / 4) <= 0.01 * budget


def test_sampled_and_unsampled_releases_compose_by_pld():
    """Two rounds of 25 sampled steps plus one unsampled upload per round in the group: PLD of the sampled
    50-fold composition with the one Gaussian the two uploads compose into (z / sqrt 2)."""
    q, z, k, zu, budget, delta = 0.05, 1.2, 25, 6.0, 3.0, 1e-5
    eps = _run(PrivacyLedger(_plan(q, z, k, budget, delta, unsampled_z=zu)), range(2))
    want = _dp_pld([(q, z, 2 * k), (1.0, zu, 2)], delta, _disc(budget, 2 * k + 1))
    np.testing.assert_allclose(eps, want, rtol=1e-3)  # one Gaussian vs two: the same curve, rounded apart
    assert np.all(eps < _dp_rdp([(q, z, 2 * k), (1.0, zu, 2)], delta, ORDERS))


def test_two_sampled_views_of_one_group_compose_by_pld():
    """DP-PFL's shape: an inner and an outer sampled view (other q, other z) in one adversary group, k steps
    each per round: PLD of both k-fold compositions (dp-accounting), at 1 % of the budget over 2k releases."""
    k, budget, delta = 15, 4.0, 1e-3
    views = tuple(View(stage, "steps", stage=stage, sample_rate=q, hidden_sampling=True, releases_per_round=k,
                       group="g", hidden_scope="participants")
                  for stage, q in (("inner", 0.2), ("outer", 0.1)))
    plan = NoisePlan(rounds=2, num_clients=N, sigma={"inner": np.full(2, 1.2), "outer": np.full(2, 0.8)},
                     sensitivity={"inner": 1.0, "outer": 1.0}, eps=budget, delta=delta, views=views,
                     orders=ORDERS)
    eps = _run(PrivacyLedger(plan), range(2))
    want = _dp_pld([(0.2, 1.2, 2 * k), (0.1, 0.8, 2 * k)], delta, _disc(budget, 4 * k))
    np.testing.assert_allclose(eps, want, rtol=1e-6)
    assert want < _dp_rdp([(0.2, 1.2, 2 * k), (0.1, 0.8, 2 * k)], delta, ORDERS)


def test_heterogeneous_history_and_without_replacement_keep_rdp():
    """A client whose z changed mid-run, and sampling without replacement, are accounted by RDP exactly
    (dp-accounting's RdpAccountant at integer orders); a client with one z still gets PLD."""
    q, z, k, budget, delta = 0.1, 1.5, 30, 2.0, 1e-5
    plan = _plan(q, z, k, budget, delta)
    ledger = PrivacyLedger(plan)
    _run(ledger, range(1))
    changed = NoisePlan(rounds=plan.rounds, num_clients=N, sigma={"inner": np.full(plan.rounds, 2 * z)},
                        sensitivity={"inner": 1.0}, eps=budget, delta=delta, views=plan.views, orders=ORDERS)
    ledger.plan = changed
    eps = _run(ledger, range(1, 2), participants=(0,))
    hetero = _dp_rdp([(q, z, k), (q, 2 * z, k)], delta, ORDERS)
    np.testing.assert_allclose(eps[0], hetero, rtol=1e-6)
    np.testing.assert_allclose(eps[1:], _dp_pld([(q, z, k)], delta, _disc(budget, k)), rtol=1e-6)
    wor = _run(PrivacyLedger(_plan(q, z, k, budget, delta, sampling="without_replacement")), range(1))
    np.testing.assert_allclose(wor, _dp_rdp([(q, z, k)], delta, ORDERS, "without_replacement"), rtol=1e-6)
    assert np.all(wor > _dp_pld([(q, z, k)], delta, _disc(budget, k)))  # PLD not used for it


def test_resume_from_state_dict_gives_the_same_epsilon():
    """Three rounds in one ledger equal two rounds, state_dict -> a fresh ledger, one more round, bit for bit;
    a ledger state of an older fedbound (per-client curves, not release histories) is refused in one line."""
    plan = _plan(0.05, 1.1, 10, 2.0, 1e-5, rounds=3)
    full = _run(PrivacyLedger(plan), range(3))
    first = PrivacyLedger(plan)
    _run(first, range(2))
    state = first.state_dict()
    second = PrivacyLedger(plan)
    second.load_state_dict(state)
    np.testing.assert_array_equal(_run(second, range(2, 3)), full)
    n, orders = plan.num_clients, len(ORDERS)
    legacy = {v.name: {"count": np.zeros(n), "inv_sum": np.zeros(n), "rdp": np.zeros((n, orders))}
              for v in plan.views}
    with pytest.raises(CheckpointError, match="older fedbound") as caught:
        PrivacyLedger(plan).load_state_dict(legacy)
    assert "\n" not in str(caught.value)


def test_wpfl_trains_the_plans_exact_sigma_within_the_budget(tmp_path):
    """`fedbound train wpfl` (recommended design) at q < 1 trains the plan's exact sigma (relative difference
    <= 1e-6 in the summary) without PrivacyBudgetExceeded, and its final eps is within [0.98, 1] x target
    both in the ledger and by dp-accounting's PLD of the T0 uploads at the trained sigma (disc 1e-4)."""
    from fedbound.validation.recipes.runner import train_from_config

    example = Path(__file__).resolve().parents[1] / "examples" / "wpfl_ridge.toml"
    eps, delta, q, T0, C = 1.0, 1e-3, 0.2, 4, 3.0
    done = train_from_config("wpfl", example, [f"eps={eps}", f"q={q}", f"T={T0}"], out=tmp_path / "w",
                             design="recommended")
    s = done.summary
    sigma = s["plan"]["sigma_dp"]
    assert s["design"]["sigma"]["uplink"]["source"] == "recommended by plan"
    assert s["design"]["sigma"]["uplink"]["value"] == pytest.approx(sigma, rel=1e-12)
    assert sigma == pytest.approx(s["design"]["sigma_recommended"]["uplink"], rel=1e-6)
    exact = _dp_pld([(q, sigma / (2 * C), T0)], delta, 1e-4)
    assert 0.98 * eps <= exact <= eps
    assert 0.98 * eps <= s["epsilon_spent"] <= eps
    assert _dp_rdp([(q, sigma / (2 * C), T0)], delta, ORDERS) > eps  # RDP alone would have refused it
