"""The classic Gaussian mechanism, as the papers use it: sigma = sqrt(2 ln(1.25/delta)) Delta / eps.

Dwork & Roth (2014), "The Algorithmic Foundations of Differential Privacy", Theorem A.1: for eps in (0, 1),
Gaussian noise with this sigma on a query of L2 sensitivity Delta is (eps, delta)-DP.  **The theorem says
nothing for eps >= 1**, yet all five seed papers use it at eps = 2 ... 100 (e.g. NbAFL eq. (9) with
c(0.01) = 3.1075).  Every function here therefore emits ``fedbound.errors.ClassicGaussianRangeWarning`` when a
single release is calibrated at eps >= 1, and ``classic_gaussian_check`` returns what such a sigma truly
delivers (exact delta at eps, exact eps at delta; Balle & Wang 2018) next to the tight sigma.

Composition over rounds is the papers' linear one (basic composition, Dwork & Roth Thm 3.16): T releases of
(eps0, delta0) give (T eps0, T delta0).  ``split_delta=True`` (default) spends delta/T per release so the
total is delta; the papers keep delta per release (``split_delta=False``, e.g. NbAFL eqs. (9)-(10)), which
under-counts
delta.

Results are floats for scalar input and arrays otherwise; validity is reported by the warning (and, in
``classic_gaussian_check``, by the ``valid`` field and the ``warnings`` tuple).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from numpy.typing import ArrayLike

from fedbound.accounting.amplification import amplify_by_subsampling, inverse_amplify_by_subsampling
from fedbound.accounting.analytic import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_std,
)
from fedbound.checks import (
    broadcast_errors_named,
    check_finite,
    check_int,
    check_probability,
    check_real,
    scalar_or_array,
)
from fedbound.errors import ClassicGaussianRangeWarning, InfeasibleError

__all__ = [
    "classic_gaussian_constant", "classic_gaussian_std", "classic_gaussian_epsilon", "classic_composed_std",
    "classic_composed_epsilon", "classic_subsampled_std", "classic_subsampled_epsilon",
    "ClassicGaussianCheck", "classic_gaussian_check", "classic_range_message",
]


def _log_125_over(delta: np.ndarray) -> np.ndarray:
    """ln(1.25 / delta) without overflowing 1.25 / delta at subnormal delta."""
    return np.log(1.25) - np.log(delta)


def _sigma_out(name: str, value: np.ndarray, **inputs) -> float | np.ndarray:
    """A computed sigma or eps, checked finite and positive (overflow is an error naming the inputs)."""
    return scalar_or_array(check_finite(name, value, inputs, positive=True))


def classic_gaussian_constant(delta: ArrayLike) -> float | np.ndarray:
    """c(delta) = sqrt(2 ln(1.25/delta)) (Dwork & Roth 2014, Thm A.1; NbAFL eq. (9); c(0.01) = 3.10751)."""
    d = check_probability("delta", delta)
    return scalar_or_array(np.sqrt(2.0 * _log_125_over(d)))


def classic_range_message(eps_release: ArrayLike, where: str = "") -> str | None:
    """The ClassicGaussianRangeWarning text for per-release eps values (None when every eps < 1)."""
    e = np.asarray(eps_release, dtype=float)
    out = e >= 1.0
    if not out.any():
        return None
    count = f"{int(out.sum())} of {e.size} values, max " if e.size > 1 else ""
    return (f"classic Gaussian mechanism{where} used at per-release eps = {count}{float(e.max()):.4g} >= 1, "
            "where "
            "sqrt(2 ln(1.25/delta)) is not proven (Dwork & Roth 2014, Thm A.1); the (eps, delta) guarantee "
            "does not follow. analytic_gaussian_std gives the exact sigma; classic_gaussian_check shows the "
            "delta this sigma truly delivers")


def _warn_range(eps_release: np.ndarray, where: str = "") -> None:
    message = classic_range_message(eps_release, where)
    if message:
        warnings.warn(message, ClassicGaussianRangeWarning, stacklevel=3)


@broadcast_errors_named
def classic_gaussian_std(eps: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                         ) -> float | np.ndarray:
    """sigma = sqrt(2 ln(1.25/delta)) Delta / eps for one release (Dwork & Roth 2014, Thm A.1; proven for eps
    < 1).

    Warns with ClassicGaussianRangeWarning for eps >= 1.
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    c = np.asarray(classic_gaussian_constant(delta))
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    _warn_range(e)
    return _sigma_out("sigma", c * d / e, eps=e, delta=delta, sensitivity=d)


