"""``T.Pipelined`` as an LDS DMA ring with ``s_waitcnt vmcnt`` waits (``_src/lds_ring.py``).

Under emulation (``TILE_DEVICE=emu``, access checks on, two thread orders) the GEMM with
2 and 3 stages matches numpy for K loops of one, two and many steps (ragged M/N/K), in
fp16 and fp32, as does FlashAttention with a 2-stage ring. The emulator lands a DMA
write only at the ``tile::wait_vmem`` that covers it, so deleting the ring's wait,
loosening it, or deleting its barrier fails. Compile-only: the gfx90a code object keeps
the ring's ``vmcnt`` between the DMA loads and the MFMAs' LDS reads.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.rocm._src.lds_dma import WAIT_CALL
from tile.backends.rocm._src.lds_ring import LDS_RING_OPTION, lds_ring_enabled
from tile.ir.errors import TargetError
from tile.ir.target import Target
from tile.layout.errors import TileError
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import matmul_kernel
from tile.testsupport.markers import needs_host_cxx
from tile.testsupport.references import attention as attention_reference

needs_host_compiler = needs_host_cxx
SEEDS = ("1", "7")
# K of 32, 64 and 200 with block_K 32: one step (no ring), two steps, seven steps (ragged)
SHAPES = [(64, 64, 32), (64, 128, 64), (100, 72, 200)]


def _target(ring: str | None = None) -> dict[str, str]:
    target = {"kind": "hip", "mcpu": "gfx90a"}
    if ring is not None:
        target[LDS_RING_OPTION] = ring
    return target


@functools.cache
def _gemm(m: int, n: int, k: int, dtype: str, stages: int, ring: str | None, _env: str) -> Any:
    func = matmul_kernel(m, n, k, dtype, block_M=64, block_N=64, block_K=32, threads=128, num_stages=stages)
    return tilelang.compile(func, out_idx=[-1], target=_target(ring))


def _compiled(m: int, n: int, k: int, dtype: str, stages: int, ring: str | None = None) -> Any:
    env = os.environ.get("TILE_DEVICE", "") + os.environ.get("TILE_EMU_CHECK", "")
    return _gemm(m, n, k, dtype, stages, ring, env)


def _operands(m: int, n: int, k: int, dtype: str) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(8)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def _check(c: Any, want: Any, dtype: str) -> None:
    tol = 2e-2 if dtype == "float16" else 1e-4
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=tol, atol=tol)


def _wrong(out: Any, want: Any) -> bool:
    """Far from ``want`` (stale LDS reads give garbage, uninitialized LDS NaNs)."""
    error = np.abs(out.astype(np.float32) - want)
    return bool(not np.isfinite(error).all() or error.max() > 1.0)


def _waits(source: str) -> list[str]:
    return re.findall(re.escape(WAIT_CALL) + r"<\d+>", source)


def _emulated(kernel: Any, source: str) -> Any:
    from tile.backends.rocm._src.emulation import EmulatedHipKernel

    binary = kernel.artifact.payload
    return EmulatedHipKernel(source, binary.recipe, binary.params)


def test_ring_is_on_by_default_and_the_option_turns_it_off() -> None:
    assert lds_ring_enabled(Target.parse(_target()))
    assert not lds_ring_enabled(Target.parse(_target("0")))
    assert not lds_ring_enabled(Target.parse({**_target(), "lds_dma": "0"})), "no DMA, no ring"
    with pytest.raises(TargetError, match=LDS_RING_OPTION):
        lds_ring_enabled(Target.parse(_target("sometimes")))


@needs_host_compiler
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rocm_emu_ring_gemm_matches_numpy(
    monkeypatch: pytest.MonkeyPatch, dtype: str, stages: int, shape: tuple[int, int, int]
) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    m, n, k = shape
    kernel = _compiled(m, n, k, dtype, stages)
    source = kernel.get_kernel_source("hip")
    steps = -(-k // 32)
    if steps > 1:
        copies = min(stages, steps)
        assert f"k_step < {steps + copies - 1}" in source, "one loop over the ring's steps"
        assert re.search(rf"A_shared = T.alloc_buffer\(\({copies}, 64, 32\)", kernel.get_kernel_source("tir"))
        assert "tile::wait_vmem<0>();\n    __syncthreads();" in source or copies > 2
    else:
        assert "k_step" not in source, "one iteration: nothing to overlap, no ring"
    assert _waits(source), "the DMA copies are waited for"
    a, b, want = _operands(m, n, k, dtype)
    for seed in SEEDS:
        monkeypatch.setenv("TILE_EMU_SEED", seed)
        _check(kernel(a, b), want, dtype)


@needs_host_compiler
def test_rocm_emu_three_stage_ring_waits_for_all_but_the_newest_iteration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 stages: the step's head waits until one iteration's DMA loads (16 per wave) may fly."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    source = _compiled(100, 72, 200, "float16", 3).get_kernel_source("hip")
    # 64x32 and 32x64 fp16 tiles: 16 chunks of 256 bytes each, over 2 waves: 8 + 8 per wave
    assert "tile::wait_vmem<16>();" in source
    # the last steps issue nothing: the wait drops to vmcnt(0) there
    tail = r"if \(k_step < 8\) \{\s*tile::wait_vmem<16>\(\);\s*\} else \{\s*tile::wait_vmem<0>\(\);"
    assert re.search(tail, source)


@needs_host_compiler
def test_rocm_emu_ring_off_keeps_the_serialized_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = _compiled(100, 72, 200, "float16", 2, "0")
    source = kernel.get_kernel_source("hip")
    assert "k_step" not in source
    # outside a ring the A and B copies share one vmcnt(0) (merge_vmem_waits)
    assert _waits(source) == [f"{WAIT_CALL}<0>"]
    a, b, want = _operands(100, 72, 200, "float16")
    _check(kernel(a, b), want, "float16")


@needs_host_compiler
@pytest.mark.parametrize("stages", [2, 3])
def test_rocm_emu_ring_without_its_wait_gives_a_wrong_product(
    monkeypatch: pytest.MonkeyPatch, stages: int
) -> None:
    """Fault injection: the step's wait is gone (2 stages) or lets one more iteration fly (3)."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = _compiled(100, 72, 200, "float16", stages)
    source = kernel.get_kernel_source("hip")
    # fp16 64x32 tiles: 16 DMA loads per wave and iteration (see the 3-stage test above)
    head = "tile::wait_vmem<0>();\n    __syncthreads();" if stages == 2 else "tile::wait_vmem<16>();"
    assert source.count(head) == 1
    broken = source.replace(head, "__syncthreads();" if stages == 2 else "tile::wait_vmem<32>();")
    a, b, want = _operands(100, 72, 200, "float16")
    bad = np.zeros((100, 72), np.float16)
    _emulated(kernel, broken)(a, b, bad)
    assert _wrong(bad, want)


