"""WPFL (seed 004) on the engine: against a plain per-client loop, clipping, the noise under quantization,
the bit-error channel, the two accountants, resume, the recipe's plan and the example config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent
from dp_accounting.pld import PLDAccountant
from scipy import stats

from fedbound.accounting import epsilon as tight_epsilon
from fedbound.accounting import qa_gaussian_epsilon, qa_quantize
from fedbound.errors import ConfigError, ParameterError, PrivacyBudgetExceeded
from fedbound.tests._training_reference import (
    client_arrays,
    flat_grad,
    module_with,
    resumed_and_full,
    tiny_setup,
)
from fedbound.training import wpfl as wpfl_mod
from fedbound.training.engine import RunOptions, run
from fedbound.training.local import LocalSGD
from fedbound.training.noise import Streams
from fedbound.training.plan import NoisePlan, View
from fedbound.training.privacy import ORDERS, PrivacyLedger
from fedbound.training.quantization import flip_bits, index_value, quantize, quantize_index, transmit
from fedbound.training.wpfl import WPFL, WPFLSchedule, jain_index
from fedbound.validation.recipes.runner import train_from_config
from fedbound.validation.recipes.wpfl import wpfl_plan

F64 = RunOptions(dtype=torch.float64, eval_clients=False)
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wpfl_mnist.toml"


def small_schedule(n: int = 6, seed: int = 0, uplink: float = 2e-3, downlink: float = 5e-3) -> WPFLSchedule:
    clients = ([0, 2, 4], [1, 3], [0, 1, 5], [2, 3, 4, 5])
    rng = np.random.default_rng(seed)
    return WPFLSchedule(tuple(np.array(c) for c in clients),
                        tuple(np.full(len(c), uplink) * rng.uniform(0.5, 1.5, len(c)) for c in clients),
                        downlink * rng.uniform(0, 1, (len(clients) + 1, n)))


def plan_for(schedule: WPFLSchedule, sigma: float, C: float, R: int, q: float, eps: float = 1e9,
             delta: float = 1e-3) -> NoisePlan:
    rounds = schedule.rounds
    view = View("uplink", "upload", sample_rate=q, hidden_sampling=q < 1, hidden_scope="participants")
    return NoisePlan(rounds=rounds, num_clients=schedule.num_clients,
                     sigma={"uplink": np.full(rounds, sigma)}, sensitivity={"uplink": 2 * C}, eps=eps,
                     delta=delta, views=(view,),
                     paper_accountant="quantized_gaussian", info={"C": C, "R": R, "q": q})


# --- the plain per-client reference (numpy quantizer, python bit flips, nn.Module gradients) --------------
def _index(v: np.ndarray, half: float, R: int) -> np.ndarray:
    step = 2 * half / (2**R - 1)
    return np.clip(np.round((v + half) / step), 0, 2**R - 1).astype(np.int64)


def _value(idx: np.ndarray, half: float, R: int) -> np.ndarray:
    return -half + 2 * half / (2**R - 1) * idx


def _channel(idx: np.ndarray, ber: float, R: int, rng: np.random.Generator) -> np.ndarray:
    idx = idx.copy()
    count = int(rng.binomial(idx.size * R, ber)) if ber > 0 else 0
    if count:
        for p in rng.choice(idx.size * R, size=count, replace=False):
            idx[p // R] ^= 1 << int(p % R)
    return idx


def _minibatch_grad(model, data, streams, w: torch.Tensor, i: int, key: tuple, q: float) -> torch.Tensor:
    x, y = client_arrays(data, i)
    n = len(y)
    u = streams.uniform_population(key, data.num_clients, data.n_max, [i], dtype=w.dtype)[0, :n]
    chosen = u < q
    if not bool(chosen.any()):
        return torch.zeros_like(w)
    module = module_with(model, w)
    (torch.nn.functional.cross_entropy(module(x[chosen]), y[chosen], reduction="sum") / (q * n)).backward()
    return flat_grad(module)


def wpfl_reference(model, data, init: torch.Tensor, schedule: WPFLSchedule, *, C, R, sigma, q, lr_f, lr_p,
                   lam, steps, seed, pl_all=True):
    """Seed 004 Alg. 1 (spec 004 Sec. 6.2) client by client."""
    streams = Streams(seed)
    n, d = data.num_clients, len(init)

    def downlink(model_vec: np.ndarray, row: int, key: int) -> list[np.ndarray]:
        idx = _index(model_vec, C, R)
        rngs = [streams.numpy("downlink_bits", key, i) for i in range(n)]
        return [_value(_channel(idx, schedule.downlink_ber[row, i], R, rngs[i]), C, R) for i in range(n)]

    received = downlink(init.numpy(), 0, -1)
    pl = [init.clone() for _ in range(n)]
    global_vec = init.numpy()
    for t in range(schedule.rounds):
        chosen = schedule.clients[t]
        agg = np.zeros(d)
        for j, i in enumerate(chosen):
            w = torch.as_tensor(received[i])
            for s in range(steps):
                w = w - lr_f * _minibatch_grad(model, data, streams, w, int(i), ("batch", t, s), q)
            w = w / max(1.0, float(w.norm()) / C)
            w = w + sigma * streams.normal(("uplink", t), [int(i)], (d,), torch.float64)[0]
            half = C + 3 * sigma
            idx = _channel(_index(w.numpy(), half, R), schedule.uplink_ber[t][j], R,
                           streams.numpy("uplink_bits", t, int(i)))
            agg += _value(idx, half, R) / len(chosen)
        global_vec = _value(_index(agg, C, R), C, R)
        received = downlink(global_vec, t + 1, t)
        for i in (range(n) if pl_all else chosen):
            p = pl[i]
            for s in range(steps):
                g = _minibatch_grad(model, data, streams, p, int(i), ("pl_batch", t, s), q)
                p = p - lr_p * ((1 - lam / 2) * g + lam * (p - torch.as_tensor(received[i])))
            pl[i] = p
    return torch.as_tensor(global_vec), torch.stack(pl), torch.as_tensor(np.stack(received))


@pytest.mark.parametrize("pl_clients", ["all", "selected"])
def test_batched_engine_equals_per_client_reference(pl_clients):
    _, _, data, model = tiny_setup(num_clients=6, sizes=[10, 12, 9, 12, 11, 12])
    init = model.init(Streams(0).generator("init"), torch.float64)
    schedule = small_schedule()
    C, R, sigma, q = 2.0, 8, 0.02, 0.5
    algo = WPFL(schedule, C, R, LocalSGD(steps=2, lr=0.3, sample_rate=q), pl_lr=0.2, pl_weight=0.5,
                pl_clients=pl_clients)
    res = run(algo, model, data, plan=plan_for(schedule, sigma, C, R, q), options=F64, init_params=init)
    glob, pl, received = wpfl_reference(model, data, init, schedule, C=C, R=R, sigma=sigma, q=q, lr_f=0.3,
                                        lr_p=0.2, lam=0.5, steps=2, seed=0, pl_all=pl_clients == "all")
    np.testing.assert_allclose(res.params.numpy(), glob.numpy(), rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(res.state.client_state["pl"].numpy(), pl.numpy(), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(res.state.client_state["received"].numpy(), received.numpy(), rtol=1e-5,
                               atol=1e-12)
    glob_rows = res.metrics[res.metrics["client"].isna()]
    assert glob_rows["uplink_element_errors"].sum() > 0 and glob_rows["downlink_element_errors"].sum() > 0
    assert not torch.allclose(res.params, init)
    assert np.unique(np.round(res.params.numpy(), 9)).size <= 2**R  # the global model sits on R-bit levels


def test_clipped_models_never_exceed_C(monkeypatch):
    seen = []
    real = wpfl_mod.clip_rows

    def recording(x, c):
        out, norms = real(x, c)
        seen.append((torch.linalg.vector_norm(out, dim=1), norms, c))
        return out, norms

    monkeypatch.setattr(wpfl_mod, "clip_rows", recording)
    _, _, data, model = tiny_setup()
    schedule = small_schedule()
    algo = WPFL(schedule, 0.5, 16, LocalSGD(steps=2, lr=0.5, sample_rate=0.5), pl_lr=0.1, pl_weight=0.5)
    res = run(algo, model, data, options=F64)
    assert seen and all(float(after.max()) <= c * (1 + 1e-12) for after, _, c in seen)
    assert any(float(before.max()) > c for _, before, c in seen)  # clipping was active
    assert res.metrics["clipped_fraction"].dropna().max() > 0


def test_uplink_noise_survives_quantization_with_the_configured_std(monkeypatch):
    """Upload minus clipped model = N(0, sigma^2) + rounding (|.| <= Delta/2 = 1.8e-5 << sigma): KS test and
    a chi-square test of the variance on 3 x d draws, each with false-alarm rate 1e-3."""
    clipped_rows, uploads = [], []
    real = wpfl_mod.clip_rows

    def recording(x, c):
        out, norms = real(x, c)
        clipped_rows.append(out.clone())
        return out, norms

    class Capture(WPFL):
        def upload(self, ctx, clients, local):
            out = super().upload(ctx, clients, local)
            uploads.append(out.clone())
            return out

    monkeypatch.setattr(wpfl_mod, "clip_rows", recording)
    _, _, data, model = tiny_setup(hidden=64)
    schedule = WPFLSchedule((np.array([0, 2, 5]),), (np.zeros(3),), np.zeros((2, 6)))
    sigma, C = 0.05, 1.0
    algo = Capture(schedule, C, 16, LocalSGD(steps=1, lr=0.1, sample_rate=0.5), pl_lr=0.1, pl_weight=0.5)
    run(algo, model, data, plan=plan_for(schedule, sigma, C, 16, 0.5), options=F64)
    noise = ((uploads[0] - clipped_rows[0]) / sigma).numpy().ravel()
    assert stats.kstest(noise, "norm").pvalue > 1e-3
    dof = noise.size
    chi2 = float(np.sum(noise**2))
    assert stats.chi2.ppf(5e-4, dof) < chi2 < stats.chi2.ppf(1 - 5e-4, dof)


def test_quantizer_tv0_and_levels():
    """spec 004 TV0 with the torch quantizer (float32 and float64 give the same levels)."""
    x = torch.tensor([[0.05, -1.5, 0.9, 1.29, -0.2]], dtype=torch.float64)
    np.testing.assert_array_equal(quantize_index(x, 1.3, 3).numpy(), [[4, 0, 6, 7, 3]])
    np.testing.assert_array_equal(quantize_index(x, 1.0, 3).numpy(), [[4, 0, 7, 7, 3]])
    np.testing.assert_allclose(quantize(x, 1.3, 3).numpy()[0], -1.3 + 0.37142857142857144 * np.array(
        [4, 0, 6, 7, 3]), rtol=1e-12)
    np.testing.assert_array_equal(quantize_index(x.float(), 1.3, 3).numpy(), [[4, 0, 6, 7, 3]])
    rows = torch.tensor([[0.5, -0.5], [0.5, -0.5]])
    two = quantize(rows, torch.tensor([1.0, 2.0]), 2)  # per-row ranges: levels -A, -A/3, A/3, A
    np.testing.assert_allclose(two.numpy(), [[1 / 3, -1 / 3], [2 / 3, -2 / 3]], rtol=1e-6)
    inside = torch.linspace(-1, 1, 1001, dtype=torch.float64).unsqueeze(0)
    assert float((quantize(inside, 1.0, 6) - inside).abs().max()) <= 1.0 / 63 + 1e-15  # E^max = A/(2^R-1)
    with pytest.raises(ParameterError, match="R"):
        quantize(inside, 1.0, 0)


def test_torch_quantizer_equals_the_accounting_reference():
    """training.quantization (torch, the engine's) and accounting.qa_quantize (numpy, the mechanism the
    privacy analysis and its Monte Carlo use) are one quantizer: equal levels inside and outside the range."""
    x = np.random.default_rng(3).normal(0.0, 2.0, (3, 4000))
    for R, A in ((1, 0.5), (4, 1.7), (16, 3.0)):
        got = quantize(torch.as_tensor(x), A, R).numpy()
        np.testing.assert_allclose(got, qa_quantize(x, A, R), rtol=0, atol=1e-12 * A)


def test_bit_flips_have_the_configured_rates():
    """Element errors ~ rho = 1 - (1 - e)^R and bit flips ~ e (binomial tests, false alarm 1e-4 each)."""
    d, R, e = 20000, 8, 0.01
    index = torch.randint(0, 2**R, (d,), generator=torch.Generator().manual_seed(0))
    received, wrong = flip_bits(index, e, R, np.random.default_rng(1))
    changed = received != index
    assert wrong == int(changed.sum())
    rho = 1 - (1 - e) ** R
    assert stats.binomtest(wrong, d, rho).pvalue > 1e-4
    flipped_bits = sum(int(((received ^ index) >> b & 1).sum()) for b in range(R))
    assert stats.binomtest(flipped_bits, d * R, e).pvalue > 1e-4
    assert int(received.min()) >= 0 and int(received.max()) < 2**R  # still a level in range
    same, none = flip_bits(index, 0.0, R, np.random.default_rng(1))
    assert none == 0 and torch.equal(same, index)
    values, _ = transmit(torch.zeros(2, 5), 1.0, 4, [1.0, 0.0], [np.random.default_rng(2)] * 2)
    np.testing.assert_allclose(values[0].numpy(), -index_value(torch.tensor([[8] * 5]), 1.0, 4)[0].numpy())


def test_jain_index_tv0():
    assert jain_index([1, 2, 3, 4]) == pytest.approx(0.8333333333333334, rel=1e-12)
    assert jain_index([2, 2, 2]) == 1.0
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    with pytest.raises(ParameterError):
        jain_index([0, 0])


def test_paper_accountant_is_theorem1_with_basic_composition():
    """After n uploads a client has spent n eps_1(delta/n): at n = T0 = 4 this is Theorem 1's eps_Q at
    delta = 0.01 for spec 004 TV1's non-degenerate case (8.2781845866); non-participants spend nothing."""
    sched = WPFLSchedule(tuple(np.array([0, 1]) if t == 0 else np.array([0]) for t in range(5)),
                         tuple(np.zeros(2 if t == 0 else 1) for t in range(5)), np.zeros((6, 3)))
    plan = plan_for(sched, sigma=1.0, C=0.2, R=2, q=0.1, eps=1e9, delta=0.01)
    ledger = PrivacyLedger(plan)
    for t in range(4):
        part = sched.clients[t]
        ledger.commit(ledger.releases(t, part, np.full(len(part), 1 / len(part))))
    eps = ledger.epsilons()
    paper, tight = eps["paper"]["uplink"], eps["tight"]["uplink"]
    assert paper[0] == pytest.approx(8.2781845866, rel=1e-9)
    assert paper[1] == pytest.approx(float(qa_gaussian_epsilon(0.01, 0.2, 1.0, 2, 0.1, 1)), rel=1e-12)
    assert paper[2] == 0.0 and tight[2] == 0.0
    # tight: 4 (resp. 1) Poisson-subsampled Gaussian releases at z = sigma / 2C, only when uploading, by
    # min(RDP over the ledger's orders (training.privacy.ORDERS), PLD by dp-accounting at the ledger's
    # discretisation: 1 % of the budget over the releases, clamped to [1e-4, 1e-2], so 1e-2 here)
    for client, n in ((0, 4), (1, 1)):
        pld = PLDAccountant(value_discretization_interval=1e-2)
        pld.compose(PoissonSampledDpEvent(0.1, GaussianDpEvent(1.0 / 0.4)), n)
        want = min(tight_epsilon(1.0 / 0.4, 0.1, n, 0.01, orders=ORDERS), pld.get_epsilon(0.01))
        assert tight[client] == pytest.approx(want, rel=1e-6)


