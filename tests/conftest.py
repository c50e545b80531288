"""Test-wide settings.

Hypothesis runs derandomized by default so CI is reproducible; FEDBOUND_HYPOTHESIS=thorough explores
10x more examples with fresh randomness (use it locally when touching a formula).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.register_profile(
    "thorough", max_examples=600, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.load_profile(os.environ.get("FEDBOUND_HYPOTHESIS", "default"))
