"""Issue 25 items 2-3: the engine's data stored once (flat rows + index, padded a chunk at a time), the
synthetic tasks drawn a block at a time, and the privacy ledger batched over runs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from fedbound.errors import PrivacyBudgetExceeded
from fedbound.training import data as data_mod
from fedbound.training.federation import ClientData
from fedbound.training.plan import NoisePlan, View
from fedbound.training.privacy import PrivacyLedger, check_budgets, epsilons_many, gaussian_epsilon

# --- synthetic tasks: blockwise draws equal the whole-matrix draw --------------------------------------


def _whole_draw(kind: str, n: int, dim: int, test_fraction: float, seed: int):
    """The synthetic task as one (n, dim) float64 matrix, as the module drew it before (the reference)."""
    rng = np.random.default_rng([seed, 11])
    x = rng.standard_normal((n, dim)) / np.sqrt(dim)
    w = rng.standard_normal(dim) * 2.0
    b = float(rng.standard_normal())
    if kind == "logistic":
        rng = np.random.default_rng([seed, 12])
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ w + b)))).astype(np.int64)
    else:
        y = (x @ w + b + 0.1 * np.random.default_rng([seed, 13]).standard_normal(n)).astype(np.float32)
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_test = int(round(test_fraction * n))
    x = x.astype(np.float32)
    return x[order[n_test:]], y[order[n_test:]], x[order[:n_test]], y[order[:n_test]], w, b


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["logistic", "ridge"]), n=st.integers(2, 300), dim=st.integers(1, 30),
       test_fraction=st.sampled_from([0.0, 0.2, 0.5]), seed=st.integers(0, 5), block_rows=st.integers(1, 50))
def test_blockwise_synthetic_equals_whole_draw(kind, n, dim, test_fraction, seed, block_rows):
    fn = data_mod.synthetic_logistic if kind == "logistic" else data_mod.synthetic_ridge
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(data_mod, "PLANTED_BLOCK_BYTES", 8 * dim * block_rows)
        got = fn(n, dim, test_fraction, seed)
    want = _whole_draw(kind, n, dim, test_fraction, seed)
    for a, b in zip((got.x_train, got.y_train, got.x_test, got.y_test), want[:4], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got.meta["planted_weight"], want[4])
    assert got.meta["planted_bias"] == want[5]


# --- client data: one copy, padded per chunk -----------------------------------------------------------


def _padded_reference(x, y, parts):
    n_max = max(len(p) for p in parts)
    xs = np.zeros((len(parts), n_max, *x.shape[1:]), np.float32)
    ys = np.zeros((len(parts), n_max), y.dtype)
    mask = np.zeros((len(parts), n_max), bool)
    for i, p in enumerate(parts):
        xs[i, :len(p)], ys[i, :len(p)], mask[i, :len(p)] = x[p], y[p], True
    return xs, ys, mask


@settings(max_examples=15, deadline=None)
@given(n=st.integers(4, 60), clients=st.integers(1, 6), used=st.sampled_from([1.0, 0.5]),
       seed=st.integers(0, 100), regression=st.booleans())
def test_gather_equals_the_padded_layout(n, clients, used, seed, regression):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32) if regression else rng.integers(0, 3, n)
    keep = rng.permutation(n)[:max(clients, int(used * n))]
    parts = [np.sort(p) for p in np.array_split(keep, clients)]
    data = ClientData.from_partition(x, y, parts)
    xs, ys, mask = _padded_reference(x, y, parts)
    order = rng.permutation(clients)
    batch = data.gather(order)
    np.testing.assert_array_equal(batch.x.numpy(), xs[order])
    np.testing.assert_array_equal(batch.y.numpy(), ys[order])
    np.testing.assert_array_equal(batch.mask.numpy(), mask[order].astype(np.float32))
    np.testing.assert_array_equal(batch.sizes.numpy(), [len(parts[i]) for i in order])
    np.testing.assert_array_equal(data.x.numpy(), xs)
    np.testing.assert_array_equal(data.mask.numpy(), mask)
    assert data.padded_shape == xs.shape and data.n_max == xs.shape[1]
    assert data.to("cpu", torch.float64).gather(order).x.dtype == torch.float64


def test_a_whole_partition_is_not_copied():
    x = np.arange(40 * 5, dtype=np.float32).reshape(40, 5)
    parts = [np.sort(p) for p in np.array_split(np.random.default_rng(0).permutation(40), 8)]
    data = ClientData.from_partition(x, np.zeros(40, np.int64), parts)
    assert data.rows.data_ptr() == x.ctypes.data  # the dataset's own array: one copy of the data in memory
    assert data.index.nbytes == 8 * 40
    np.testing.assert_array_equal(data.gather([3]).x[0].numpy(), x[parts[3]])


# --- the ledger, batched over runs ---------------------------------------------------------------------


def _analytic_eps_reference(z: float, delta: float) -> float:
    """Balle & Wang 2018, Thm 8 solved for eps with scipy's brentq (point by point, independent)."""
    def excess(eps: float) -> float:
        return (stats.norm.cdf(0.5 / z - eps * z) - math.exp(eps) * stats.norm.cdf(-0.5 / z - eps * z)
                - delta)

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return optimize.brentq(excess, 0.0, hi, xtol=1e-14, rtol=1e-14)


