"""sm_90a warp-specialized kernels: what the SASS comparison with TileLang found, kept fixed.

``tools/compat/sass_vs_tilelang.py`` builds the paper GEMM and FlashAttention with tile and
with TileLang 0.1.15 and counts their SASS (CUDA backend README). Three differences were
closed in tile's lowering; each is pinned here on the generated source and SASS
(compile-only: nvcc) and run on the CPU emulator, which models mbarrier transactions and
the generic/async proxies:

* FlashAttention's consumer loop fenced the async proxy (``fence.proxy.async``, a
  ``MEMBAR.ALL.CTA`` in SASS) twice per K step, because its row reductions' warp shuffles
  counted as possible shared-memory writes: now one fence, before the loop.
* The tensor maps are prefetched (``prefetch.tensormap``) by the producer thread while
  thread 0 initialises the barriers.
* K and V each have their own barriers: Q K^T waits for K only, and K's stage goes back to
  the producer once Q K^T has read it.
* Q, loaded once before the loop, comes by TMA on an mbarrier of its own (so the loop's
  proxy fence is gone too: no generic write of shared memory is left before it), and O,
  written to shared memory after the loop, goes out by a TMA store (``cp.async.bulk.tensor``
  from one thread after every thread's ``fence.proxy.async`` and a barrier, then
  ``commit_group`` and ``wait_group.read 0``) from the bytes Q had.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cpu.simt import SimtFault
from tile.backends.cuda import probe_nvcc
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import matmul_kernel
from tile.testsupport.markers import needs_host_cxx
from tile.testsupport.references import attention as sdpa

needs_nvcc = pytest.mark.skipif(probe_nvcc() is None, reason="nvcc not found")
SM90A = {"kind": "cuda", "arch": "sm_90a"}
_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.x]*)", re.M)


@functools.cache
def flash_attention(causal: bool, seq_len: int = 512, dim: int = 128) -> Any:
    """The library FlashAttention at TileLang's sm_90a config: 128 x 128 tiles, 256 threads, 2 stages."""
    tiling = {"block_M": 128, "block_N": 128, "threads": 256, "num_stages": 2}
    func = flash_attention_kernel(1, 1, seq_len, dim, causal, "float16", **tiling)
    return tilelang.compile(func, out_idx=[-1], target=SM90A)


def opcodes(kernel: Any) -> list[str]:
    return _OPCODE.findall(kernel.get_kernel_source("sass"))


def count(ops: list[str], name: str) -> int:
    return sum(op == name or op.startswith(name + ".") for op in ops)


def consumer_loop(source: str) -> str:
    """The consumer's K loop: from ``for (int k = 0`` to the end of the source."""
    return source[source.index("for (int k = 0") :]


@needs_nvcc
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_has_no_proxy_fence(causal: bool) -> None:
    kernel = flash_attention(causal)
    source = kernel.get_kernel_source("cuda")
    # every wgmma operand comes by TMA (Q too, before the loop) or from registers, and the
    # library kernel writes O from registers: nothing is written to shared memory generically
    assert "tile_fence_proxy_async" not in source
    ops = opcodes(kernel)
    assert count(ops, "MEMBAR") == 0, [op for op in ops if "MEMBAR" in op or "FENCE" in op]
    assert count(ops, "HGMMA") == 16 and count(ops, "WARPGROUP.DEPBAR") == 2
    stats = kernel.artifact.payload.stats
    assert stats.spills == 0 and stats.stack_bytes == 0, stats


@needs_nvcc
def test_tensor_maps_are_prefetched_once_each() -> None:
    gemm = tilelang.compile(
        matmul_kernel(1024, 1024, 1024, block_M=256, block_N=128, block_K=64, num_stages=3, threads=256),
        target=SM90A,
    )
    for kernel, maps in ((gemm, "AB"), (flash_attention(False), "QKV")):
        source = kernel.get_kernel_source("cuda")
        for tensor in maps:
            assert source.count(f"tile_tma_prefetch_map(((unsigned long long)(&(tile_tmap_{tensor}))))") == 1
        ops = opcodes(kernel)
        assert count(ops, "UTMACCTL.PF") == len(maps), [op for op in ops if op.startswith("UTMA")]
        # the prefetches come before the CTA barrier that publishes the mbarriers
        first_barrier = next(i for i, op in enumerate(ops) if op.startswith("BAR.SYNC"))
        assert all(i < first_barrier for i, op in enumerate(ops) if op.startswith("UTMACCTL.PF"))


