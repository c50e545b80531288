"""The privacy ledger against independent oracles (scipy, Opacus, dp-accounting) and the papers' own
accounting of their plans (seed 002 F10/F11/F27 with Lemma 4, seed 003 eq. (10)/(16))."""

from __future__ import annotations

import math
from dataclasses import replace

import dp_accounting as dpa
import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
from scipy import stats

from fedbound.errors import ParameterError, PrivacyBudgetExceeded
from fedbound.training.plan import NoisePlan, View
from fedbound.training.privacy import ORDERS as DEFAULT_ORDERS  # the ledger's orders (calibrate_noise's)
from fedbound.training.privacy import PrivacyLedger


def ledger_for(views, sigma, sens, n=4, rounds=10, eps=1e9, delta=1e-5, paper="classic_linear",
               budget="paper"):
    """A ledger of these views; ``budget="paper"`` reproduces the paper (its accountant binds: only the
    paper-reproduction mode lets it, the default binds on the tight one)."""
    plan = NoisePlan(rounds=rounds, num_clients=n, sigma=sigma, sensitivity=sens, eps=eps, delta=delta,
                     views=tuple(views), paper_accountant=paper, budget_accountant=budget,
                     paper_reproduction=budget == "paper")
    return PrivacyLedger(plan)


def play(ledger, rounds, participants, weights=None):
    for t in range(rounds):
        part = np.asarray(participants(t) if callable(participants) else participants)
        w = np.full(len(part), 1.0 / len(part)) if weights is None else weights
        rel = ledger.releases(t, part, w)
        ledger.check_budget(rel, t)
        ledger.commit(rel)
    return ledger.epsilons()


def gaussian_delta(eps, mu):
    """Exact delta(eps) of a mu-GDP mechanism (Dong, Roth & Su 2019, Cor. 2.13), by scipy."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def test_unsampled_uploads_compose_exactly():
    sigma, sens, T = 0.8, 0.2, 7
    ledger = ledger_for([View("up", "upload")], {"uplink": np.full(T, sigma)}, {"uplink": sens}, rounds=T)
    eps = play(ledger, T, [0, 1, 2, 3])["tight"]["up"]
    mu = math.sqrt(T) * sens / sigma
    assert gaussian_delta(float(eps[0]), mu) == pytest.approx(1e-5, rel=1e-7)
    np.testing.assert_allclose(eps, eps[0])


def test_uploads_count_only_realised_participations():
    T = 6
    ledger = ledger_for([View("up", "upload")], {"uplink": np.full(T, 1.0)}, {"uplink": 0.5}, rounds=T)
    eps = play(ledger, T, lambda t: [0, 1] if t % 2 == 0 else [0])["tight"]["up"]
    delta_of = [gaussian_delta(float(eps[i]), math.sqrt(k) * 0.5) for i, k in ((0, 6), (1, 3))]
    np.testing.assert_allclose(delta_of, 1e-5, rtol=1e-7)
    assert eps[2] == eps[3] == 0.0


def test_max_releases_caps_what_the_adversary_sees():
    T = 5
    views = [View("up", "upload", max_releases=2)]
    capped = play(ledger_for(views, {"uplink": np.full(T, 1.0)}, {"uplink": 1.0}, rounds=T), T, [0, 1, 2, 3])
    two = play(ledger_for([View("up", "upload")], {"uplink": np.full(2, 1.0)}, {"uplink": 1.0}, rounds=2), 2,
               [0, 1, 2, 3])
    np.testing.assert_allclose(capped["tight"]["up"], two["tight"]["up"])
    np.testing.assert_allclose(capped["paper"]["up"], two["paper"]["up"])


def test_hidden_poisson_steps_match_opacus():
    T, q, z, k = 8, 0.05, 1.3, 3
    view = View("local", "steps", stage="local", sample_rate=q, hidden_sampling=True, releases_per_round=k)
    ledger = ledger_for([view], {"local": np.full(T, z * 0.5)}, {"local": 0.5}, rounds=T, paper="rdp")
    out = play(ledger, T, [0, 1, 2, 3])
    o = np.asarray(DEFAULT_ORDERS)
    expected, _ = get_privacy_spent(orders=o, rdp=compute_rdp(q=q, noise_multiplier=z, steps=T * k, orders=o),
                                    delta=1e-5)
    np.testing.assert_allclose(out["paper"]["local"], expected, rtol=1e-6)
    # the tight column is min(RDP, PLD): dp-accounting's PLD at the ledger's discretisation (its stated error
    # T k disc, 1 % of the budget, clamped to [1e-4, 1e-2]: 1e-2 at this budget of 1e9)
    pld = dpa.pld.PLDAccountant(value_discretization_interval=1e-2)
    pld.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), T * k)
    np.testing.assert_allclose(out["tight"]["local"], min(expected, pld.get_epsilon(1e-5)), rtol=1e-6)


def test_hidden_k_of_n_broadcast_matches_dp_accounting():
    """NbAFL's downlink under K-client scheduling: a K-of-N subset without replacement each round."""
    N, K, T = 50, 20, 25
    sigma_up, sigma_srv, sens = 0.3, 0.05, 0.4
    view = View("down", "broadcast", sample_rate=K / N, hidden_sampling=True, sampling="without_replacement")
    ledger = ledger_for([view], {"uplink": np.full(T, sigma_up), "server": np.full(T, sigma_srv)},
                        {"uplink": sens}, n=N, rounds=T, delta=0.01)
    eps = play(ledger, T, lambda t: np.arange(t % 30, t % 30 + K))["tight"]["down"]
    z = math.sqrt(sigma_srv**2 + sigma_up**2 / K) / (sens / K)
    acc = dpa.rdp.RdpAccountant([float(a) for a in DEFAULT_ORDERS], dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SampledWithoutReplacementDpEvent(N, K, dpa.GaussianDpEvent(z)), T)
    np.testing.assert_allclose(eps, acc.get_epsilon(0.01), rtol=1e-6)


