"""The cache key's toolchain versions, read from dist-info names, match importlib.metadata."""

import importlib.metadata

from tile.lang._src import cache


def test_installed_versions_match_importlib_metadata():
    expected: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata["Name"] or "")
        if name and cache._is_tile_distribution(name):
            expected.setdefault(name.lower().replace("_", "-"), str(dist.version))
    got = cache._installed_versions()
    assert got == expected
    assert "tile-lang" in got and "apache-tvm" in got
