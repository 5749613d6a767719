"""tile.backends.cpu.toolchain: the host toolchain the emulator and the C micro-kernels share."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest

from tile.backends.cpu import toolchain
from tile.testsupport.markers import needs_host_cxx


def test_content_digest_counts_part_boundaries() -> None:
    digest = toolchain.content_digest("ab", b"c")
    assert len(digest) == 32 and int(digest, 16) >= 0
    assert digest == toolchain.content_digest(b"ab", "c")
    assert digest != toolchain.content_digest("a", "bc")


def test_cache_dir_is_under_tile_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    assert toolchain.cache_dir("simt") == tmp_path / "simt"


def test_a_missing_configured_compiler_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CXX", "/nonexistent/c++")
    with pytest.raises(toolchain.HostCompilerNotFoundError, match="TILE_CXX='/nonexistent/c\\+\\+'"):
        toolchain.find_host_compiler()


@needs_host_cxx
def test_build_shared_library_moves_only_a_finished_library(tmp_path: Path) -> None:
    cxx = toolchain.find_host_compiler()
    assert toolchain.compiler_identity(cxx).startswith(cxx)
    assert toolchain.accepts_flag(cxx, "-O2") and not toolchain.accepts_flag(cxx, "--tile-no-such-flag")
    good, bad = tmp_path / "good.cpp", tmp_path / "bad.cpp"
    good.write_text('extern "C" int tile_toolchain_probe(int x) { return 3 * x + 1; }\n')
    bad.write_text("this is not C++\n")
    out = tmp_path / "cache" / "libprobe.so"
    failed = toolchain.build_shared_library(cxx, ["-fPIC", "-shared", str(bad)], out)
    assert failed.returncode != 0 and "error" in failed.stderr
    assert not out.exists() and list(out.parent.iterdir()) == []  # no half-written file left
    assert not toolchain.is_built(out)
    built = toolchain.build_shared_library(cxx, ["-fPIC", "-shared", str(good)], out)
    assert built.returncode == 0, built.stderr
    assert toolchain.is_built(out)
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name, out.name + ".sha256"]
    # Load a copy: the library is damaged in place below, and a mapped library rewritten in
    # place crashes the process when its finalizer runs at exit.
    loaded = tmp_path / "loaded.so"
    shutil.copyfile(out, loaded)
    assert ctypes.CDLL(str(loaded)).tile_toolchain_probe(5) == 16
    out.write_bytes(out.read_bytes()[:-1])  # a truncated library is not built: it is rebuilt
    assert not toolchain.is_built(out)


def test_the_toolchain_is_tile_irs_host_toolchain_shared_with_the_native_launcher():
    from tile.ir import host_toolchain

    assert toolchain.find_host_compiler is host_toolchain.find_host_compiler
    assert toolchain.cache_dir is host_toolchain.cache_dir