def _calls(name: str, source: str) -> list[tuple[int, str]]:
    """(offset, barrier index expression) of each call of ``name`` in ``source``."""
    found = re.finditer(rf"{name}\(\(&\(tile_mbar_ptr\[([^\]]*)\]\)\)", source)
    return [(m.start(), m.group(1)) for m in found]


@needs_nvcc
def test_flash_attention_waits_for_k_and_v_separately() -> None:
    source = flash_attention(False).get_kernel_source("cuda")
    # 2 stages x (K, V): full barriers expect the producer's one arrival, empty ones all 256
    # consumers; Q's (loaded once) one consumer thread's
    inits = re.findall(r"tile_mbarrier_init\(\(&\(tile_mbar_ptr\[(\d+)\]\)\), \(uint\)(\d+)\)", source)
    assert inits == [(str(i), "1") for i in range(4)] + [(str(i), "256") for i in range(4, 8)] + [("8", "1")]
    loop = consumer_loop(source)
    gemms = [m.start() for m in re.finditer(r"tile_wgmma_m64n128k16_(ss|rs)_f16_f32", loop)]
    assert len(gemms) == 16
    qk_end, pv_start = gemms[7], gemms[8]
    waits = _calls("tile_mbarrier_wait", loop)
    arrives = _calls("tile_mbarrier_arrive", loop)
    assert [index for _, index in waits] == ["(k & 1)", "((k & 1) + 2)"]  # K's full, then V's
    assert waits[0][0] < gemms[0] and qk_end < waits[1][0] < pv_start
    assert [index for _, index in arrives] == ["((k & 1) + 4)", "((k & 1) + 6)"]  # K's empty, then V's
    assert qk_end < arrives[0][0] < pv_start and arrives[1][0] > gemms[-1]
    # each release follows its gemm's wgmma.wait_group 0: the tensor cores have read the stage
    # (the emulator's schedule would not expose a release before the read)
    assert "tile_wgmma_wait<0>();" in loop[qk_end : arrives[0][0]]
    assert "tile_wgmma_wait<0>();" in loop[gemms[-1] : arrives[1][0]]
    # the producer: per stage, K's 32 KB then V's 32 KB, each after its own empty barrier (and
    # before them, in the consumer branch, Q's 32 KB on barrier 8)
    expect_tx = r"tile_mbarrier_arrive_expect_tx\(\(&\(tile_mbar_ptr\[([^\]]*)\]\)\), \(uint\)(\d+)\)"
    announced = re.findall(expect_tx, source)
    assert announced == [("(k_load & 1)", "32768"), ("((k_load & 1) + 2)", "32768"), ("8", "32768")]


@needs_nvcc
def test_gemm_keeps_one_barrier_pair_per_stage() -> None:
    # A and B are read by the same gemm: one group, as before the split
    kernel = tilelang.compile(matmul_kernel(512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=3,
                                            threads=128), target=SM90A)  # fmt: skip
    source = kernel.get_kernel_source("cuda")
    assert source.count("tile_mbarrier_init(") == 6
    loop = consumer_loop(source)
    assert loop.count("tile_mbarrier_wait(") == 1 and loop.count("tile_mbarrier_arrive(") == 1
    assert source.count("tile_mbarrier_arrive_expect_tx(") == 1


# ---------------------------------------------------------------- on the emulator
@needs_host_cxx
@pytest.mark.emu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_at_tilelang_config_on_the_emulator(causal: bool) -> None:
    # four K/V steps over two stages: each stage of K and of V is refilled while the other runs
    b, h, s, d = 1, 1, 512, 64
    kernel = flash_attention(causal, s, d)
    source = kernel.get_kernel_source("cuda")
    assert "tile_tma_prefetch_map" in source and source.count("tile_mbarrier_init(") == 9
    rng = np.random.default_rng(11 + causal)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    got = kernel(q, k, v).astype(np.float32)
    np.testing.assert_allclose(got, sdpa(q, k, v, causal), rtol=5e-3, atol=5e-3)


