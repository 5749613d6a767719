"""The ROCm examples run under emulation (TILE_DEVICE=emu) as wave64 and match numpy.

The generated HIP source, unchanged, is compiled with the host C++ compiler against this
package's emulated ``tile_hip.h`` and launched with 64-lane waves: reductions shuffle across
64 lanes, and every MFMA is computed by ``emu/native/simt_mfma.cpp`` from the AMD register
tables (not from tile-layout). No hipcc is needed for these tests.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest
from _rocm_kernels import (
    half_column_max_kernel,
    hide_hip_compilers,
    int8_gemm_kernel,
    register_operands_gemm_kernel,
    split_k_gemm_kernel,
)

import tile.lang as tilelang
from tile.backends.rocm import RocmLaunchError
from tile.layout.errors import TileError
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import matmul_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.markers import needs_host_cxx
from tile.testsupport.references import attention as attention_reference

pytestmark = needs_host_cxx
TARGET = {"kind": "hip", "mcpu": "gfx90a"}


@pytest.fixture(autouse=True)
def _emulate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")


@functools.cache
def _compiled(name: str) -> Any:
    factories = {
        "gemm": lambda: matmul_kernel(128, 128, 64, block_M=64, block_N=64, block_K=32, threads=256),
        "gemm_bf16": lambda: matmul_kernel(64, 128, 64, "bfloat16", block_M=64, block_N=64, threads=128),
        "gemm_one_wave": lambda: matmul_kernel(32, 48, 32, block_M=32, block_N=48, block_K=32, threads=64),
        "softmax": lambda: softmax_kernel(64, 256, "float16"),
        "rms_norm": lambda: rms_norm_kernel(64, 256, "float16"),
        "flash_attention": lambda: flash_attention_kernel(
            1, 2, 128, 64, False, block_M=64, block_N=64, threads=128
        ),
        "flash_attention_causal": lambda: flash_attention_kernel(
            1, 1, 128, 64, True, block_M=64, block_N=64, threads=128
        ),
    }
    return tilelang.compile(factories[name](), out_idx=[-1], target=TARGET)


def _rng() -> np.random.Generator:
    return np.random.default_rng(8)


@pytest.mark.parametrize(
    ("name", "m", "n", "k", "dtype"),
    [
        ("gemm", 128, 128, 64, np.float16),
        ("gemm_one_wave", 32, 48, 32, np.float16),
    ],
)
def test_rocm_emu_gemm_matches_numpy(name: str, m: int, n: int, k: int, dtype: Any) -> None:
    rng = _rng()
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = _compiled(name)(a, b)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-3, atol=2e-2)


def test_rocm_emu_bf16_gemm_matches_numpy() -> None:
    import torch

    rng = _rng()
    a = torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float32)).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal((64, 128)).astype(np.float32)).to(torch.bfloat16)
    c = _compiled("gemm_bf16")(a, b)
    want = a.float().numpy() @ b.float().numpy()
    np.testing.assert_allclose(c.float().numpy(), want, rtol=1e-2, atol=1e-1)


def test_rocm_emu_split_k_matches_numpy() -> None:
    rng = _rng()
    a = rng.standard_normal((64, 256)).astype(np.float16)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)  # an input: the four K slices add into it atomically
    kernel = tilelang.compile(split_k_gemm_kernel(64, 64, 256, 4, block_M=64, block_N=64), target=TARGET)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-3)


def test_rocm_emu_softmax_and_rms_norm_rows() -> None:
    rng = _rng()
    x = rng.standard_normal((64, 256)).astype(np.float16)
    y = _compiled("softmax")(x).astype(np.float32)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-2, atol=1e-3)
    w = rng.standard_normal(256).astype(np.float16)
    y = _compiled("rms_norm")(x, w).astype(np.float32)
    want = xf / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float32)
    np.testing.assert_allclose(y, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", ["flash_attention", "flash_attention_causal"])
def test_rocm_emu_flash_attention_matches_numpy(name: str) -> None:
    heads = 2 if name == "flash_attention" else 1
    causal = name.endswith("causal")
    rng = _rng()
    q, k, v = (rng.standard_normal((1, 128, heads, 64)).astype(np.float16) for _ in range(3))
    out = _compiled(name)(q, k, v).astype(np.float32)
    np.testing.assert_allclose(out, attention_reference(q, k, v, causal), rtol=2e-2, atol=2e-2)


def _emulated_with_source(name: str, source: str) -> Any:
    from tile.backends.rocm._src.emulation import EmulatedHipKernel

    built = _compiled(name)
    binary = built.artifact.payload
    return EmulatedHipKernel(source, binary.recipe, binary.params)


@pytest.mark.parametrize(
    ("name", "wrapper", "m", "n", "k"),
    [
        ("gemm", "tile_mfma_f32_32x32x8_f16", 128, 128, 64),  # 4 waves, 64x64 each: 32x32 tiles
        ("gemm_one_wave", "tile_mfma_f32_16x16x16_f16", 32, 48, 32),  # 48 columns: 16x16 tiles
    ],
)
def test_rocm_emu_wrong_mfma_operand_mapping_is_caught(
    name: str, wrapper: str, m: int, n: int, k: int
) -> None:
    """Fault injection: the A registers fed to the MFMA in the B slot (and B in A's) gives wrong C."""
    source = _compiled(name).get_kernel_source("hip")
    call = re.compile(rf"{wrapper}\(([^,]+), (\(&\([^)]*\)\)), (\(&\([^)]*\)\))\);")
    swapped, count = call.subn(rf"{wrapper}(\1, \3, \2);", source)
    assert count > 0, "the fault could not be injected: no MFMA call found"
    rng = _rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    good = np.zeros((m, n), np.float16)
    _emulated_with_source(name, source)(a, b, good)
    np.testing.assert_allclose(good.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    bad = np.zeros((m, n), np.float16)
    _emulated_with_source(name, swapped)(a, b, bad)
    assert np.abs(bad.astype(np.float32) - want).max() > 1.0


@pytest.mark.parametrize(
    ("name", "mask", "m", "n", "k"),
    [
        ("gemm", 31, 128, 128, 64),  # the 32x32x8 path: rows from lane % 32
        ("gemm_one_wave", 15, 32, 48, 32),  # the 16x16x16 path: rows from lane % 16
    ],
)
def test_rocm_emu_wrong_lane_of_a_operand_is_caught(name: str, mask: int, m: int, n: int, k: int) -> None:
    """Fault injection: A's rows read from lane % T + 1 (an off-by-one fragment row) gives wrong C."""
    source = _compiled(name).get_kernel_source("hip")
    broken, count = re.subn(
        rf"\(\(\(int\)threadIdx\.x\) & {mask}\) \* 32\)", f"((((int)threadIdx.x) + 1) & {mask}) * 32)", source
    )
    assert count > 0, "the fault could not be injected: no A row index found"
    rng = _rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = np.zeros((m, n), np.float16)
    _emulated_with_source(name, broken)(a, b, out)
    assert np.abs(out.astype(np.float32) - a.astype(np.float32) @ b.astype(np.float32)).max() > 1.0


def test_rocm_emu_rejects_bad_arguments_with_a_typed_error() -> None:
    with pytest.raises(TileError, match="float16"):
        _compiled("softmax")(np.zeros((64, 256), np.float32))
    binary = _compiled("softmax").artifact.payload
    emulated = _emulated_with_source("softmax", binary.source)
    with pytest.raises(RocmLaunchError, match="emulated wave64"):
        emulated(np.zeros((64, 256), np.float16))  # Y missing: the raw kernel takes X and Y


@pytest.mark.parametrize("fmt", ["fp4", "int4"])
def test_rocm_emu_dequant_gemm_matches_numpy(fmt: str) -> None:
    """The dequantized weights are the MFMA's register A operand, read in place."""
    from tile.ops.dequant_gemm import dequant_gemm_kernel, dequantize, pack_4bit

    m, n, k = 64, 128, 128
    rng = _rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    packed = pack_4bit(rng.integers(0, 16, size=(n, k)).astype(np.uint8))
    kernel = tilelang.compile(dequant_gemm_kernel(m, n, k, fmt, threads=256), out_idx=[-1], target=TARGET)
    assert "_lds" not in kernel.get_kernel_source("hip"), "the A operand is not staged through LDS"
    args: list[Any] = [a, packed]
    scale = None
    if fmt == "int4":
        scale = (rng.random((n, k // 32)) + 0.5).astype(np.float16)
        args.append(scale)
    ct = kernel(*args).astype(np.float32)
    want = dequantize(packed, fmt, scale) @ a.astype(np.float32).T
    np.testing.assert_allclose(ct, want, rtol=2e-2, atol=2e-1)


def test_rocm_emu_half_column_max() -> None:
    x = _rng().standard_normal((4, 64)).astype(np.float16)
    y = tilelang.compile(half_column_max_kernel(), out_idx=[-1], target=TARGET)(x)
    np.testing.assert_array_equal(y, x.max(axis=0))


def test_rocm_emu_gemm_of_register_operands() -> None:
    """Both operands in registers (the MFMA operand layouts), one wave, one MFMA per k-step (a
    one-statement body, which TVM's SeqStmt refuses): the MFMA reads them in place."""
    kernel = tilelang.compile(register_operands_gemm_kernel(), out_idx=[-1], target=TARGET)
    assert "_lds" not in kernel.get_kernel_source("hip")
    rng = _rng()
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    np.testing.assert_allclose(
        kernel(a, b), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4
    )


@pytest.mark.parametrize(
    ("m", "n", "k", "dtype", "blocks"),
    [
        (64, 64, 64, "float32", (32, 32, 32, 128)),  # no MFMA for fp32 here
        (32, 32, 16, "float16", (16, 16, 8, 128)),  # K=8 and 2 waves on a 16x16 tile: no 16x16x16 split
    ],
)
def test_rocm_emu_gemm_without_an_mfma_fit_falls_back_to_simt(m, n, k, dtype, blocks) -> None:
    bm, bn, bk, threads = blocks
    func = matmul_kernel(m, n, k, dtype, block_M=bm, block_N=bn, block_K=bk, threads=threads)
    kernel = tilelang.compile(func, out_idx=[-1], target=TARGET)
    assert "tile_mfma" not in kernel.get_kernel_source("hip")
    rng = _rng()
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize(
    ("name", "wrapper"),
    [
        ("gemm", "tile_mfma_f32_32x32x8_f16"),
        ("gemm_bf16", "tile_mfma_f32_32x32x8_bf16"),
        ("flash_attention", "tile_mfma_f32_32x32x8_f16"),
        ("gemm_one_wave", "tile_mfma_f32_16x16x16_f16"),
    ],
)
def test_rocm_emu_gemm_picks_32x32_mfma_where_wave_tiles_split(name: str, wrapper: str) -> None:
    """The kernels the numeric tests above run: which MFMA each uses (layout_rules.mfma_tiling)."""
    source = _compiled(name).get_kernel_source("hip")
    assert set(re.findall(r"tile_mfma_\w+", source)) == {wrapper}


@pytest.mark.parametrize(("dtype", "wrapper"), [("float16", "tile_mfma_f32_32x32x8_f16"),
                                                ("int8", "tile_mfma_i32_32x32x8_i8")])  # fmt: skip
def test_rocm_emu_32x32_gemm_of_register_operands(dtype: str, wrapper: str) -> None:
    """One wave, a 32x32 tile, A and B in registers in the 32x32x8 operand layouts: read in place."""
    accum = "int32" if dtype == "int8" else "float32"
    func = register_operands_gemm_kernel(32, 32, 32, dtype=dtype, accum=accum)
    kernel = tilelang.compile(func, out_idx=[-1], target=TARGET)
    source = kernel.get_kernel_source("hip")
    assert "_lds" not in source and "_staged" not in source
    assert set(re.findall(r"tile_mfma_\w+", source)) == {wrapper}
    rng = _rng()
    if dtype == "int8":
        a = rng.integers(-128, 128, (32, 32)).astype(np.int8)
        b = rng.integers(-128, 128, (32, 32)).astype(np.int8)
        np.testing.assert_array_equal(kernel(a, b), a.astype(np.int32) @ b.astype(np.int32))
    else:
        a = rng.standard_normal((32, 32)).astype(np.float16)
        b = rng.standard_normal((32, 32)).astype(np.float16)
        want = a.astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(kernel(a, b), want, rtol=1e-5, atol=1e-4)


@pytest.fixture
def _no_hipcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """Build source only (no compiler found): the emulator runs the HIP source."""
    from tile.backends.rocm._src import backend

    hide_hip_compilers(monkeypatch, tmp_path)
    monkeypatch.setenv("TILE_CACHE", "0")
    backend._compiler_present.cache_clear()
    yield
    backend._compiler_present.cache_clear()


# (arch, block_M, block_N, threads) -> the MFMA: 64x64 on 2 waves splits into 32x32 tiles,
# 32x48 on one wave only into 16x16 ones. CDNA3 (gfx942) has only the K=32 / K=16 int8 forms.
INT8_CASES = [
    ("gfx90a", 64, 64, 128, "tile_mfma_i32_32x32x8_i8"),
    ("gfx90a", 32, 48, 64, "tile_mfma_i32_16x16x16_i8"),
    ("gfx942", 64, 64, 128, "tile_mfma_i32_32x32x16_i8"),
    ("gfx942", 32, 48, 64, "tile_mfma_i32_16x16x32_i8"),
]


@pytest.mark.parametrize(("arch", "bm", "bn", "threads", "wrapper"), INT8_CASES)
def test_rocm_emu_int8_gemm_is_exact(
    _no_hipcc: Any, arch: str, bm: int, bn: int, threads: int, wrapper: str
) -> None:
    m, n, k = 64, 2 * bn, 64  # whole blocks: test_rocm_emu_ragged_int8_gemm_is_exact has partial ones
    func = int8_gemm_kernel(m, n, k, block_M=bm, block_N=bn, threads=threads)
    kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "hip", "mcpu": arch})
    assert set(re.findall(r"tile_mfma_\w+", kernel.get_kernel_source("hip"))) == {wrapper}
    rng = _rng()
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0, :] = -128  # the extremes: -128 * -128 summed over K
    b[:, 0] = -128
    c = kernel(a, b)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


# (M, N, K, block_M, block_N, threads): a partial last block of rows, of both, and of K.
# The zero-filled tail copies of the int8 tiles are 8- and 16-byte vectors whose 0 arm TVM's
# CUDA C generator printed as make_int2/make_int4 with one argument per byte, and whose
# shared index CSE bound to an int32x16 variable ("Cannot convert type T.int32x16 to
# CUDA type"): tile/ir/gpu/legalize_vectors.py.
RAGGED_INT8 = [
    (100, 64, 64, 64, 64, 256),
    (100, 64, 64, 64, 64, 128),
    (100, 100, 100, 64, 64, 256),
    (96, 80, 64, 32, 48, 64),
]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "threads"), RAGGED_INT8)
def test_rocm_emu_ragged_int8_gemm_is_exact(
    _no_hipcc: Any, arch: str, m: int, n: int, k: int, bm: int, bn: int, threads: int
) -> None:
    func = int8_gemm_kernel(m, n, k, block_M=bm, block_N=bn, threads=threads)
    kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "hip", "mcpu": arch})
    assert "tile_mfma_i32" in kernel.get_kernel_source("hip")
    rng = _rng()
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[-1, :] = -128  # the extremes, in the partial block
    b[:, -1] = -128
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.int32) @ b.astype(np.int32))


def test_rocm_emu_int8_k32_gemm_of_register_operands(_no_hipcc: Any) -> None:
    """gfx942: int8 A and B in registers in the 16x16x32 layout (8 bytes per lane), read in place."""
    func = register_operands_gemm_kernel(16, 16, 64, dtype="int8", accum="int32")
    kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "hip", "mcpu": "gfx942"})
    source = kernel.get_kernel_source("hip")
    assert "_lds" not in source and "_staged" not in source
    assert set(re.findall(r"tile_mfma_\w+", source)) == {"tile_mfma_i32_16x16x32_i8"}
    rng = _rng()
    a = rng.integers(-128, 128, (16, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 16)).astype(np.int8)
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.int32) @ b.astype(np.int32))
