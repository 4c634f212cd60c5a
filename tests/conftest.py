"""Hypothesis settings for the whole suite: no timing-based checks.

Tests assert behaviour, never time (the project's rule): a draw that stalls because the
machine is busy (CI's 2 cores, ``-n 2``) must not fail a test, so the ``too_slow`` health
check and the per-example deadline are off everywhere. Tests that set their own
``@settings`` inherit this profile for what they leave unset.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "onnx_symdims", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("onnx_symdims")