def _run(binary: Any, source: str, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros_like(q)
    EmulatedCudaKernel(source, binary.recipe, binary.params)(q, k, v, out)
    return out.astype(np.float32)


def _without_v_wait(source: str) -> str:
    """The P V gemm reads V's stage without waiting for its TMA."""
    loop_at = source.index("for (int k = 0")
    wait = re.search(r"tile_mbarrier_wait\(\(&\(tile_mbar_ptr\[\(\(k & 1\) \+ 2\)\]\)\), [^;]*\);\n",
                     source[loop_at:])  # fmt: skip
    assert wait is not None, "V's full-barrier wait moved in the generated source"
    return source[: loop_at + wait.start()] + source[loop_at + wait.end() :]


def _without_q_wait(source: str) -> str:
    """Q K^T reads Q's tile without waiting for its TMA load."""
    wait = "tile_mbarrier_wait((&(tile_mbar_ptr[8])), (uint)0);\n"
    assert source.count(wait) == 1, "Q's wait moved in the generated source"
    return source.replace(wait, "")


@needs_host_cxx
@pytest.mark.emu
@pytest.mark.parametrize("mutant", [_without_v_wait, _without_q_wait])
def test_flash_attention_barrier_and_fence_are_needed(mutant: Any) -> None:
    b, h, s, d = 1, 1, 512, 64
    binary = flash_attention(False, s, d).artifact.payload
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    want = sdpa(q, k, v, False)
    np.testing.assert_allclose(_run(binary, binary.source, q, k, v), want, rtol=5e-3, atol=5e-3)
    source = mutant(binary.source)
    try:
        got = _run(binary, source, q, k, v)
    except SimtFault:
        return  # reported
    assert not np.allclose(got, want, rtol=5e-3, atol=5e-3), f"{mutant.__name__} went unnoticed"


# ---------------------------------------------------------------- O through shared memory
def attention_through_shared(seq_len: int, dim: int) -> Any:
    """FlashAttention forward (BSHD, one head) whose epilogue writes O to a shared tile and
    copies that tile out, as TileLang's sm_90a examples and the SASS comparison program do."""
    import tile.lang.language as T

    shape = [1, seq_len, 1, dim]
    scale = 1.44269504 / dim**0.5

    @T.prim_func
    def main(
        Q: T.Tensor(shape, "float16"),  # type: ignore[valid-type]
        K: T.Tensor(shape, "float16"),  # type: ignore[valid-type]
        V: T.Tensor(shape, "float16"),  # type: ignore[valid-type]
        Output: T.Tensor(shape, "float16"),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(seq_len, 128), threads=256) as bx:
            q_tile = T.alloc_shared([128, dim], "float16")
            k_tile = T.alloc_shared([128, dim], "float16")
            v_tile = T.alloc_shared([128, dim], "float16")
            o_tile = T.alloc_shared([128, dim], "float16")
            scores = T.alloc_fragment([128, 128], "float32")
            probs = T.alloc_fragment([128, 128], "float16")
            out = T.alloc_fragment([128, dim], "float32")
            row_max = T.alloc_fragment([128], "float32")
            prev_max = T.alloc_fragment([128], "float32")
            correction = T.alloc_fragment([128], "float32")
            tile_sum = T.alloc_fragment([128], "float32")
            denominator = T.alloc_fragment([128], "float32")
            T.copy(Q[0, bx * 128 : (bx + 1) * 128, 0, :], q_tile)
            T.fill(out, 0)
            T.fill(denominator, 0)
            T.fill(row_max, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(seq_len, 128), num_stages=2):
                T.copy(K[0, k * 128 : (k + 1) * 128, 0, :], k_tile)
                T.clear(scores)
                T.gemm(q_tile, k_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, prev_max)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(128):
                    correction[i] = T.exp2((prev_max[i] - row_max[i]) * scale)
                for i, j in T.Parallel(128, 128):
                    scores[i, j] = T.exp2((scores[i, j] - row_max[i]) * scale)
                T.reduce_sum(scores, tile_sum, dim=1)
                for i in T.Parallel(128):
                    denominator[i] = denominator[i] * correction[i] + tile_sum[i]
                T.copy(scores, probs)
                for i, j in T.Parallel(128, dim):
                    out[i, j] *= correction[i]
                T.copy(V[0, k * 128 : (k + 1) * 128, 0, :], v_tile)
                T.gemm(probs, v_tile, out, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(128, dim):
                out[i, j] /= denominator[i]
            T.copy(out, o_tile)
            T.copy(o_tile, Output[0, bx * 128 : (bx + 1) * 128, 0, :])

    return main


@functools.cache
def through_shared(seq_len: int, dim: int) -> Any:
    return tilelang.compile(attention_through_shared(seq_len, dim), out_idx=[-1], target=SM90A)


@needs_nvcc
def test_q_comes_and_o_goes_by_tma() -> None:
    kernel = through_shared(4096, 128)  # 32 K steps: nvcc does not unroll the producer's loop
    source = kernel.get_kernel_source("cuda")
    consumer = source[source.index("tile_setmaxnreg_inc") :]
    # Q: one consumer thread announces its 32 KB and loads its two 64-column boxes on barrier 8,
    # every consumer waits for it before the loop (no 128-bit loads and stores of Q)
    q_load = consumer[: consumer.index("for (int k = 0")]
    announce = r"tile_mbarrier_arrive_expect_tx\(\(&\(tile_mbar_ptr\[8\]\)\), \(uint\)32768\);"
    assert re.search(r"if \(\(\(int\)threadIdx.x\) == 0\) \{\s*" + announce, q_load)
    assert q_load.count("tile_tmap_Q") == 2
    assert "tile_mbarrier_wait((&(tile_mbar_ptr[8])), (uint)0);" in q_load
    assert "tile_fence_proxy_async" not in q_load  # nothing is written generically before the loop
    # O: stmatrix into shared memory, every thread's proxy fence, the consumers' barrier, then
    # one thread's two box stores, committed and waited for (read) before it exits
    epilogue = consumer[consumer.rindex("tile_stmatrix") :]
    order = ["tile_fence_proxy_async();", "tile_named_barrier_sync((uint)1, (uint)256);",
             "if (((int)threadIdx.x) == 0) {", "tile_tma_store_4d(", "tile_tma_store_4d(",
             "tile_tma_store_commit();", "tile_tma_store_wait_read<0>();"]  # fmt: skip
    at = [epilogue.index(step, epilogue.index(order[i - 1]) + 1 if i else 0) for i, step in enumerate(order)]
    assert at == sorted(at) and epilogue.count("tile_tmap_Output") == 2
    # O's tile takes Q's bytes: 32 KB each of Q (then O), 2 stages of K and of V
    assert int(kernel.artifact.payload.recipe.dynamic_shared) == 5 * 32768
    ops = opcodes(kernel)
    assert count(ops, "UTMALDG") == 6 and count(ops, "UTMASTG") == 2 and count(ops, "UTMACCTL.PF") == 4
    assert count(ops, "LDG") == 0 and count(ops, "STG") == 0  # Q and O move by TMA only
    assert count(ops, "MEMBAR") == 1  # the epilogue's fence.proxy.async


def _without_store_fence(source: str) -> str:
    """O's stmatrix writes reach the TMA store with no proxy fence."""
    assert source.count("tile_fence_proxy_async();\n") == 1
    return source.replace("tile_fence_proxy_async();\n", "")


def _without_store_wait(source: str) -> str:
    """The storing thread exits before its TMA store has read O's tile."""
    assert source.count("tile_tma_store_wait_read<0>();\n") == 1
    return source.replace("tile_tma_store_wait_read<0>();\n", "")


@needs_host_cxx
@pytest.mark.emu
def test_tma_q_and_o_on_the_emulator() -> None:
    # (the causal library kernel above loads Q by TMA too; its O leaves from registers)
    s, d = 256, 64
    kernel = through_shared(s, d)
    assert kernel.get_kernel_source("cuda").count("tile_tma_store_4d(") == 1  # one 64-column box of O
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, s, 1, d)).astype(np.float16) for _ in range(3))
    got = kernel(q, k, v).astype(np.float32)
    np.testing.assert_allclose(got, sdpa(q, k, v, False), rtol=5e-3, atol=5e-3)


