"""Paper registrations: one module per paper, each defining ``PAPER = Paper(...)`` (see fedbound.registry)."""
