"""The HIP renderer on CUDA-dialect text as TVM prints it, and both tile_hip.h headers on the result.

The snippet uses every name the renderer maps or tile_hip.h takes over from TVM's CUDA prelude
(bf16 vectors and their make/pack helpers, half4, max/min, CUDART_INF_F, uint, aligned
__shared__); it must compile with hipcc (device header) and with the host compiler against the
emulator's header.
"""

from __future__ import annotations

import pytest

from tile.backends.rocm._src.codegen import render_hip
from tile.ir.errors import BackendError
from tile.testsupport.markers import needs_host_cxx

TVM_TEXT = """// TVM's CUDA prelude, dropped by the renderer
#include <cuda_fp16.h>
__device__ half max(half a, half b) { return a; }
extern "C" __global__ void __launch_bounds__(64) k(half* H, nv_bfloat16* Bf, float* F) {
  __shared__ alignas(16) float s[64];
  uint t = (uint)threadIdx.x;
  s[t] = max(F[t], -CUDART_INF_F);
  __syncthreads();
  F[t] = min(s[63 - t], s[t]);
  half4 h4 = make_half4(H[0], H[1], H[2], H[3]);
  H[4 + t % 4] = max(h4.x, h4.w);
  nv_bfloat162 p = make_nv_bfloat162(Bf[0], Bf[1]);
  nv_bfloat164 q = make_nv_bfloat164(Bf[0], Bf[1], Bf[2], Bf[3]);
  *(uint*)(Bf + 8 + 2 * (t % 4)) = __pack_nv_bfloat162(p.y, q.w);
  Bf[16 + t % 8] = __float2bfloat16_rn(__bfloat162float(Bf[t % 8]) * 2.0f);
}
"""


def test_rocm_render_maps_tvm_prelude_names() -> None:
    hip = render_hip(TVM_TEXT, "k", "gfx90a")
    assert hip.count('#include "tile_hip.h"') == 1 and "cuda_fp16" not in hip
    assert "nv_bfloat16 " not in hip and "tile_bf162 p = make_tile_bf162(" in hip
    assert "tile_bf164 q = make_tile_bf164(" in hip
    assert "__shared__ __attribute__((aligned(16))) float s[64]" in hip
    assert "tile::max(F[t], -CUDART_INF_F)" in hip and "tile::min(" in hip


def test_rocm_render_refuses_cuda_only_text() -> None:
    with pytest.raises(BackendError, match="inline assembly"):
        render_hip(TVM_TEXT.replace("__syncthreads();", 'asm volatile("bar.sync 0;");'), "k", "gfx90a")
    with pytest.raises(BackendError, match="no __global__ kernel"):
        render_hip("int x;\n", "k", "gfx90a")


def test_rocm_rendered_names_compile_with_hipcc() -> None:
    from _rocm_kernels import need_compiler

    from tile.backends.rocm._src.compiler import compile_code_object

    need_compiler("gfx90a")
    code, _stats = compile_code_object(render_hip(TVM_TEXT, "k", "gfx90a"), "gfx90a", "k")
    assert code[:4] == b"\x7fELF"


@needs_host_cxx
def test_rocm_rendered_names_compile_for_the_emulator() -> None:
    from tile.backends.cpu import simt
    from tile.backends.rocm.emu import DEVICE

    assert simt.kernel_library(render_hip(TVM_TEXT, "k", "gfx90a"), "k", DEVICE).exists()
