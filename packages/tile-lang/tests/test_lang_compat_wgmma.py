"""TileLang's hand-built wgmma descriptors (``T.alloc_wgmma_desc``,
``T.initialize_wgmma_descriptor``) and ``T.wgmma_mma``: descriptor bits checked against
PTX's "Matrix Descriptor Format" table on the CUDA emulator, ``T.wgmma_mma`` against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import TileTypeError
from tile.testsupport.kernels import one_block_gemm
from tile.testsupport.markers import needs_backend


@T.prim_func
def _descriptors(Out: T.Tensor((3,), "uint64")):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((4096,), "float16")
        d0 = T.alloc_wgmma_desc()
        d1 = T.alloc_wgmma_desc()
        d2 = T.alloc_wgmma_desc()
        T.initialize_wgmma_descriptor(d0, S, 1, 1, 64)  # 128B swizzle, LBO 16 B, SBO 1024 B
        T.initialize_wgmma_descriptor(d1, T.access_ptr(S[512]), 2, 2, 32)  # +1024 B
        T.initialize_wgmma_descriptor(d2, S[8], 0, 8, 16)  # +16 B
        if T.get_thread_binding() == 0:
            Out[0] = d0[0]
            Out[1] = d1[0]
            Out[2] = d2[0]


def _fields(desc: int) -> dict[str, int]:
    """PTX Matrix Descriptor Format: start 13-0, LBO 29-16, SBO 45-32, base offset 51-49, swizzle 63-62."""
    return {
        "start": desc & 0x3FFF,
        "lbo": (desc >> 16) & 0x3FFF,
        "sbo": (desc >> 32) & 0x3FFF,
        "base": (desc >> 49) & 0x7,
        "swizzle": desc >> 62,
        "reserved": desc & ((0x3 << 14) | (0x3 << 30) | (0x7 << 46) | (0x3FF << 52)),
    }


@needs_backend("cuda")
def test_descriptor_bits_follow_the_ptx_table_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_descriptors, out_idx=[0], target={"kind": "cuda", "arch": "sm_90a"})
    d0, d1, d2 = (_fields(int(d)) for d in np.asarray(kernel()).astype(np.uint64))
    assert (d0["lbo"], d0["sbo"], d0["swizzle"]) == (1, 64, 1)
    assert (d1["lbo"], d1["sbo"], d1["swizzle"]) == (2, 32, 2)
    assert (d2["lbo"], d2["sbo"], d2["swizzle"]) == (8, 16, 0)
    assert d1["start"] - d0["start"] == 512 * 2 // 16  # addresses in 16-byte units
    assert d2["start"] - d0["start"] == 8 * 2 // 16
    assert all(d["base"] == 0 and d["reserved"] == 0 for d in (d0, d1, d2))


@pytest.mark.parametrize(
    ("layout_type", "stride_offset", "message"),
    [(4, 64, "layout type 4 is not a wgmma swizzle mode"), (1, 1 << 14, "14-bit field")],
)
def test_descriptor_arguments_are_checked(layout_type, stride_offset, message):
    with pytest.raises(TileTypeError, match=message):

        @T.prim_func
        def bad_descriptor(Out: T.Tensor((1,), "uint64")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((64, 64), "float16")
                d = T.alloc_wgmma_desc()
                T.initialize_wgmma_descriptor(d, S, layout_type, 1, stride_offset)


def test_wgmma_mma_is_tilelangs_wgmma_gemm():
    assert T.wgmma_mma is T.wgmma_gemm  # TileLang defines the two names as one function
    rng = np.random.default_rng(90)
    a = rng.integers(-3, 4, (64, 16)).astype("float16")
    b = rng.integers(-3, 4, (16, 32)).astype("float16")
    kernel = tilelang.compile(one_block_gemm(64, 32, 16, op=T.wgmma_mma), out_idx=[2], target="cpu")
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64))


@T.prim_func
def _wgmma_ss(
    A: T.Tensor((64, 16), "float16"), Bt: T.Tensor((8, 16), "float16"), C: T.Tensor((64, 8), "float32")
):
    # K-major operands without swizzle, in PTX's canonical layout: 8x8 core matrices of
    # 16-byte rows, the next core matrix along K 128 B on (LBO), the next 8 rows 256 B on (SBO).
    with T.Kernel(1, threads=128):
        Sa = T.alloc_shared((1024,), "float16")
        Sb = T.alloc_shared((128,), "float16")
        acc = T.alloc_local((4,), "float32")
        desc_a = T.alloc_wgmma_desc()
        desc_b = T.alloc_wgmma_desc()
        tx = T.get_thread_binding()
        for e in T.serial(8):
            r, k = (tx * 8 + e) // 16, (tx * 8 + e) % 16
            Sa[r % 8 * 8 + r // 8 * 128 + k % 8 + k // 8 * 64] = A[r, k]
            if tx < 16:
                Sb[r % 8 * 8 + k % 8 + k // 8 * 64] = Bt[r, k]
        T.sync_threads()
        T.fence_proxy_async()
        T.initialize_wgmma_descriptor(desc_a, Sa, 0, 8, 16)
        T.initialize_wgmma_descriptor(desc_b, Sb, 0, 8, 16)
        T.warpgroup_arrive()
        T.ptx_wgmma_ss(
            T.float32, "m64n8k16", True, True, "fp16", "fp16", "fp32",
            desc_a.data, 0, desc_b.data, 0, acc.data, 0, False,
        )  # fmt: skip
        T.warpgroup_commit_batch()
        T.warpgroup_wait(0)
        lane = tx % 32
        for i in T.serial(4):  # PTX's m64nNk16 accumulator fragment
            C[16 * (tx // 32) + lane // 4 + 8 * (i // 2 % 2), lane % 4 * 2 + i % 2] = acc[i]


@needs_backend("cuda")
def test_ptx_wgmma_ss_multiplies_canonical_k_major_tiles_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    rng = np.random.default_rng(64)
    a = rng.integers(-3, 4, (64, 16)).astype("float16")
    bt = rng.integers(-3, 4, (8, 16)).astype("float16")
    kernel = tilelang.compile(_wgmma_ss, out_idx=[2], target={"kind": "cuda", "arch": "sm_90a"})
    np.testing.assert_array_equal(np.asarray(kernel(a, bt)), a.astype(np.float64) @ bt.T.astype(np.float64))


@T.prim_func
def _tma_boxes(A: T.Tensor((48, 40), "float16"), Out: T.Tensor((256,), "float16")):
    with T.Kernel(1, threads=128):
        bar = T.alloc_barrier(1)
        S = T.alloc_shared((256,), "float16")
        tx = T.get_thread_binding()
        if tx == 0:
            T.mbarrier_arrive_expect_tx(bar, 512)  # two 8 x 16 boxes of halves, zero fill included
            # cuTensorMapEncodeTiled's arguments, innermost first: dims, byte strides, box, steps
            tmap = T.create_tma_descriptor(6, 2, A.data, 40, 48, 2, 80, 16, 8, 1, 1, 0, 0, 2, 0)
            T.tma_load(tmap, bar, S[0], 8, 8)
            T.tma_load(tmap, bar, T.access_ptr(S[128]), 32, 44)  # partly past both edges
        T.barrier_wait(bar, 0)
        for i in T.serial(2):
            Out[tx * 2 + i] = S[tx * 2 + i]


@needs_backend("cuda")
def test_tma_load_boxes_with_zero_fill_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.arange(48 * 40, dtype=np.float32).reshape(48, 40).astype("float16")
    kernel = tilelang.compile(_tma_boxes, out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"})
    padded = np.zeros((64, 64), "float16")
    padded[:48, :40] = a
    want = np.concatenate([padded[8:16, 8:24].ravel(), padded[44:52, 32:48].ravel()])
    np.testing.assert_array_equal(np.asarray(kernel(a)), want)


def test_tma_descriptor_arguments_are_checked():
    with pytest.raises(TileTypeError, match="data type code 7 does not copy A's float16"):

        @T.prim_func
        def wrong_type(A: T.Tensor((48, 40), "float16")):
            with T.Kernel(1, threads=128):
                T.create_tma_descriptor(7, 2, A.data, 40, 48, 2, 80, 16, 8, 1, 1, 0, 0, 2, 0)

    with pytest.raises(TileTypeError, match=r"byte strides \[2, 40\] are not A's"):

        @T.prim_func
        def wrong_strides(A: T.Tensor((48, 40), "float16")):
            with T.Kernel(1, threads=128):
                T.create_tma_descriptor(6, 2, A.data, 40, 48, 2, 40, 16, 8, 1, 1, 0, 0, 2, 0)


def test_source_kernels_are_refused_with_what_to_write():
    from tile.ir.errors import UnsupportedOnTargetError

    with pytest.raises(UnsupportedOnTargetError, match="hand-written CUDA __global__") as info:

        @T.prim_func
        def source(A: T.Tensor((64,), "float32")):
            T.CUDASourceCodeKernel(1, threads=64, source_code_or_path="", entry_name="k")

    assert info.value.location is not None and "T.*" in info.value.hint