@needs_host_cxx
@pytest.mark.emu
@pytest.mark.parametrize(
    ("mutant", "reported"),
    [
        (_without_store_fence, "generic proxy wrote with no fence.proxy.async"),
        (_without_store_wait, "never waited for"),
    ],
)
def test_tma_store_fence_and_wait_are_needed(mutant: Any, reported: str) -> None:
    s, d = 256, 64
    binary = through_shared(s, d).artifact.payload
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, s, 1, d)).astype(np.float16) for _ in range(3))
    want = sdpa(q, k, v, False)
    np.testing.assert_allclose(_run(binary, binary.source, q, k, v), want, rtol=5e-3, atol=5e-3)
    with pytest.raises(SimtFault, match=reported):
        _run(binary, mutant(binary.source), q, k, v)


def gemm_plain_epilogue(n: int) -> Any:
    """A warp-specialized GEMM writing C to a swizzled shared tile with plain stores, then copying
    it out (a TMA store: the tile is swizzled)."""
    import tile.lang.language as T
    from tile.lang.cuda.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(n // 64, n // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_s = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_s: make_mma_swizzle_layout(C_s)})
            T.clear(C_f)
            for k in T.Pipelined(n // 32, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(64, 64):
                C_s[i, j] = C_f[i, j]
            T.copy(C_s, C[by * 64, bx * 64])

    return main


@needs_host_cxx
@pytest.mark.emu
def test_tma_store_after_the_barrier_is_checked_for_races(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under TILE_EMU_CHECK the TMA store's read of its tile is its thread's read: without the
    # consumers' barrier before it, the plain stores of the other threads race with it
    from tile.backends.cpu.simt import SimtRaceError

    monkeypatch.setenv("TILE_EMU_CHECK", "1")
    n = 128
    binary = tilelang.compile(gemm_plain_epilogue(n), target=SM90A).artifact.payload
    source = binary.source
    assert "tile_tma_store_2d" in source
    store = source.index("tile_tma_store_2d")
    barrier = "tile_named_barrier_sync((uint)1, (uint)128);\n"
    last = source.rindex(barrier, 0, store)
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    out = np.zeros((n, n), np.float16)
    EmulatedCudaKernel(source, binary.recipe, binary.params)(a, b, out)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    mutant = source[:last] + source[last + len(barrier) :]
    with pytest.raises(SimtRaceError, match="race on shared memory"):
        EmulatedCudaKernel(mutant, binary.recipe, binary.params)(a, b, np.zeros((n, n), np.float16))


# ---------------------------------------------------------------- a loop bound set twice
def partial_gemm(n: int, runtime_condition: bool) -> Any:
    """``C = A[:, :K'] B[:K', :]`` whose K loop bound is assigned twice before the loop.

    ``K' = n / 2``, set by a second assignment under a Python condition (straight-line code
    in the kernel), or only for the first block column under a runtime one.
    """
    import tile.lang.language as T

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float32")):
        with T.Kernel(n // 64, n // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            steps = T.ceildiv(n, 32)
            if runtime_condition:
                if bx == 0:
                    steps = steps // 2
            else:
                steps = steps // 2
            for k in T.Pipelined(steps, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 64, bx * 64])

    return main


@needs_host_cxx
@pytest.mark.emu
@pytest.mark.parametrize("runtime_condition", [False, True])
def test_loop_bound_assigned_twice(runtime_condition: bool) -> None:
    # Straight-line assignments fold into the value the producer warpgroup recomputes, so the
    # loop keeps its TMA producer; one under a runtime condition differs by block, and the
    # loop stays on the cp.async ring (both correct)
    n = 128
    kernel = tilelang.compile(partial_gemm(n, runtime_condition), target=SM90A)
    source = kernel.get_kernel_source("cuda")
    assert ("tile_tma_load_2d" in source) == (not runtime_condition)
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    kernel(a, b, c)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    want = af[:, : n // 2] @ bf[: n // 2]
    if runtime_condition:
        want[:, 64:] = af @ bf[:, 64:]
    np.testing.assert_allclose(c, want, rtol=2e-3, atol=2e-2)
