"""``T.cumsum`` on shared memory for CUDA: lanes scan row segments in registers, shuffles join them.

Compiled for sm_80 and sm_90a (no spills; every shuffle outside any branch), and run for
sm_80 under the CPU emulator against ``numpy.cumsum``: rows split over 1, 4 and 32 lanes,
rows that need several passes of the block, ragged segments, reverse scans, a separate
destination and a column scan (``dim=0``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda import probe_nvcc
from tile.testsupport.markers import needs_host_cxx

pytestmark = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
needs_host_compiler = needs_host_cxx


def shared_scan(M: int, N: int, block_M: int, dim: int = 1, reverse: bool = False, separate: bool = False,
                dtype: str = "float32", threads: int = 128, op: str = "cumsum"):  # type: ignore[no-untyped-def]  # fmt: skip
    scan_op = T.cumsum if op == "cumsum" else T.cummax

    @T.prim_func
    def scan(X: T.Tensor((M, N), dtype), Prefix: T.Tensor((M, N), dtype)):  # type: ignore[no-untyped-def]
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            out = T.alloc_shared((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            if separate:
                scan_op(tile, out, dim=dim, reverse=reverse)
                T.copy(out, Prefix[bx * block_M, 0])
            else:
                scan_op(tile, dim=dim, reverse=reverse)
                T.copy(tile, Prefix[bx * block_M, 0])

    return scan


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_shared_cumsum_compiles_without_spills(arch: str) -> None:
    kernel = tilelang.compile(shared_scan(256, 128, 32), target={"kind": "cuda", "arch": arch})
    stats = kernel.artifact.payload.stats
    assert stats.spills == 0 and stats.stack_bytes == 0, stats
    source = kernel.get_kernel_source("cuda")
    body = source[source.index("__global__") :]
    # 32 rows over 128 threads: 4 lanes per row, the 3 lower lanes' totals gathered
    assert body.count("tile::shfl_idx(") == 3
    for line in body.splitlines():
        if "shfl_idx" in line:
            indent = len(line) - len(line.lstrip())
            assert indent == 2, f"shuffle inside a branch: {line}"  # top level of the kernel body
    assert re.search(r"\bSHFL\.IDX\b", kernel.get_kernel_source("sass"))


def test_a_row_too_long_for_the_registers_is_a_typed_error() -> None:
    from tile.ir.errors import UnsupportedOnTargetError

    with pytest.raises(UnsupportedOnTargetError, match="elements per thread") as info:
        tilelang.compile(
            shared_scan(256, 128, 128, dtype="float16"), target={"kind": "cuda", "arch": "sm_80"}
        )
    assert info.value.hint


CASES = {
    "4_lanes": dict(M=256, N=128, block_M=32),
    "32_lanes_ragged": dict(M=8, N=1000, block_M=2),  # 32 lanes, segments of 32, the last one short
    "two_passes": dict(M=512, N=16, block_M=256),  # 256 rows over 128 threads: one lane, 2 passes
    "partial_pass": dict(M=200, N=24, block_M=200),  # 200 rows: the second pass has 72
    "reverse": dict(M=64, N=96, block_M=16, reverse=True),
    "separate_dst": dict(M=64, N=40, block_M=16, separate=True),
    "columns": dict(M=64, N=32, block_M=64, dim=0),
    "columns_reverse": dict(M=96, N=24, block_M=48, dim=0, reverse=True),
}


NUMPY_SCANS = {"cumsum": np.cumsum, "cummax": np.maximum.accumulate}


@needs_host_compiler
@pytest.mark.parametrize("op", sorted(NUMPY_SCANS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_scan_matches_numpy_on_the_emulator(
    monkeypatch: pytest.MonkeyPatch, case: str, op: str
) -> None:
    # T.cummax is T.cumsum's scan with max for +: the same lanes, passes and shuffles
    monkeypatch.setenv("TILE_DEVICE", "emu")
    spec = dict(CASES[case])
    m, n, block_m = spec["M"], spec["N"], spec["block_M"]
    kernel = tilelang.compile(
        shared_scan(**spec, op=op), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}
    )
    rng = np.random.default_rng(m * n)
    x = rng.integers(-8, 8, size=(m, n)).astype(np.float32)  # small integers: sums are exact
    if op == "cummax":
        x -= 20.0  # every value negative: a padding lane or carry of 0 would show
    got = kernel(x)
    dim, reverse = spec.get("dim", 1), spec.get("reverse", False)
    scan = NUMPY_SCANS[op]
    want = np.empty_like(x)
    for start in range(0, m, block_m):
        tile = x[start : start + block_m]
        if reverse:
            want[start : start + block_m] = np.flip(scan(np.flip(tile, dim), axis=dim), dim)
        else:
            want[start : start + block_m] = scan(tile, axis=dim)
    np.testing.assert_array_equal(got, want)


def fragment_scans(M: int, N: int, block_M: int, dtype: str = "float32", op: str = "cumsum"):  # type: ignore[no-untyped-def]
    """A shared tile scanned into a fragment (reverse) and a fragment scanned in place."""
    scan_op = T.cumsum if op == "cumsum" else T.cummax

    @T.prim_func
    def scans(X: T.Tensor((M, N), dtype), Suffix: T.Tensor((M, N), dtype), Twice: T.Tensor((M, N), dtype)):  # type: ignore[no-untyped-def]
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            suffix = T.alloc_fragment((block_M, N), dtype)
            twice = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            scan_op(tile, suffix, dim=1, reverse=True)
            T.copy(X[bx * block_M, 0], twice)
            scan_op(twice, dim=0)
            T.copy(suffix, Suffix[bx * block_M, 0])
            T.copy(twice, Twice[bx * block_M, 0])

    return scans


@needs_host_compiler
@pytest.mark.parametrize("op", sorted(NUMPY_SCANS))
def test_fragment_operands_are_staged_through_shared_memory(monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    # T.cummax of a fragment was rows of T.Parallel scanned in order, which read elements
    # other threads hold (TileLang's language/scan test_cummax_fragment was refused)
    monkeypatch.setenv("TILE_DEVICE", "emu")
    m, n, block_m = 96, 40, 32
    kernel = tilelang.compile(
        fragment_scans(m, n, block_m, op=op), out_idx=[1, 2], target={"kind": "cuda", "arch": "sm_80"}
    )
    source = kernel.get_kernel_source("cuda")
    assert "suffix_scan_out" in source and "twice_scan_in" in source and "twice_scan_out" not in source
    x = np.random.default_rng(5).integers(-8, 8, size=(m, n)).astype(np.float32) - 20.0
    suffix, twice = kernel(x)
    scan = NUMPY_SCANS[op]
    np.testing.assert_array_equal(suffix, np.flip(scan(np.flip(x, 1), axis=1), 1))
    blocks = x.reshape(m // block_m, block_m, n)
    np.testing.assert_array_equal(twice, scan(blocks, axis=1).reshape(m, n))
