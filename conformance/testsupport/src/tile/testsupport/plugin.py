"""pytest plugin: the hypothesis profiles every tile package's tests run under.

Loaded through the ``pytest11`` entry point, so a package's tests get the deterministic
``ci`` profile in CI without a conftest of their own.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator

import pytest
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


# --- the vendor compiler's check of emulated kernels, one test in N -------------------------
# Under TILE_DEVICE=emu a CUDA or HIP kernel is also compiled by nvcc / hipcc, as a check that
# the generated source is real CUDA or HIP. That compile is most of an emulated build (about
# 1.3 s of 1.6 s for a small kernel with nvcc, 1.7 s of 2.0 s with hipcc). With
# --tile-vendor-compile-every=N, one test in N (chosen by a hash of its node id, so the same
# tests every run and on every xdist worker) keeps the check; the others run with
# TILE_EMU_VENDOR_COMPILE=0. A test that needs the cubin or code object of an emulated build
# carries the ``vendor_compile`` marker and always keeps it; TILE_EMU_VENDOR_COMPILE set by the
# caller always wins. The conformance plugin reads the same option and samples per build.

VENDOR_VARIABLE = "TILE_EMU_VENDOR_COMPILE"
VENDOR_OPTION = "--tile-vendor-compile-every"
VENDOR_MARKER = "vendor_compile"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tile", "tile test support")
    group.addoption(
        VENDOR_OPTION, type=int, default=1, metavar="N",
        help="under TILE_DEVICE=emu, keep the vendor compiler's check of the generated source (nvcc, "
             "hipcc) in one test in N (a hash of the node id picks them) and, in the conformance suite, "
             "in one emulated build in N; tests marked vendor_compile always keep it, and a "
             f"{VENDOR_VARIABLE} set by the caller wins (default 1: every test and build)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{VENDOR_MARKER}: the test needs the vendor compiler's output (cubin, code object) of an "
        f"emulated build, so {VENDOR_OPTION} never turns the compile off for it",
    )


def vendor_check_kept(nodeid: str, every: int) -> bool:
    """Whether the test ``nodeid`` keeps the vendor compiler's check when one test in ``every`` does."""
    return every <= 1 or zlib.crc32(nodeid.encode()) % every == 0


def pytest_report_header(config: pytest.Config) -> str | None:
    every = config.getoption(VENDOR_OPTION)
    if every <= 1:
        return None
    if VENDOR_VARIABLE in os.environ:
        return f"vendor compile check: {VENDOR_VARIABLE}={os.environ[VENDOR_VARIABLE]} (set by the caller)"
    return f"vendor compile check of emulated kernels: one test in {every} and every {VENDOR_MARKER} test"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    every = item.config.getoption(VENDOR_OPTION)
    skip_check = (
        every > 1
        and VENDOR_VARIABLE not in os.environ
        and item.get_closest_marker(VENDOR_MARKER) is None
        and not vendor_check_kept(item.nodeid, every)
    )
    if skip_check:
        os.environ[VENDOR_VARIABLE] = "0"
    try:
        yield
    finally:
        if skip_check:
            os.environ.pop(VENDOR_VARIABLE, None)
