"""NbAFL's audit (``fedbound audit nbafl``): the uplink (each client's clipped, noised model) and the
downlink broadcast (the aggregate plus the server's noise), as the plan's views say.  The record-level
neighbouring relation is the paper's (Wei et al. 2020, Sec. II-C: one sample of one client replaced); the
sensitivity the plan assumes is eq. (6)'s ``2C/m`` (paper mode) or the provable one (``sensitivity =
"provable"``, ``fedbound.bounds.provable``)."""

from fedbound.validation.audit import AuditViews

AUDIT = AuditViews(doc="uplink and downlink of NbAFL's Algorithm 1, record-level")
