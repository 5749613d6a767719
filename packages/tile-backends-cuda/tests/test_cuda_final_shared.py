"""The shared memory of the kernel as generated is checked at compile time (issue 17).

Passes after the storage plan (warp specialization's mbarriers, rings) can make the launch
ask for more shared memory than the plan: the build checks the generated kernel's dynamic
plus static bytes. A warp-specialized kernel that does not fit is built without warp
specialization where that fits, and refused with a ``ResourceLimitError`` otherwise.
"""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src import backend
from tile.ir.errors import ResourceLimitError
from tile.ops.gemm import matmul_kernel

pytestmark = [
    pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler"),
]
SM90_WS = {"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"}


@pytest.fixture(autouse=True)
def emulate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_CACHE", "0")  # the limit below is patched: never reuse a build


def gemm():
    return matmul_kernel(128, 128, 128, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)


def shared_limit(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    real = backend.capabilities
    monkeypatch.setattr(backend, "capabilities", lambda t: dataclasses.replace(real(t), shared_bytes=limit))


def needed(kernel) -> int:
    binary = kernel.artifact.payload
    return int(binary.recipe.dynamic_shared) + binary.stats.shared_bytes


def test_a_warp_specialized_kernel_that_does_not_fit_is_built_without_it(monkeypatch):
    plain = tilelang.compile(gemm(), out_idx=[-1], target={**SM90_WS, "warp_specialize": "0"})
    assert "tile_mbarrier_wait" not in plain.get_kernel_source("cuda")
    shared_limit(monkeypatch, needed(plain))  # the plain kernel just fits; its mbarriers do not
    kernel = tilelang.compile(gemm(), out_idx=[-1], target=SM90_WS)
    source = kernel.get_kernel_source("cuda")
    assert "tile_mbarrier_wait" not in source and "tile_wgmma" in source
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    got = kernel(a, b).astype(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3, atol=2e-2)


def row_sum():
    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            xs = T.alloc_fragment((256,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[0:256], xs)
            T.reduce_sum(xs, s, dim=0)  # across 4 warps: a shared workspace made after the plan
            Y[0] = s[0]

    return main


def test_shared_memory_added_after_the_plan_is_checked_at_compile_time(monkeypatch):
    # the plan has no shared buffer; the reduction's workspace is 16 bytes (a float per warp)
    shared_limit(monkeypatch, 8)
    with pytest.raises(ResourceLimitError, match="as generated") as info:
        tilelang.compile(row_sum(), target={"kind": "cuda", "arch": "sm_80"})
    assert "has 8" in str(info.value) and "fallback" not in str(info.value)
    assert info.value.location is not None and info.value.location.filename == __file__