def test_classic_linear_costs_c_over_z_per_release():
    """Seed 002 F4/F10: a release with multiplier z costs c(delta)/z (c(0.01) = 3.10751146, spec 002)."""
    T, z = 4, 5.0
    ledger = ledger_for([View("up", "upload")], {"uplink": np.full(T, z)}, {"uplink": 1.0}, rounds=T,
                        delta=0.01)
    eps = play(ledger, T, [0, 1, 2, 3])["paper"]["up"]
    np.testing.assert_allclose(eps, T * 3.10751146009224 / z, rtol=1e-12)


def test_nbafl_paper_plan_spends_exactly_eps_under_the_papers_accounting():
    """Spec 002 TV1 (eps = 60, T = 25 > L sqrt(N)): uplink eps/L per upload, downlink eps/T per broadcast."""
    from fedbound.bounds import nbafl as nb

    N, T, eps, delta, C, m, L = 50, 25, 60.0, 0.01, 20.0, 100, 1
    with pytest.warns(UserWarning):
        up, down = nb.sigma_uplink(eps, delta, C, m, L), nb.sigma_downlink(eps, delta, C, m, N, T, L)
    np.testing.assert_allclose([up, down], [0.02071674307, 0.009935400946], rtol=1e-9)  # spec 002 Sec. 8
    views = [View("uplink", "upload", max_releases=L), View("downlink", "broadcast")]
    ledger = ledger_for(views, {"uplink": np.full(T, up), "server": np.full(T, down)}, {"uplink": 2 * C / m},
                        n=N, rounds=T, eps=eps, delta=delta)
    out = play(ledger, T, np.arange(N))
    np.testing.assert_allclose(out["paper"]["uplink"], eps, rtol=1e-12)
    np.testing.assert_allclose(out["paper"]["downlink"], eps, rtol=1e-12)
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_budget(ledger.releases(T, np.arange(N), np.full(N, 1 / N)), T)


def test_nbafl_k_scheduling_plan_spends_eps_under_lemma4():
    """Spec 002 TV3 (eps = 6, K = 20, T = 25): sigma_D^(K) = 0.06708478318, and Lemma 4's one-sided
    amplification of the classic per-round eps gives exactly eps/T per broadcast."""
    from fedbound.bounds import nbafl as nb

    N, K, T, eps, delta, C, m, L = 50, 20, 25, 6.0, 0.01, 20.0, 100, 1
    with pytest.warns(UserWarning):
        up = nb.sigma_uplink(eps, delta, C, m, L)
        down = nb.sigma_downlink_k(eps, delta, C, m, N, K, T, L)
    assert down == pytest.approx(0.06708478318, rel=1e-9)
    view = View("downlink", "broadcast", sample_rate=K / N, hidden_sampling=True,
                paper_amplification="lemma4", sampling="without_replacement")
    ledger = ledger_for([view], {"uplink": np.full(T, up), "server": np.full(T, down)}, {"uplink": 2 * C / m},
                        n=N, rounds=T, eps=eps, delta=delta)
    out = play(ledger, T, lambda t: np.sort(np.random.default_rng(t).choice(N, K, replace=False)),
               weights=np.full(K, 1 / K))
    np.testing.assert_allclose(out["paper"]["downlink"], eps, rtol=1e-9)