def _ledgers(count: int, rng: np.random.Generator) -> list[tuple[PrivacyLedger, list]]:
    out = []
    for _ in range(count):
        n, rounds = int(rng.integers(2, 6)), int(rng.integers(2, 5))
        sigma = {"uplink": rng.uniform(0.5, 3.0, (rounds, n)), "server": rng.uniform(0.5, 2.0, rounds)}
        plan = NoisePlan(rounds=rounds, num_clients=n, sigma=sigma, sensitivity={"uplink": 1.0},
                         eps=1e9, delta=float(rng.choice([1e-5, 1e-3, 0.01])),
                         views=(View("up", "upload"), View("down", "broadcast", stage="uplink", group="b")),
                         paper_accountant="classic_linear", budget_accountant="tight")
        ledger = PrivacyLedger(plan)
        releases = []
        for t in range(rounds):
            part = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
            releases.append(ledger.releases(t, part, np.full(len(part), 1.0 / len(part))))
        out.append((ledger, releases))
    return out


def test_batched_ledger_equals_point_by_point():
    rng = np.random.default_rng(3)
    runs = _ledgers(6, rng)
    for t in range(4):  # every run's round t, all runs' budgets and epsilons in one batch
        live = [(ledger, rel[t]) for ledger, rel in runs if t < len(rel)]
        history = {id(ledger): rel[:t + 1] for ledger, rel in runs}
        assert check_budgets([(ledger, rel, t) for ledger, rel in live]) == [None] * len(live)
        for ledger, rel in live:
            ledger.commit(rel)
        batched = epsilons_many([(ledger, None) for ledger, _ in live])
        for (ledger, _), got in zip(live, batched, strict=True):
            assert ledger.epsilons() is not None
            for group, eps in got["tight"].items():
                np.testing.assert_array_equal(eps, ledger.epsilons()["tight"][group])  # the committed cache
                names = {v.name for v in ledger._groups()[group]}
                total = sum(np.where(np.isinf(r.z), 0.0, 1.0 / np.square(r.z))  # sum of 1/z^2 of its releases
                            for rels in history[id(ledger)] for r in rels if r.view.name in names)
                want = [0.0 if s == 0 else _analytic_eps_reference(1 / math.sqrt(s), ledger.plan.delta)
                        for s in total]
                np.testing.assert_allclose(eps, want, rtol=1e-9, atol=1e-12)
            fresh = PrivacyLedger(ledger.plan)
            fresh.load_state_dict(ledger.state_dict())
            for kind, groups in fresh.epsilons().items():  # recomputed alone, not from the batch
                for group, eps in groups.items():
                    np.testing.assert_allclose(got[kind][group], eps, rtol=1e-12)


def test_gaussian_epsilon_broadcasts_delta():
    inv = np.array([0.0, 0.25, 1.0, np.inf, 0.25])
    delta = np.array([1e-5, 1e-5, 1e-3, 1e-3, 1e-3])
    got = gaussian_epsilon(inv, delta)
    assert got[0] == 0.0 and got[3] == np.inf
    for i in (1, 2, 4):
        assert got[i] == pytest.approx(_analytic_eps_reference(1 / math.sqrt(inv[i]), delta[i]), rel=1e-9)
    assert got[4] < got[1]  # larger delta, smaller eps


def test_batched_budget_check_stops_only_the_run_over_budget():
    rng = np.random.default_rng(1)
    (a, rel_a), (b, rel_b) = _ledgers(2, rng)
    assert all(float(np.max(v)) == 0.0 for v in b.epsilons()["tight"].values())  # nothing spent yet
    b.plan = dataclasses.replace(b.plan, eps=1e-6)
    errors = check_budgets([(a, rel_a[0], 0), (b, rel_b[0], 0)])
    assert errors[0] is None and isinstance(errors[1], PrivacyBudgetExceeded)
    with pytest.raises(PrivacyBudgetExceeded) as alone:
        b.check_budget(rel_b[0], 0)
    assert str(alone.value) == str(errors[1])


def test_batched_sweep_stops_the_run_over_budget_as_alone():
    """In one batched call, a run whose plan runs out of budget at round 2 stops with the error it raises
    alone; the other run is unaffected (the budget checks of a round are batched, privacy.check_budgets)."""
    from fedbound.training.engine import Algorithm, run
    from fedbound.training.local import LocalSGD
    from fedbound.training.models import build_model
    from fedbound.training.multirun import BatchJob, run_batch

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    data = ClientData.from_partition(x, (x[:, 0] > 0).astype(np.int64), np.array_split(np.arange(40), 4))
    model, local = build_model("logreg", (3,), 2), LocalSGD(steps=1, lr=0.3)

    def plan(eps: float) -> NoisePlan:
        return NoisePlan(rounds=3, num_clients=4, sigma={"uplink": np.full(3, 1.0)},
                         sensitivity={"uplink": 1.0}, eps=eps, delta=1e-5, views=(View("up", "upload"),),
                         paper_accountant="none", budget_accountant="tight")

    one_round = float(gaussian_epsilon(np.array([1.0]), 1e-5)[0])
    plans = [plan(100.0), plan(1.5 * one_round)]  # the second affords one round, not two
    batched = run_batch([BatchJob(Algorithm(3, local), model, data, plan=p) for p in plans])
    alone = []
    for p in plans:
        try:
            alone.append(run(Algorithm(3, local), model, data, plan=p))
        except PrivacyBudgetExceeded as exc:
            alone.append(exc)
    assert isinstance(batched[1], PrivacyBudgetExceeded) and str(batched[1]) == str(alone[1])
    assert "round 2 would spend" in str(batched[1])
    torch.testing.assert_close(batched[0].params, alone[0].params)
    assert batched[0].metrics["epsilon_spent"].tolist() == alone[0].metrics["epsilon_spent"].tolist()
