"""``T.import_source`` on CUDA: the imported code is CUDA C++ printed into the kernel's source.

TileLang's dequantizing GEMMs import ``__device__`` templates with inline PTX
(``lop3.b32``, ``prmt.b32``) and call them with ``T.call_extern``. tile compiled that code
with the host C compiler when the kernel was traced, which rejected it on every target.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda.toolchain import probe_nvcc
from tile.ir.errors import UnsupportedOnTargetError

PLAIN = """
template <typename T>
__device__ T tile_test_fma3(T x, T y) { return x * T(3) + y; }
"""

WITH_PTX = """
__device__ void tile_test_add_ptx(const unsigned *a, unsigned *out) {
  asm volatile("add.u32 %0, %1, %2;" : "=r"(out[0]) : "r"(a[0]), "r"(a[1]));
}
"""

# popc is a PTX instruction the emulator's translation (inline_ptx.INSTRUCTIONS) does not have
WITH_UNKNOWN_PTX = """
__device__ void tile_test_add_ptx(const unsigned *a, unsigned *out) {
  asm volatile("popc.b32 %0, %1;" : "=r"(out[0]) : "r"(a[0]));
}
"""


def fma3_kernel(n: int = 64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        T.import_source(PLAIN)
        with T.Kernel(1, threads=n) as _bx:
            tx = T.get_thread_binding()
            C[tx] = T.call_extern("tile_test_fma3", A[tx], B[tx], dtype="float32")  # TileLang's order

    return main


def ptx_kernel(code: str = WITH_PTX):
    @T.prim_func
    def main(A: T.Tensor((2,), "uint32"), B: T.Tensor((1,), "uint32")):
        T.import_source(code)  # the line the emulator's refusal names
        with T.Kernel(1, threads=32):
            T.call_extern("handle", "tile_test_add_ptx", T.address_of(A[0]), T.address_of(B[0]))

    return main


@pytest.mark.emu
@pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler")
def test_imported_device_template_runs_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")  # the source, not nvcc, is under test here
    kernel = tilelang.compile(fma3_kernel(), out_idx=[2], target={"kind": "cuda", "arch": "sm_80"})
    source = kernel.get_kernel_source()
    # after the header, before the kernel that calls it
    assert (
        source.index('#include "tile_cuda.h"')
        < source.index("tile_test_fma3(T x")
        < source.index("__global__")
    )
    a = np.linspace(-2, 2, 64, dtype="float32")
    b = np.arange(64, dtype="float32")
    np.testing.assert_allclose(kernel(a, b), a * 3 + b, rtol=1e-6)


@pytest.mark.emu
@pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler")
def test_inline_ptx_in_imported_code_runs_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    kernel = tilelang.compile(ptx_kernel(), out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    assert 'asm volatile("add.u32' in kernel.get_kernel_source()  # the source itself is unchanged
    a = np.array([0xFFFFFFF0, 0x25], dtype=np.uint32)
    assert kernel(a)[0] == 0x15  # add.u32 wraps


@pytest.mark.emu
def test_inline_ptx_the_emulator_cannot_translate_is_refused_at_its_line(monkeypatch):
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    says = r"PTX instruction 'popc\.b32'.*asm volatile\(\"popc"
    with pytest.raises(UnsupportedOnTargetError, match=says) as info:
        tilelang.compile(ptx_kernel(WITH_UNKNOWN_PTX), out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    assert info.value.location is not None
    assert "the line the emulator's refusal names" in (info.value.location.source_line or "")
    assert "GPU" in (info.value.hint or "")


@pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not installed")
def test_nvcc_compiles_imported_inline_ptx_for_the_gpu(monkeypatch):
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    kernel = tilelang.compile(ptx_kernel(), out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    assert 'asm volatile("add.u32' in kernel.get_kernel_source()
    assert "add.u32" in kernel.artifact.payload.ptx  # nvcc compiled the imported PTX into the kernel


# CUDA's SIMD-within-a-word intrinsics, which TileLang's BitNet int2 decoder calls (__vsub4)
SIMD = """
__device__ void tile_test_simd(const unsigned *a, unsigned *out) {
  const unsigned x = a[0], y = a[1];
  out[0] = __vadd4(x, y);
  out[1] = __vsub4(x, y);
  out[2] = __vadd2(x, y);
  out[3] = __vsub2(x, y);
  out[4] = __vabsdiffu4(x, y);
  out[5] = __vmaxu4(x, y);
  out[6] = __vminu4(x, y);
  out[7] = __vmaxs4(x, y);
  out[8] = __vmins4(x, y);
  out[9] = __byte_perm(x, y, 0x7351);
  out[10] = __funnelshift_l(x, y, 12);
  out[11] = __funnelshift_r(x, y, 36);
}
"""


def _lanes(x: int, y: int, bits: int, f) -> int:
    mask = (1 << bits) - 1
    return sum((f((x >> s) & mask, (y >> s) & mask) & mask) << s for s in range(0, 32, bits))


def _signed8(v: int) -> int:
    return v - 256 if v >= 128 else v


def _simd_reference(x: int, y: int) -> list[int]:
    both = (y << 32) | x
    return [
        _lanes(x, y, 8, lambda p, q: p + q),
        _lanes(x, y, 8, lambda p, q: p - q),
        _lanes(x, y, 16, lambda p, q: p + q),
        _lanes(x, y, 16, lambda p, q: p - q),
        _lanes(x, y, 8, lambda p, q: abs(p - q)),
        _lanes(x, y, 8, max),
        _lanes(x, y, 8, min),
        _lanes(x, y, 8, lambda p, q: p if _signed8(p) > _signed8(q) else q),
        _lanes(x, y, 8, lambda p, q: p if _signed8(p) < _signed8(q) else q),
        sum(((both >> (8 * ((0x7351 >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4)),
        ((both << 12) >> 32) & 0xFFFFFFFF,
        (both >> (36 & 31)) & 0xFFFFFFFF,  # the shift is taken modulo 32
    ]


@pytest.mark.emu
@pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler")
@pytest.mark.parametrize(
    "words", [(0x7F80FF01, 0x0281FE7F), (0x00000000, 0xFFFFFFFF), (0x12345678, 0x9ABCDEF0)]
)
def test_simd_word_intrinsics_run_on_the_emulator(words, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")

    @T.prim_func
    def main(A: T.Tensor((2,), "uint32"), B: T.Tensor((12,), "uint32")):
        T.import_source(SIMD)
        with T.Kernel(1, threads=32):
            T.call_extern("handle", "tile_test_simd", T.address_of(A[0]), T.address_of(B[0]))

    kernel = tilelang.compile(main, out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    got = kernel(np.array(words, dtype=np.uint32))
    assert [int(v) for v in got] == _simd_reference(*words)
