"""``tile.lang.lower``: a kernel's generated code without a runnable kernel, and apache-tvm targets.

TileLang programs read ``tilelang.lower(func, target=...).kernel_source`` (47 of its test and
example files call ``lower``), often inside ``with tvm.target.Target("c"):``, which TileLang's
"auto" target takes before detecting a device.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TileError
from tile.lang.errors import ArgumentValueError, TileTypeError
from tile.testsupport.markers import needs_backend


def scaled_copy(n=256, block=64):
    @T.prim_func
    def scaled(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 3.0

    return scaled


def test_lower_for_the_cpu_gives_the_lowered_tir_and_llvm():
    artifact = tilelang.lower(scaled_copy(), target="cpu")
    assert artifact.target.kind == "cpu"
    assert [(p.name, p.dtype, tuple(p.shape)) for p in artifact.params] == [
        ("A", "float32", (256,)),
        ("B", "float32", (256,)),
    ]
    assert artifact.kernel_source == artifact.sources["tir"] and "def scaled(" in artifact.kernel_source
    assert "define" in artifact.sources["llvm"]
    funcs = list(artifact.device_mod.functions.values())
    assert len(funcs) == 1 and str(funcs[0].attrs["global_symbol"]) == "scaled"
    # the same text a compiled kernel reports
    assert tilelang.compile(scaled_copy(), target="cpu").get_kernel_source() == artifact.kernel_source


def test_a_tvm_target_scope_is_what_auto_means():
    with tvm.target.Target("c"):
        artifact = tilelang.lower(scaled_copy())
        kernel = tilelang.compile(scaled_copy(), out_idx=[1])
    assert artifact.target.kind == "cpu"
    a = np.arange(256, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a * 3.0)


@needs_backend("cuda")
def test_lower_for_cuda_needs_no_gpu():
    artifact = tilelang.lower(scaled_copy(), target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
    assert artifact.target.kind == "cuda" and artifact.target.arch == "sm_90a"
    assert "__global__" in artifact.kernel_source and artifact.kernel_source == artifact.sources["cuda"]


@needs_backend("cuda")
def test_tvms_no_gpu_guess_is_not_taken_for_an_arch():
    # apache-tvm fills in sm_50 for Target("cuda") when it finds no GPU: tile reads a bare "cuda"
    artifact = tilelang.lower(scaled_copy(), target=tvm.target.Target("cuda"))
    assert artifact.target.kind == "cuda" and artifact.target.arch != "sm_50"


def test_what_lower_does_not_make_is_refused():
    artifact = tilelang.lower(scaled_copy(), target="cpu")
    with pytest.raises(TileTypeError, match="no host module"):
        _ = artifact.host_mod
    with pytest.raises(TileTypeError, match="no runtime module"):
        _ = artifact.rt_mod

    @T.prim_func
    def two(A: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            A[0] = 1.0
        with T.Kernel(1):
            A[1] = 2.0

    with pytest.raises(ArgumentValueError, match=r"one T\.Kernel"):
        tilelang.lower(two, target="cpu")
    with pytest.raises(TileError, match=r"@T\.prim_func"):
        tilelang.lower(lambda: None, target="cpu")


def test_a_jit_factorys_tir_lowers_without_compiling():
    calls = []

    @tilelang.jit(out_idx=[1])
    def tripled(n=128):
        calls.append(n)
        return scaled_copy(n, 64)

    func = tripled.get_tir(n=192)
    assert calls == [192] and [int(d) for d in func.buffer_map[func.params[0]].shape] == [192]
    artifact = tilelang.lower(func, target="cpu")
    assert "def scaled(" in artifact.kernel_source
    a = np.arange(192, dtype="float32")
    np.testing.assert_array_equal(tripled(n=192)(a), a * 3.0)
