"""One exception hierarchy for fedbound.

Every error is a ``ValueError`` subclass, so ``except ValueError`` keeps working for callers that do not
care about the details.  Messages name the parameter, the offending value and the valid range, e.g.::

    ParameterError: delta = 1.5 is outside its valid range (0, 1)

Warnings are ``UserWarning`` subclasses so a user can silence or escalate them by category.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FedboundError",
    "ParameterError",
    "DomainError",
    "ConfigError",
    "InfeasibleError",
    "PrivacyBudgetExceeded",
    "TrainingDiverged",
    "CheckpointError",
    "FedboundWarning",
    "ClassicGaussianRangeWarning",
    "VacuousBoundWarning",
    "AssumptionWarning",
    "AccountingFallbackWarning",
    "UnsupportedError",
]


def _show(value: Any) -> str:
    """A short, readable rendering of an offending value (arrays are summarised)."""
    try:
        import numpy as np

        if isinstance(value, np.ndarray):
            if value.size == 1:
                return repr(value.reshape(()).item())
            return f"array(shape={value.shape}, first offending element shown separately)"
        if isinstance(value, np.generic):
            return repr(value.item())
    except ImportError:  # pragma: no cover - numpy is a hard dependency
        pass
    return repr(value)


class FedboundError(ValueError):
    """Base class of every error fedbound raises on purpose."""


class ParameterError(FedboundError):
    """A parameter value is outside its valid range.

    Attributes: ``name`` (the parameter), ``value`` (what was given), ``valid`` (the valid range, in words or
    interval notation) and ``hint`` (optional advice).
    """

    def __init__(self, name: str, value: Any, valid: str, hint: str = "") -> None:
        self.name = name
        self.value = value
        self.valid = valid
        self.hint = hint
        message = f"{name} = {_show(value)} is outside its valid range {valid}"
        if hint:
            message += f"; {hint}"
        super().__init__(message)


class DomainError(ParameterError):
    """A formula is evaluated where it is undefined (e.g. outside the domain of a logarithm).

    Raised instead of returning NaN.  The message says which condition failed.
    """


class UnsupportedError(ParameterError, NotImplementedError):
    """A valid combination of options that fedbound (or the library it delegates to) does not implement.

    E.g. PLD accounting of sampling without replacement (dp-accounting 0.6 has no PLD for it).  It is both a
    ParameterError (naming the option) and a NotImplementedError, so callers may catch either.
    """


class ConfigError(FedboundError):
    """A configuration file or a ``--set KEY=VALUE`` override cannot be used as given."""


class InfeasibleError(FedboundError):
    """An optimisation problem has no feasible point (e.g. no K with 0 < Q(K) < 1)."""


class PrivacyBudgetExceeded(FedboundError):
    """A training run would spend more privacy than its configured budget."""


class TrainingDiverged(FedboundError):
    """A training run's model or loss became NaN/inf ("diverged at round t"); its last good checkpoint is
    kept."""


class CheckpointError(FedboundError):
    """A checkpoint file is damaged (bit flips, truncated, empty) or not a fedbound checkpoint; it is refused
    before anything in it is unpickled."""


class FedboundWarning(UserWarning):
    """Base class of fedbound's warnings."""


class ClassicGaussianRangeWarning(FedboundWarning):
    """The classic Gaussian mechanism (sigma = sqrt(2 ln(1.25/delta)) Delta / eps) is proven for eps < 1 only.

    All five seed papers use it at eps = 2 ... 100; the guarantee does not hold there.  Compare with the
    analytic (tight) calibration, which is valid for every eps > 0.
    """


class VacuousBoundWarning(FedboundWarning):
    """A bound is defined but says nothing useful (e.g. it exceeds the trivial bound)."""


class AssumptionWarning(FedboundWarning):
    """A formula is used outside the conditions under which its source proves it.

    E.g. the moments-accountant closed form of Abadi et al. (2016, Thm 1) needs sigma >= 1 and q < 1/(16
    sigma).
    The number is still returned (papers use it there); compare with a tight accountant.
    """


class AccountingFallbackWarning(FedboundWarning):
    """The requested accountant would be too costly for this input (e.g. PLD at a tiny noise multiplier or
    10^12 steps), so a cheaper valid one (RDP, an upper bound on eps) answered instead; the message says
    which."""
