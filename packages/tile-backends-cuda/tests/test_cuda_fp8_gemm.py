"""``T.gemm`` on fp8 (e4m3, e5m2) operands with float32 accumulators, sm_89 and sm_90a.

* Reference: an exact numpy decoder of the OCP fp8 bytes (checked against every code
  torch converts, and by hand on 448, NaN and the smallest subnormal); products of fp8
  values are exact in float64, so the kernel's float32 sums are compared at float32 precision.
* Compile checks (nvcc + nvdisasm): the sm_89 cubin multiplies with ``QMMA.16832.F32.E4M3``
  (mma.sync m16n8k32), the sm_90a one with ``QGMMA.64xNx32.F32.E4M3`` (wgmma m64nNk32).
* Descriptor oracle: every byte a K-major fp8 wgmma reads through our descriptor
  (``isa_tables.wgmma_smem_addr`` with 8-bit elements) is the element our layout stores there.
* Emulator runs (``TILE_DEVICE=emu``): the generated CUDA source, unchanged, against the reference,
  with B stored (N, K) (``transpose_B=True``) and, on sm_89, (K, N); hand-checked edge cases.
  On sm_90a a B stored (K, N) is a typed error at the gemm's line (wgmma reads 8-bit operands
  K-major only).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON

import tile.lang as tilelang
from tile.backends.cuda._src.hopper import operand_desc
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang.demo import matmul as paper_gemm
from tile.layout import SwizzledLayout, make_swizzled_layout
from tile.ops.gemm import GemmConfig, fp8_matmul_kernel
from tile.testsupport import isa_tables as isa
from tile.testsupport.markers import needs_host_cxx

torch = pytest.importorskip("torch")

FP8 = {"float8_e4m3fn": (4, 3), "float8_e5m2": (5, 2)}


def decode_fp8(codes: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values of fp8 bytes (OCP OFP8 v1.0): e4m3fn has no infinities and one NaN code per
    sign (S.1111.111); e5m2 is IEEE-like (exponent 31: inf or NaN)."""
    exp_bits, man_bits = FP8[dtype]
    bias = (1 << (exp_bits - 1)) - 1
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> man_bits) & ((1 << exp_bits) - 1)
    mantissa = codes & ((1 << man_bits) - 1)
    normal = (1.0 + mantissa / (1 << man_bits)) * np.exp2(exponent - bias)
    subnormal = mantissa / (1 << man_bits) * np.exp2(1 - bias)
    value = sign * np.where(exponent == 0, subnormal, normal)
    top = exponent == (1 << exp_bits) - 1
    if dtype == "float8_e4m3fn":
        return np.where(top & (mantissa == (1 << man_bits) - 1), np.nan, value)
    return np.where(top, np.where(mantissa == 0, sign * np.inf, np.nan), value)


def fp8_bytes(x: Any) -> np.ndarray:
    return x.view(torch.uint8).numpy()


def reference(a: Any, b: Any, transpose_b: bool, dtype: str) -> np.ndarray:
    av = decode_fp8(fp8_bytes(a), dtype)
    bv = decode_fp8(fp8_bytes(b), dtype)
    return av @ (bv.T if transpose_b else bv)


@pytest.mark.parametrize("dtype", sorted(FP8))
def test_decoder_agrees_with_torch_on_every_code(dtype: str) -> None:
    codes = np.arange(256, dtype=np.uint8)
    ours = decode_fp8(codes, dtype)
    theirs = torch.from_numpy(codes).view(getattr(torch, dtype)).to(torch.float64).numpy()
    np.testing.assert_array_equal(ours, theirs)  # NaNs in the same places


def test_decoder_hand_checked_codes() -> None:
    e4m3 = decode_fp8(np.array([0x7E, 0xFE, 0x7F, 0xFF, 0x01, 0x08, 0x38], np.uint8), "float8_e4m3fn")
    assert e4m3[0] == 448.0 and e4m3[1] == -448.0  # the largest finite e4m3 value
    assert np.isnan(e4m3[2]) and np.isnan(e4m3[3])  # S.1111.111
    assert e4m3[4] == 2.0**-9 and e4m3[5] == 2.0**-6 and e4m3[6] == 1.0
    e5m2 = decode_fp8(np.array([0x7B, 0x7C, 0x7D, 0x01], np.uint8), "float8_e5m2")
    assert e5m2[0] == 57344.0 and e5m2[1] == np.inf and np.isnan(e5m2[2]) and e5m2[3] == 2.0**-16