@broadcast_errors_named
def classic_gaussian_epsilon(sigma: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                             ) -> float | np.ndarray:
    """eps = sqrt(2 ln(1.25/delta)) Delta / sigma, the inverse of ``classic_gaussian_std``.

    Warns with ClassicGaussianRangeWarning where the result is >= 1 (the theorem then gives no guarantee).
    """
    s = check_real("sigma", sigma, 0.0, low_open=True)
    c = np.asarray(classic_gaussian_constant(delta))
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    eps = c * d / s
    _warn_range(eps)
    return _sigma_out("eps", eps, sigma=s, delta=delta, sensitivity=d)


def _per_step_delta(delta: ArrayLike, steps: ArrayLike, split_delta: bool) -> tuple[np.ndarray, np.ndarray]:
    d = check_probability("delta", delta)
    t = check_int("steps", steps, 1)
    return (d / t if split_delta else d), t


@broadcast_errors_named
def classic_composed_std(eps: ArrayLike, delta: ArrayLike, steps: ArrayLike, sensitivity: ArrayLike = 1.0,
                         split_delta: bool = True) -> float | np.ndarray:
    """Per-release sigma for ``steps`` Gaussian releases composed linearly: c(delta_step) Delta steps / eps.

    Basic composition (Dwork & Roth 2014, Thm 3.16) of classic releases with eps_step = eps / steps and
    delta_step = delta / steps (``split_delta=True``) or delta (``split_delta=False``, as NbAFL eq.
    (9)-(10)).  Warns when eps / steps >= 1.
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    d_step, t = _per_step_delta(delta, steps, split_delta)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    _warn_range(e / t, " (per step)")
    return _sigma_out("sigma", np.sqrt(2.0 * _log_125_over(d_step)) * d * t / e, eps=e, delta=delta, steps=t,
                      sensitivity=d)


@broadcast_errors_named
def classic_composed_epsilon(sigma: ArrayLike, delta: ArrayLike, steps: ArrayLike,
                             sensitivity: ArrayLike = 1.0, split_delta: bool = True) -> float | np.ndarray:
    """Total eps = steps * c(delta_step) Delta / sigma of ``steps`` classic releases (linear composition)."""
    s = check_real("sigma", sigma, 0.0, low_open=True)
    d_step, t = _per_step_delta(delta, steps, split_delta)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    eps_step = np.sqrt(2.0 * _log_125_over(d_step)) * d / s
    _warn_range(eps_step, " (per step)")
    return _sigma_out("eps", t * eps_step, sigma=s, delta=delta, steps=t, sensitivity=d)


@broadcast_errors_named
def classic_subsampled_std(eps: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                           sensitivity: ArrayLike = 1.0) -> float | np.ndarray:
    """Per-release sigma when each of ``steps`` rounds subsamples a q-fraction: classic + BBG + linear
    composition.

    The round budget (eps/steps, delta/steps) is un-amplified with ``inverse_amplify_by_subsampling`` (Balle,
    Barthe & Gaboardi 2018, two-sided) to the per-release (eps0, delta0 = delta/(steps q)), then calibrated
    with the classic constant.  This is the rigorous (up to eps0 < 1) version of NbAFL Lemma 4.  Warns when
    eps0 >= 1; raises InfeasibleError when delta/(steps q) >= 1.
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    d_step, t = _per_step_delta(delta, steps, True)
    qq = check_probability("q", q, allow_one=True)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    eps0, delta0 = (np.asarray(v) for v in inverse_amplify_by_subsampling(e / t, d_step, qq))
    _warn_range(eps0, " (per release, before amplification)")
    return _sigma_out("sigma", np.sqrt(2.0 * _log_125_over(delta0)) * d / eps0, eps=e, delta=delta, q=qq,
                      steps=t, sensitivity=d)


