"""Compile-only checks (no GPU): the issue's examples to HIP source and a gfx90a code object.

The compiler ``select_hip_compiler`` picks (clang++-19 with lld here, else Debian's hipcc)
builds each kernel; the checks read the code object's metadata (no spills) and its
disassembly (MFMA in the GEMMs). ``test_rocm_gfx942.py`` does the same for gfx942. An arch
no installed compiler builds is skipped with the selection's own answer.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any

import pytest
from _rocm_kernels import CASES, cast_kernel, half_column_max_kernel, kernel, need_compiler

import tile.lang as tilelang


@functools.cache
def compiled(name: str, arch: str) -> Any:
    return tilelang.compile(kernel(name), target={"kind": "hip", "mcpu": arch})


_need = need_compiler


@pytest.mark.parametrize("name", sorted(CASES))
def test_rocm_example_compiles_for_gfx90a_without_spills(name: str) -> None:
    _need("gfx90a")
    built = compiled(name, "gfx90a")
    binary = built.artifact.payload
    assert binary.code_object[:4] == b"\x7fELF", "the payload is a plain AMDGPU ELF code object"
    assert binary.stats.spills == 0 and binary.stats.scratch_bytes == 0, binary.stats
    source = built.get_kernel_source("hip")
    assert source.count('#include "tile_hip.h"') == 1 and "cuda_fp16" not in source
    assert "asm" not in re.findall(r"\b\w+\b", source), "special instructions go through tile_hip.h"


# Kernel -> (wrapper in the HIP source, gfx90a mnemonic). Waves whose sub-tiles split into
# 32x32 tiles use the 32x32 MFMAs, the others 16x16 (the 48-column one-wave tiles,
# flash attention's 16-row waves).
MFMA_CASES = {
    "gemm": ("tile_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8f16"),
    "gemm_bf16": ("tile_mfma_f32_32x32x8_bf16", "v_mfma_f32_32x32x8bf16_1k"),
    "split_k": ("tile_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8f16"),
    # FullRow policy, 4 waves on 64 rows: 16 rows per wave, so 16x16 MFMAs.
    "flash_attention": ("tile_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16f16"),
    "gemm_one_wave": ("tile_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16f16"),
    "int8_gemm": ("tile_mfma_i32_16x16x16_i8", "v_mfma_i32_16x16x16i8"),
    "int8_gemm_32": ("tile_mfma_i32_32x32x8_i8", "v_mfma_i32_32x32x8i8"),
}


@pytest.mark.parametrize("name", sorted(MFMA_CASES))
def test_rocm_gemm_disassembly_has_mfma(name: str) -> None:
    _need("gfx90a")
    built = compiled(name, "gfx90a")
    wrapper, mnemonic = MFMA_CASES[name]
    asm = built.get_kernel_source("asm")
    found = len(re.findall(rf"\b{mnemonic}\b", asm))
    if name == "gemm":
        # 4 waves in 2 x 2, 64 x 64 per wave = 2 x 2 MFMA tiles, four K=8 steps per 32-wide K tile.
        assert found == 16, found
    else:
        assert found > 0
    assert not re.search(r"\bv_mfma_\w+", asm.replace(mnemonic, "")), "one MFMA kind per kernel"
    assert built.get_kernel_source("hip").count(wrapper) > 0


def _lds_reads(asm: str) -> Counter[str]:
    """Per-lane LDS reads in a disassembly by width (``b64``, ``u16``, ...): a ``ds_read2*``
    instruction reads two addresses, so it counts twice."""
    found: Counter[str] = Counter()
    for pair, width in re.findall(r"\bds_read(2(?:st64)?)?_(\w+)", asm):
        found[width] += 2 if pair else 1
    return found


def test_rocm_gemm_reads_k_contiguous_operands_with_wide_lds_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 128x128x32 fp16 gemm (A [M][K], B [K][N]; 4 waves in 2 x 2, 64 x 64 per wave, four
    32x32x8 MFMA k-steps per K tile). A lane's 4 A elements are 8 contiguous, aligned bytes
    of one 16-byte chunk under A's swizzle: one ds_read_b64 per A tile per k-step, 2 x 4 = 8
    per K tile. B [K][N] holds a lane's elements a row apart: 4 ds_read_u16 each, 2 x 4 x 4
    = 32. Before the lowering emitted wide reads, hipcc turned the 64 element loads into
    56 ds_read_u16, 1 ds_read_b64 and 1 ds_read2_b32 (so only 8 of A's 32 elements merged).
    The counts are the bank model's (lds.operand_reads) for the layouts the kernel got.
    """
    from tile.backends.rocm._src import backend as rocm_backend
    from tile.backends.rocm._src.lds import operand_reads
    from tile.ir.transform import layout_map_of

    _need("gfx90a")
    seen: list[Any] = []
    build = rocm_backend.build
    monkeypatch.setattr(rocm_backend, "build", lambda mod, target: (seen.append(mod), build(mod, target))[1])
    monkeypatch.setenv("TILE_CACHE", "0")
    built = tilelang.compile(kernel("gemm"), target={"kind": "hip", "mcpu": "gfx90a"})
    (func,) = seen[0].functions.values()
    layouts = layout_map_of(func)
    reads = _lds_reads(built.get_kernel_source("asm"))
    assert set(reads) == {"b64", "u16"}, reads
    assert (reads["b64"], reads["u16"]) == (8, 32), reads
    # The model reads whole 128x32 A and 32x128 B tiles; each wave reads half of each.
    model_a = operand_reads(layouts["A_shared"], "float16", "A", tile=32)
    model_b = operand_reads(layouts["B_shared"], "float16", "B", tile=32)
    assert {r.width for r in model_a} == {8} and {r.width for r in model_b} == {2}
    assert (len(model_a) // 2, len(model_b) // 2) == (reads["b64"], reads["u16"])
    assert built.get_kernel_source("hip").count("tile::copy_64(") == 8


def test_rocm_int8_gemm_reads_a_with_one_dword_per_lane() -> None:
    """int8 32x32x8 MFMAs on gfx90a take 4 bytes per lane: A [M][K] reads are ds_read_b32
    (from tile::copy_32); B [K][N] stays one ds_read_u8 per element. Two waves, 64 x 32
    each (2 A tiles, 1 B tile), four k-steps, and hipcc unrolls the two K tiles: 2 x 4 x 2
    = 16 dword reads of A, 1 x 4 x 4 x 2 = 32 byte reads of B. Before, hipcc merged 8 of
    the 16 A reads (4 ds_read2_b32) and left the others as 32 ds_read_u8 (64 in all)."""
    _need("gfx90a")
    built = compiled("int8_gemm_32", "gfx90a")
    reads = _lds_reads(built.get_kernel_source("asm"))
    assert (reads["b32"], reads["u8"]) == (16, 32), reads


def test_rocm_gfx942_builds_where_clang_supports_it() -> None:
    _need("gfx942")
    built = compiled("gemm", "gfx942")
    assert re.search(r"\bv_mfma_f32_32x32x8_?f16\b", built.get_kernel_source("asm"))


def test_rocm_gfx942_int8_gemm_uses_the_k32_mfma_where_clang_supports_it() -> None:
    # gfx942 has no v_mfma_i32_16x16x16i8 (CDNA3 replaced it by 16x16x32_i8, 8 bytes per lane).
    _need("gfx942")
    built = compiled("int8_gemm", "gfx942")
    assert "tile_mfma_i32_16x16x32_i8" in built.get_kernel_source("hip")
    assert re.search(r"\bv_mfma_i32_16x16x32_?i8\b", built.get_kernel_source("asm"))


def test_rocm_code_object_cache_round_trip(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _need("gfx90a")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    first = tilelang.compile(kernel("softmax"), target={"kind": "hip", "mcpu": "gfx90a"})
    again = tilelang.compile(kernel("softmax"), target={"kind": "hip", "mcpu": "gfx90a"})
    assert again.artifact.payload.code_object == first.artifact.payload.code_object
    assert again.artifact.payload.stats == first.artifact.payload.stats
    assert list(tmp_path.rglob("kernel.co")), "the code object is kept in the kernel cache"


def test_rocm_half_max_reduction_compiles() -> None:
    """TVM prints T.max as max(a, b); on half operands HIP's <cmath> template breaks the build
    ("call to '__test' is ambiguous") unless the call names tile_hip.h's overload. The tile is
    copied with TVM's half4 vector type, which tile_hip.h defines too."""
    _need("gfx90a")
    built = tilelang.compile(half_column_max_kernel(), target={"kind": "hip", "mcpu": "gfx90a"})
    source = built.get_kernel_source("hip")
    assert "tile::max(" in source and not re.search(r"(?<![\w.:])max\(", source)


@pytest.mark.parametrize(("src", "dst"), [("bfloat16", "float32"), ("float32", "bfloat16")])
def test_rocm_bfloat16_casts_compile(src: str, dst: str) -> None:
    """TVM spells bf16 conversions __float2bfloat16_rn / __bfloat162float; tile_hip.h defines them."""
    _need("gfx90a")
    built = tilelang.compile(cast_kernel(src, dst), target={"kind": "hip", "mcpu": "gfx90a"})
    assert "tile_bf16" in built.get_kernel_source("hip")
    assert built.artifact.payload.stats.spills == 0


def test_rocm_bfloat16_abs_compiles_and_clears_only_the_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    """T.abs of a bfloat16 prints as __habs, which HIP defines for __half only (found by the
    program fuzzer: "no matching function for call to '__habs'"); tile_hip.h defines it."""
    import numpy as np
    import torch

    import tile.lang.language as T

    @T.prim_func
    def scaled_abs(A: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "bfloat16")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = T.abs(A[i]) * T.cast(0.25, "bfloat16")

    _need("gfx90a")
    built = tilelang.compile(scaled_abs, target={"kind": "hip", "mcpu": "gfx90a"})
    assert "__habs(" in built.get_kernel_source("hip") and built.artifact.payload.code_object
    monkeypatch.setenv("TILE_DEVICE", "emu")  # the emulator runs the same source
    emulated = tilelang.compile(scaled_abs, target={"kind": "hip", "mcpu": "gfx90a"})
    a = torch.tensor(np.linspace(-4, 4, 64, dtype=np.float32)).to(torch.bfloat16)
    b = torch.empty(64, dtype=torch.bfloat16)
    emulated(a, b)
    np.testing.assert_array_equal(b.float().numpy(), np.abs(a.float().numpy()) * 0.25)


def test_rocm_float32_gemm_compiles_to_scalar_fma_without_scratch() -> None:
    """No MFMA for fp32 operands here: the SIMT fallback keeps the accumulator in registers."""
    from tile.ops.gemm import matmul_kernel

    _need("gfx90a")
    func = matmul_kernel(128, 128, 64, "float32", block_M=64, block_N=64, block_K=32, threads=128)
    built = tilelang.compile(func, target={"kind": "hip", "mcpu": "gfx90a"})
    stats = built.artifact.payload.stats
    assert stats.spills == 0 and stats.scratch_bytes == 0, stats
    assert re.search(r"\bv_(pk_)?(fma|fmac|mac)_f32", built.get_kernel_source("asm"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_lane_shuffles_compile_for_every_width(dtype: str) -> None:
    # A row max (tile::shfl_xor) and a row scan (tile::shfl_idx, which tile_hip.h lacked:
    # "no member named 'shfl_idx' in namespace 'tile'"); half and bytes go through an int
    import tile.lang.language as T

    @T.prim_func
    def rows(X: T.Tensor((4, 64), dtype), Y: T.Tensor((4,), dtype), Z: T.Tensor((4, 64), dtype)):
        with T.Kernel(1, threads=64) as _bx:
            tile = T.alloc_fragment((4, 64), dtype)
            top = T.alloc_fragment((4,), dtype)
            T.copy(X, tile)
            T.reduce_max(tile, top, dim=1)
            T.copy(top, Y)
            T.cumsum(tile, dim=1)
            T.copy(tile, Z)

    source = tilelang.compile(rows, target={"kind": "hip", "mcpu": "gfx90a"}).get_kernel_source("hip")
    assert "tile::shfl_xor" in source and "tile::shfl_idx" in source


def test_cummax_of_a_fragment_runs_on_the_emulator(monkeypatch) -> None:
    # T.cummax is T.cumsum's scan with max for +: rows split over lanes of a 64-wide wavefront
    import numpy as np

    import tile.lang.language as T

    @T.prim_func
    def rows(X: T.Tensor((4, 200), "float32"), Z: T.Tensor((4, 200), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            tile = T.alloc_fragment((4, 200), "float32")
            T.copy(X, tile)
            T.cummax(tile, dim=1, reverse=True)
            T.copy(tile, Z)

    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(rows, out_idx=[1], target={"kind": "hip", "mcpu": "gfx90a"})
    x = np.random.default_rng(3).standard_normal((4, 200)).astype(np.float32) - 10.0
    want = np.flip(np.maximum.accumulate(np.flip(x, 1), axis=1), 1)
    np.testing.assert_array_equal(kernel(x), want)


def _warp_sync_and_fma():
    import tile.lang.language as T

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), D: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            S[tx] = A[tx]
            T.sync_warp()  # CUDA's __syncwarp: tile_hip.h defines it for a wavefront
            D[tx] = T.fma2(S[63 - tx], A[tx], A[tx])  # fmaf, which TVM's generator left unresolved

    return main


def test_sync_warp_and_fma_compile_for_gfx90a_and_run_on_the_emulator(monkeypatch) -> None:
    import numpy as np

    _need("gfx90a")
    built = tilelang.compile(_warp_sync_and_fma(), target={"kind": "hip", "mcpu": "gfx90a"})
    assert built.artifact.payload.code_object[:4] == b"\x7fELF"
    source = built.get_kernel_source("hip")
    assert "__syncwarp" in source and "fmaf(" in source
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_warp_sync_and_fma(), target={"kind": "hip", "mcpu": "gfx90a"})
    a = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    d = np.zeros(64, np.float32)
    kernel(a, d)
    want = (a[::-1].astype(np.float64) * a + a).astype(np.float32)
    np.testing.assert_array_equal(d, want)


def _predicated_async_copy():
    import tile.lang.language as T

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            S = T.alloc_shared((8,), "float32")
            for i in T.serial(8):
                S[i] = T.float32(i + 1)
            T.ptx_cp_async(T.access_ptr(S[0], "w", 1), T.access_ptr(A[0], "r", 1), 1, predicate=False)
            T.ptx_cp_async(T.access_ptr(S[4], "w", 4), T.access_ptr(A[4], "r", 4), 4)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            for i in T.serial(8):
                B[i] = S[i]

    return main


def test_ptx_cp_async_on_hip_copies_at_once_and_zero_fills_one_dword(monkeypatch) -> None:
    import numpy as np

    _need("gfx90a")
    built = tilelang.compile(_predicated_async_copy(), target={"kind": "hip", "mcpu": "gfx90a"})
    assert "tile_cp_async_zfill_4" in built.get_kernel_source("hip")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_predicated_async_copy(), target={"kind": "hip", "mcpu": "gfx90a"})
    a = np.arange(10, 18, dtype=np.float32)
    b = np.zeros(8, np.float32)
    kernel(a, b)
    # a false predicate zeroes one dword only (TileLang's fix 9: not 16 bytes); the 16-byte copy lands
    np.testing.assert_array_equal(b, [0, 2, 3, 4, 14, 15, 16, 17])
