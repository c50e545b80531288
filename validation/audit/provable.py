"""``sensitivity = "provable"`` in the training recipes of the model-clipping papers (NbAFL, PADPFL).

:func:`provable_setting` fills the setting keys ``fedbound.bounds.provable`` reads from the run itself:
``tau`` = ``[train] local_steps``, ``eta`` = the local learning rate, and ``model_norm_bound`` = true when
the run trains a model other than a one-output linear one for more than one step (then only the model-norm
bound ``2C`` is proven, ``fedbound.training.sensitivity``).  More than one step of a one-output linear model
needs ``feature_norm`` (inputs clipped to it): the step-size condition then reads no record, so whether the
run trains and its sensitivity are the same on neighbouring datasets.  :func:`sensitivity_clip` is the clip
``C_eff`` whose ``2 C_eff / m_i`` is the plan's sensitivity (the paper's ``C`` in paper mode).
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
                     section: str) -> dict[str, Any]:
    """``setting`` with ``tau``, ``eta`` and ``model_norm_bound`` of the run (module docstring); unchanged
    unless ``sensitivity = "provable"``.  ConfigError when the section's own ``tau``/``eta`` disagree with
    ``[train]`` or ``C_g`` is missing."""
    out = dict(setting)
    if setting.get("sensitivity") != "provable":
        return out
    if setting.get("C_g") is None:
        raise ConfigError(f"[{section}] sensitivity = \"provable\" needs C_g, the per-sample gradient "
                          "clip of local training")
    run = {"tau": int(train["local_steps"]), "eta": float(train["lr"] or default_lr)}
    for key, value in run.items():
        given = setting.get(key)
        if given is not None and float(given) != value:
            train_key = "local_steps" if key == "tau" else "lr"
            raise ConfigError(f"[{section}] {key} = {given} differs from the run's [train] {train_key} = "
                              f"{value}: the provable sensitivity must describe the training actually run")
    linear = run["tau"] > 1 and _one_output_linear(train)
    if linear and setting.get("feature_norm") is None:
        raise ConfigError(f"[{section}] sensitivity = \"provable\" with [train] local_steps = {run['tau']} "
                          "of a linear model needs feature_norm, the declared bound on every input's norm "
                          "(local training clips inputs to it; the step-size condition eta <= 2/L must not "
                          "depend on the data)")
    out.update(run, model_norm_bound=run["tau"] > 1 and not linear)
    return out


def sensitivity_clip(setting: Mapping[str, Any], clip_key: str, m: float) -> float:
    """``C_eff`` (module docstring) for a setting prepared by :func:`provable_setting`."""
    from fedbound.bounds.provable import effective_clip

    if setting.get("sensitivity") != "provable":
        return float(setting[clip_key])
    return effective_clip(float(setting[clip_key]), float(setting["C_g"]), float(m), int(setting["tau"]),
                          float(setting["eta"]), bool(setting.get("model_norm_bound")))