def test_udp_paper_sigma_spends_eps_under_its_moments_accountant():
    """Seed 003 eq. (10) inverted: eps = sqrt(2 q T ln(1/delta)) Delta / sigma, accrued by every client."""
    from fedbound.accounting import udp_theorem1_std

    U, K, T, eps, delta = 10, 6, 40, 4.0, 1e-3
    sens = np.linspace(0.01, 0.02, U)
    sigma = np.asarray(udp_theorem1_std(eps, delta, K / U, T, sens))
    ledger = ledger_for([View("uplink", "upload", sample_rate=K / U)], {"uplink": np.tile(sigma, (T, 1))},
                        {"uplink": sens}, n=U, rounds=T, eps=eps, delta=delta, paper="udp_moments")
    out = play(ledger, T, lambda t: np.sort(np.random.default_rng(t).choice(U, K, replace=False)))
    np.testing.assert_allclose(out["paper"]["uplink"], eps, rtol=1e-12)


def test_udp_paper_sigma_under_delivers_at_eps_8_with_q_1():
    """Spec 003 E5: at eps = 8, delta = 1e-3, q = 1 the paper's sigma is an exact mu-GDP composition with
    mu = eps / sqrt(2 ln(1/delta)) = 2.152, which spends more than 8."""
    from fedbound.accounting import udp_theorem1_std

    U, T, eps, delta = 4, 30, 8.0, 1e-3
    sigma = float(udp_theorem1_std(eps, delta, 1.0, T, 0.01))
    ledger = ledger_for([View("uplink", "upload")], {"uplink": np.full(T, sigma)}, {"uplink": 0.01}, n=U,
                        rounds=T, eps=eps, delta=delta, paper="udp_moments")
    out = play(ledger, T, np.arange(U))
    tight = out["tight"]["uplink"]
    mu = eps / math.sqrt(2 * math.log(1 / delta))
    assert gaussian_delta(float(tight[0]), mu) == pytest.approx(delta, rel=1e-7)
    assert tight[0] > 8.3
    np.testing.assert_allclose(out["paper"]["uplink"], eps, rtol=1e-12)


def test_zero_noise_is_refused_by_the_plan_and_infinite_epsilon_in_the_ledger():
    with pytest.raises(ParameterError, match=r"sigma\['uplink'\] in round 2 .* without noise"):
        ledger_for([View("up", "upload")], {"uplink": np.array([1.0, 0.0, 1.0])}, {"uplink": 1.0}, rounds=3)
    with pytest.raises(ParameterError, match="view 'down' would release it without noise"):  # no noise at all
        ledger_for([View("down", "broadcast")], {"uplink": np.zeros(3), "server": np.zeros(3)},
                   {"uplink": 1.0}, rounds=3)
    ledger_for([View("down", "broadcast")], {"uplink": np.zeros(3), "server": np.ones(3)}, {"uplink": 1.0},
               rounds=3)  # the server's noise alone protects a broadcast
    ledger_for([View("up", "upload")], {"uplink": np.zeros(3)}, {"uplink": 1.0}, rounds=3,
               eps=math.inf)  # an infinite budget promises nothing: zero noise is no contradiction
    ledger = ledger_for([View("up", "upload")], {"uplink": np.ones(3)}, {"uplink": 1.0}, rounds=3, eps=10.0)
    rel = [replace(r, z=np.zeros(4), z_all=np.zeros(4))  # a release without noise, made by hand
           for r in ledger.releases(0, np.arange(4), np.full(4, 0.25))]
    with pytest.raises(PrivacyBudgetExceeded, match="inf"):
        ledger.check_budget(rel, 0)
    ledger.commit(rel)
    assert np.isinf(ledger.epsilons()["tight"]["up"]).all()


