"""PADPFL (seed 001) in the simulator: engine vs a per-client loop, NbAFL as its uniform special case,
participation, clipping, per-round noise and privacy, spec 001 Sec. 8 test vectors, the example config."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from fedbound import registry
from fedbound.bounds import adaptive as ba
from fedbound.errors import ConfigError, ParameterError, PrivacyBudgetExceeded
from fedbound.tests._training_reference import (
    client_arrays,
    flat_grad,
    module_with,
    resumed_and_full,
    tiny_setup,
)
from fedbound.training.adaptive import PADPFL
from fedbound.training.data import salt_and_pepper
from fedbound.training.engine import RunOptions, run
from fedbound.training.federation import ClientData
from fedbound.training.local import LocalSGD
from fedbound.training.nbafl import NbAFL
from fedbound.training.noise import Streams
from fedbound.training.plan import NoisePlan, View
from fedbound.validation.recipes import adaptive as ta
from fedbound.validation.recipes.runner import train_from_config

F64 = RunOptions(dtype=torch.float64, eval_clients=False)
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "adaptive_mnist.toml"


def plan_for(
    p: np.ndarray, sigma_up: float, sigma_server, sens: float = 0.05, eps: float = 1e6, R: int = 1
) -> NoisePlan:
    rounds = len(p)
    sigma = {"uplink": np.full(rounds, sigma_up), "server": np.broadcast_to(sigma_server, rounds)}
    return NoisePlan(
        rounds=rounds,
        num_clients=p.shape[1],
        sigma=sigma,
        sensitivity={"uplink": sens},
        eps=eps,
        delta=0.01,
        views=(View("uplink", "upload", max_releases=R), View("downlink", "broadcast")),
    )


def init_for(model, dtype=torch.float64):
    return model.init(Streams(0).generator("init"), dtype)


def padpfl_reference(model, phases, init, p, *, lr, mu, steps, clip, sigma_up, sigma_server, seed):
    """Seed 001's PADPFL (spec 001 Sec. 5) client by client: clients with p_i > 0 run ``steps`` prox
    steps from the broadcast on their current phase's data, clip to B, add sigma_C noise; the server sums
    p_i x~_i and adds sigma_S^(t) noise.  ``phases``: [(first_round, ClientData)]."""
    streams = Streams(seed)
    w_global = init.clone()
    d = len(w_global)
    for t in range(len(p)):
        data = [dat for first, dat in phases if first <= t][-1]
        agg = torch.zeros_like(w_global)
        for i in np.flatnonzero(p[t] > 0):
            x, y = client_arrays(data, i)
            w = w_global.clone()
            for _ in range(steps):
                module = module_with(model, w)
                torch.nn.functional.cross_entropy(module(x), y).backward()
                w = w - lr * (flat_grad(module) + mu * (w - w_global))
            w = w / max(1.0, float(w.norm()) / clip)
            w = w + sigma_up * streams.normal(("uplink", t), [int(i)], (d,), w.dtype)[0]
            agg = agg + float(p[t, i]) * w
        w_global = agg + float(sigma_server[t]) * streams.normal(("server", t), [-1], (d,), agg.dtype)[0]
    return w_global


def noisy_copy(data: ClientData, density: float, seed: int = 5) -> ClientData:
    """The same clients with salt-and-pepper images (a second data phase, as in scenario 4)."""
    x = torch.as_tensor(salt_and_pepper(data.x.numpy(), density, np.random.default_rng(seed)))
    return ClientData(x * data.mask.unsqueeze(-1), data.y, data.mask, data.sizes)


SCHEDULE = np.array([[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2], [2, 2, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]) / 6.0
SCHEDULE[:3] /= SCHEDULE[:3].sum(axis=1, keepdims=True)


def test_batched_engine_equals_per_client_reference():
    """Unequal sizes, zero-impact clients, a switch of p and of the data, per-round server sigma."""
    _, _, data, model = tiny_setup(num_clients=6, sizes=[10, 12, 9, 12, 11, 12])
    init = init_for(model)
    phase2 = noisy_copy(data, 0.3)
    p, sig_srv = SCHEDULE, np.array([0.004, 0.004, 0.009, 0.0])
    algo = PADPFL(
        4,
        clip_norm=2.0,
        local=LocalSGD(steps=3, lr=0.3, prox_mu=0.5),
        impact_factors=p,
        data_schedule=[(2, phase2)],
    )
    res = run(algo, model, data, plan=plan_for(p, 0.01, sig_srv), options=F64, init_params=init)
    ref = padpfl_reference(
        model,
        [(0, data), (2, phase2)],
        init,
        p,
        lr=0.3,
        mu=0.5,
        steps=3,
        clip=2.0,
        sigma_up=0.01,
        sigma_server=sig_srv,
        seed=0,
    )
    np.testing.assert_allclose(res.params.numpy(), ref.numpy(), rtol=1e-5, atol=1e-9)
    no_switch = padpfl_reference(
        model,
        [(0, data)],
        init,
        p,
        lr=0.3,
        mu=0.5,
        steps=3,
        clip=2.0,
        sigma_up=0.01,
        sigma_server=sig_srv,
        seed=0,
    )
    assert not np.allclose(res.params.numpy(), no_switch.numpy(), rtol=1e-5)  # the data switch mattered
    glob = res.metrics
    assert glob["participants"].tolist() == [4, 4, 4, 6]
    np.testing.assert_allclose(glob["impact_change"].to_numpy(dtype=float), [0, 0, 4 / 3, 2 / 3])
    np.testing.assert_allclose(glob["p_max"].to_numpy(dtype=float), [1 / 3, 1 / 3, 1 / 3, 1 / 6])
    np.testing.assert_allclose(
        glob["sigma_aggregated_client"].to_numpy(dtype=float), 0.01 * np.sqrt((p**2).sum(axis=1))
    )


def test_uniform_impact_factors_reproduce_nbafl():
    """p_i = 1/N with equal sizes is NbAFL (spec 001 Sec. 3.5, limiting case): same numbers, same seed."""
    _, _, data, model = tiny_setup(num_clients=6)
    init = init_for(model)
    p = np.full((3, 6), 1 / 6)
    plan = plan_for(p, 0.02, 0.005)
    local = LocalSGD(steps=2, lr=0.3, prox_mu=0.2)
    ours = run(PADPFL(3, 1.5, local, p), model, data, plan=plan, options=F64, init_params=init)
    theirs = run(NbAFL(3, 1.5, local), model, data, plan=plan, options=F64, init_params=init)
    np.testing.assert_allclose(ours.params.numpy(), theirs.params.numpy(), rtol=1e-12, atol=1e-15)
    cols = ["loss", "sigma", "epsilon_spent", "epsilon_spent_paper"]
    np.testing.assert_allclose(
        ours.metrics[cols].to_numpy(dtype=float), theirs.metrics[cols].to_numpy(dtype=float), rtol=1e-12
    )


def test_zero_impact_clients_neither_train_nor_upload():
    seen: list[tuple[int, list[int]]] = []

    class Spy(PADPFL):
        def local_update(self, ctx, clients, start, batch):
            seen.append((ctx.round, clients.tolist()))
            return super().local_update(ctx, clients, start, batch)

    _, _, data, model = tiny_setup(num_clients=6)
    res = run(
        Spy(4, 2.0, LocalSGD(steps=1, lr=0.1), SCHEDULE),
        model,
        data,
        plan=plan_for(SCHEDULE, 0.01, 0.002),
        options=RunOptions(dtype=torch.float64, chunk_size=3),
    )
    assert sorted({(t, c) for t, chunk in seen for c in chunk}) == [
        (t, c) for t in range(4) for c in range(6) if SCHEDULE[t, c] > 0
    ]
    rows = res.metrics[res.metrics["client"].notna()]
    took = rows.pivot(index="round", columns="client", values="participated").to_numpy(dtype=bool)
    np.testing.assert_array_equal(took, SCHEDULE > 0)
    assert (rows.loc[~rows["participated"].astype(bool), "sigma"] == 0).all()
    assert (rows.loc[rows["participated"].astype(bool), "sigma"] == 0.01).all()


@pytest.mark.parametrize("clip", [0.05, 0.7, 3.0])
def test_uploads_are_clipped_to_B(clip):
    norms: list[torch.Tensor] = []

    class Spy(PADPFL):
        def upload(self, ctx, clients, local):
            out = super().upload(ctx, clients, local)
            norms.append(torch.linalg.vector_norm(out, dim=1))
            return out

    _, _, data, model = tiny_setup(num_clients=6)
    res = run(Spy(3, clip, LocalSGD(steps=2, lr=0.5), SCHEDULE[:3]), model, data, options=F64)
    upload_norms = torch.cat(norms)
    assert len(upload_norms) == 12 and float(upload_norms.max()) <= clip * (1 + 1e-12)
    if clip < 0.1:  # far below the models' norms: every upload was clipped, to exactly B
        np.testing.assert_allclose(upload_norms.numpy(), clip, rtol=1e-12)
        assert (res.metrics["clipped_fraction"] == 1.0).all()


def test_injected_noise_has_the_planned_per_round_std():
    """With lr = 0 and no clipping each round's model change is the injected noise sum_i p_i n_i + n_S,
    coordinates iid N(0, sigma_C^2 sum_i p_i^2 + sigma_S^(t)^2) (seed 001 eq. (11)-(13)), here with p and
    sigma_S from F19 changing between the rounds.  Two-sided chi-square test of each round's variance at
    false-alarm rate 1e-3 (fixed seed: deterministic); the two variances differ by more than 10x, so the
    test also tells the rounds apart."""
    _, _, data, model = tiny_setup(num_clients=6, hidden=64)
    init = init_for(model)
    p = np.array([[0.5, 0.5, 0, 0, 0, 0], [1 / 6] * 6])
    sigma_c = 0.3
    m, T = 12, 2
    scale = 0.5  # sigma_S from F19 with B c / eps chosen so that 2 B c / (m eps) = scale
    sigma_s = np.array([ba.server_noise_sigma(1.0, 0.01, T, 1, row, scale * m / 2, [m], c=1.0) for row in p])
    assert sigma_s[0] > 0 and sigma_s[1] == 0  # T = 2 > T_th = sqrt(2), but T <= sqrt(6)
    plan = plan_for(p, sigma_c, sigma_s)
    after = [
        run(
            PADPFL(2, 1e9, LocalSGD(steps=1, lr=0.0), p),
            model,
            data,
            plan=plan,
            options=F64,
            init_params=init,
            rounds=r,
        ).params.numpy()
        for r in (1, 2)
    ]
    variances = sigma_c**2 * (p**2).sum(axis=1) + sigma_s**2
    assert variances[0] / variances[1] > 10
    lo, hi = stats.chi2.ppf([5e-4, 1 - 5e-4], init.numel())
    for noise, var, other in ((after[0] - init.numpy(), *variances), (after[1] - after[0], *variances[::-1])):
        assert lo < np.sum(noise**2) / var < hi
        assert not lo < np.sum(noise**2) / other < hi
        assert abs(noise.mean()) < 4 * math.sqrt(var / noise.size)


def test_impact_factor_rows_are_checked():
    with pytest.raises(ParameterError, match="sum of impact_factors in round 2"):
        PADPFL(2, 1.0, LocalSGD(), [[0.5, 0.5], [0.5, 0.6]])
    with pytest.raises(ParameterError, match="impact_factors"):
        PADPFL(2, 1.0, LocalSGD(), [[1.5, -0.5]])


# --- the plan, the ledger, configs ------------------------------------------------------------------

SETTING = {
    "N": 6,
    "T": 3,
    "R": 2,
    "C": 2.0,
    "eps": 4.0,
    "delta": 0.01,
    "mu": 0.1,
    "m": None,
    "parts": "2,2,2",
    "ratios": "1,1,1; 0,0,1",
    "switch_after": "1",
    "salt_pepper": None,
}
TRAIN = {"local_steps": 1, "lr": 0.1, "batch_size": 0, "weight_decay": 0.0}


def test_ledger_counts_each_rounds_sensitivity():
    """The broadcast's sensitivity follows p^(t) (F14): 2 B max_i p_i^(t) / min m.  Round 1 has uniform p
    (T = 3 <= T_th = 2 sqrt(6): sigma_S = 0 and the broadcast carries sigma_AC > sigma_A), rounds 2-3 have
    p = (0, 0, 1/2) per part (T_th = 2 sqrt(2) < 3: sigma_S > 0, the broadcast carries sigma_A).  The
    paper's accountant charges c Delta f^(t) / sigma_eff^(t) per round to every client in the aggregate
    (eps / T when sigma_eff = sigma_A) and eps / R per upload; the tight one composes the same releases."""
    from fedbound.accounting import analytic_gaussian_epsilon

    _, _, data, model = tiny_setup(num_clients=6)
    m = int(data.sizes.min())
    plan = ta.adaptive_plan(SETTING, data.sizes, 3)
    p = ta.setting_impact_schedule(SETTING, 3)
    sigma_c = ba.client_noise_sigma(4.0, 0.01, 2.0, 2, [m])
    np.testing.assert_allclose(plan.sigma["uplink"], sigma_c, rtol=1e-15)
    assert plan.sigma["server"][0] == 0 and np.all(plan.sigma["server"][1:] > 0)
    delta_f = 2 * 2.0 * p.max(axis=1) / m
    sigma_eff = np.sqrt(sigma_c**2 * (p**2).sum(axis=1) + plan.sigma["server"] ** 2)
    per_round = ba.gaussian_constant(0.01) * delta_f / sigma_eff
    np.testing.assert_allclose(per_round[1:], 4.0 / 3, rtol=1e-12)  # sigma_A: eps / T per broadcast
    assert per_round[0] < 4.0 / 3 - 0.1
    res = run(
        PADPFL.from_config(SETTING, TRAIN, 3, p),
        model,
        data,
        plan=plan,
        options=RunOptions(dtype=torch.float64),
    )
    rows = res.metrics[(res.metrics["client"].notna()) & (res.metrics["round"] == 3)]
    down = np.where(p > 0, per_round[:, None], 0.0).sum(axis=0)  # per client, over the rounds it is in
    up = np.minimum((p > 0).sum(axis=0), 2) * 4.0 / 2  # at most R = 2 exposures of eps / R
    np.testing.assert_allclose(
        rows["epsilon_spent_paper"].to_numpy(dtype=float), np.maximum(up, down), rtol=1e-9
    )
    assert down[4] == pytest.approx(per_round[0] + 8 / 3) and down[0] == pytest.approx(per_round[0])
    z = sigma_eff / delta_f  # tight: a client's broadcasts compose as one Gaussian, 1/z^2 = sum 1/z_t^2
    tight_down = [
        analytic_gaussian_epsilon(1 / math.sqrt(np.sum(1 / z[p[:, i] > 0] ** 2)), 0.01) for i in range(6)
    ]
    last = res.metrics[res.metrics["client"].isna()].iloc[-1]
    assert float(last["epsilon_downlink"]) == pytest.approx(max(tight_down), rel=1e-6)
    with pytest.raises(PrivacyBudgetExceeded, match="round 4"):  # the paper's accountant binds: reproduction
        run(PADPFL(4, 2.0, LocalSGD(steps=1, lr=0.1), p), model, data,
            plan=dataclasses.replace(plan, paper_reproduction=True), options=F64, rounds=4)


def test_tight_plan_spends_exactly_eps_under_the_tight_accountant():
    _, _, data, model = tiny_setup(num_clients=6)
    setting = {**SETTING, "R": 1, "ratios": "1,2,3; 3,2,1", "T": 4, "switch_after": "2"}
    plan = ta.adaptive_plan(setting, data.sizes, 4, noise="tight")
    assert plan.budget_accountant == "tight" and np.all(plan.sigma["server"] > 0)
    p = ta.setting_impact_schedule(setting, 4)
    res = run(PADPFL(4, 2.0, LocalSGD(steps=1, lr=0.1), p), model, data, plan=plan, options=F64)
    assert res.summary["epsilon_spent"] == pytest.approx(4.0, rel=1e-6)
    assert res.summary["epsilon_spent"] <= 4.0 * (1 + 1e-9)
    assert not any("under-delivers" in w for w in res.summary["warnings"])


def test_resume_equals_uninterrupted(tmp_path):
    _, _, data, model = tiny_setup(num_clients=6)
    phase2 = noisy_copy(data, 0.2)

    def algo():
        return PADPFL(4, 2.0, LocalSGD(steps=2, lr=0.2, batch_size=6), SCHEDULE, data_schedule=[(2, phase2)])

    plan = plan_for(SCHEDULE, 0.01, [0.003, 0.003, 0.005, 0.0])
    cols = ["round", "client", "loss", "sigma", "epsilon_spent", "epsilon_spent_paper", "impact_change"]
    resumed_and_full(algo, model, data, plan, RunOptions(dtype=torch.float64), tmp_path, 2, cols)


TINY = """
[adaptive]
N = 6
T = 4
R = 1
C = 2.0
eps = 8.0
delta = 0.01
mu = 0.1
parts = "2,2,2"
ratios = "0,1,2; 2,1,0"
switch_after = "2"
salt_pepper = "0.4,0.1,0.0; 0.0,0.1,0.4"
sensitivity = "paper"