@broadcast_errors_named
def classic_subsampled_epsilon(sigma: ArrayLike, delta: ArrayLike, q: ArrayLike, steps: ArrayLike,
                               sensitivity: ArrayLike = 1.0) -> float | np.ndarray:
    """Total eps of ``steps`` q-subsampled classic releases: steps * ln(1 + q(e^eps0 - 1)), eps0 = c(delta0)
    Delta/sigma.

    delta0 = delta / (steps q) per release, so the amplified, linearly composed total is delta.  Inverse of
    ``classic_subsampled_std``.  Raises InfeasibleError when delta/(steps q) >= 1.
    """
    s = check_real("sigma", sigma, 0.0, low_open=True)
    d_step, t = _per_step_delta(delta, steps, True)
    qq = check_probability("q", q, allow_one=True)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    delta0 = d_step / qq
    if np.any(delta0 >= 1.0):
        raise InfeasibleError(f"delta / (steps q) = {float(np.max(delta0)):g} >= 1: the classic mechanism "
                              "has no per-release delta below 1 here")
    eps0 = check_finite("eps", np.sqrt(2.0 * _log_125_over(delta0)) * d / s,
                        dict(sigma=s, delta=delta, q=qq, steps=t, sensitivity=d))
    _warn_range(eps0, " (per release, before amplification)")
    return _sigma_out("eps", t * np.asarray(amplify_by_subsampling(eps0, 0.0, qq).epsilon), sigma=s,
                      delta=delta, q=qq, steps=t, sensitivity=d)


@dataclasses.dataclass(frozen=True)
class ClassicGaussianCheck:
    """What the classic sigma for (eps, delta) claims and what it truly delivers (one release).

    ``sigma``: classic sigma; ``valid``: eps < 1 (the theorem's premise); ``delivered_delta``: the exact delta
    of that sigma at eps; ``delivered_epsilon``: the exact eps at delta; ``tight_sigma``: the analytic sigma;
    ``saving_percent``: 100 (1 - tight_sigma / sigma), the noise the tight calibration saves (negative when
    the classic sigma is too small); ``warnings``: human-readable validity notes.  Fields are floats for
    scalar input and arrays otherwise.
    """

    eps: float | np.ndarray
    delta: float | np.ndarray
    sigma: float | np.ndarray
    valid: bool | np.ndarray
    delivered_delta: float | np.ndarray
    delivered_epsilon: float | np.ndarray
    tight_sigma: float | np.ndarray
    saving_percent: float | np.ndarray
    warnings: tuple[str, ...]


@broadcast_errors_named
def classic_gaussian_check(eps: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                           ) -> ClassicGaussianCheck:
    """The classic sigma next to what it delivers and the tight sigma (Dwork & Roth Thm A.1 vs Balle & Wang
    Thm 8).

    Example: eps = 60, delta = 0.01 (NbAFL TV1) gives sigma = 0.0518 Delta, which delivers delta = 1.0 at
    eps = 60, i.e. no guarantee.  Does not emit the warning; it is returned in ``warnings`` instead.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClassicGaussianRangeWarning)
        sigma = classic_gaussian_std(eps, delta, sensitivity)
    e = check_real("eps", eps, 0.0, low_open=True)
    d = check_probability("delta", delta)
    tight = analytic_gaussian_std(e, d, sensitivity)
    delivered_delta = analytic_gaussian_delta(e, sigma, sensitivity)
    notes = []
    message = classic_range_message(e)
    if message:
        notes.append(message)
    if np.any(np.asarray(delivered_delta) > d * (1 + 1e-9)):
        notes.append(f"the classic sigma under-delivers: exact delta at eps is up to "
                     f"{float(np.max(delivered_delta)):.4g} (claimed {float(np.max(d)):.4g})")
    valid = e < 1.0
    return ClassicGaussianCheck(
        eps=scalar_or_array(e), delta=scalar_or_array(d), sigma=sigma,
        valid=bool(valid) if valid.ndim == 0 else valid, delivered_delta=delivered_delta,
        delivered_epsilon=analytic_gaussian_epsilon(sigma, d, sensitivity), tight_sigma=tight,
        saving_percent=scalar_or_array(100.0 * (1.0 - np.asarray(tight) / np.asarray(sigma))),
        warnings=tuple(notes))
