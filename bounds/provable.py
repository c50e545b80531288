"""A sensitivity that is proven for the training actually run, for the papers that clip the local *model*.

NbAFL (Wei et al. 2020, eq. (6)) and PADPFL (Talaei & Izadi 2024, eq. (8)) take the uplink sensitivity of a
client with ``m`` records to be ``2C/m`` after clipping the locally trained model to norm ``C``.  The paper's
argument covers one gradient step with bounded gradients; with several local steps of weakly regularised
training one replaced record moves the clipped model further (fedbound's audit measured 2.6-5.8x ``2C/m``
for NbAFL with 10 steps, docs/papers/nbafl.md).  ``sensitivity = "provable"``, the DEFAULT of both papers
(:data:`DEFAULT_MODE`), replaces it by a bound that holds for the training run:

* every per-sample gradient is clipped to ``C_g`` during full-batch local training (DP-SGD clipping, no
  extra noise); unset, ``C_g = C / (tau eta)`` (:func:`default_gradient_clip`), at which one step moves the
  model by at most the paper's own ``2C/m``;
* one step of size ``eta`` from the received model moves it by at most ``2 eta C_g / m`` for ANY model
  (both copies start from the same model; only the replaced record's clipped gradient differs);
* ``tau`` steps, ANY model (:func:`growth_recursion`): a step is ``w -> (1 - eta d) w + eta mu w_anchor -
  eta g(w)`` with ``d = mu + lambda`` (proximal and weight-decay terms, the same on both datasets) and
  ``||g|| <= C_g`` (a mean of clipped gradients), so the distance ``delta`` of the two trajectories obeys
  ``delta_1 <= 2 eta C_g / m`` and ``delta_{s+1} <= |1 - eta d| delta_s + 2 eta C_g`` (Hardt, Recht &
  Singer 2016, Lemma 2.5, the growth recursion: the affine part is ``|1 - eta d|``-expansive, the gradient
  part ``eta C_g``-bounded), i.e. ``delta_tau <= 2 eta C_g (a^(tau-1)/m + sum_{s<tau-1} a^s)``,
  ``a = |1 - eta d|``;
* ``tau`` steps of a convex, L-smooth one-output linear model with ``eta <= 2/L`` move it by at most
  ``2 tau eta C_g / m`` (Hardt, Recht & Singer 2016, Lemma 3.7; the three-line proof is in
  ``fedbound.training.sensitivity``).  ``L`` is not read from the data (the adversary's record would then
  decide whether training may start): inputs are clipped to a declared norm ``feature_norm`` X and
  ``L = kappa (X^2 + 1) + mu + lambda`` bounds every client's smoothness;
* and at most ``2C`` always (both clipped models lie in the C-ball; clipping is a projection, so it never
  increases the distance).

So :func:`local_sensitivity` is the least of these that applies.  Every noise formula of these papers is
linear in the sensitivity with the form ``2 C / m_i``, so :func:`apply` hands them the *effective clip*
``C_eff`` with ``2 C_eff / m = local_sensitivity`` (``m``: the smallest client), and every sigma scales by
``C_eff / C``, which the warning states (nothing is said where the two agree, as for one step at the default
``C_g``).  ``sensitivity = "paper"`` keeps the paper's ``2C/m`` for reproducing the
papers: the audit measures it LEAKing for multi-step local training (:data:`PAPER_LEAK`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from fedbound.errors import ConfigError, FedboundWarning, ParameterError

__all__ = ["MODES", "DEFAULT_MODE", "KEYS", "PAPER_LEAK", "mode", "default_gradient_clip", "growth_recursion",
           "local_sensitivity", "effective_clip", "apply", "for_planner", "premise"]

MODES = ("paper", "provable")
DEFAULT_MODE = "provable"
"""What an unset ``sensitivity`` means: the mechanism NbAFL and PADPFL deploy by default is private as
accounted."""
KEYS = ("sensitivity", "C_g", "tau", "eta", "model_norm_bound", "feature_norm", "decay", "batch")
"""The setting keys of this module (a planner that reads every key as a number drops them)."""
PAPER_LEAK = ("the paper's 2C/m is not a bound for more than one local step: fedbound's audit measured a "
              "noise-free shift of 2.33 against the assumed 0.4 (5.8x, LEAK) for NbAFL's MNIST example with "
              "10 local steps")
"""What ``sensitivity = "paper"`` is labelled with wherever it is deployed."""


def mode(setting: Mapping[str, Any]) -> str | None:
    """The setting's sensitivity mode, an unset one read as :data:`DEFAULT_MODE`."""
    given = setting.get("sensitivity")
    return DEFAULT_MODE if given is None else given