def test_the_upload_after_t0_exceeds_the_paper_budget():
    """At the calibrated sigma (spec TV1, MLR) the paper's accountant certifies eps = 0 for T0 uploads and
    the (T0 + 1)-th upload breaks the budget: the engine stops the run before it."""
    setting = {"N": 2, "T": 3, "C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3}
    plan = dataclasses.replace(wpfl_plan(setting, rounds=4), paper_reproduction=True)  # its accountant binds
    ledger = PrivacyLedger(plan)
    for t in range(3):
        releases = ledger.releases(t, np.array([0]), np.ones(1))
        ledger.check_budget(releases, t)
        ledger.commit(releases)
    assert ledger.epsilons()["paper"]["uplink"][0] == 0.0
    with pytest.raises(PrivacyBudgetExceeded):
        ledger.check_budget(ledger.releases(3, np.array([0]), np.ones(1)), 3)


def test_plan_reproduces_spec_sigmas_and_reports_the_tight_gap():
    """spec 004 TV1 / S21 (MLR: C 3, R 16, q 0.01, eps 1, delta 1e-3) through the recipe's plan."""
    base = {"N": 20, "C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3}
    got = [wpfl_plan({**base, "T": t0}, rounds=10).info["sigma_dp"] for t0 in (5, 20, 30)]
    np.testing.assert_allclose(got, [0.00183, 0.00736, 0.01108], atol=6e-6)
    plan = wpfl_plan({**base, "T": 20}, rounds=40)
    assert plan.info["sigma_dp"] == pytest.approx(0.00735867, abs=1e-7)
    assert plan.info["delta_Q_theorem1"] <= 1e-3
    assert plan.info["epsilon_tight_after_T0_uploads"] > 1e5  # E17: not a set-based guarantee
    assert plan.sensitivity["uplink"] == 6.0 and plan.paper_accountant == "quantized_gaussian"
    assert any("per-outcome" in note for note in plan.notes)
    tight = wpfl_plan({**base, "T": 20}, rounds=40, noise="tight")
    assert tight.budget_accountant == "tight" and tight.info["sigma_dp"] > 100 * plan.info["sigma_dp"]
    # the plan's exact sigma: dp-accounting's PLD (disc 1e-4) of the 20 uploads meets eps, RDP does not
    pld = PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(PoissonSampledDpEvent(0.01, GaussianDpEvent(tight.info["sigma_dp"] / 6.0)), 20)
    assert 0.98 <= pld.get_epsilon(1e-3) <= 1.0
    assert tight_epsilon(tight.info["sigma_dp"] / 6.0, 0.01, 20, 1e-3) > 1.0
    assert tight.info["epsilon_tight_after_T0_uploads"] == pytest.approx(1.0, rel=1e-3)
    two = wpfl_plan({**base, "T": 20}, rounds=40, local_steps=2)
    assert two.info["q"] == pytest.approx(1 - 0.99**2) and any("local_steps" in n for n in two.notes)


def test_resume_equals_uninterrupted(tmp_path):
    _, _, data, model = tiny_setup()
    schedule = small_schedule()
    plan = plan_for(schedule, 0.02, 2.0, 8, 0.5)

    def algo():
        return WPFL(schedule, 2.0, 8, LocalSGD(steps=1, lr=0.3, sample_rate=0.5), pl_lr=0.2, pl_weight=0.5)

    cols = ["round", "loss", "epsilon_spent", "epsilon_spent_paper", "pl_jain_index", "global_loss"]
    resumed, full = resumed_and_full(algo, model, data, plan, F64, tmp_path, 2, cols)
    assert torch.equal(resumed.state.client_state["pl"], full.state.client_state["pl"])


def test_schedule_and_config_errors():
    with pytest.raises(ParameterError, match="clients"):
        WPFLSchedule((np.array([2, 1]),), (np.zeros(2),), np.zeros((2, 3)))
    with pytest.raises(ParameterError, match="ber"):
        WPFLSchedule((np.array([1]),), (np.array([1.5]),), np.zeros((2, 3)))
    with pytest.raises(ParameterError, match="downlink_ber"):
        WPFLSchedule((np.array([1]),), (np.zeros(1),), np.zeros((1, 3)))
    _, _, data, model = tiny_setup()
    wrong_size = WPFLSchedule((np.array([0]),), (np.zeros(1),), np.zeros((2, 6)), n_params=7850)
    with pytest.raises(ConfigError, match="n_params"):
        run(WPFL(wrong_size, 1.0, 8, LocalSGD(), 0.1, 0.5), model, data)
    with pytest.raises(ParameterError, match="lambda"):
        WPFL(small_schedule(), 1.0, 8, LocalSGD(), 0.1, 2.5)


def test_example_config_trains_and_lowers_the_loss(tmp_path):
    """examples/wpfl_mnist.toml with T = 6 (fewer rounds): the PL loss falls, the tight sigma holds the
    budget under exact accounting (the paper's accountant claims 0 for it), every client uploads T0 times,
    the personalised metrics are recorded."""
    done = train_from_config("wpfl", EXAMPLE, ["T=6"], out=tmp_path / "w")
    s = done.summary
    assert s["final_loss"] < s["initial_loss"]
    assert s["epsilon_spent_paper"] == 0.0 and 0.99 < s["epsilon_spent"] <= 1.0 * (1 + 1e-9)
    assert s["rounds_done"] == s["schedule_rounds"] >= 12
    table = done.result.metrics
    clients = table[table["client"].notna()]
    last = clients[clients["round"] == s["rounds_done"]]
    assert len(last) == 20
    uploads = clients.groupby("client")["participated"].sum()
    assert (uploads == 6).all()
    glob = table[table["client"].isna()]
    for col in ("pl_test_accuracy", "pl_jain_index", "global_test_accuracy", "pl_max_test_loss"):
        assert glob[col].notna().all()
    assert 0.9 < float(glob["pl_jain_index"].iloc[-1]) <= 1.0
    # the personalised evaluations reach the summary (last value of each extra *_loss / *_accuracy column)
    assert s["final_extra"]["pl_test_accuracy"] == pytest.approx(float(glob["pl_test_accuracy"].iloc[-1]))
    assert "pl_jain_index" not in s["final_extra"] and "loss" not in s["final_extra"]
    with pytest.raises(ConfigError, match="lr must stay unset"):
        train_from_config("wpfl", EXAMPLE, ["T=2", "train.lr=0.5"], out=tmp_path / "x")
    with pytest.raises(ConfigError, match="drop \\[train\\] lr"):
        train_from_config("wpfl", EXAMPLE, ["T=2", "train.lr=0.5", 'policy="non_adjustment"'],
                          out=tmp_path / "y")


def test_per_client_per_round_rates_from_the_schedule():
    """eta_P and lambda as data: a schedule carrying the same scalars everywhere trains exactly like the
    algorithm's scalars; per-client values reproduce the per-client reference run client by client."""
    _, _, data, model = tiny_setup(num_clients=6, sizes=[10, 12, 9, 12, 11, 12])
    init = model.init(Streams(0).generator("init"), torch.float64)
    base = small_schedule()
    C, R, sigma, q = 2.0, 8, 0.02, 0.5

    def train(schedule, lr=0.2, lam=0.5):
        algo = WPFL(schedule, C, R, LocalSGD(steps=1, lr=0.3, sample_rate=q), pl_lr=lr, pl_weight=lam)
        return run(algo, model, data, plan=plan_for(schedule, sigma, C, R, q), options=F64, init_params=init)

    shape = (base.rounds, base.num_clients)

    def with_rates(lr, lam):
        return WPFLSchedule(base.clients, base.uplink_ber, base.downlink_ber, None, lr, lam)

    same = train(with_rates(np.full(shape, 0.2), np.full(shape, 0.5)), lr=9.9, lam=1.9)
    scalar = train(base)
    assert torch.equal(same.state.client_state["pl"], scalar.state.client_state["pl"])
    lam = np.tile(np.array([0.1, 0.5, 1.0, 1.5, 0.5, 0.5]), (base.rounds, 1))
    mixed = train(with_rates(np.full(shape, 0.2), lam))
    for client, value in ((0, 0.1), (3, 1.5)):
        ref = train(base, lam=value)
        torch.testing.assert_close(mixed.state.client_state["pl"][client],
                                   ref.state.client_state["pl"][client])
    torch.testing.assert_close(mixed.params, scalar.params)  # the FL side does not see lambda
    with pytest.raises(ParameterError, match="pl_weight"):
        WPFLSchedule(base.clients, base.uplink_ber, base.downlink_ber, None, None, np.full(shape, 2.5))
    with pytest.raises(ParameterError, match="pl_lr.shape"):
        WPFLSchedule(base.clients, base.uplink_ber, base.downlink_ber, None, np.ones((1, 6)), None)


def test_compare_policies_table(tmp_path):
    """One call trains the proposed schedule next to the baselines and reports the paper's three metrics."""
    from fedbound.validation.recipes.wpfl import PAPER_IMPROVEMENTS, compare_policies

    out = compare_policies(EXAMPLE, ["T=2"], tmp_path, policies=("proposed", "round_robin"))
    rows = out["policies"]
    assert set(rows) == {"proposed", "round_robin"}
    for r in rows.values():
        assert 0 <= r["accuracy"] <= 1 and r["max_test_loss"] > 0 and 1 / 20 <= r["jain_index"] <= 1
    mine, base = rows["proposed"], rows["round_robin"]
    assert out["improvement_percent"]["accuracy"] == pytest.approx(
        100 * (mine["accuracy"] - base["accuracy"]) / base["accuracy"])
    paper = {"accuracy": 87.08, "max_test_loss": 16.21, "jain_index": 38.37}
    assert out["paper_improvement_percent"] == PAPER_IMPROVEMENTS == paper


def test_perfect_gaussian_baseline_skips_quantization_and_channel():
    """mechanism = "perfect_gaussian" (Fig. 2): the global model is the plain mean of the noisy clipped
    uploads (no R-bit levels), no element errors, the same sigma as the quantized mechanism."""
    _, _, data, model = tiny_setup(num_clients=6, sizes=[10, 12, 9, 12, 11, 12])
    schedule = small_schedule(uplink=0.05, downlink=0.05)
    algo = WPFL(schedule, 2.0, 4, LocalSGD(steps=1, lr=0.3, sample_rate=0.5), 0.2, 0.5, quantized=False)
    res = run(algo, model, data, plan=plan_for(schedule, 0.02, 2.0, 4, 0.5), options=F64)
    glob = res.metrics[res.metrics["client"].isna()]
    assert glob["uplink_element_errors"].sum() == 0 and glob["downlink_element_errors"].sum() == 0
    assert np.unique(np.round(res.params.numpy(), 9)).size > 2**4
    assert torch.equal(res.state.client_state["received"][0], res.params)
    from fedbound.validation.recipes.wpfl import sigma_for

    setting = {"N": 20, "T": 20, "C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3}
    assert sigma_for({**setting, "mechanism": "perfect_gaussian"}) == sigma_for(setting)
    assert sigma_for({**setting, "mechanism": "gaussian"}) > 100 * sigma_for(setting)


def test_dithered_quantizer_error_is_exactly_gaussian_whatever_the_input():
    """Subtractive dither with half-step sigma chi_3: the error is N(0, sigma^2) and independent of x (a
    Kolmogorov-Smirnov test against scipy's normal at two very different inputs; false-alarm rate 1e-3)."""
    from scipy import stats

    from fedbound.training.quantization import dithered_gaussian

    sigma, n = 0.7, 40_000
    for level in (0.0, 12.345):
        x = torch.full((1, n), level, dtype=torch.float64)
        y, wrong, bits = dithered_gaussian(x, [sigma], 16, [0.0], [np.random.default_rng(7)])
        err = (y - x).numpy().ravel()
        assert wrong == 0 and 0 <= bits <= 16
        assert stats.kstest(err / sigma, "norm").pvalue > 1e-3
        assert abs(float(np.std(err)) - sigma) < 0.02


def test_dithering_baseline_trains_with_the_tight_sigma():
    """mechanism = "dithering" (Fig. 2): the uploads carry exactly Gaussian noise made by the quantizer (no
    separate noise draw), the element errors of the channel apply, and its sigma is the tight calibration."""
    from fedbound.validation.recipes.wpfl import sigma_for

    _, _, data, model = tiny_setup(num_clients=6, sizes=[10, 12, 9, 12, 11, 12])
    schedule = small_schedule(uplink=0.05, downlink=0.05)
    algo = WPFL(schedule, 2.0, 4, LocalSGD(steps=1, lr=0.3, sample_rate=0.5), 0.2, 0.5, dithered=True)
    res = run(algo, model, data, plan=plan_for(schedule, 0.02, 2.0, 4, 0.5), options=F64)
    glob = res.metrics[res.metrics["client"].isna()]
    assert glob["dither_bits"].min() >= 0 and np.isfinite(res.params.numpy()).all()
    assert glob["uplink_element_errors"].sum() > 0  # the channel still applies
    setting = {"N": 20, "T": 20, "C": 3.0, "R": 16, "q": 0.01, "eps": 1.0, "delta": 1e-3}
    assert sigma_for({**setting, "mechanism": "dithering"}) == sigma_for(setting, "tight")