def test_groups_compose_views_seen_by_one_adversary():
    T = 3
    views = [View("a", "upload", group="server"), View("b", "upload", stage="other", group="server")]
    ledger = ledger_for(views, {"uplink": np.full(T, 1.0), "other": np.full(T, 2.0)},
                        {"uplink": 1.0, "other": 1.0}, rounds=T)
    eps = play(ledger, T, [0])["tight"]["server"]
    mu = math.sqrt(T * (1.0 + 0.25))
    assert gaussian_delta(float(eps[0]), mu) == pytest.approx(1e-5, rel=1e-7)


_MIXED_VIEWS = [View("up", "upload"), View("down", "broadcast", group="server"),
                View("local", "steps", stage="local", sample_rate=0.1, hidden_sampling=True,
                     releases_per_round=2, group="server")]
_MIXED_SIGMA = {"uplink": np.linspace(0.8, 1.2, 6), "server": np.full(6, 0.1), "local": np.full(6, 0.6)}
_MIXED_SENS = {"uplink": 0.5, "local": 0.5}


def _snapshot(ledger):
    return {name: {k: np.array(v, copy=True) for k, v in fields.items()}
            for name, fields in ledger.state_dict().items()}


def _assert_same_accounts(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].keys() == b[name].keys()
        for k in a[name]:
            np.testing.assert_array_equal(a[name][k], b[name][k], err_msg=f"{name}.{k}")


@pytest.mark.parametrize("paper", ["classic_linear", "udp_moments", "rdp", "none"])
def test_a_checked_round_is_recorded_once_as_if_recorded_directly(paper):
    """check_budget's trial accounts become the ledger's at commit: the accounts and the epsilons equal a
    ledger that records every round directly (no check), bit for bit, under every paper accountant."""
    checked = ledger_for(_MIXED_VIEWS, _MIXED_SIGMA, _MIXED_SENS, n=5, rounds=6, paper=paper)
    direct = ledger_for(_MIXED_VIEWS, _MIXED_SIGMA, _MIXED_SENS, n=5, rounds=6, paper=paper)
    rng = np.random.default_rng(0)
    for t in range(6):
        part = np.sort(rng.choice(5, size=3, replace=False))
        w = np.full(3, 1 / 3)
        rel = checked.releases(t, part, w)
        checked.check_budget(rel, t)
        checked.commit(rel)
        direct.commit(direct.releases(t, part, w))
        _assert_same_accounts(_snapshot(checked), _snapshot(direct))
        got, want = checked.epsilons(), direct.epsilons()
        for column in want:
            for group in want[column]:
                np.testing.assert_array_equal(got[column][group], want[column][group])


@pytest.mark.parametrize("paper", ["classic_linear", "udp_moments", "rdp", "quantized_gaussian"])
def test_a_failed_or_uncommitted_check_leaves_the_accounts_alone(paper):
    """The trial copies exactly what recording writes (the paper accountant's ``writes`` included): a check
    that is never committed changes nothing the ledger holds."""
    info = {"C": 1.0, "R": 1.0, "q": 0.5} if paper == "quantized_gaussian" else {}
    plan = NoisePlan(rounds=6, num_clients=5, sigma=_MIXED_SIGMA, sensitivity=_MIXED_SENS, eps=1e9,
                     delta=1e-5, views=tuple(_MIXED_VIEWS), paper_accountant=paper, budget_accountant="tight",
                     info=info)
    ledger = PrivacyLedger(plan)
    part, w = np.array([0, 2, 3]), np.full(3, 1 / 3)
    ledger.commit(ledger.releases(0, part, w))
    before = _snapshot(ledger)
    ledger.check_budget(ledger.releases(1, np.array([1, 4]), np.full(2, 0.5)), 1)
    _assert_same_accounts(_snapshot(ledger), before)
    tight = ledger_for(_MIXED_VIEWS, _MIXED_SIGMA, _MIXED_SENS, n=5, rounds=6, eps=1e-3, budget="tight")
    tight.commit(tight.releases(0, part, w))
    before = _snapshot(tight)
    with pytest.raises(PrivacyBudgetExceeded):
        tight.check_budget(tight.releases(1, part, w), 1)
    _assert_same_accounts(_snapshot(tight), before)