def default_gradient_clip(C: float, tau: int, eta: float) -> float:
    """``C_g = C / (tau eta)``: the per-sample gradient clip at which one local step (and ``tau`` steps of a
    convex linear model) moves the model by at most the paper's ``2C/m`` (module docstring)."""
    return float(C) / (int(tau) * float(eta))


def growth_recursion(C_g: float, m: float, tau: int, eta: float, decay: float = 0.0) -> float:
    """``2 eta C_g (a^(tau-1)/m + sum_{s=0}^{tau-2} a^s)``, ``a = |1 - eta decay|``: how far ``tau``
    full-batch steps of clipped gradients (norm ``<= C_g``) move ANY model when one of ``m`` records is
    replaced (Hardt, Recht & Singer 2016, Lemma 2.5; module docstring); ``inf`` where it overflows."""
    a = abs(1.0 - float(eta) * float(decay))
    k = int(tau) - 1
    try:
        geometric = float(k) if a == 1.0 else -math.expm1(k * math.log(a)) / (1.0 - a) if a > 0 else (
            1.0 if k >= 1 else 0.0)
        head = a**k if a > 0 else (1.0 if k == 0 else 0.0)
    except OverflowError:
        return math.inf
    return 2.0 * float(eta) * float(C_g) * (head / float(m) + geometric)


