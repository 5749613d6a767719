"""tile.ir.host_toolchain: the one place that finds the host compiler and the cache folder."""

from __future__ import annotations

import hashlib
import pathlib

import pytest

from tile.ir import host_toolchain


def test_tile_cxx_that_does_not_exist_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CXX", "/nonexistent/c++")
    with pytest.raises(host_toolchain.HostCompilerNotFoundError, match="TILE_CXX"):
        host_toolchain.find_host_compiler()


def test_cache_dir_is_under_tile_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    assert host_toolchain.cache_dir("native") == tmp_path / "native"


def test_content_digest_length_prefixes_each_part() -> None:
    # hand-computed: sha256 over (8-byte little-endian length, bytes) of each part, 32 hex digits
    expected = hashlib.sha256(b"\x02\0\0\0\0\0\0\0ab" + b"\x01\0\0\0\0\0\0\0c").hexdigest()[:32]
    assert host_toolchain.content_digest(b"ab", "c") == expected
    assert host_toolchain.content_digest("a", "bc") != expected