[train]
dataset = "digits"
partition = "groups"
group_clients = "2,2,2"
group_samples = "20,25,30"
model = "logreg"
local_steps = 2
lr = 0.3
paper_reproduction = true  # the paper's sigma (eqs. (8), (13)) spends 8.6 > 8 under exact accounting
"""


def test_config_trains_with_phases_and_reports_the_schedule(tmp_path):
    cfg = tmp_path / "a.toml"
    cfg.write_text(TINY)
    done = train_from_config("adaptive", cfg, out=tmp_path / "run")
    glob = done.result.metrics[done.result.metrics["client"].isna()]
    assert glob["participants"].tolist() == [4, 4, 4, 4]
    np.testing.assert_allclose(glob["impact_change"].to_numpy(dtype=float), [0, 0, 4 / 3, 0])
    assert done.plan.info["m_min"] == 20 and done.plan.sensitivity["uplink"] == pytest.approx(0.2)
    assert done.summary["impact_switch_after"] == "2"
    assert done.summary["epsilon_spent_paper"] == pytest.approx(8.0)
    assert len(done.result.state.rows) == 4 * 7
    algo = ta.RECIPE.algorithm(_setting(cfg), _train(cfg), 4)
    firsts = [first for first, _ in algo.data_schedule]
    assert firsts == [0, 2]
    x0, x1 = (d.x for _, d in algo.data_schedule)
    assert not torch.equal(x0[:2], x1[:2]) and torch.equal(x0[2:4], x1[2:4])  # part 2 keeps its quality


def _setting(cfg):
    from fedbound.config import load_config

    return dict(load_config(cfg, [registry.get("adaptive").config_section])["adaptive"])


def _train(cfg):
    from fedbound.config import load_config
    from fedbound.training.config import TRAIN_SECTION

    return dict(load_config(cfg, [TRAIN_SECTION], known_sections=["adaptive"])["train"])


@pytest.mark.parametrize(
    "sets,message",
    [
        (['parts="2,2,1"'], "sums to 5, but N = 6"),
        (['ratios="0,1"'], "one ratio per part"),
        (['switch_after="2,3"'], "need 1 switch round"),
        (['salt_pepper="0.1,0.2,0.3"'], "one density per part for each of the 2 phase"),
        (['group_noise="0.1,0.2,0.3"'], "in one place"),
        (['group_clients="3,2,1"'], "differs from \\[adaptive\\] parts"),
        (["R=5"], "R = 5 is outside its valid range integer in \\[1, 4\\]"),
        (["m=21"], "m = 21 but the smallest client has 20"),
        (['ratios="0,a,1; 1,1,1"'], "expected comma-separated numbers"),
    ],
)
def test_config_errors_name_the_problem(tmp_path, sets, message):
    cfg = tmp_path / "a.toml"
    cfg.write_text(TINY)
    with pytest.raises(ConfigError, match=message):
        train_from_config("adaptive", cfg, sets, out=tmp_path / "run")


def test_example_config_trains_and_lowers_the_loss(tmp_path):
    """The example as shipped (scenario 4, eps = 20, 30 rounds), measured on the clean test images."""
    done = train_from_config("adaptive", EXAMPLE, ["eval_clients=false"], out=tmp_path / "ex")
    glob = done.result.metrics
    test_loss = glob["test_loss"].to_numpy(dtype=float)
    assert test_loss[-1] < test_loss[0] - 0.5 and done.summary["final_test_accuracy"] > 0.7
    assert glob["participants"].tolist() == [40] * 30
    assert glob["impact_change"].to_numpy(dtype=float)[10] == pytest.approx(4 / 3)
    # private as shipped: one step at the default C_g, sensitivity 2B/m; tight sigma: the uplink is one
    # exactly (20, 0.01)-DP Gaussian release (scipy's GDP delta at mu = Delta / sigma)
    sens = 2 * 5.0 / 60
    assert done.plan.sensitivity["uplink"] == pytest.approx(sens, rel=1e-12)
    mu = sens / done.plan.info["sigma_client"]
    assert stats.norm.cdf(-20 / mu + mu / 2) - math.exp(20) * stats.norm.cdf(-20 / mu - mu / 2) == \
        pytest.approx(0.01, rel=1e-6)
    assert done.summary["epsilon_spent"] == pytest.approx(20.0, rel=1e-9)
    assert done.summary["privacy"].startswith("(ε, δ)-DP at the stated budget")


# --- gamma-inexactness, dropout, planned weights, one noise function ------------------------------------


def test_measured_gamma_matches_a_direct_computation():
    """gamma_i = ||grad h_i(x_i; x~)|| / ||grad l_i(x~)|| (seed 001 eq. (38)), against torch autograd on
    each client's module; no local step gives gamma = 1 exactly, more steps give a smaller gamma."""
    from fedbound.training.adaptive import inexactness

    _, _, data, model = tiny_setup(num_clients=3)
    batch = data.gather(np.arange(3))
    anchor = init_for(model).expand(3, -1).clone()
    local = LocalSGD(steps=60, lr=0.1, prox_mu=0.5).run(
        model, anchor, batch, streams=Streams(0), round_=0, clients=np.arange(3), num_clients=3
    )
    got = inexactness(model, anchor, local, batch, 0.5)
    for i in range(3):
        x, y = client_arrays(data, i)

        def grad(w, x=x, y=y):
            module = module_with(model, w)
            torch.nn.functional.cross_entropy(module(x), y).backward()
            return flat_grad(module)

        g_h = grad(local[i]) + 0.5 * (local[i] - anchor[i])
        assert float(got[i]) == pytest.approx(float(g_h.norm() / grad(anchor[i]).norm()), rel=1e-9)
    assert np.all(got.numpy() < 1)
    np.testing.assert_allclose(inexactness(model, anchor, anchor, batch, 0.5).numpy(), 1.0, rtol=1e-12)


