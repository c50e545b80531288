"""WPFL: wireless personalized FL with the quantization-assisted Gaussian mechanism (WPFL, Algorithms 1
and 2; spec 004 Sec. 6.2).

What differs from FedAvg:

* participation: a precomputed :class:`WPFLSchedule` (selected clients per round, the bit error rate of each
  one's subchannel, every client's downlink BER), built outside ``training/`` by
  ``fedbound.scheduling.wireless.schedule_run`` (KM, round robin or random; every client uploads ``T0``
  times);
* local update (eq. (20a)): ``local_steps`` SGD steps with rate ``eta_F`` on Poisson mini-batches (rate
  ``q``), from the global model the client *received* (with its downlink errors);
* upload (eqs. (2), (8), (15)): the model clipped to norm ``C``, plus ``N(0, sigma_DP^2 I)`` (stage
  ``"uplink"``), quantized to ``R`` bits on ``[-(C + 3 sigma_DP), C + 3 sigma_DP]``, sent over the
  subchannel's bit errors (``training.quantization``);
* aggregation (eq. (16)): the plain mean of the received uploads, ``p_n = 1/|N_t|``;
* server (eq. (19)): the aggregate quantized to ``R`` bits on ``[-C, C]`` (the global model);
* ``quantized=False`` is the "perfect Gaussian" baseline of Fig. 2: the same noise, no quantization and no
  bit errors (uplink, server and downlink pass the models through unchanged);
* downlink (eq. (18)): every client receives the quantized global model through its own bit errors;
* personalization (eq. (20b)), for every client (``pl_clients="all"``, spec E12) or only the round's
  uploaders (``"selected"``, Alg. 1 literally), after the downlink (spec Sec. 6.2's order):
  ``pl <- pl - eta_P [(1 - lambda/2) grad F_n(pl; mini-batch) + lambda (pl - received)]``, ``local_steps``
  times.

``personalization`` (``[wpfl] personalization``) swaps the last three steps for a PFL baseline of Figs. 5-7
(pFedMe, APPLE, FedAMP, FedALA; ``training.pfl_baselines``, which also holds eq. (20b)'s hooks): what a
selected client uploads, what each client receives, how it updates its PL model.  Every upload also logs the
bits it costs under the paper's bit-length coding (Table III): ``bits_quantization`` (B_q, effective bits
plus sign), ``bits_overhead`` (B_o, the run index list) and ``bits_sent`` = min(R, B_q + B_o), per
parameter, averaged over the round's uploads (``quantization.coded_bits``).

``eta_P`` and ``lambda`` come with the schedule, as data: per round and per client (``WPFLSchedule.pl_lr``,
``pl_weight``, e.g. the min-max optimum of Alg. 2 lines 10-14, P4-P7, computed by
``fedbound.scheduling.wpfl.schedule_rounds``), or, when the schedule carries none, the algorithm's fixed
scalars (the paper's "Non-Adjustment" setting).  ``eta_F`` is the local SGD rate (the optimum eta_F* is the
same for every client and round, F28).

Evaluation: the engine's rows are the *personalized* models (``eval_models`` returns one per client; the
global row's loss/accuracy are the size-weighted means over clients).  Every evaluated round also logs the
global model's ``global_loss``/``global_accuracy`` (training data) and, with a test set,
``global_test_loss``/``global_test_accuracy``, the PL models' mean ``pl_test_loss``/``pl_test_accuracy``
and ``pl_max_test_loss`` (the paper's "maximum test loss"), and Jain's fairness index of the PL training
losses, ``pl_jain_index`` (F33).  ``uplink_element_errors`` / ``downlink_element_errors`` count the
elements received wrong in the round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.clipping import clip_rows
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.federation import ClientBatch
from fedbound.training.local import LocalSGD
from fedbound.training.metrics import evaluate_clients, evaluate_test
from fedbound.training.models import Model
from fedbound.training.participation import scheduled
from fedbound.training.pfl_baselines import chunks, pl_gradient, rule
from fedbound.training.quantization import coded_bits, dithered_gaussian, quantize, quantize_index, transmit
from fedbound.training.sensitivity import record_release

__all__ = ["WPFL", "WPFLSchedule", "jain_index", "evaluate_each_on_test", "PL_CLIENTS"]

PL_CLIENTS = ("all", "selected")


def jain_index(x: Sequence[float] | np.ndarray) -> float:
    """Jain's fairness index ``(sum x)^2 / (N sum x^2)`` in ``[1/N, 1]`` (WPFL Sec. VII; spec 004 F33,
    denominator N per E12b)."""
    arr = np.asarray(x, dtype=np.float64)
    square = float(np.sum(arr**2))
    if arr.size == 0 or square == 0:
        raise ParameterError("x", arr.tolist(), "a non-empty vector that is not all zero")
    return float(np.sum(arr) ** 2 / (arr.size * square))


@torch.no_grad()
def evaluate_each_on_test(model: Model, params: torch.Tensor, test: tuple[torch.Tensor, torch.Tensor],
                          max_samples: int = 16384) -> tuple[np.ndarray, np.ndarray | None]:
    """Mean test loss and accuracy of each of ``k`` models ``(k, d)`` on one shared test set, batched over
    models (``metrics.evaluate_test`` does one model); about ``max_samples`` model-sample pairs per call."""
    x, y = test
    n = len(y)
    per_call = max(1, max_samples // n)
    step = min(n, max_samples)
    loss = torch.zeros(len(params), dtype=params.dtype, device=params.device)
    hits = torch.zeros_like(loss)
    classify = True
    for lo in range(0, len(params), per_call):
        p = params[lo:lo + per_call]
        for s in range(0, n, step):
            xs, ys = x[s:s + step], y[s:s + step]
            out = model(p, xs.unsqueeze(0).expand(len(p), *xs.shape))
            yk = ys.unsqueeze(0).expand(len(p), -1)
            loss[lo:lo + len(p)] += model.per_sample_loss(out, yk).sum(1)
            hit = model.correct(out, yk)
            classify = hit is not None
            if classify:
                hits[lo:lo + len(p)] += hit.sum(1)
    acc = (hits / n).cpu().numpy().astype(np.float64) if classify else None
    return (loss / n).cpu().numpy().astype(np.float64), acc


@dataclass(frozen=True)
class WPFLSchedule:
    """Per round ``t``: ``clients[t]`` (sorted, distinct, non-empty), ``uplink_ber[t]`` aligned with them;
    ``downlink_ber`` ``(rounds + 1, N)`` (row 0: the initial broadcast; row ``t + 1``: the broadcast ending
    round ``t``); ``n_params``: the model size the channel was planned for (checked at the start);
    optional ``pl_lr`` and ``pl_weight`` ``(rounds, N)``: eta_P and lambda of every client's PL step at the
    end of round ``t`` (WPFL eq. (20b)); None: the algorithm's scalars."""

    clients: tuple[np.ndarray, ...]
    uplink_ber: tuple[np.ndarray, ...]
    downlink_ber: np.ndarray
    n_params: int | None = None
    pl_lr: np.ndarray | None = None
    pl_weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        clients = tuple(np.asarray(c, dtype=np.int64) for c in self.clients)
        ber_up = tuple(np.asarray(b, dtype=np.float64) for b in self.uplink_ber)
        down = np.asarray(self.downlink_ber, dtype=np.float64)
        if len(ber_up) != len(clients) or not clients:
            raise ParameterError("uplink_ber", len(ber_up), f"one array per round ({len(clients)} >= 1)")
        if down.ndim != 2 or down.shape[0] != len(clients) + 1:
            raise ParameterError("downlink_ber.shape", down.shape, f"({len(clients) + 1}, N)")
        for t, (c, b) in enumerate(zip(clients, ber_up, strict=True)):
            if c.size == 0 or np.any(np.diff(c) <= 0) or c.min() < 0 or c.max() >= down.shape[1]:
                raise ParameterError(f"clients[{t}]", c.tolist(),
                                     f"sorted distinct ids in [0, {down.shape[1]})")
            if b.shape != c.shape:
                raise ParameterError(f"uplink_ber[{t}].shape", b.shape, f"{c.shape}, one per selected client")
        every = np.concatenate([down.ravel(), *ber_up])
        if np.any(~np.isfinite(every)) or np.any(every < 0) or np.any(every > 1):
            raise ParameterError("ber", float(every[(every < 0) | (every > 1) | ~np.isfinite(every)][0]),
                                 "[0, 1]")
        for name, high in (("pl_lr", np.inf), ("pl_weight", 2.0)):
            value = getattr(self, name)
            if value is None:
                continue
            arr = np.asarray(value, dtype=np.float64)
            if arr.shape != (len(clients), down.shape[1]):
                raise ParameterError(f"{name}.shape", arr.shape, f"({len(clients)}, {down.shape[1]})")
            bad = ~np.isfinite(arr) | (arr < 0) | (arr > high) | ((arr == 0) if name == "pl_lr" else False)
            if bad.any():
                raise ParameterError(name, float(arr[bad][0]), "(0, inf)" if name == "pl_lr" else "[0, 2]")
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "clients", clients)
        object.__setattr__(self, "uplink_ber", ber_up)
        object.__setattr__(self, "downlink_ber", down)

    @property
    def rounds(self) -> int:
        return len(self.clients)

    @property
    def num_clients(self) -> int:
        return int(self.downlink_ber.shape[1])

    def uploads(self) -> np.ndarray:
        """Uploads per client over the whole schedule."""
        return np.bincount(np.concatenate(self.clients), minlength=self.num_clients)


