"""``T.gemm(..., impl="cute")``: CuTe's gemm on CUDA, for comparison with tile's own.

Numerics run the generated CUDA source under the CPU emulator (``TILE_DEVICE=emu``; CuTe's
MMA atom is ours and calls ``tile_mma_*``, which the emulator implements); the SASS test
compiles with nvcc only. The layout tests compile small host programs with g++ against the
installed CuTe headers and compare CuTe's offsets with tile-layout's and the backend's model.
Everything that needs CUTLASS skips without the nvidia-cutlass wheel.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cuda._src import cute_headers
from tile.backends.cuda._src.cute import c_partition_coord, swizzle_params
from tile.ir.errors import BackendUnavailableError, TileTypeError, UnsupportedOnTargetError
from tile.layout import make_swizzle_layout
from tile.testsupport.kernels import one_block_gemm, pipelined_gemm
from tile.testsupport.markers import needs_nvcc

SM80 = {"kind": "cuda", "arch": "sm_80"}
F16, F32 = "float16", "float32"
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
CUTLASS = cute_headers.cutlass_include_dir()
needs_cutlass = pytest.mark.skipif(CUTLASS is None, reason="nvidia-cutlass (CuTe headers) not installed")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")


def gemm_kernel(
    m: int,
    n: int,
    k: int,
    block: tuple[int, int, int],
    threads: int,
    dtype: str = "float16",
    impl: str | None = "cute",
    stages: int = 0,
    trans_b: bool = False,
    accum: str = "float32",
):
    """The paper GEMM (``tile.testsupport.kernels.pipelined_gemm``) with ``T.gemm(impl=impl)``."""
    bm, bn, bk = block
    options = {"trans_b": trans_b, "num_stages": stages, "threads": threads, "accum": accum, "impl": impl}
    return pipelined_gemm(m, n, k, bm, bn, bk, dtype, **options)


def _inputs(m: int, n: int, k: int, dtype: str, trans_b: bool, seed: int):
    import ml_dtypes

    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np_dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np_dtype)
    b_kn = b.astype(np.float32).T if trans_b else b.astype(np.float32)
    return a, b, a.astype(np.float32) @ b_kn


# --------------------------------------------------------------------------- emulated numerics
@needs_cutlass
@needs_cxx
@pytest.mark.parametrize(
    ("shape", "block", "threads", "dtype", "stages", "trans_b"),
    [
        ((128, 128, 64), (128, 128, 32), 128, "float16", 0, False),
        # bf16, B transposed and a 3-stage pipeline in one case: each case compiles CuTe's
        # templates with the host compiler (about 30 s on CI's machine)
        ((128, 64, 96), (64, 64, 32), 128, "bfloat16", 3, True),
    ],
    ids=["f16-128x128x32-4warps", "bf16-64x64x32-transB-pipelined"],
)
def test_cute_gemm_matches_numpy_and_default_impl(monkeypatch, shape, block, threads, dtype, stages, trans_b):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    m, n, k = shape
    a, b, want = _inputs(m, n, k, dtype, trans_b, seed=m + n + k)
    outputs = {}
    for impl in ("cute", None):
        func = gemm_kernel(m, n, k, block, threads, dtype, impl, stages, trans_b)
        kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
        source = kernel.get_kernel_source("cuda")
        assert ("tile_cute::gemm<" in source) == (impl == "cute")
        outputs[impl] = kernel(a, b)
    np.testing.assert_allclose(outputs["cute"], want, rtol=1e-3, atol=1e-3)
    # same products, same fp32 accumulation order per mma: the two impls agree closely
    np.testing.assert_allclose(outputs["cute"], outputs[None], rtol=1e-5, atol=1e-4)


# --------------------------------------------------------------------------- compile only
@needs_cutlass
@needs_nvcc
def test_cute_gemm_sm80_sass_has_hmma(monkeypatch):
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    func = gemm_kernel(128, 128, 64, (128, 128, 32), 128)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
    source = kernel.get_kernel_source("cuda")
    assert '#include "tile_cuda/cute.h"' in source and "tile_cute::gemm<tile_cute::MmaF16F32" in source
    assert "asm volatile" not in source  # the MMA goes through tile_cuda/mma.h
    sass = kernel.get_kernel_source("sass")
    assert "HMMA.16816.F32" in sass


# --------------------------------------------------------------------------- typed errors
def _compile(func, target=SM80):
    return tilelang.compile(func, out_idx=[-1], target=target)



def test_impl_missing_on_target_names_line_and_alternatives():
    with pytest.raises(UnsupportedOnTargetError) as info:
        _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128, impl="cute"), target="cpu")
    message = str(info.value)
    assert "impl='cute'" in message and "'tile'" in message
    assert info.value.location is not None and info.value.location.line > 0
    with pytest.raises(UnsupportedOnTargetError, match=r"'ck'.*'tile', 'cute'"):
        _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128, impl="ck"))


def test_impl_tile_is_the_default():
    default = _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128, impl=None)).get_kernel_source("cuda")
    named = _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128, impl="tile")).get_kernel_source("cuda")
    assert default == named and "tile_cute" not in default


@needs_cutlass
def test_cute_refuses_other_dtypes_and_register_operands():
    with pytest.raises(UnsupportedOnTargetError, match="use the default impl"):
        _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128, dtype="float32"))

    with pytest.raises(UnsupportedOnTargetError, match="shared memory"):
        _compile(one_block_gemm(64, 64, 32, a_in_registers=True, impl="cute"))


def test_cute_without_headers_says_how_to_install(monkeypatch):
    monkeypatch.setattr(cute_headers, "cutlass_include_dir", lambda: None)
    from tile.backends.cuda._src import cute

    monkeypatch.setattr(cute, "cutlass_include_dir", lambda: None)
    with pytest.raises(BackendUnavailableError) as info:
        _compile(gemm_kernel(64, 64, 32, (64, 64, 32), 128))
    assert "pip install nvidia-cutlass" in str(info.value.hint)


def test_unknown_gemm_keyword_is_a_type_error():
    with pytest.raises(TileTypeError, match=r"unknown keyword.*bogus"):
        one_block_gemm(64, 64, 32, bogus=1)


def test_tilelang_gemm_options_are_accepted():
    main = one_block_gemm(64, 64, 32, k_pack=1, wg_wait=0, mbar=None, annotations={})
    assert "tile_mma_m16n8k16_f16_f32" in _compile(main).get_kernel_source("cuda")


# --------------------------------------------------------------------------- CuTe's layouts
def _host_program(body: str) -> str:
    """Compile and run a host C++ program that includes cute.h (its MMA wrappers stubbed)."""
    include = cute_headers._cccl_dir()
    if include is None:
        pytest.skip("no libcu++ headers (nvidia-cuda-cccl or a CUDA toolkit)")
    cuda_include = include.parent if include.name == "cccl" else include
    from tile.backends.cuda._src.compiler import INCLUDE_DIR

    prelude = """