@pytest.mark.parametrize("paper", ["classic_linear", "udp_moments", "rdp", "quantized_gaussian"])
def test_runs_accounted_together_equal_each_run_alone(paper):
    """check_budgets of a sweep (runs of one shape stacked into one ledger, others alone, one root search)
    against every run checked alone, round after round: the same accounts and epsilons, the same verdicts."""
    from fedbound.training.privacy import check_budgets

    info = {"C": 1.0, "R": 1.0, "q": 0.5} if paper == "quantized_gaussian" else {}

    def make(scale, eps=1e9, views=_MIXED_VIEWS):
        sigma = {k: v * scale for k, v in _MIXED_SIGMA.items()}
        plan = NoisePlan(rounds=6, num_clients=5, sigma=sigma, sensitivity=_MIXED_SENS, eps=eps, delta=1e-5,
                         views=tuple(views), paper_accountant=paper, budget_accountant="tight", info=info)
        return PrivacyLedger(plan)

    shapes = [(1.0, 1e9, _MIXED_VIEWS), (1.3, 1e9, _MIXED_VIEWS), (0.7, 1e9, _MIXED_VIEWS),
              (1.0, 1e9, _MIXED_VIEWS[:1]), (1.1, 1e9, _MIXED_VIEWS[:1]), (0.9, 4.0, _MIXED_VIEWS)]
    together, alone = [make(*a) for a in shapes], [make(*a) for a in shapes]
    rng = np.random.default_rng(1)
    refused = 0
    for t in range(6):
        parts = [np.sort(rng.choice(5, size=int(rng.integers(1, 6)), replace=False)) for _ in shapes]
        weights = [np.full(len(p), 1 / len(p)) for p in parts]
        rel_t = [led.releases(t, p, w) for led, p, w in zip(together, parts, weights, strict=True)]
        rel_a = [led.releases(t, p, w) for led, p, w in zip(alone, parts, weights, strict=True)]
        verdicts = check_budgets([(led, rel, t) for led, rel in zip(together, rel_t, strict=True)])
        for led_t, led_a, r_t, r_a, verdict in zip(together, alone, rel_t, rel_a, verdicts,
                                                       strict=True):
            try:
                led_a.check_budget(r_a, t)
                alone_ok = True
            except PrivacyBudgetExceeded:
                alone_ok = False
            assert (verdict is None) == alone_ok
            refused += not alone_ok
            if alone_ok:
                led_t.commit(r_t)
                led_a.commit(r_a)
            _assert_same_accounts(_snapshot(led_t), _snapshot(led_a))
            got, want = led_t.epsilons(), led_a.epsilons()
            for column in want:
                for group in want[column]:
                    np.testing.assert_array_equal(got[column][group], want[column][group])
    assert 0 < refused < 6  # the small budget is refused in some rounds, not from the start


def test_releases_of_many_runs_equal_each_run_alone():
    """releases_many (runs of one shape from array operations over all of them) against
    PrivacyLedger.releases of each run: the same multipliers, element for element, for uploads, broadcasts
    and sampled steps, with per-client sigmas, a vanishing noise (a plan refuses zero) and rounds past the
    plan."""
    from fedbound.training.privacy import releases_many

    per_client = {**_MIXED_SIGMA, "uplink": np.outer(np.linspace(0.8, 1.2, 6), np.linspace(0.5, 1.5, 5))}
    per_client["uplink"][2, 3] = 5e-324
    sigmas = [_MIXED_SIGMA, {k: v * 1.7 for k, v in _MIXED_SIGMA.items()}, per_client]
    ledgers = [ledger_for(_MIXED_VIEWS, sigma, _MIXED_SENS, n=5, rounds=6) for sigma in sigmas]
    ledgers.append(ledger_for(_MIXED_VIEWS[:1], _MIXED_SIGMA, _MIXED_SENS, n=5, rounds=6))
    rng = np.random.default_rng(3)
    for t in (0, 2, 5, 9):
        asks = []
        for led in ledgers:
            part = np.sort(rng.choice(5, size=int(rng.integers(0, 6)), replace=False))
            asks.append((led, t, part, rng.dirichlet(np.ones(max(len(part), 1)))[:len(part)]))
        for (led, r, part, w), together in zip(asks, releases_many(asks), strict=True):
            alone = led.releases(r, part, w)
            assert [rel.view for rel in together] == [rel.view for rel in alone]
            for a, b in zip(together, alone, strict=True):
                np.testing.assert_array_equal(a.z, b.z)
                np.testing.assert_array_equal(a.z_all, b.z_all)
                assert a.count == b.count
