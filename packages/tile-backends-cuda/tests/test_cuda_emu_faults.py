"""Fault injection under the CPU emulator: a broken paper GEMM must not pass.

The sm_80 paper GEMM (128x128x32 tiles, 3-stage cp.async ring, 128 threads) is
compiled once; its CUDA source is then patched the way a lowering bug would break it
and run under emulation. The unmodified source must match numpy; every mutant must
either compute a wrong result or be reported as a fault. Patterns are asserted to
occur, so a codegen change that moves them fails here instead of testing nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cpu.simt import SimtFault
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.ops.gemm import matmul_kernel
from tile.testsupport.markers import needs_host_cxx

pytestmark = [
    needs_host_cxx,
]
M = N = K = 256


@pytest.fixture(scope="module")
def gemm() -> object:
    func = matmul_kernel(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    return tilelang.compile(func, target={"kind": "cuda", "arch": "sm_80"}).artifact.payload


def _replace_once(pattern: str, replacement: str | Callable[[re.Match[str]], str]) -> Callable[[str], str]:
    def mutate(source: str) -> str:
        patched, count = re.subn(pattern, replacement, source, count=1)
        assert count == 1, f"pattern {pattern!r} not in the generated GEMM"
        return patched

    return mutate


def _wait_after_the_reads(source: str) -> str:
    """The ring's wait leaves the loop: every stage is read before any copy is waited for."""
    waits = re.findall(r"tile_cp_async_wait<1>\(\);\n", source)
    assert len(waits) == 1 and "tile_cp_async_wait<0>();" in source
    source = source.replace(waits[0], "", 1)
    final = "tile_cp_async_wait<0>();"
    return source.replace(final, "tile_cp_async_wait<1>();\n  " + final, 1)


MUTANTS: dict[str, Callable[[str], str]] = {
    # the barrier between the copies landing and other warps reading them
    "syncthreads_removed": _replace_once(r"(tile_cp_async_wait<1>\(\);\s*)__syncthreads\(\);", r"\1"),
    "cp_async_wait_after_the_reads": _wait_after_the_reads,
    # an off-by-one ring: waits for one group too few
    "cp_async_wait_one_group_short": _replace_once(r"tile_cp_async_wait<1>\(\)", "tile_cp_async_wait<2>()"),
    # a wrong fragment mapping: B loaded without the transpose its [K][N] storage needs
    "ldmatrix_without_trans": _replace_once(r"tile_ldmatrix_x4_trans\(", "tile_ldmatrix_x4("),
}


def _run(binary: object, source: str) -> tuple[np.ndarray, np.ndarray]:
    kernel = EmulatedCudaKernel(source, binary.recipe, binary.params)  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    kernel(a, b, c)
    return c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32)


def test_unmodified_gemm_passes(gemm):
    got, want = _run(gemm, gemm.source)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_broken_gemm_is_caught(gemm, mutant):
    source = MUTANTS[mutant](gemm.source)  # type: ignore[attr-defined]
    assert source != gemm.source  # type: ignore[attr-defined]
    try:
        got, want = _run(gemm, source)
    except SimtFault:
        return  # reported
    assert not np.allclose(got, want, rtol=2e-3, atol=2e-2, equal_nan=False), f"{mutant} went unnoticed"


def test_removed_syncthreads_is_reported_as_a_race_under_access_checks(gemm, monkeypatch):
    from tile.backends.cpu.simt import SimtRaceError

    monkeypatch.setenv("TILE_EMU_CHECK", "1")  # instrumented build: bounds and race checks
    got, want = _run(gemm, gemm.source)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2)
    source = MUTANTS["syncthreads_removed"](gemm.source)  # type: ignore[attr-defined]
    with pytest.raises(SimtRaceError, match="race on shared memory"):
        _run(gemm, source)