@needs_host_compiler
def test_rocm_emu_ring_without_its_barrier_is_a_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: no barrier after the wait: a wave refills a stage another still reads."""
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    kernel = _compiled(100, 72, 200, "float16", 2)
    source = kernel.get_kernel_source("hip")
    head = "tile::wait_vmem<0>();\n    __syncthreads();"
    assert source.count(head) == 1
    broken = source.replace(head, "tile::wait_vmem<0>();")
    a, b, want = _operands(100, 72, 200, "float16")
    out = np.zeros((100, 72), np.float16)
    try:
        _emulated(kernel, broken)(a, b, out)
    except TileError as error:
        assert re.search(r"race|shared", str(error), re.IGNORECASE)
    else:
        assert _wrong(out, want)


@needs_host_compiler
@pytest.mark.parametrize("causal", [False, True])
def test_rocm_emu_flash_attention_ring_matches_numpy(monkeypatch: pytest.MonkeyPatch, causal: bool) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    func = flash_attention_kernel(1, 1, 128, 64, causal, block_M=64, block_N=64, num_stages=2, threads=128)
    kernel = tilelang.compile(func, out_idx=[-1], target=_target())
    tir = kernel.get_kernel_source("tir")
    assert re.search(r"K_shared = T.alloc_buffer\(\(2, ", tir), "K streams in a ring"
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, 128, 1, 64)).astype(np.float16) for _ in range(3))
    want = attention_reference(q, k, v, causal)
    for seed in SEEDS:
        monkeypatch.setenv("TILE_EMU_SEED", seed)
        np.testing.assert_allclose(kernel(q, k, v).astype(np.float32), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("stages", [2, 3])
def test_rocm_gfx90a_ring_waits_between_dma_loads_and_lds_reads(
    monkeypatch: pytest.MonkeyPatch, stages: int
) -> None:
    from _rocm_kernels import assert_lds_reads_wait_for_dma, need_compiler

    need_compiler("gfx90a")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    asm = assert_lds_reads_wait_for_dma(_compiled(100, 72, 200, "float16", stages).get_kernel_source("asm"))
    assert any(re.search(r"\boffen lds\b", line) for line in asm)
    if stages == 3:
        # the ring's own count survives (merged with the barrier's lgkmcnt wait)
        assert any(re.search(r"s_waitcnt vmcnt\(16\)", line) for line in asm)
