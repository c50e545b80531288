"""Every accounting method side by side for one setting: the tables behind ``fedbound account`` /
``calibrate``.

``compare_noise(eps, delta, q, steps)`` gives the noise multiplier each method needs for (eps, delta) over
``steps`` rounds, with the saving over the classic calibration; ``compare_epsilon(z, q, steps, delta)`` gives
the eps each method certifies for noise multiplier z.  Each row says what the method assumes and whether its
guarantee is proven there (``valid``); formula rows that are approximations or used outside their premises
are kept (the papers use them) but marked invalid with the reason in ``note``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

from fedbound.accounting.calibrate import calibrate_noise, epsilon
from fedbound.accounting.classic import (
    classic_composed_epsilon,
    classic_composed_std,
    classic_subsampled_epsilon,
    classic_subsampled_std,
)
from fedbound.accounting.moments import (
    moments_accountant_epsilon,
    moments_accountant_std,
    udp_theorem1_epsilon,
    udp_theorem1_std,
)
from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import AccountingFallbackWarning, FedboundError, FedboundWarning, ParameterError

__all__ = ["MethodRow", "compare_noise", "compare_epsilon", "ASSUMES"]

ASSUMES = {
    "classic": "one classic Gaussian release per step (Dwork-Roth, proven for eps_step < 1), no subsampling "
               "credit; linear composition: eps = steps*eps_step, delta_step = delta/steps",
    "classic+bbg": "classic release per step, amplified by subsampling (Balle-Barthe-Gaboardi 2018: "
                   "ln(1+q(e^eps0-1)), q*delta0); linear composition over steps",
    "moments": "Abadi et al. 2016 Thm 1 closed form, c2 = 2 (leading order of Lemma 3; needs z >= 1, "
               "q < 1/(16z), eps < c1 q^2 T with unknown c1)",
    "udp-thm1": "seed 003 Thm 1, eq. (10): log moment linear in q (approximation; last step reversed, "
                "spec 003 E5)",
    "analytic": "exact: T Gaussian releases = one Gaussian with std z/sqrt(T) (q = 1 only; Balle-Wang 2018)",
    "rdp": "Renyi DP of the Poisson-subsampled Gaussian (Mironov et al. 2019), add/remove relation, "
           "improved conversion (Canonne et al. 2020)",
    "rdp-wor": "Renyi DP, K-of-N sampling without replacement, replace-one relation (Wang et al. 2019 via "
               "dp-accounting); z relative to the replace-one sensitivity",
    "pld": "privacy loss distribution (dp-accounting), Poisson subsampling, add/remove relation; tightest",
}
LABELS = {"classic": "classic, linear", "classic+bbg": "classic + BBG, linear", "moments": "moments (Abadi)",
          "udp-thm1": "UDP Thm 1 (seed 003)", "analytic": "analytic (exact)", "rdp": "RDP, Poisson",
          "rdp-wor": "RDP, w/o replacement", "pld": "PLD, Poisson"}


@dataclasses.dataclass(frozen=True)
class MethodRow:
    """One method's answer: ``value`` is a noise multiplier (compare_noise) or an eps (compare_epsilon).

    ``value`` is None when the method does not apply (``note`` says why); ``saving_percent`` is the noise
    saved relative to the classic row, 100 (1 - value / classic) (compare_noise only); ``tight`` marks
    accountants (vs closed forms).
    """

    method: str
    label: str
    value: float | None
    valid: bool
    tight: bool
    assumes: str
    saving_percent: float | None = None
    note: str = ""


def _row(method: str, fn: Callable[[], float], tight: bool, valid: bool, note: str = "") -> MethodRow:
    notes = [note] if note else []
    value: float | None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FedboundWarning)
        try:
            value = float(fn())
        except FedboundError as exc:
            value, valid = None, False
            notes.append(str(exc))
    if any(not isinstance(w.message, AccountingFallbackWarning) for w in caught):
        valid = False  # a fallback to a looser valid accountant (PLD -> RDP) keeps the guarantee
    notes.extend(str(w.message) for w in caught)
    return MethodRow(method, LABELS[method], value, valid, tight, ASSUMES[method], note="; ".join(notes))


def _na(method: str, why: str) -> MethodRow:
    return MethodRow(method, LABELS[method], None, False, method in ("analytic", "rdp", "rdp-wor", "pld"),
                     ASSUMES[method], note=why)


def _check_scalars(**values: float) -> None:
    """Validate the shared inputs up front, so bad input is an error and not a table of n/a rows."""
    checks = {"eps": lambda n, v: check_real(n, v, 0.0, low_open=True),
              "noise_multiplier": lambda n, v: check_real(n, v, 0.0, low_open=True),
              "delta": check_probability, "q": lambda n, v: check_probability(n, v, allow_one=True),
              "steps": lambda n, v: check_int(n, v, 1)}
    for name, value in values.items():
        if checks[name](name, value).ndim:
            raise ParameterError(name, value, "a scalar (the comparison table is for one setting)")


def compare_noise(eps: float, delta: float, q: float, steps: int, *, pld: bool = True,
                  without_replacement: bool = True) -> tuple[MethodRow, ...]:
    """Noise multiplier needed for (eps, delta) after ``steps`` rounds at sample rate q, by every method."""
    _check_scalars(eps=eps, delta=delta, q=q, steps=steps)
    rows = [
        _row("classic", lambda: classic_composed_std(eps, delta, steps), False, True),
        _row("classic+bbg", lambda: classic_subsampled_std(eps, delta, q, steps), False, True) if q < 1
        else _na("classic+bbg", "q = 1: no subsampling"),
        _row("moments", lambda: moments_accountant_std(eps, delta, q, steps), False, False,
             "closed-form approximation, not a proof"),
        _row("udp-thm1", lambda: udp_theorem1_std(eps, delta, q, steps), False, False,
             "under-delivers delta even under its own accountant (spec 003 E5)"),
        _row("analytic", lambda: calibrate_noise(eps, delta, q, steps, "analytic"), True, True) if q == 1
        else _na("analytic", "q < 1: exact only without subsampling"),
        _row("rdp", lambda: calibrate_noise(eps, delta, q, steps, "rdp"), True, True),
    ]
    if without_replacement and q < 1:
        rows.append(_row("rdp-wor", lambda: calibrate_noise(eps, delta, q, steps, "rdp",
                                                             sampling="without_replacement"), True, True))
    if pld and q < 1:
        rows.append(_row("pld", lambda: calibrate_noise(eps, delta, q, steps, "pld"), True, True))
    elif pld:  # the analytic row is exact; a PLD search would only approximate it, slowly at large eps
        rows.append(_na("pld", "q = 1: see the analytic row (exact); use epsilon(..., 'pld') to cross-check"))
    classic = rows[0].value
    if classic:
        rows = [dataclasses.replace(r, saving_percent=None if r.value is None
                                    else 100.0 * (1.0 - r.value / classic)) for r in rows]
    return tuple(rows)


def compare_epsilon(noise_multiplier: float, q: float, steps: int, delta: float, *, pld: bool = True,
                    without_replacement: bool = True) -> tuple[MethodRow, ...]:
    """eps each method certifies after ``steps`` rounds (noise multiplier z, sample rate q, ``delta``)."""
    _check_scalars(noise_multiplier=noise_multiplier, q=q, steps=steps, delta=delta)
    z = noise_multiplier
    rows = [
        _row("classic", lambda: classic_composed_epsilon(z, delta, steps), False, True),
        _row("classic+bbg", lambda: classic_subsampled_epsilon(z, delta, q, steps), False, True) if q < 1
        else _na("classic+bbg", "q = 1: no subsampling"),
        _row("moments", lambda: moments_accountant_epsilon(z, delta, q, steps), False, False,
             "closed-form approximation, not a proof"),
        _row("udp-thm1", lambda: udp_theorem1_epsilon(z, delta, q, steps), False, False,
             "under-delivers delta even under its own accountant (spec 003 E5)"),
        _row("analytic", lambda: epsilon(z, q, steps, delta, "analytic"), True, True) if q == 1
        else _na("analytic", "q < 1: exact only without subsampling"),
        _row("rdp", lambda: epsilon(z, q, steps, delta, "rdp"), True, True),
    ]
    if without_replacement and q < 1:
        rows.append(_row("rdp-wor", lambda: epsilon(z, q, steps, delta, "rdp",
                                                     sampling="without_replacement"), True, True))
    if pld:
        rows.append(_row("pld", lambda: epsilon(z, q, steps, delta, "pld"), True, True))
    return tuple(rows)