@pytest.mark.parametrize("dtype", sorted(FP8))
def test_fp8_mma_fragments_are_the_isa_tables(dtype: str) -> None:
    # the operand registers tile's mma.sync lowering fills for fp8 (PTX: the m16n8k32 .s8 layout,
    # "also e4m3/e5m2"), element by element against the repository's ISA oracle
    from tile.layout.hardware import mma_fragment

    for which, oracle, elems in (("A", isa.mma_m16n8k32_s8_a, 16), ("B", isa.mma_m16n8k32_s8_b, 8)):
        table = {
            (thread, local[0]): coord
            for coord, _, thread, local in mma_fragment(which, dtype).enumerate_threads()
        }
        assert table == {(lane, i): oracle(lane, i) for lane in range(32) for i in range(elems)}, which


def fp8_gemm(
    M: int,
    N: int,
    K: int,
    dtype: str = "float8_e4m3fn",
    transpose_b: bool = True,
    block: tuple[int, int, int] = (64, 64, 64),
    threads: int = 128,
    stages: int = 2,
) -> Any:
    """``C = A @ B`` with a float32 C: B stored (N, K) and read K-major (``transpose_B=True``, the
    library's fp8 kernel given B's transpose), or B stored (K, N) straight into ``T.gemm`` (the
    paper's GEMM)."""
    if transpose_b:
        return fp8_matmul_kernel(M, N, K, dtype, "float32", GemmConfig(*block, stages, threads))
    return paper_gemm(
        M, N, K, *block, dtype, "float32", out_dtype="float32", num_stages=stages, threads=threads
    )