def test_gamma_is_logged_each_round():
    _, _, data, model = tiny_setup(num_clients=6)
    p = np.tile(np.full(6, 1 / 6), (3, 1))
    res = run(
        PADPFL(3, 50.0, LocalSGD(steps=5, lr=0.3, prox_mu=0.5), p),
        model,
        data,
        plan=plan_for(p, 1e-3, [1e-3, 1e-3, 1e-3]),
        options=F64,
    )
    glob = res.metrics[res.metrics["client"].isna()]
    gam = glob["gamma_inexact"].to_numpy(dtype=float)
    assert np.all((gam > 0) & (gam < 1)) and np.all(glob["gamma_inexact_above_1"].to_numpy(dtype=float) == 0)
    off = run(
        PADPFL(3, 50.0, LocalSGD(steps=5, lr=0.3, prox_mu=0.5), p, measure_gamma=False),
        model,
        data,
        plan=plan_for(p, 1e-3, [1e-3, 1e-3, 1e-3]),
        options=F64,
    )
    assert "gamma_inexact" not in off.metrics or off.metrics["gamma_inexact"].isna().all()


def test_dropout_redistributes_and_the_plan_follows_the_rows():
    setting = {**SETTING, "ratios": "1,2,3", "switch_after": None, "dropout": 0.3, "T": 5}
    rows = ta.impact_rows(setting, {"seed": 7}, 5)
    again = ta.impact_rows(setting, {"seed": 7}, 5)
    np.testing.assert_array_equal(rows, again)  # seeded: same seed, same absences
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-12)
    base = ba.impact_factors_from_ratios([1, 2, 3], [2, 2, 2])
    for row in rows:
        present = row > 0
        np.testing.assert_allclose(row[present], base[present] / base[present].sum(), rtol=1e-12)
    assert np.any(rows == 0)  # somebody dropped out in 5 rounds at rate 0.3
    _, _, data, _ = tiny_setup(num_clients=6)
    plan = ta.adaptive_plan(setting, data.sizes, 5, train={"seed": 7})
    m = int(data.sizes.min())
    expected = ba.server_noise_sigma(4.0, 0.01, 5, 2, rows, 2.0, [m])
    np.testing.assert_allclose(plan.sigma["server"], expected, rtol=1e-12)


