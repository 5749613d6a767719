"""pytest plugin: the hypothesis profiles every tile package's tests run under.

Loaded through the ``pytest11`` entry point, so a package's tests get the deterministic
``ci`` profile in CI without a conftest of their own.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"

# ci: deterministic (derandomized, no example database), no deadline (compiles are slow and
# vary with machine load), the default example count; nightly: wider exploration.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", deadline=None, max_examples=500, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=10)


def selected_profile() -> str:
    """The profile named by HYPOTHESIS_PROFILE, or hypothesis's own default."""
    return os.environ.get(PROFILE_VARIABLE, "default") or "default"


def load_selected_profile() -> None:
    """Load the selected profile if it is one of ours; a name another plugin registers
    (the conformance suite's ``emu``) is loaded by that plugin, after it registers it."""
    name = selected_profile()
    try:
        settings.get_profile(name)
    except InvalidArgument:
        return
    settings.load_profile(name)


load_selected_profile()
