"""From a config to a noise plan, and from a config to a finished training run.

This is where prediction meets the simulator: the noise formulas live in ``fedbound.bounds`` (per paper)
and ``fedbound.accounting``; ``fedbound.training`` only receives their numbers as a
:class:`~fedbound.training.plan.NoisePlan`.

* :func:`nbafl_plan`: seed 002.  ``sigma_U`` (F10) on every upload, ``sigma_D`` (Theorem 1, F11; under
  K-client scheduling Lemma 4's F27) on the server; sensitivity ``2C/m`` (F7).  The adversary views are
  the uplink (at most ``L`` uploads per client, classic Gaussian with linear composition: eps/L each) and the
  downlink broadcast (``T`` releases; under scheduling the eavesdropper does not see who was scheduled,
  so the release is a K-of-N sample without replacement, and the paper accounts for it with Lemma 4's
  one-sided amplification).  ``noise="tight"`` uses the tight counterparts of ``fedbound.bounds.nbafl``.
* :func:`udp_plan`: seed 003.  ``sigma_i = Delta_i sqrt(2 q T ln(1/delta)) / eps`` (Theorem 1, eq. (10),
  ``fedbound.accounting.udp_theorem1_std``) with ``Delta_i = 2 eta C / |D_i|`` (eq. (13)) per client; the
  server sees who uploads, so the tight accountant counts each client's realised participations (spec 003
  E9) and the paper's accountant is eq. (16)'s ``sqrt(2 q ln(1/delta) sum_t Delta^2/sigma_t^2)``.
  ``noise="tight"``: ``sigma_i = Delta_i z`` with ``z`` the exact T-fold Gaussian calibration (valid for
  any participation pattern).

The ``[udp]`` section is declared here (:data:`UDP_SECTION`) until a UDP planning module exists.

:func:`train_from_config` is the whole of ``fedbound train``: load ``[ALGO]`` + ``[train]``, build the data,
the plan and the algorithm, run (resuming from ``out``'s checkpoint), write the run directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.config import Field, Section, load_config
from fedbound.errors import ConfigError

__all__ = ["UDP_SECTION", "setting_section", "nbafl_plan", "udp_plan", "noise_plan", "setting_rounds",
           "num_clients", "TrainRun", "train_from_config", "run_key"]

UDP_SECTION = Section("udp", (
    Field("U", int, doc="number of clients (mobile terminals)", low=1),
    Field("K", int, None, "clients per round, chosen uniformly (default: all U)", low=1, optional=True),
    Field("T", int, doc="communication rounds (CRD: the initial T)", low=1),
    Field("eps", float, doc="each client's privacy budget epsilon_i", low=0.0, low_open=True),
    Field("delta", float, doc="each client's delta_i", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("eta", float, doc="learning rate of the local step; sets the sensitivity 2 eta C / |D_i| "
          "(eq. (13))", low=0.0, low_open=True),
    Field("C", float, doc="per-sample gradient clipping threshold", low=0.0, low_open=True),
    Field("crd", bool, False, "communication-rounds discounting (seed 003 Alg. 2)"),
    Field("beta", float, 0.9, "CRD discount factor", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("zeta", float, 0.001, "CRD trigger: discount when the validation loss improves by less",
          low=0.0, low_open=True),
), doc="UDP setting (seed 003, spec 003 notation)")


def setting_section(algo: str) -> Section:
    """The setting section ``fedbound train ALGO`` reads next to ``[train]``."""
    from fedbound.training.config import ALGORITHMS, IMPLEMENTED

    if algo == "nbafl":
        from fedbound.bounds.nbafl import CONFIG_SECTION

        return CONFIG_SECTION
    if algo == "udp":
        return UDP_SECTION
    if algo in ALGORITHMS:
        raise ConfigError(f"fedbound train {algo}: not implemented yet (the simulator has "
                          f"{', '.join(IMPLEMENTED)} so far)")
    raise ConfigError(f"algorithm {algo!r} is outside its valid range one of {', '.join(ALGORITHMS)}")


def _capture(fn, *args: Any, notes: list[str]) -> float:
    """``fn(*args)`` as a float, its warnings appended to ``notes`` (deduplicated)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = float(fn(*args))
    for w in caught:
        text = str(w.message)
        if text not in notes:
            notes.append(text)
    return value


def setting_rounds(algo: str, setting: Mapping[str, Any]) -> int:
    """T of the setting; for NbAFL without T, Theorem 2's optimal T (fedbound.scheduling.nbafl.optimal_T)."""
    if algo == "nbafl" and setting.get("T") is None:
        from fedbound.scheduling.nbafl import optimal_T

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return int(optimal_T({k: v for k, v in setting.items() if v is not None}).x)
    return int(setting["T"])