class WPFL(Algorithm):
    """WPFL Alg. 1 with a given schedule (module docstring); ``local.lr`` is eta_F, ``local.sample_rate``
    the paper's q."""

    name = "wpfl"

    def __init__(self, schedule: WPFLSchedule, clip_norm: float, bits: int, local: LocalSGD, pl_lr: float,
                 pl_weight: float, pl_clients: str = "all", quantized: bool = True,
                 dithered: bool = False, personalization: str = "wpfl") -> None:
        super().__init__(schedule.rounds, local)
        if not clip_norm > 0:
            raise ParameterError("C", clip_norm, "(0, inf)")
        if not 0 <= pl_weight <= 2:
            raise ParameterError("lambda", pl_weight, "[0, 2]")
        if not pl_lr > 0:
            raise ParameterError("eta_P", pl_lr, "(0, inf)")
        if pl_clients not in PL_CLIENTS:
            raise ParameterError("pl_clients", pl_clients, "one of " + ", ".join(PL_CLIENTS))
        self.schedule = schedule
        self.clip_norm = float(clip_norm)
        self.bits = int(bits)
        self.pl_lr = float(pl_lr)
        self.pl_weight = float(pl_weight)
        self.pl_clients = pl_clients
        self.quantized = bool(quantized)
        self.dithered = bool(dithered)
        self.weight_decay = local.weight_decay
        self.rule = rule(personalization)

    @classmethod
    def from_config(cls, setting: Mapping[str, Any], train: Mapping[str, Any], schedule: WPFLSchedule
                    ) -> WPFL:
        """From the [wpfl] setting (C, R, q, eta_F, eta_P, lam, pl_clients) and [train] (local_steps,
        weight_decay); [train] lr and batch_size must stay unset (eta_F and q are the paper's)."""
        if train["lr"] is not None and train["lr"] != setting["eta_F"]:
            raise ConfigError(f"[train] lr = {train['lr']} differs from [wpfl] eta_F = {setting['eta_F']}: "
                              "WPFL's local learning rate is eta_F; drop [train] lr")
        if train["batch_size"]:
            raise ConfigError("[train] batch_size must be 0 for WPFL: its mini-batches are Poisson samples "
                              "with rate [wpfl] q, the q of Theorem 1")
        local = LocalSGD(steps=train["local_steps"], lr=setting["eta_F"], sample_rate=setting["q"],
                         weight_decay=train["weight_decay"])
        return cls(schedule, setting["C"], setting["R"], local, setting["eta_P"], setting["lam"],
                   setting["pl_clients"], setting.get("mechanism", "quantized") != "perfect_gaussian",
                   setting.get("mechanism") == "dithering", setting.get("personalization", "wpfl"))

    # --- state -------------------------------------------------------------------------------------------
    def init_client_state(self, ctx: RoundContext) -> dict[str, torch.Tensor]:
        if self.schedule.num_clients != ctx.num_clients:
            raise ConfigError(f"the WPFL schedule is for {self.schedule.num_clients} clients, the data has "
                              f"{ctx.num_clients}")
        if self.schedule.n_params is not None and self.schedule.n_params != ctx.model.n_params:
            raise ConfigError(f"the channel schedule was planned for |omega| = {self.schedule.n_params} "
                              f"parameters (rate constraint C5), the model has {ctx.model.n_params}: set "
                              f"[wpfl] n_params = {ctx.model.n_params}")
        if ctx.state.rounds > self.schedule.rounds:
            raise ConfigError(f"{ctx.state.rounds} rounds requested, the schedule has {self.schedule.rounds}")
        everyone = np.arange(ctx.num_clients)
        start = ctx.global_params.unsqueeze(0).expand(ctx.num_clients, -1)
        received = self._downlink(ctx, start, everyone, row=0, key=-1)
        return {"received": received, "pl": ctx.global_params.repeat(ctx.num_clients, 1),
                **self.rule.state(self, ctx)}

    # --- one round ---------------------------------------------------------------------------------------
    def participants(self, ctx: RoundContext) -> np.ndarray:
        return scheduled(self.schedule.clients, ctx.round, ctx.num_clients)

    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        return np.full(len(participants), 1.0 / len(participants))

    @property
    def plain_local_update(self) -> bool:
        return self.rule.plain

    def start_models(self, ctx: RoundContext, clients: np.ndarray) -> torch.Tensor:
        return self.rule.start_models(self, ctx, clients)

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        own = self.rule.local_update(self, ctx, clients, start)
        return super().local_update(ctx, clients, start, batch) if own is None else own

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        clipped, norms = clip_rows(local, self.clip_norm)
        ctx.log("clipped", float((norms > self.clip_norm).sum()))
        if self.dithered:  # the dithering baseline: exact Gaussian noise made by the quantizer itself
            sigma = ctx.sigma("uplink", clients)
            ctx.noise_std.setdefault("uplink", []).extend(sigma.tolist())
            ber = self.uplink_ber(ctx, clients)
            received, wrong, bits = dithered_gaussian(clipped, sigma, self.bits, ber,
                                                      self._rngs(ctx, "uplink_dither", ctx.round, clients))
            ctx.log("uplink_element_errors", wrong)
            ctx.log("dither_bits", bits * len(clients) / max(len(self.schedule.clients[ctx.round]), 1))
            self.rule.uploaded(ctx, clients, received)
            return received
        noisy = ctx.add_noise("uplink", clipped, clients)
        record_release(ctx, "uplink_noised", clients, noisy)
        if not self.quantized:  # the "perfect Gaussian" baseline: no quantization, no channel
            ctx.log("uplink_element_errors", 0.0)
            self.rule.uploaded(ctx, clients, noisy)
            return noisy
        half = self.clip_norm + 3.0 * ctx.sigma("uplink", clients).to(torch.float64)
        chosen = self.schedule.clients[ctx.round]
        ber = self.uplink_ber(ctx, clients)
        rngs = self._rngs(ctx, "uplink_bits", ctx.round, clients)
        bits_q, bits_o = coded_bits(quantize_index(noisy, half, self.bits), self.bits)
        share = len(chosen)
        ctx.log("bits_quantization", float(bits_q.sum()) / share)
        ctx.log("bits_overhead", float(bits_o.sum()) / share)
        ctx.log("bits_sent", float(np.minimum(self.bits, bits_q + bits_o).sum()) / share)
        received, wrong = transmit(noisy, half, self.bits, ber, rngs)
        ctx.log("uplink_element_errors", wrong)
        self.rule.uploaded(ctx, clients, received)
        return received

    def server_update(self, ctx: RoundContext, aggregate: torch.Tensor) -> torch.Tensor:
        if not self.quantized:
            return aggregate
        return quantize(aggregate.unsqueeze(0), self.clip_norm, self.bits)[0]

    def after_round(self, ctx: RoundContext, new_global: torch.Tensor) -> None:
        self.rule.downlink(self, ctx, new_global)
        learners = np.arange(ctx.num_clients) if self.pl_clients == "all" else ctx.participants
        self.rule.personalize(self, ctx, learners)
        if ctx.options.evaluates(ctx.round + 1, ctx.state.rounds):
            self._log_metrics(ctx, new_global)

    def eval_models(self, ctx: RoundContext) -> torch.Tensor:
        return self.rule.eval_models(ctx)

    # --- pieces --------------------------------------------------------------------------------------------
    def uplink_ber(self, ctx: RoundContext, clients: np.ndarray) -> np.ndarray:
        """The bit error rate of each uploading client's subchannel this round (the schedule's)."""
        chosen = self.schedule.clients[ctx.round]
        return self.schedule.uplink_ber[ctx.round][np.searchsorted(chosen, clients)]

    @staticmethod
    def _rngs(ctx: RoundContext, stage: str, round_: int, clients: np.ndarray) -> list[np.random.Generator]:
        return [ctx.streams.numpy(stage, round_, int(c)) for c in clients]

    def _downlink(self, ctx: RoundContext, rows: torch.Tensor, clients: np.ndarray, row: int, key: int
                  ) -> torch.Tensor:
        """Eq. (19) + (18): the model quantized on [-C, C] and received by each client through its BER."""
        if not self.quantized:
            ctx.log("downlink_element_errors", 0.0)
            return rows.clone()
        ber = self.schedule.downlink_ber[row, clients]
        received, wrong = transmit(rows, self.clip_norm, self.bits, ber,
                                   self._rngs(ctx, "downlink_bits", key, clients))
        ctx.log("downlink_element_errors", wrong)
        return received

    def _personalize(self, ctx: RoundContext, learners: np.ndarray) -> None:
        """Eq. (20b) for ``learners``, ``local.steps`` mini-batch steps each, chunked as the engine does."""
        pl, received, sched = ctx.client_state["pl"], ctx.client_state["received"], self.schedule
        lr_all = (np.full(ctx.num_clients, self.pl_lr) if sched.pl_lr is None else sched.pl_lr[ctx.round])
        lam_all = (np.full(ctx.num_clients, self.pl_weight) if sched.pl_weight is None
                   else sched.pl_weight[ctx.round])
        for clients, idx, batch in chunks(ctx, learners):
            w, anchor = pl[idx].clone(), received[idx]
            lam = torch.as_tensor(lam_all[clients], dtype=w.dtype, device=w.device).unsqueeze(1)
            lr = torch.as_tensor(lr_all[clients], dtype=w.dtype, device=w.device).unsqueeze(1)
            for step in range(self.local.steps):
                g = pl_gradient(self, ctx, clients, batch, w, step)
                w = w - lr * ((1.0 - lam / 2.0) * g + lam * (w - anchor))
            pl[idx] = w

    def _log_metrics(self, ctx: RoundContext, new_global: torch.Tensor) -> None:
        p = ctx.data.sizes / ctx.data.sizes.sum()
        loss, acc = evaluate_clients(ctx.model, new_global.unsqueeze(0), ctx.data)
        ctx.log("global_loss", float(p @ loss))
        if acc is not None:
            ctx.log("global_accuracy", float(p @ acc))
        pl = ctx.client_state["pl"]
        pl_loss, _ = evaluate_clients(ctx.model, pl, ctx.data)
        ctx.log("pl_jain_index", jain_index(pl_loss))
        if ctx.test is None:
            return
        test_loss, test_acc = evaluate_test(ctx.model, new_global.unsqueeze(0), ctx.test)
        ctx.log("global_test_loss", test_loss)
        losses, accs = evaluate_each_on_test(ctx.model, pl, ctx.test)
        ctx.log("pl_test_loss", float(losses.mean()))
        ctx.log("pl_max_test_loss", float(losses.max()))
        if test_acc is not None:
            ctx.log("global_test_accuracy", test_acc)
            ctx.log("pl_test_accuracy", float(accs.mean()))
