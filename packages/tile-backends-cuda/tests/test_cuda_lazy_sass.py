"""SASS is disassembled when asked, not during compile, and is still there after a cache hit."""

from __future__ import annotations

import pytest
from test_cuda_compile import elementwise_kernel

import tile.lang as tilelang
from tile.backends.cuda import probe_nvcc
from tile.backends.cuda._src import backend

SM80 = {"kind": "cuda", "arch": "sm_80"}


@pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
def test_sass_is_lazy_and_survives_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "1")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    real = backend.disassemble
    monkeypatch.setattr(backend, "disassemble", lambda cubin: calls.append(1) or real(cubin))
    first = tilelang.compile(elementwise_kernel(128, 256), target=SM80)
    assert calls == [], "compiling must not run the disassembler"
    assert "sass" not in first.artifact.sources
    assert "LDG" in first.get_kernel_source("sass") and calls == [1]
    first.get_kernel_source("sass")
    assert calls == [1], "the disassembly is kept once made"
    again = tilelang.compile(elementwise_kernel(128, 256), target=SM80)  # a cache hit
    assert again.get_kernel_source("sass") == first.get_kernel_source("sass")
    with pytest.raises(KeyError, match="sass"):
        again.get_kernel_source("no-such-kind")
