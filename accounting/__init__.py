"""Privacy mechanisms and accountants: noise std <-> (eps, delta), as the papers state it and tight.

Conventions: every function broadcasts numpy arrays and returns a float for scalar input and an array
otherwise; functions that carry more information return small frozen records (``ClassicGaussianCheck``,
``PrivacyParams``, ``MethodRow``).  ``noise_multiplier`` (z) is the noise std divided by the L2 sensitivity.
Bad input raises ``fedbound.errors.ParameterError``; unreachable targets raise ``InfeasibleError``.

Modules (one idea each):

* ``classic``        sigma = sqrt(2 ln(1.25/delta)) Delta/eps (Dwork & Roth), linear composition; warns at
eps >= 1
* ``analytic``       the exact Gaussian mechanism (Balle & Wang 2018)
* ``rdp``            Renyi DP of the (Poisson-subsampled) Gaussian, conversions to (eps, delta)
* ``pld``            privacy loss distributions, delegated to dp-accounting
* ``calibrate``      ``epsilon`` / ``delta_for_epsilon`` / ``calibrate_noise`` over T rounds, vectorised
* ``moments``        closed forms: Abadi et al. 2016 Thm 1, UDP Thm 1 (eq. (10))
* ``amplification``  amplification by subsampling for (eps, delta)-DP and its inverse (BBG 2018)
* ``events``         dp_accounting DpEvents and accountants for our mechanisms
* ``compare``        every method side by side (the ``fedbound account`` / ``fedbound calibrate`` tables)
* ``quantized_gaussian``  WPFL's quantization-assisted Gaussian mechanism and its Theorem 1 (pointwise
  delta_Q, eps_Q, sigma_DP calibration)
"""

import importlib
from typing import TYPE_CHECKING, Any

# Names are imported from their module on first use (PEP 562), so that e.g. the analytic Gaussian does not
# pull in scipy.special, dp-accounting and the RDP code: a cold ``fedbound plan`` needs one module of these.
_MODULES: dict[str, str] = {
    "amplification": "PrivacyParams amplify_by_subsampling inverse_amplify_by_subsampling",
    "analytic": "analytic_gaussian_delta analytic_gaussian_epsilon analytic_gaussian_std",
    "calibrate": "METHODS calibrate_noise delta_for_epsilon epsilon",
    "classic": ("ClassicGaussianCheck classic_composed_epsilon classic_composed_std "
        "classic_gaussian_check classic_gaussian_constant classic_gaussian_epsilon "
        "classic_gaussian_std classic_subsampled_epsilon classic_subsampled_std"),
    "compare": "MethodRow compare_epsilon compare_noise",
    "events": ("SAMPLINGS dp_event gaussian_event make_accountant neighboring_relation "
        "poisson_gaussian_event without_replacement_gaussian_event"),
    "moments": ("moments_accountant_epsilon moments_accountant_std udp_theorem1_epsilon "
        "udp_theorem1_std"),
    "pld": "pld_delta pld_epsilon",
    "quantized_gaussian": ("SIGMA_DP_BRACKET calibrate_sigma_dp qa_gaussian_delta "
        "qa_gaussian_epsilon qa_gaussian_log_psi qa_gaussian_mechanism "
        "qa_gaussian_psi qa_quantize quantization_max_error"),
    "rdp": ("DEFAULT_ORDERS rdp_gaussian rdp_sampled_without_replacement rdp_subsampled_gaussian "
        "rdp_to_delta rdp_to_dp"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from fedbound.accounting.amplification import (
        PrivacyParams,
        amplify_by_subsampling,
        inverse_amplify_by_subsampling,
    )
    from fedbound.accounting.analytic import (
        analytic_gaussian_delta,
        analytic_gaussian_epsilon,
        analytic_gaussian_std,
    )
    from fedbound.accounting.calibrate import METHODS, calibrate_noise, delta_for_epsilon, epsilon
    from fedbound.accounting.classic import (
        ClassicGaussianCheck,
        classic_composed_epsilon,
        classic_composed_std,
        classic_gaussian_check,
        classic_gaussian_constant,
        classic_gaussian_epsilon,
        classic_gaussian_std,
        classic_subsampled_epsilon,
        classic_subsampled_std,
    )
    from fedbound.accounting.compare import MethodRow, compare_epsilon, compare_noise
    from fedbound.accounting.events import (
        SAMPLINGS,
        dp_event,
        gaussian_event,
        make_accountant,
        neighboring_relation,
        poisson_gaussian_event,
        without_replacement_gaussian_event,
    )
    from fedbound.accounting.moments import (
        moments_accountant_epsilon,
        moments_accountant_std,
        udp_theorem1_epsilon,
        udp_theorem1_std,
    )
    from fedbound.accounting.pld import pld_delta, pld_epsilon
    from fedbound.accounting.quantized_gaussian import (
        SIGMA_DP_BRACKET,
        calibrate_sigma_dp,
        qa_gaussian_delta,
        qa_gaussian_epsilon,
        qa_gaussian_log_psi,
        qa_gaussian_mechanism,
        qa_gaussian_psi,
        qa_quantize,
        quantization_max_error,
    )
    from fedbound.accounting.rdp import (
        DEFAULT_ORDERS,
        rdp_gaussian,
        rdp_sampled_without_replacement,
        rdp_subsampled_gaussian,
        rdp_to_delta,
        rdp_to_dp,
    )

__all__ = [
    # classic (as the papers use it)
    "classic_gaussian_constant", "classic_gaussian_std", "classic_gaussian_epsilon", "classic_composed_std",
    "classic_composed_epsilon", "classic_subsampled_std", "classic_subsampled_epsilon",
    "classic_gaussian_check", "ClassicGaussianCheck",
    # exact Gaussian
    "analytic_gaussian_std", "analytic_gaussian_delta", "analytic_gaussian_epsilon",
    # RDP
    "DEFAULT_ORDERS", "rdp_gaussian", "rdp_subsampled_gaussian", "rdp_sampled_without_replacement",
    "rdp_to_dp", "rdp_to_delta",
    # PLD
    "pld_epsilon", "pld_delta",
    # composition over rounds, calibration
    "METHODS", "SAMPLINGS", "epsilon", "delta_for_epsilon", "calibrate_noise",
    # closed forms from the papers
    "moments_accountant_std", "moments_accountant_epsilon", "udp_theorem1_std", "udp_theorem1_epsilon",
    # amplification by subsampling
    "amplify_by_subsampling", "inverse_amplify_by_subsampling", "PrivacyParams",
    # dp_accounting interop
    "gaussian_event", "poisson_gaussian_event", "without_replacement_gaussian_event", "dp_event",
    "neighboring_relation", "make_accountant",
    # side-by-side tables
    "MethodRow", "compare_epsilon", "compare_noise",
    # WPFL: quantization-assisted Gaussian mechanism (Theorem 1)
    "quantization_max_error", "qa_quantize", "qa_gaussian_mechanism", "qa_gaussian_psi",
    "qa_gaussian_log_psi", "qa_gaussian_delta", "qa_gaussian_epsilon", "calibrate_sigma_dp",
    "SIGMA_DP_BRACKET",
]
