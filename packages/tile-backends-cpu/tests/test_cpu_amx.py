"""The bf16 micro-kernel on AMX tiles: numerics against numpy, the run-time dispatch, the fallbacks."""

from __future__ import annotations

import ctypes
import itertools
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cpu._src import ukernels
from tile.backends.cpu._src.host import cpu_flags

needs_ukernel = pytest.mark.skipif(
    not ukernels.use_bf16_gemm_ukernel(),
    reason="no AVX-512 BF16 on this CPU, or no host compiler to build the micro-kernel",
)
HOST_HAS_AMX = {"amx_bf16", "amx_tile"} <= cpu_flags()

P, INT = ctypes.c_void_p, ctypes.c_int
SHAPES = [
    (16, 16, 32),  # one tile of each
    (33, 17, 34),  # one row and one column past a tile; K one pair past a tile step
    (100, 70, 66),
    (47, 129, 300),  # several column groups, a K tail
    (20, 50, 1030),  # more than one K chunk over packed-here panels
    (64, 64, 31),  # odd K: packed A pads the last pair
    (150, 40, 67),  # odd K on AMX: A packed in two row panels, a one-pair K tail
    (15, 64, 64),  # too few rows for a tile: AVX-512
]


@pytest.fixture(params=[True, False], ids=["amx", "avx512"])
def amx(request):
    """``TILE_CPU_AMX`` pinned on or off for the test (applied to the loaded library), then restored."""
    saved = os.environ.get("TILE_CPU_AMX")
    os.environ["TILE_CPU_AMX"] = "1" if request.param else "0"
    try:
        on = ukernels.amx_in_use()
        if request.param and not on:
            pytest.skip("no AMX-BF16 on this CPU, or Linux refused the tile state")
        yield on
    finally:
        if saved is None:
            os.environ.pop("TILE_CPU_AMX", None)
        else:
            os.environ["TILE_CPU_AMX"] = saved
        ukernels.amx_in_use()


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(ukernels.bf16_gemm_library()))  # the handle the loader already opened
    lib.tile_bf16_gemm_f32acc.argtypes = [INT, INT, INT, P, P, INT, P, P, INT, P, INT, INT, INT, INT]
    lib.tile_bf16_pack_b_group.argtypes = [P, P, INT, INT, INT, INT, INT, P]
    lib.tile_bf16_gemm_f32acc_packed_b.argtypes = [
        INT, INT, INT, P, P, INT, P, ctypes.c_long, P, INT, INT, INT
    ]
    return lib


def _stored(x: np.ndarray, wide: bool) -> tuple[np.ndarray, int]:
    """A bf16 matrix as the kernels see it: 16-bit patterns, or widened to float32 (exact)."""
    return (x.astype(np.float32), 4) if wide else (x.view(np.uint16).copy(), 2)


def _operands(rng, M, N, K, trans_a, trans_b):
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)  # the bf16 inputs, exactly
    return a, b, (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)


@needs_ukernel
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_micro_kernel_matches_numpy(amx, M, N, K):
    lib = _library()
    rng = np.random.default_rng(M * 1000 + K)
    for trans_a, trans_b, accumulate, wide_a, wide_b in itertools.product([0, 1], repeat=5):
        a, b, expected = _operands(rng, M, N, K, trans_a, trans_b)
        A, ea = _stored(a, bool(wide_a))
        B, eb = _stored(b, bool(wide_b))
        c = rng.standard_normal((M, N)).astype(np.float32)
        out = c.copy()
        status = lib.tile_bf16_gemm_f32acc(
            M, N, K, A.ctypes.data, A.ctypes.data + ea, A.shape[1], B.ctypes.data, B.ctypes.data + eb,
            B.shape[1], out.ctypes.data, N, trans_a, trans_b, accumulate,
        )
        assert status == 0
        want = expected + c if accumulate else expected
        np.testing.assert_allclose(
            out, want, rtol=1e-5, atol=2e-5 * K,
            err_msg=f"trans_a={trans_a} trans_b={trans_b} accumulate={accumulate} wide={wide_a}{wide_b}",
        )


