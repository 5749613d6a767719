"""An int8 x int8 -> int32 gemm whose last blocks are partial (M, N or K not a multiple of the block).

Its zero-filled tail copies into shared memory are 8- or 16-byte int8 vectors, which TVM's
CUDA C generator could not print: the out-of-bounds ``0`` came out as ``make_int2`` /
``make_int4`` with one argument per byte (nvcc: "too many arguments"), and CSE bound the
shared index both tail copies use to an ``int32x16`` variable ("Cannot convert type
T.int32x16 to CUDA type"). ``legalize_vectors`` rewrites both before code generation: a
before/after check of the pass (no toolchain), the kernel compiled with nvcc for sm_80, and
run under the CPU emulator against numpy (exact).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tvm  # type: ignore[import-untyped]
import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]

import tile.lang as tilelang
from tile.ir.gpu.legalize_vectors import legalize_vectors
from tile.lang.demo import matmul as paper_gemm
from tile.testsupport.markers import needs_host_cxx, needs_nvcc

needs_host_compiler = needs_host_cxx
TARGET = {"kind": "cuda", "arch": "sm_80"}


def int8_gemm(M: int, N: int, K: int, block_M: int, block_N: int, threads: int, block_K: int = 32) -> Any:
    """The paper's GEMM on int8 operands, accumulated and stored in int32, one stage."""
    return paper_gemm(
        M, N, K, block_M, block_N, block_K, "int8", "int32", out_dtype="int32", num_stages=1, threads=threads
    )


# (M, N, K, block_M, block_N, threads): partial row blocks (8- and 16-byte tail vectors),
# partial row and column blocks, and a partial K block.
RAGGED = [
    (100, 64, 64, 64, 64, 256),
    (100, 64, 64, 64, 64, 128),
    (100, 100, 100, 64, 64, 128),
    (96, 80, 64, 32, 48, 64),
]


def _tail_copy(lanes: int) -> Any:
    """A zero-filled int8 tail copy as TVM's pipeline leaves it: the vector index bound to a
    variable (what CSE does when two stores share it) and an int8 Broadcast for the 0."""
    A = tirx.decl_buffer((1024,), "int8", name="A")
    C = tirx.decl_buffer((1024,), "int8", name="C")
    tx = tirx.Var("tx", "int32")
    index = tirx.Var("index", f"int32x{lanes}")
    inside = tirx.BufferStore(C, tirx.BufferLoad(A, [index]), [index])
    zero = tirx.Broadcast(tirx.const(0, "int8"), lanes)
    edge = tirx.BufferStore(C, tirx.if_then_else(tx < 50, tirx.BufferLoad(A, [index]), zero), [index])
    body = tirx.SeqStmt(
        [tirx.Bind(index, tirx.Ramp(tx * lanes, 1, lanes)), tirx.IfThenElse(tx < 40, inside, edge)]
    )
    thread = tirx.IterVar(ir.Range(0, 64), tx, 1, "threadIdx.x")
    body = tirx.For(tx, 0, 64, tirx.ForKind.THREAD_BINDING, body, thread_binding=thread)
    return tirx.PrimFunc([A, C], body).with_attrs({"global_symbol": "tail", "tirx.noalias": True})


def _cuda_source(func: Any) -> str:
    """TVM's CUDA C for ``func`` (source only: no nvcc)."""
    return str(tvm.compile(func, target=TARGET).mod.imports[0].inspect_source("cuda"))


def _too_many_make_args(source: str) -> list[str]:
    """``make_<type>N(...)`` calls with more than N arguments."""
    bad = []
    for name, width, args in re.findall(r"\bmake_([a-z]+)(\d)\(((?:[^()]|\([^()]*\))*)\)", source):
        if len(args.split(",")) > int(width):
            bad.append(f"make_{name}{width}({args})")
    return bad


@pytest.mark.parametrize("lanes", [8, 16])
def test_legalize_vectors_before_and_after(lanes: int) -> None:
    func = _tail_copy(lanes)
    if lanes == 16:
        with pytest.raises(Exception, match=re.escape("Cannot convert type T.int32x16 to CUDA type")):
            _cuda_source(func)
    else:  # an int32x8 index variable prints as "longlong4 index = __1;" and the 0 as 8-arg make_int2
        source = _cuda_source(func)
        assert "longlong4" in source and _too_many_make_args(source)
    out = legalize_vectors(func)
    binds: list[Any] = []
    tvm_ffi.structural_walk(out.body, (tirx.Bind, binds.append))
    assert not binds
    broadcasts: list[str] = []
    tvm_ffi.structural_walk(out.body, (tirx.Broadcast, lambda b: broadcasts.append(str(b.ty))))
    assert broadcasts == [f"uint32x{lanes // 4}"]
    source = _cuda_source(out)
    assert not _too_many_make_args(source) and "longlong4" not in source
    assert f"make_uint{lanes // 4}(" in source


@needs_nvcc
@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "threads"), RAGGED)
def test_ragged_int8_gemm_compiles_for_sm80(m: int, n: int, k: int, bm: int, bn: int, threads: int) -> None:
    kernel = tilelang.compile(int8_gemm(m, n, k, bm, bn, threads), target=TARGET)
    source = kernel.get_kernel_source("cuda")
    assert not _too_many_make_args(source)
    assert kernel.artifact.payload.stats.spills == 0


@needs_host_compiler
@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "threads"), RAGGED)
def test_ragged_int8_gemm_is_exact_on_the_emulator(
    monkeypatch: pytest.MonkeyPatch, m: int, n: int, k: int, bm: int, bn: int, threads: int
) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(int8_gemm(m, n, k, bm, bn, threads), out_idx=[-1], target=TARGET)
    rng = np.random.default_rng(8)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[-1, :] = -128  # the extremes, in the partial block
    b[:, -1] = -128
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.int32) @ b.astype(np.int32))
