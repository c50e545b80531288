"""UDP's audit (``fedbound audit udp``): the uplink view of seed 003's Algorithm 1 (per-sample clipped local
step, then the client's Gaussian noise), record-level: one sample of one client replaced, against the
sensitivity ``2 eta C / |D_i|`` of eq. (13)."""

from fedbound.validation.audit import AuditViews

AUDIT = AuditViews(doc="uplink of UDP's Algorithm 1, record-level")
