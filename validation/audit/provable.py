"""``sensitivity = "provable"`` (the default) in the training recipes of the model-clipping papers (NbAFL,
PADPFL).

:func:`provable_setting` fills the setting keys ``fedbound.bounds.provable`` reads from the run itself:
``sensitivity`` = ``"provable"`` when unset; ``tau`` = ``[train] local_steps``, ``eta`` = the local learning
rate, ``C_g`` = ``C / (tau eta)`` when unset (``fedbound.bounds.provable.default_gradient_clip``), ``decay``
= the proximal ``mu`` plus ``[train] weight_decay`` (the data-independent curvature the growth recursion
reads), ``batch`` = ``[train] batch_size`` (0: full batches), and ``model_norm_bound`` = true when more
than one step is trained and the convex linear bound does not cover the run (a model other than a
one-output linear one, or a linear one without ``feature_norm``): then the general bound ``min(2C, growth
recursion)`` applies.  With ``feature_norm`` X, more than one step of a one-output linear model reads the
convex bound too (inputs clipped to X: the step-size condition then reads no record, so whether the run
trains and its sensitivity are the same on neighbouring datasets).  :func:`sensitivity_clip` is the clip
``C_eff`` whose ``2 C_eff / m_i`` is the plan's sensitivity (the paper's ``C`` in paper mode).  The algorithm
and the plan of a run both read the setting this returns, so what local training clips is what the ledger
counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedbound.errors import ConfigError

__all__ = ["provable_setting", "sensitivity_clip"]


def _one_output_linear(train: Mapping[str, Any]) -> bool:
    from fedbound.training import config as tc
    from fedbound.training.data import load_dataset
    from fedbound.training.sensitivity import convex_one_output

    dataset = load_dataset(train["dataset"], data_path=train["data_path"],
                           test_fraction=train["test_fraction"], seed=train["seed"],
                           synthetic_samples=train["synthetic_samples"], synthetic_dim=train["synthetic_dim"])
    return convex_one_output(tc.build_model_for(train, dataset)) is not None


def provable_setting(setting: Mapping[str, Any], train: Mapping[str, Any], default_lr: float,
                     section: str, prox_mu: float | None = None) -> dict[str, Any]:
    """``setting`` with the provable mode's keys of the run filled in (module docstring); unchanged in
    ``"paper"`` mode (or a paper's own other reading).  ``prox_mu``: the proximal coefficient local training
    uses (default the setting's ``mu``).  ConfigError when the section's own ``tau``/``eta`` disagree with
    ``[train]``."""
    from fedbound.bounds.provable import DEFAULT_MODE, default_gradient_clip

    out = dict(setting)
    if setting.get("sensitivity") is None:
        out["sensitivity"] = DEFAULT_MODE
    if out["sensitivity"] != "provable" or out.get("model_norm_bound") is not None:
        return out  # paper mode, or filled in already
    run = {"tau": int(train["local_steps"]), "eta": float(train["lr"] or default_lr)}
    for key, value in run.items():
        given = setting.get(key)
        if given is not None and float(given) != value:
            train_key = "local_steps" if key == "tau" else "lr"
            raise ConfigError(f"[{section}] {key} = {given} differs from the run's [train] {train_key} = "
                              f"{value}: the provable sensitivity must describe the training actually run")
    convex = run["tau"] > 1 and setting.get("feature_norm") is not None and _one_output_linear(train)
    mu = prox_mu if prox_mu is not None else setting.get("mu")
    decay = float(mu or 0.0) + float(train.get("weight_decay") or 0.0)
    C_g = setting.get("C_g")
    if C_g is None:
        C_g = default_gradient_clip(float(setting["C"]), run["tau"], run["eta"])
    out.update(run, C_g=float(C_g), decay=decay, model_norm_bound=run["tau"] > 1 and not convex,
               batch=int(train.get("batch_size") or 0) or None)
    return out


def sensitivity_clip(setting: Mapping[str, Any], clip_key: str, m: float) -> float:
    """``C_eff`` (module docstring) for a setting prepared by :func:`provable_setting`."""
    from fedbound.bounds.provable import effective_clip

    if setting.get("sensitivity") != "provable":
        return float(setting[clip_key])
    return effective_clip(float(setting[clip_key]), float(setting["C_g"]), float(m), int(setting["tau"]),
                          float(setting["eta"]), bool(setting.get("model_norm_bound")),
                          float(setting.get("decay") or 0.0), setting.get("batch"))
