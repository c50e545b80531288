"""PADPFL's audit (``fedbound audit adaptive``): NbAFL's two views with the impact factors as aggregation
weights (Talaei & Izadi 2024, eq. (3)); the broadcast's weight on the target is its ``p_i``.  The copies of
the target client are trained without the per-round inexactness measurement and without a data schedule
(both read the original federation's impact factors; neither changes the upload)."""

from typing import Any

from fedbound.validation.audit import AuditViews, without


def _prepare(algorithm: Any) -> Any:
    return without(algorithm, measure_gamma=False, data_schedule=())


AUDIT = AuditViews(prepare=_prepare, doc="uplink and downlink of PADPFL, record-level")