def test_plan_noise_comes_from_bounds_noise_and_planned_weights_train():
    _, _, data, model = tiny_setup(num_clients=6)
    m = int(data.sizes.min())
    for method in ("paper", "tight"):
        plan = ta.adaptive_plan(SETTING, data.sizes, 3, method)
        ref = ba.noise({**SETTING, "p": ta.setting_impact_schedule(SETTING, 3), "m": [m]}, 3, method)
        np.testing.assert_array_equal(plan.sigma["uplink"], ref["uplink"])
        np.testing.assert_array_equal(plan.sigma["server"], ref["server"])
    planned = {
        **SETTING,
        "ratios": "1,1,1",
        "switch_after": None,
        "weights": "priority",
        "sizes": "12,12,12",
        "scores": "0,1,2",
        "quality_weight": 0.5,
    }
    rows = ta.impact_rows(planned, {"seed": 0}, 3)
    from fedbound.scheduling.adaptive import planned_impact_factors

    np.testing.assert_allclose(rows[0], planned_impact_factors(planned, 3).x, rtol=1e-12)
    assert rows[0][5] > rows[0][0]  # the quality score favours the last part
    algo = ta.RECIPE.algorithm(planned, {**TRAIN, "partition": "iid", "seed": 0}, 3)
    np.testing.assert_allclose(algo.impact(0), rows[0])


