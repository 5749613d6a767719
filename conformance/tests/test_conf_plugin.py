"""The plugin itself: backend selection and capability-based skips (run with pytester)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.requires(warp_size=4096)
def test_needs_huge_warps(tile_backend):
    raise AssertionError("must have been skipped")

@pytest.mark.requires(dtypes={"float32"})
def test_needs_float32(tile_backend):
    assert "float32" in tile_backend.capabilities.dtypes
"""


def test_unknown_backend_is_a_usage_error_listing_installed_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(tile_backend): pass\n")
    result = pytester.runpytest("--tile-backend=no-such-backend", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*--tile-backend='no-such-backend' is not installed*"])
    assert result.ret != 0


def test_requires_marker_skips_by_capability_and_runs_otherwise(
    pytester: pytest.Pytester, tile_backend
) -> None:
    pytester.makepyfile(test_caps=SUITE)
    result = pytester.runpytest(f"--tile-backend={tile_backend.name}", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*lacks: warp_size=4096*"])