@needs_ukernel
@pytest.mark.parametrize(
    "M,N,K",
    [
        (96, 200, 1100),
        (40, 64, 64),
        (128, 128, 2048),
        # AMX keeps C in tiles over all whole K steps here (A in place, B prepacked): ragged rows
        # (3 blocks + 4) and columns (a 2-column group), more steps than one 128-pair chunk, a 5-pair K tail
        (100, 130, 2090),
        (33, 64, 34),  # one row past a block, a one-pair K tail after one step
    ],
)
def test_prepacked_panels_match_numpy(amx, M, N, K):
    """B packed once (tile_bf16_pack_b_group); the whole product and one sub-block read from the panels."""
    lib = _library()
    rng = np.random.default_rng(K)
    a, b, expected = _operands(rng, M, N, K, False, False)
    A, B = a.view(np.uint16).copy(), b.view(np.uint16).copy()
    groups, pairs = -(-N // 64), K // 2
    packed = np.zeros(groups * pairs * 64, np.uint32)
    for g in range(groups):
        start = B.ctypes.data
        assert lib.tile_bf16_pack_b_group(start, start + 2, N, K, N, 0, g, packed.ctypes.data) == 0
    out = np.zeros((M, N), np.float32)
    assert lib.tile_bf16_gemm_f32acc_packed_b(
        M, N, K, A.ctypes.data, A.ctypes.data + 2, K, packed.ctypes.data, pairs * 64, out.ctypes.data, N, 0, 0
    ) == 0
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-5 * K)
    # rows 16.., columns 64.., K from 32 on: the panel word of pair 16 in group 1's first 32-column slice
    # (each pair of a slice 32 words, the second slice pairs * 32 words on), accumulated onto ones
    m, n, k0 = M - 16, N - 64, 32
    part = np.ones((m, n), np.float32)
    start = packed.ctypes.data + 4 * (pairs * 64 + (k0 // 2) * 32)
    a_part = A[16:, k0:]
    assert lib.tile_bf16_gemm_f32acc_packed_b(
        m, n, K - k0, a_part.ctypes.data, a_part.ctypes.data + 2, K, start, pairs * 64,
        part.ctypes.data, n, 0, 1,
    ) == 0
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(part, 1 + a64[16:, k0:] @ b64[k0:, 64:], rtol=1e-5, atol=2e-5 * K)


@needs_ukernel
def test_dispatch_follows_the_cpu_the_switch_and_the_shape(monkeypatch):
    monkeypatch.setenv("TILE_CPU_AMX", "1")
    try:
        assert ukernels.amx_in_use() == HOST_HAS_AMX  # the probe agrees with /proc/cpuinfo here
        assert ukernels.amx_applies(32, 32, 64) == HOST_HAS_AMX
        assert ukernels.amx_applies(16, 1, 32) == HOST_HAS_AMX  # one whole tile of rows and of K
        assert not ukernels.amx_applies(15, 64, 64)  # under a tile of rows: AVX-512 BF16
        assert not ukernels.amx_applies(64, 64, 31)  # under a tile of K
        monkeypatch.setenv("TILE_CPU_AMX", "0")
        assert not ukernels.amx_in_use()
        assert not ukernels.amx_applies(128, 128, 2048)
    finally:
        monkeypatch.delenv("TILE_CPU_AMX")
        ukernels.amx_in_use()


_REFUSED = textwrap.dedent(
    """
    import ctypes, numpy as np, ml_dtypes
    # A signal stack too small for the AMX state: Linux refuses ARCH_REQ_XCOMP_PERM (ENOSPC).
    class stack_t(ctypes.Structure):
        _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]
    buf = ctypes.create_string_buffer(4096)
    assert ctypes.CDLL(None).sigaltstack(ctypes.byref(stack_t(ctypes.addressof(buf), 0, 4096)), None) == 0
    from tile.backends.cpu._src import ukernels
    from tile.ops.gemm import matmul_kernel
    import tile.lang as tilelang
    kernel = tilelang.compile(matmul_kernel(64, 64, 128, dtype="bfloat16", accum_dtype="float32", block_M=32,
                                            block_N=64, block_K=32, num_stages=2), out_idx=[-1], target="cpu")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    out = np.asarray(kernel(a, b)).astype(np.float32)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)
    print("AMX" if ukernels.amx_in_use() else "REFUSED")
    """
)


@needs_ukernel
@pytest.mark.skipif(not HOST_HAS_AMX or sys.platform != "linux", reason="needs a Linux host with AMX-BF16")
def test_refused_tile_permission_falls_back_to_avx512(tmp_path):
    env = {**os.environ, "TILE_CACHE_DIR": str(tmp_path)}
    env.pop("TILE_CPU_AMX", None)
    command = [sys.executable, "-c", _REFUSED]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-1] == "REFUSED"


@needs_ukernel
def test_paper_gemm_matches_numpy(amx, monkeypatch):
    """Blocks over a K loop that folds into one call over prepacked B, with ragged edge blocks."""
    from tile.ops.gemm import matmul_kernel

    monkeypatch.setenv("TILE_CACHE", "0")
    M, N, K = 200, 176, 256
    kernel = tilelang.compile(
        matmul_kernel(M, N, K, dtype="bfloat16", accum_dtype="float32", block_M=64, block_N=128, block_K=64,
                      num_stages=3),
        out_idx=[-1], target="cpu",
    )
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    out = np.asarray(kernel(a, b)).astype(np.float32)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-2, atol=1e-2)


def test_capabilities_name_the_amx_product_where_the_cpu_has_it(monkeypatch):
    from tile.backends.cpu._src import backend

    assert backend.matrix_instructions() == ((backend.AMX_BF16,) if HOST_HAS_AMX else ())
    assert backend.AMX_BF16.m == backend.AMX_BF16.n == 16 and backend.AMX_BF16.k == 32  # one tdpbf16ps
    monkeypatch.setenv("TILE_CPU_AMX", "0")
    assert backend.matrix_instructions() == ()