def test_exact_epsilon_of_a_plan_equals_the_engine_ledger(tmp_path):
    """bounds.adaptive.exact_epsilon (what the planner reports as the eps the paper's sigma spend) against the
    engine's own tight ledger on a real run; and the tight calibration spends exactly eps."""
    cfg = tmp_path / "a.toml"
    cfg.write_text(TINY)
    done = train_from_config("adaptive", cfg, out=tmp_path / "run")
    setting = _setting(cfg)
    p = ta.setting_impact_schedule(setting, 4)
    sigma = ba.noise_details({**setting, "p": p, "m": [20]}, 4, "paper")
    got = ba.exact_epsilon(sigma, p, [20], 2.0, 1, 0.01)
    last = done.result.metrics[done.result.metrics["client"].isna()].iloc[-1]
    assert got["uplink"] == pytest.approx(float(last["epsilon_uplink"]), rel=1e-6)
    assert got["downlink"] == pytest.approx(float(last["epsilon_downlink"]), rel=1e-6)
    tight = ba.exact_epsilon(
        ba.noise_details({**setting, "p": p, "m": [20]}, 4, "tight"), p, [20], 2.0, 1, 0.01
    )
    assert tight["uplink"] == pytest.approx(8.0, rel=1e-9) and tight["downlink"] <= 8.0 * (1 + 1e-9)


def test_the_example_paper_sigma_overspends():  # the demo number: eps = 34.8 against a budget of 20
    design = ba.design_from_settings(
        {"N": 60, "parts": "20,20,20", "ratios": "0,1,2; 2,1,0", "switch_after": "10", "sizes": "60,60,60"}
    )
    p = design.schedule(30)
    setting = {"eps": 20.0, "delta": 0.01, "C": 5.0, "R": 1, "p": p, "m": [60]}
    spent = ba.exact_epsilon(ba.noise_details(setting, 30, "paper"), p, [60], 5.0, 1, 0.01)
    assert spent["uplink"] == pytest.approx(34.8333371100, rel=1e-8)