#include <cstdint>
#include <cstdio>
#define __device__
#define __forceinline__ inline
static void tile_mma_m16n8k16_f16_f32(float*, const void*, const void*) {}
static void tile_mma_m16n8k16_bf16_f32(float*, const void*, const void*) {}
#include "tile_cuda/cute.h"
using namespace cute;
int main() {
"""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, exe = f"{tmp}/p.cpp", f"{tmp}/p"
        with open(src, "w") as f:
            f.write(prelude + body + "\nreturn 0;\n}\n")
        flags = ["-std=c++17", "-w", f"-I{INCLUDE_DIR}", f"-I{CUTLASS}", f"-I{cuda_include}"]
        flags.append(f"-I{include}")
        subprocess.run([CXX, *flags, src, "-o", exe], check=True, capture_output=True, timeout=300)
        return subprocess.run([exe], check=True, capture_output=True, text=True, timeout=60).stdout


@needs_cutlass
@needs_cxx
def test_cute_swizzle_equals_tile_layout():
    cases = [(64, 64, 128), (32, 32, 64), (64, 128, 128), (32, 64, 32), (16, 128, 64)]
    body = ""
    for rows, cols, swizzle in cases:
        span, bits = swizzle_params(
            make_swizzle_layout([rows, cols], "float16", swizzle), rows, cols, "float16"
        )
        body += (
            f"{{ auto L = tile_cute::operand_layout<true, {rows}, {cols}, {span}, {bits}>();\n"
            f"  for (int r = 0; r < {rows}; ++r) for (int c = 0; c < {cols}; ++c)\n"
            '    printf("%d ", int(L(r, c)));\n'
            '  printf("\\n"); }\n'
            f"{{ auto L = tile_cute::operand_layout<false, {rows}, {cols}, {span}, {bits}>();\n"
            f"  for (int r = 0; r < {rows}; ++r) for (int c = 0; c < {cols}; ++c)\n"
            '    printf("%d ", int(L(c, r)));\n'
            '  printf("\\n"); }\n'
        )
    lines = _host_program(body).splitlines()
    for index, (rows, cols, swizzle) in enumerate(cases):
        layout = make_swizzle_layout([rows, cols], "float16", swizzle)
        width = int(layout.get_output_shape()[-1])
        want = []
        for r in range(rows):
            for c in range(cols):
                pr, pc = (int(x) for x in layout.map_forward_index([r, c]))
                want.append(pr * width + pc)
        for got in (lines[2 * index], lines[2 * index + 1]):  # (MN, K) and the transposed view
            assert [int(x) for x in got.split()] == want, (rows, cols, swizzle)


@needs_cutlass
@needs_cxx
def test_cute_c_partition_matches_backend_model():
    body = """
auto tiled = make_tiled_mma(tile_cute::MmaF16F32{});
Tensor ids = make_identity_tensor(make_shape(Int<32>{}, Int<16>{}));
for (int lane = 0; lane < 32; ++lane) {
  Tensor part = tiled.get_slice(lane).partition_C(ids);  // ((2,2), 2, 2)
  for (int ni = 0; ni < 2; ++ni) for (int mi = 0; mi < 2; ++mi)
    for (int v1 = 0; v1 < 2; ++v1) for (int v0 = 0; v0 < 2; ++v0) {
      auto coord = part(make_coord(make_coord(v0, v1), mi, ni));
      printf("%d %d %d %d %d %d %d\\n", lane, v0, v1, mi, ni, int(get<0>(coord)), int(get<1>(coord)));
    }
}
"""
    rows = _host_program(body).splitlines()
    assert len(rows) == 32 * 16
    for row in rows:
        lane, v0, v1, mi, ni, r, c = (int(x) for x in row.split())
        assert c_partition_coord(lane, v0, v1, mi, ni) == (r, c)
