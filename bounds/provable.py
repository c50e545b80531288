"""A sensitivity that is proven for the training actually run, for the papers that clip the local *model*.

NbAFL (Wei et al. 2020, eq. (6)) and PADPFL (Talaei & Izadi 2024, eq. (8)) take the uplink sensitivity of a
client with ``m`` records to be ``2C/m`` after clipping the locally trained model to norm ``C``.  The paper's
argument covers one gradient step; with several local steps of weakly regularised training one replaced
record moves the clipped model further (fedbound's audit measured 2.6-3.5x ``2C/m`` for NbAFL with 10
steps, docs/papers/nbafl.md).  ``sensitivity = "provable"`` replaces it by a bound that holds:

* every per-sample gradient is clipped to ``C_g`` during local training (DP-SGD clipping, no extra noise);
* ``tau`` full-batch steps of size ``eta`` then move the model by at most ``2 tau eta C_g / m`` for a convex,
  L-smooth one-output linear model with ``eta <= 2/L`` (Hardt, Recht & Singer 2016, Lemma 3.7; the
  three-line proof is in ``fedbound.training.sensitivity``), exactly ``2 eta C_g / m`` for one step and any
  model, and at most ``2C`` always (both clipped models lie in the C-ball).  ``L`` is not read from the data
  (the adversary's record would then decide whether training may start): inputs are clipped to a declared
  norm ``feature_norm`` X and ``L = kappa (X^2 + 1) + mu + lambda`` bounds every client's smoothness
  (``fedbound.training.sensitivity.smoothness_ceiling``).

So :func:`local_sensitivity` is ``min(2C, 2 tau eta C_g / m)``.  Every noise formula of these papers is
linear in the sensitivity with the form ``2 C / m_i``, so :func:`apply` hands them the *effective clip*
``C_eff = min(tau eta C_g, C m)`` (``m``: the smallest client): ``2 C_eff / m_i`` bounds every client's
provable sensitivity, and every sigma scales by ``C_eff / C``, which the warning states.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from fedbound.errors import ConfigError, FedboundWarning, ParameterError

__all__ = ["MODES", "KEYS", "local_sensitivity", "effective_clip", "apply", "for_planner"]

MODES = ("paper", "provable")
KEYS = ("sensitivity", "C_g", "tau", "eta", "model_norm_bound", "feature_norm")
"""The setting keys of this module (a planner that reads every key as a number drops them)."""


def local_sensitivity(C: float, C_g: float, m: float, tau: int, eta: float, model_norm: bool = False
                      ) -> float:
    """``min(2C, 2 tau eta C_g / m)`` (module docstring); ``2C`` alone with ``model_norm`` (a non-convex model
    trained for more than one step, where only the model-norm bound is proven)."""
    for name, value in (("C", C), ("C_g", C_g), ("eta", eta), ("m", m)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ParameterError(name, value, "(0, inf)")
    if not (isinstance(tau, int) and tau >= 1):
        raise ParameterError("tau", tau, "integer in [1, inf)")
    if model_norm:
        return 2.0 * C
    return min(2.0 * C, 2.0 * tau * eta * C_g / m)


def effective_clip(C: float, C_g: float, m: float, tau: int, eta: float, model_norm: bool = False) -> float:
    """``C_eff`` with ``2 C_eff / m = local_sensitivity(...)`` (module docstring)."""
    return local_sensitivity(C, C_g, m, tau, eta, model_norm) * m / 2.0


def apply(setting: Mapping[str, Any], *, clip_key: str, m: float, paper: str, assumption: str
          ) -> dict[str, Any]:
    """``setting`` as the paper's noise formulas should read it: unchanged unless ``sensitivity =
    "provable"``; with ``"provable"`` the clip ``clip_key`` replaced by :func:`effective_clip` of the
    setting's ``C_g``, ``tau``, ``eta`` (and ``model_norm_bound``), with a warning that says how much more (or
    less) noise that is than ``assumption`` (the paper's sensitivity, cited by ``paper``)."""
    out = dict(setting)
    if setting.get("sensitivity") != "provable":  # "paper" (or a paper's own other reading) is unchanged
        return out
    missing = [k for k in ("C_g", "tau", "eta") if setting.get(k) is None]
    if missing:
        raise ConfigError(f"sensitivity = \"provable\" needs {', '.join(missing)} (the per-sample gradient "
                          "clip C_g, the local steps tau and their step size eta; fedbound train takes tau "
                          "and eta from [train] local_steps and lr)")
    C = float(setting[clip_key])
    model_norm = bool(setting.get("model_norm_bound", False))
    c_eff = effective_clip(C, float(setting["C_g"]), float(m), int(setting["tau"]), float(setting["eta"]),
                           model_norm)
    bound = "the model-norm bound 2C (more than one step of a non-convex model)" if model_norm else \
        "min(2C, 2 tau eta C_g / m)"
    warnings.warn(f"provable sensitivity {bound} = {2 * c_eff / m:.4g} replaces {paper}'s {assumption} = "
                  f"{2 * C / m:.4g}: every sigma is {c_eff / C:.3g}x the paper's", FedboundWarning,
                  stacklevel=3)
    out[clip_key] = c_eff
    return out


def for_planner(setting: Mapping[str, Any], *, clip_key: str, m: float, paper: str, assumption: str
                ) -> tuple[dict[str, Any], str | None]:
    """:func:`apply` for a planner: the numeric setting (:data:`KEYS` dropped) and the note that says how
    much more noise the provable sensitivity costs (None in paper mode)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FedboundWarning)
        out = apply(setting, clip_key=clip_key, m=m, paper=paper, assumption=assumption)
    notes = [str(w.message) for w in caught if issubclass(w.category, FedboundWarning)]
    return {k: v for k, v in out.items() if k not in KEYS}, (notes[0] if notes else None)