def local_sensitivity(C: float, C_g: float, m: float, tau: int, eta: float, model_norm: bool = False,
                      decay: float = 0.0, batch: int | None = None) -> float:
    """``min(2C, growth recursion, 2 tau eta C_g / m)`` (module docstring); the convex linear bound
    ``2 tau eta C_g / m`` is left out with ``model_norm`` (more than one step of a model it does not cover:
    a non-convex one, or a linear one without a declared feature norm).  ``decay``: the data-independent
    curvature ``mu + lambda`` of the local objective (proximal and weight-decay terms; 0 is safe whenever
    ``eta decay <= 2``).  ``batch``: mini-batches of ``B`` records drawn the same way on both datasets (the
    engine keys them by round and step): a step's mean of clipped gradients still has norm ``<= C_g``, and the
    replaced record weighs ``1 / min(B, m)`` in the steps it is drawn in, so ``m`` reads ``min(B, m)``."""
    for name, value in (("C", C), ("C_g", C_g), ("eta", eta), ("m", m)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ParameterError(name, value, "(0, inf)")
    if not (isinstance(tau, int) and tau >= 1):
        raise ParameterError("tau", tau, "integer in [1, inf)")
    if not (isinstance(decay, int | float) and math.isfinite(decay) and decay >= 0):
        raise ParameterError("decay", decay, "[0, inf)")
    if batch is not None and not (isinstance(batch, int) and batch >= 1):
        raise ParameterError("batch", batch, "integer in [1, inf) or None (full batches)")
    per_step = min(float(batch), m) if batch else m
    bounds = [2.0 * C, growth_recursion(C_g, per_step, tau, eta, decay)]
    if not model_norm:
        bounds.append(2.0 * tau * eta * C_g / per_step)
    return min(bounds)


def effective_clip(C: float, C_g: float, m: float, tau: int, eta: float, model_norm: bool = False,
                   decay: float = 0.0, batch: int | None = None) -> float:
    """``C_eff`` with ``2 C_eff / m = local_sensitivity(...)`` (module docstring)."""
    return local_sensitivity(C, C_g, m, tau, eta, model_norm, decay, batch) * m / 2.0


def _resolved(setting: Mapping[str, Any], clip_key: str) -> dict[str, Any]:
    """``tau`` (default 1), ``eta``, ``C_g`` (default :func:`default_gradient_clip`) and ``decay`` (default
    the setting's ``mu``, else 0) of a provable setting; ConfigError where ``eta`` is needed but unset."""
    C = float(setting[clip_key])
    tau = int(setting.get("tau") or 1)
    eta = setting.get("eta")
    if eta is None and (tau > 1 or setting.get("C_g") is not None):
        given = f"tau = {tau}" if tau > 1 else "C_g"
        raise ConfigError(f"sensitivity = \"provable\" with {given} needs "
                          "eta, the local step size (fedbound train takes tau and eta from [train] "
                          "local_steps and lr)")
    batch = setting.get("batch")
    if eta is None:  # one step at the default C_g = C / eta: 2 eta C_g / b = 2C/b whatever eta is
        return {"C": C, "C_g": C, "tau": 1, "eta": 1.0, "decay": 0.0, "batch": int(batch) if batch else None}
    C_g = setting.get("C_g")
    decay = setting.get("decay")
    if decay is None:
        decay = float(setting.get("mu") or 0.0)
    return {"C": C, "C_g": float(C_g) if C_g is not None else default_gradient_clip(C, tau, float(eta)),
            "tau": tau, "eta": float(eta), "decay": float(decay), "batch": int(batch) if batch else None}


def apply(setting: Mapping[str, Any], *, clip_key: str, m: float, paper: str, assumption: str
          ) -> dict[str, Any]:
    """``setting`` as the paper's noise formulas should read it: unchanged in ``"paper"`` mode (or a paper's
    own other reading); in ``"provable"`` mode (the default) the clip ``clip_key`` replaced by
    :func:`effective_clip` of the setting's ``C_g``, ``tau``, ``eta``, ``decay`` (and ``model_norm_bound``),
    with a warning that says how much more (or less) noise that is than ``assumption`` (the paper's
    sensitivity, cited by ``paper``) when the two differ."""
    out = dict(setting)
    if mode(setting) != "provable":  # "paper" (or a paper's own other reading) is unchanged
        return out
    r = _resolved(setting, clip_key)
    model_norm = bool(setting.get("model_norm_bound", False))
    c_eff = effective_clip(r["C"], r["C_g"], float(m), r["tau"], r["eta"], model_norm, r["decay"], r["batch"])
    out[clip_key] = c_eff
    if math.isclose(c_eff, r["C"], rel_tol=1e-12):  # e.g. one step at the default C_g: the paper's 2C/m
        return out
    bound = ("min(2C, 2 eta C_g (a^(tau-1)/m + sum a^s)) (more than one step of a model the convex bound "
             "does not cover)" if model_norm else "min(2C, 2 tau eta C_g / m, growth recursion)")
    warnings.warn(f"provable sensitivity {bound} = {2 * c_eff / m:.4g} replaces {paper}'s {assumption} = "
                  f"{2 * r['C'] / m:.4g}: every sigma is {c_eff / r['C']:.3g}x the paper's", FedboundWarning,
                  stacklevel=3)
    return out


def for_planner(setting: Mapping[str, Any], *, clip_key: str, m: float, paper: str, assumption: str
                ) -> tuple[dict[str, Any], str | None]:
    """:func:`apply` for a planner: the numeric setting (:data:`KEYS` dropped) and the note that says how
    much more noise the provable sensitivity costs (None where it costs nothing or in paper mode)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FedboundWarning)
        out = apply(setting, clip_key=clip_key, m=m, paper=paper, assumption=assumption)
    notes = [str(w.message) for w in caught if issubclass(w.category, FedboundWarning)]
    return {k: v for k, v in out.items() if k not in KEYS}, (notes[0] if notes else None)


def premise(setting: Mapping[str, Any], *, clip_key: str, m: float, paper: str, assumption: str) -> str:
    """The sentence a plan rests on for the sensitivity it deploys: the provable bound and its premises
    (per-sample clipping, full batches), or the paper's ``assumption`` labelled with :data:`PAPER_LEAK`."""
    if mode(setting) != "provable":
        return (f"{paper}'s {assumption} (sensitivity = \"paper\"): it holds for one local step with bounded "
                f"gradients; {PAPER_LEAK}")
    r = _resolved(setting, clip_key)
    model_norm = bool(setting.get("model_norm_bound", False))
    value = local_sensitivity(r["C"], r["C_g"], float(m), r["tau"], r["eta"], model_norm, r["decay"],
                              r["batch"])
    steps = "one local step" if r["tau"] == 1 else f"{r['tau']} local steps"
    clip = ("C_g = C/(tau eta), the default" if setting.get("C_g") is None else f"C_g = {r['C_g']:g}")
    return (f"the provable sensitivity {value:.4g} of a client's clipped upload for {steps} of full-batch "
            f"local training with every per-sample gradient clipped to {clip} (fedbound.bounds.provable: "
            "2 eta C_g / m for one step of any model, Hardt, Recht & Singer 2016 for more; "
            f"{paper}'s {assumption} holds only for one step)")
