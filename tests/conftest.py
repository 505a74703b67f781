"""Test-wide settings. Under CI (``CI`` set, as .ci/run is run) hypothesis draws the same
examples every run, so a landing never depends on a lucky seed; locally it explores anew
(and ``make fuzz`` runs the long random campaign)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_sessionstart(session):
    """Compile numba's kernels (if it is installed) before any test runs: a fresh installation
    compiles them once, 10-17 s, which inside a test under a 10 s guard reads as a hang."""
    from hcsim.engine.fairshare import warm_kernels

    warm_kernels()