def _random_fp8(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> Any:
    # spread over fp8's range (normals, subnormals, zeros), clear of overflow
    values = rng.standard_normal(shape) * np.exp2(rng.integers(-8, 5, shape))
    return torch.from_numpy(values.astype(np.float32)).to(getattr(torch, dtype))


def _run(
    arch: str, M: int, N: int, K: int, dtype: str, transpose_b: bool, a: Any, b: Any, **kw: Any
) -> np.ndarray:
    kernel = tilelang.compile(
        fp8_gemm(M, N, K, dtype, transpose_b, **kw), out_idx=[-1], target={"kind": "cuda", "arch": arch}
    )
    return np.asarray(kernel(a, b))


# --------------------------------------------------------------------------- compile (nvcc)
@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
@pytest.mark.parametrize("transpose_b", [True, False])
def test_sm89_fp8_gemm_runs_on_qmma(transpose_b: bool) -> None:
    kernel = tilelang.compile(
        fp8_gemm(256, 256, 256, transpose_b=transpose_b), target={"kind": "cuda", "arch": "sm_89"}
    )
    binary = kernel.artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    # 4 warps of 32x32 (2 x 4 m16n8 tiles), 2 k32 steps per 64-wide K tile: 16 per K tile
    # (nvcc may unroll the 4 K tiles)
    count = len(re.findall(r"\bQMMA\.16832\.F32\.E4M3\.E4M3\b", sass))
    assert count in (16, 64), count
    assert not re.search(r"\bHMMA\b", sass)
    if transpose_b:  # both operands K-contiguous: every operand comes in through ldmatrix
        assert re.search(r"\bLDSM\.16\.M88\.4\b", sass)


@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
def test_sm90a_fp8_gemm_runs_on_qgmma() -> None:
    kernel = tilelang.compile(
        fp8_gemm(256, 256, 512, block=(128, 128, 128), threads=256, stages=3),
        target={"kind": "cuda", "arch": "sm_90a"},
    )
    binary = kernel.artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    # two warpgroups of 64x128 each: one m64n128k32 per 32 of K
    assert re.search(r"\bQGMMA\.64x128x32\.F32\.E4M3\.E4M3\b", sass), "no fp8 wgmma"
    assert not re.search(r"\b[HQ]MMA\b", sass), "an fp8 gemm on sm_90a fell back to mma.sync"


@pytest.mark.parametrize("shape", [(64, 32), (64, 64), (64, 128)])  # 32B, 64B, 128B swizzles
def test_fp8_descriptor_reads_what_the_layout_stores(shape: tuple[int, int]) -> None:
    # a K-major (MN, K) fp8 tile under the layout T.gemm gives it; k32 steps of one byte per element
    layout = make_swizzled_layout(list(shape), "float8_e4m3fn")
    assert isinstance(layout, SwizzledLayout)
    rows, cols = shape
    desc = operand_desc(layout, rows, True)
    width = int(layout.get_output_shape()[-1])

    def byte(row: int, col: int) -> int:
        out = [int(e) for e in layout.map_forward_index([row, col])]
        return out[0] * width + out[1]

    for mn0 in range(0, rows, 64):
        for k0 in range(0, cols, 32):
            start = byte(mn0, k0)
            for mn in range(64):
                for k in range(32):
                    read = isa.wgmma_smem_addr(
                        start, "K", desc.swizzle_bytes, mn, k, 8, desc.lbo_bytes, desc.sbo_bytes
                    )
                    assert read == byte(mn0 + mn, k0 + k), (mn0, k0, mn, k)


# --------------------------------------------------------------------------- emulator
@pytest.mark.parametrize(
    ("arch", "dtype", "transpose_b"),
    [
        ("sm_89", "float8_e4m3fn", True),
        ("sm_89", "float8_e4m3fn", False),
        ("sm_89", "float8_e5m2", True),
        ("sm_90a", "float8_e4m3fn", True),
        ("sm_90a", "float8_e5m2", True),
    ],
)
@pytest.mark.emu
@needs_host_cxx
def test_fp8_gemm_matches_exact_reference(arch: str, dtype: str, transpose_b: bool) -> None:
    M, N, K = 128, 64, 192
    rng = np.random.default_rng(7)
    a = _random_fp8(rng, (M, K), dtype)
    b = _random_fp8(rng, (N, K) if transpose_b else (K, N), dtype)
    kernel = tilelang.compile(
        fp8_gemm(M, N, K, dtype, transpose_b), out_idx=[-1], target={"kind": "cuda", "arch": arch}
    )
    wrapper = "tile_wgmma_m64n64k32_ss_" if arch == "sm_90a" else "tile_mma_m16n8k32_"
    assert wrapper + dtype.split("_")[1].removesuffix("fn") in kernel.get_kernel_source("cuda")
    c = np.asarray(kernel(a, b))
    want = reference(a, b, transpose_b, dtype)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.emu
@needs_host_cxx
def test_fp8_gemm_edge_values_sm89() -> None:
    # hand-checked: 448 (the largest finite e4m3) times 448 summed over K = 64 is 448^2 * 64
    # (exact in float32); a NaN operand makes its row of C NaN and leaves the others alone
    M = N = K = 64
    a = torch.full((M, K), 1.0).to(torch.float8_e4m3fn)
    a[0, :] = 448.0
    a[1, 5] = float("nan")
    a[2, :] = -(2.0**-9)  # the smallest e4m3 subnormal
    b = torch.full((N, K), 448.0).to(torch.float8_e4m3fn)
    c = _run("sm_89", M, N, K, "float8_e4m3fn", True, a, b, block=(64, 64, 32))
    assert np.all(c[0] == 448.0 * 448.0 * 64)
    assert np.all(np.isnan(c[1]))
    assert np.all(c[2] == -(2.0**-9) * 448.0 * 64)
    assert np.all(c[3:] == 448.0 * 64)


def test_sm90a_fp8_b_stored_k_by_n_is_a_typed_error_at_the_gemm() -> None:
    with pytest.raises(UnsupportedOnTargetError) as info:
        tilelang.compile(
            fp8_gemm(128, 128, 128, transpose_b=False), target={"kind": "cuda", "arch": "sm_90a"}
        )
    error = info.value
    assert "K-major only" in str(error) and "B_shared" in str(error)
    assert "transpose_B=True" in error.hint
    assert error.location is not None and "T.gemm(A_shared, B_shared" in (error.location.source_line or "")


# --------------------------------------------------------------------------- GPU twin
@pytest.mark.gpu
@pytest.mark.parametrize("b_column_major", [True, False])
def test_fp8_matmul_on_the_gpu(b_column_major: bool) -> None:
    # tile.ops.matmul on device tensors (the arch of the GPU here: sm_89 mma.sync, sm_90a wgmma)
    # against the exact product; skips on GPUs without fp8 tensor cores
    import tile.ops

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 tensor cores need sm_89 or newer")
    rng = np.random.default_rng(11)
    m, k, n = 1000, 1024, 768  # M not a multiple of any tile
    a = _random_fp8(rng, (m, k), "float8_e4m3fn")
    weight = _random_fp8(rng, (n, k), "float8_e4m3fn")
    b = weight.t() if b_column_major else weight.t().contiguous()
    c = tile.ops.matmul(a.cuda(), b.cuda(), out_dtype=torch.float32).cpu().numpy()
    want = reference(a, weight, True, "float8_e4m3fn")
    # fp8 tensor cores may add their products in less than float32 precision
    np.testing.assert_allclose(c, want, rtol=2.0**-10, atol=2.0**-10 * np.abs(want).max())