def num_clients(algo: str, setting: Mapping[str, Any]) -> int:
    return int(setting["N"] if algo == "nbafl" else setting["U"])


def nbafl_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int, noise: str = "paper"):
    """NbAFL's noise plan (module docstring) for ``rounds`` rounds and the actual client sizes."""
    from fedbound.bounds import nbafl as nb
    from fedbound.training.plan import NoisePlan, View

    N, C, m, eps, delta, L = (setting[k] for k in ("N", "C", "m", "eps", "delta", "L"))
    K = setting.get("K")
    scheduled = K is not None and K < N
    sizes = np.asarray(client_sizes)
    if len(sizes) != N:
        raise ConfigError(f"[nbafl] N = {N} but the partition made {len(sizes)} clients")
    if sizes.min() < m:
        raise ConfigError(f"[nbafl] m = {m} but the smallest client has {int(sizes.min())} samples: the "
                          "sensitivity 2C/m would be too small; lower m or give every client >= m samples")
    notes: list[str] = []
    if noise == "paper":
        up = _capture(nb.sigma_uplink, eps, delta, C, m, L, notes=notes)
        if scheduled:
            down = _capture(nb.sigma_downlink_k, eps, delta, C, m, N, K, rounds, L, notes=notes)
        else:
            down = _capture(nb.sigma_downlink, eps, delta, C, m, N, rounds, L, notes=notes)
        source = "seed 002: sigma_U F10, sigma_D " + ("Lemma 4 / F27 (K-client scheduling)" if scheduled
                                                      else "Theorem 1 / F11")
    else:
        up = _capture(nb.sigma_uplink_tight, eps, delta, C, m, L, notes=notes)
        if scheduled:
            down = _capture(nb.sigma_downlink_k_tight, eps, delta, C, m, N, K, rounds, L, notes=notes)
        else:
            down = _capture(nb.sigma_downlink_tight, eps, delta, C, m, N, rounds, L, notes=notes)
        source = "fedbound.bounds.nbafl tight counterparts of F10 / F11 / F27 (exact Gaussian composition)"
    views = (View("uplink", "upload", stage="uplink", max_releases=int(L)),
             View("downlink", "broadcast", stage="uplink", sample_rate=(K / N) if scheduled else 1.0,
                  hidden_sampling=scheduled, paper_amplification="lemma4" if scheduled else "none",
                  sampling="without_replacement"))
    return NoisePlan(rounds=rounds, num_clients=N, sigma={"uplink": np.full(rounds, up), "server":
                     np.full(rounds, down)}, sensitivity={"uplink": 2.0 * C / m}, eps=eps, delta=delta,
                     views=views, budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="classic_linear", source=source, notes=tuple(notes),
                     info={"sigma_uplink": up, "sigma_server": down, "sensitivity_uplink": 2.0 * C / m})


def udp_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, local_steps: int = 1,
             noise: str = "paper"):
    """UDP's noise plan (module docstring); per-client sigma because ``Delta_i`` depends on ``|D_i|``."""
    from fedbound.accounting import calibrate_noise, udp_theorem1_std
    from fedbound.training.plan import NoisePlan, View

    U, T, eps, delta, eta, C = (setting[k] for k in ("U", "T", "eps", "delta", "eta", "C"))
    K = setting.get("K") or U
    if K > U:
        raise ConfigError(f"[udp] K = {K} is outside its valid range integer in [1, {U}] (U = {U})")
    sizes = np.asarray(client_sizes, dtype=np.float64)
    if len(sizes) != U:
        raise ConfigError(f"[udp] U = {U} but the partition made {len(sizes)} clients")
    q = K / U
    sens = local_steps * 2.0 * eta * C / sizes
    notes: list[str] = []
    if local_steps > 1:
        notes.append(f"local_steps = {local_steps}: seed 003's sensitivity 2 eta C/|D_i| is for one "
                     "full-batch step; the plan uses local_steps x that, which spec 003 E8 shows is not "
                     "a bound when clipping is active")
    if noise == "paper":
        sigma = np.asarray(udp_theorem1_std(eps, delta, q, T, sens), dtype=np.float64)
        source = "seed 003 Theorem 1, eq. (10) (fedbound.accounting.udp_theorem1_std)"
    else:
        z = float(calibrate_noise(eps, delta, 1.0, T, method="analytic"))
        sigma = z * sens
        source = "exact T-fold Gaussian calibration (fedbound.accounting.calibrate_noise, analytic)"
    views = (View("uplink", "upload", stage="uplink", sample_rate=q, hidden_sampling=False),)
    return NoisePlan(rounds=T, num_clients=U, sigma={"uplink": np.tile(sigma, (T, 1))},
                     sensitivity={"uplink": sens}, eps=eps, delta=delta, views=views,
                     budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="udp_moments",
                     source=source, notes=tuple(notes),
                     info={"sigma_uplink_min": float(sigma.min()), "sigma_uplink_max": float(sigma.max()),
                           "sample_rate": q})


