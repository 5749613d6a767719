"""The GPU layer's native launch library: built once into the cache, sealed, and rebuilt
(never loaded) when the cached file is damaged; its ctypes mirror matches the C++ structs.
What it launches is tested against a C stand-in for libcuda in tile-backends-cuda
(test_cuda_driver_native.py)."""

from __future__ import annotations

import os
import shutil

import pytest

from tile.ir.gpu import native_launch

pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="needs a host C++ compiler"
)


def _build(monkeypatch: pytest.MonkeyPatch, cache: object) -> object:
    monkeypatch.setenv("TILE_CACHE_DIR", str(cache))
    return native_launch._library.__wrapped__()  # type: ignore[attr-defined]


def test_the_library_is_built_sealed_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    assert _build(monkeypatch, tmp_path) is not None  # its layout check passed on loading
    (library,) = (tmp_path / "native").glob("libtile_gpu_launch-*.so")
    assert library.with_name(library.name + ".sha256").exists()
    damaged = tmp_path / "damaged.so"  # truncated, as by a full disk; replaced, not rewritten in
    damaged.write_bytes(library.read_bytes()[:4096])  # place (the loaded copy stays mapped)
    os.replace(damaged, library)
    assert _build(monkeypatch, tmp_path) is not None
    assert library.stat().st_size > 4096  # rebuilt, not mapped


def test_turned_off_it_is_not_built(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_NATIVE_LAUNCH", "0")
    assert _build(monkeypatch, tmp_path) is None
    assert not (tmp_path / "native").exists()


def test_a_plan_goes_native_only_where_the_drivers_stream_is_the_one_tvm_ffi_installs():
    torch = pytest.importorskip("torch")
    import tvm_ffi

    if native_launch.native_call_function() is None:
        pytest.skip("the native launch library did not build")
    cpu = torch.device("cpu")
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cpu", 0), 0x5EED):
        assert native_launch.follows_torch(cpu, lambda index: 0x5EED)
        assert not native_launch.follows_torch(cpu, lambda index: 0xF00D)


def test_the_native_call_keeps_the_gil():
    # the tables' writers rely on it: a call never interleaves with Python (native_launch's docstring)
    call = native_launch.native_call_function()
    if call is None:
        pytest.skip("the native launch library did not build")
    assert call is native_launch.native_call_function() and call.release_gil is False