def noise_plan(algo: str, setting: Mapping[str, Any], train: Mapping[str, Any], client_sizes: np.ndarray,
               rounds: int):
    """The plan for ``fedbound train ALGO`` (None when ``[train] private = false``)."""
    if not train["private"]:
        return None
    if algo == "nbafl":
        return nbafl_plan(setting, client_sizes, rounds, train["noise"])
    if algo == "udp":
        return udp_plan(setting, client_sizes, train["local_steps"], train["noise"])
    setting_section(algo)
    raise ConfigError(f"no noise plan for {algo!r}")


def run_key(algo: str, sections: Mapping[str, Mapping[str, Any]]) -> str:
    """A fingerprint of everything that changes a run's numbers (guards checkpoint resumption)."""
    from fedbound import __version__

    text = json.dumps({"algo": algo, "sections": sections, "version": __version__}, sort_keys=True,
                      default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass
class TrainRun:
    """What ``fedbound train`` reports: the engine result, the plan, the run directory and a summary."""

    result: Any
    plan: Any
    run_dir: Path
    summary: dict
    files: dict


def train_from_config(algo: str, config: str | Path, overrides: Iterable[str] = (), *,
                      out: str | Path | None = None, seed: int | None = None, device: str | None = None,
                      progress: bool = False, overwrite: bool = False) -> TrainRun:
    """Train ``algo`` as configured; checkpoints, metrics (CSV + Parquet), summary and config in ``out``.

    ``out`` defaults to ``runs/<algo>_<config stem>``.  A checkpoint there from the same configuration is
    resumed (identical numbers); one from another configuration is a ConfigError unless ``overwrite``.
    """
    from fedbound.training import config as tc
    from fedbound.training.engine import run
    from fedbound.training.metrics import write_outputs

    section = setting_section(algo)
    extra = list(overrides)
    if seed is not None:
        extra.append(f"train.seed={seed}")
    if device is not None:
        extra.append(f"train.device={json.dumps(device)}")
    cfg = load_config(config, [section, tc.TRAIN_SECTION], extra)
    setting, train = dict(cfg[section.name]), dict(cfg["train"])
    rounds = setting_rounds(algo, setting)
    n_clients = num_clients(algo, setting)
    device_name = tc.resolve_device(train["device"])
    setup = tc.build_data(train, n_clients, setting.get("m") if algo == "nbafl" else None, device_name)
    plan = noise_plan(algo, setting, train, setup.client_sizes, rounds)
    algorithm = tc.make_algorithm(algo, setting, train, rounds)
    run_dir = Path(out) if out is not None else Path("runs") / f"{algo}_{Path(config).stem}"
    if overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    key = run_key(algo, {section.name: setting, "train": train, "rounds": {"T": rounds}})
    t0 = time.perf_counter()
    result = run(algorithm, setup.model, setup.data, plan=plan, options=tc.run_options(train, progress),
                 test=setup.test, run_dir=run_dir, run_key=key)
    summary = dict(result.summary)
    summary.update(config=str(config), run_dir=str(run_dir), wall_time_s=time.perf_counter() - t0,
                   rounds=rounds, num_clients=n_clients, model=setup.model.name,
                   n_params=setup.model.n_params,
                   dataset=setup.dataset.name, client_sizes_min=int(setup.client_sizes.min()),
                   client_sizes_max=int(setup.client_sizes.max()))
    if plan is not None:
        summary["plan"] = dict(plan.info)
        summary["plan_rounds"] = plan.rounds
    if algo == "nbafl" and setting.get("T") is None:
        summary["T_source"] = "T_opt (fedbound.scheduling.nbafl.optimal_T): [nbafl] T is not set"
    crd = result.state.algo_state.get("discounts")
    if crd:
        summary["crd_discounts"] = [list(d) for d in crd]
    config_text = tc.dump_toml({section.name: setting, "train": train},
                               f"effective configuration of this run (from {config})\n"
                               f"fedbound train {algo} <this file> reproduces it")
    files = write_outputs(run_dir, result.metrics, summary, config_text)
    return TrainRun(result, plan, run_dir, summary, {k: str(v) for k, v in files.items()})
