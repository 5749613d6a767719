"""Programs the fuzzer found failing, as small explicit regression tests.

Each is a ``Program`` run on the target where it failed, against the interpreter. A
failure not fixed yet is ``xfail(strict=True)`` with the cause: when it is fixed the
test starts passing, strict xfail turns that into a failure, and the mark must go.
"""

from __future__ import annotations

import dataclasses

import pytest

from tile.conformance.fuzz import Program, installed_targets, run_program

TARGETS = {t.name: t for t in installed_targets()}


def _run(program: Program, target_name: str) -> None:
    target = TARGETS.get(target_name)
    if target is None:
        pytest.skip(f"target {target_name} is not installed here")
    outcome = run_program(program, target)
    assert outcome.status == "pass", f"{outcome.status}: {outcome.detail}"


# A T.Pipelined loop whose consumer statement writes a *shared* buffer (here it sums the
# chunks into W) failed on sm_80 and gfx90a (and on sm_90a when a ragged copy keeps it off
# TMA), where the loop becomes an async-copy ring (tile.ir.gpu.async_ring): TVM's
# ThreadSync("shared.dyn"), run by code generation, wants a barrier inside the ring's
# `if k_step - 1 >= 0` guard of the consumer and refused ("Cannot insert syncs inside
# condition"): it only places one under a condition marked thread-invariant. The ring now
# marks its step guards (`tvm_thread_invariant`), which depend on the step alone.
PIPELINED_SHARED_ACCUMULATOR = Program(
    dtype="float32", M=32, N=32, bm=16, bn=16, threads=128, scope="shared", stages=2, ops=(),
    style="inline", guard="none", epilogue="store",
)


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "rocm-emu-gfx90a"])
@pytest.mark.parametrize("change", [{}, {"stages": 3, "N": 80, "bn": 16}])
def test_pipelined_loop_accumulating_in_shared_memory_on_async_copy_rings(
    target_name: str, change: dict[str, object]
) -> None:
    _run(dataclasses.replace(PIPELINED_SHARED_ACCUMULATOR, **change), target_name)  # type: ignore[arg-type]


@pytest.mark.parametrize("target_name", ["cpu", "cuda-emu-sm_90a"])
def test_pipelined_loop_accumulating_in_shared_memory_elsewhere(target_name: str) -> None:
    _run(PIPELINED_SHARED_ACCUMULATOR, target_name)


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "rocm-emu-gfx90a"])
def test_the_same_loop_accumulating_in_a_fragment_on_async_copy_rings(target_name: str) -> None:
    _run(dataclasses.replace(PIPELINED_SHARED_ACCUMULATOR, scope="fragment"), target_name)


# T.reduce_max / T.reduce_min of bfloat16 started from TVM's `infinity("bfloat16")`, which
# TVM cannot make ("Cannot decide infinity for type T.bfloat16"): every such kernel failed to
# compile. The identity is now built as a bfloat16 FloatImm (tile.ir.ops.reduce.infinity),
# which TVM's CUDA/HIP code generators printed as `inff`: tile.ir.gpu.codegen now spells
# non-finite bfloat16 constants as a cast float32 constant.
BFLOAT16_MIN_ROWS = Program(
    dtype="bfloat16", M=50, N=39, bm=2, bn=32, threads=2, scope="fragment", stages=None, ops=(),
    style="inline", guard="none", epilogue="reduce", reduce_kind="min", dim=1, clear=True,
)


@pytest.mark.parametrize("change", [{}, {"reduce_kind": "max", "clear": False, "init": 3.0, "dim": 0,
                                         "scope": "shared"}])
def test_bfloat16_min_and_max_reductions_on_cpu(change: dict[str, object]) -> None:
    _run(dataclasses.replace(BFLOAT16_MIN_ROWS, **change), "cpu")  # type: ignore[arg-type]


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "rocm-emu-gfx90a"])
@pytest.mark.parametrize("kind", ["min", "max"])
def test_bfloat16_min_and_max_reductions_on_gpu_targets(target_name: str, kind: str) -> None:
    _run(dataclasses.replace(BFLOAT16_MIN_ROWS, threads=32, reduce_kind=kind), target_name)


# T.atomic_add of a one-element *shared* tile was done by every thread of the block on the
# GPU targets (the region lowering left no loop for thread binding to distribute), so the
# destination received threads x the value: 1121 instead of 36 with 32 threads. Fixed in
# tile.ir.ops.atomic.lower_atomic_update (a one-trip T.Parallel loop).
ONE_ELEMENT_SHARED_ATOMIC = Program(
    dtype="int32", M=1, N=1, bm=1, bn=1, threads=32, scope="shared", stages=None, ops=(),
    style="inline", guard="none", epilogue="atomic",
)


@pytest.mark.parametrize("target_name", ["cpu", "cuda-emu-sm_80", "rocm-emu-gfx90a"])
@pytest.mark.parametrize("change", [{}, {"dtype": "float32", "threads": 64, "M": 3, "N": 2}])
def test_an_atomic_add_of_a_one_element_shared_tile_happens_once_per_block(
    target_name: str, change: dict[str, object]
) -> None:
    _run(dataclasses.replace(ONE_ELEMENT_SHARED_ATOMIC, **change), target_name)  # type: ignore[arg-type]


# On the CPU, a bfloat16 tile copied from X (8 x 49) in 4 x 32 tiles and stored back lost
# the first element of rows 1-3 of every row tile (it read as 0). LLVM 22 (TVM's) stores a
# truncating masked store with a one-lane constant mask as a 32-bit store
# (llvm/llvm-project#179489): the tail's last bfloat16 store wrote 4 bytes, zeroing the
# next row's first element. Fixed in tile-backends-cpu llvm_workarounds (no if-conversion
# for kernels with a guarded narrow store).
BFLOAT16_RAGGED_COPY = Program(
    dtype="bfloat16", M=8, N=49, bm=4, bn=32, threads=4, scope="fragment", stages=None, ops=(),
    style="inline", guard="none", epilogue="store",
)


def test_a_ragged_bfloat16_copy_on_cpu() -> None:
    _run(BFLOAT16_RAGGED_COPY, "cpu")


def test_the_same_ragged_copy_in_float16_on_cpu() -> None:
    _run(dataclasses.replace(BFLOAT16_RAGGED_COPY, dtype="float16"), "cpu")


# sm_90a: a T.Pipelined loop copying 2 x 16 int8 tiles through TMA put the ring's stages
# at shared addresses that were not 128-byte aligned (32-byte stages, and the ring placed
# at byte 64 after another 32-byte buffer); the emulator reported the fault TMA would raise
# ("the shared destination must be 128-byte aligned"). Fixed in the CUDA backend's
# sm90a_warp_specialize_loop: stages padded to the TMA alignment, the ring's start aligned.
SMALL_INT8_TMA_RING = Program(
    dtype="int8", M=73, N=64, bm=2, bn=16, threads=128, scope="shared", stages=2, ops=(),
    style="inline", guard="none", epilogue="store",
)


@pytest.mark.parametrize("change", [{}, {"dtype": "float16", "bn": 8}, {"stages": 3, "bm": 3}])
def test_a_tma_ring_of_small_tiles_on_sm90a(change: dict[str, object]) -> None:
    _run(dataclasses.replace(SMALL_INT8_TMA_RING, **change), "cuda-emu-sm_90a")  # type: ignore[arg-type]


# gfx90a: T.min of a uint16 value and a constant printed as `tile::min(a + (ushort)3, (ushort)1)`:
# C++ promotes the sum to int and no overload takes (int, unsigned short) ("call to 'min' is
# ambiguous"); found by the campaign of 2026-11-26 (seed 5) and by session 9 for int8/int16
# max/min. The same promotion is a wrong result on every GPU target once the sum wraps (TIR
# wraps it to 16 bits, C++ does not): tile.ir.gpu.narrow_integers now casts such operands back.
UINT16_MIN_ON_HIP = Program(
    dtype="uint16", M=57, N=71, bm=8, bn=8, threads=64, scope="shared", stages=None,
    ops=(("add", 3.0), ("add", 2.0), ("min", 1.0)), style="inline", guard="named",
    epilogue="cumsum", reverse=True,
)


@pytest.mark.parametrize("change", [{}, {"dtype": "int8", "ops": (("mul", 3.0), ("max", -2.0))},
                                    {"dtype": "int16", "ops": (("add", 5.0), ("min", 4.0)), "guard": "none"}])
def test_narrow_integer_min_and_max_on_gfx90a(change: dict[str, object]) -> None:
    _run(dataclasses.replace(UINT16_MIN_ON_HIP, **change), "rocm-emu-gfx90a")  # type: ignore[arg-type]


def _wrapping_kernel(n: int) -> object:
    import tile.lang.language as T

    @T.prim_func
    def wraps(X: T.Tensor((n,), "uint16"), Y: T.Tensor((n,), "uint16"), Z: T.Tensor((n,), "int8")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(n):
                Y[i] = T.min(X[i] + T.uint16(60000), T.uint16(5000))
                Z[i] = T.max(T.Cast("int8", X[i]) * T.int8(3), T.int8(-100))
                if X[i] + T.uint16(60000) < T.uint16(3000):
                    Y[i] = Y[i] + T.uint16(1)

    return wraps


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "rocm-emu-gfx90a"])
def test_narrow_integer_sums_wrap_before_they_are_compared(target_name: str) -> None:
    import numpy as np

    import tile.lang as tilelang

    target = TARGETS.get(target_name)
    if target is None:
        pytest.skip(f"target {target_name} is not installed here")
    n = 256
    x = np.arange(0, n * 39, 39, dtype=np.uint16)
    y, z = np.zeros(n, np.uint16), np.zeros(n, np.int8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILE_DEVICE", target.device)
        tilelang.compile(_wrapping_kernel(n), target=target.target)(x, y, z)
    wrapped = x + np.uint16(60000)  # numpy wraps uint16 as TIR does
    want_y = np.minimum(wrapped, np.uint16(5000)) + (wrapped < 3000).astype(np.uint16)
    want_z = np.maximum(x.astype(np.int8) * np.int8(3), np.int8(-100))
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


# A ragged int16 tile copied into shared memory: the out-of-bounds arm of the vectorized copy
# is a 16-bit Broadcast of 8 lanes, which TVM prints as `make_int4` with eight `(short)0`
# arguments (nvcc and the host compiler reject it). Found by the campaign of 2026-11-27 on
# sm_80 and gfx90a; tile.ir.gpu.legalize_vectors now packs 16-bit broadcasts as it did 8-bit ones.
RAGGED_INT16_SHARED_COPY = Program(
    dtype="int16", M=79, N=80, bm=32, bn=16, threads=32, scope="shared", stages=1, ops=(),
    style="inline", guard="inline", epilogue="reduce", reduce_kind="min", dim=1,
)


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "rocm-emu-gfx90a"])
@pytest.mark.parametrize("change", [{}, {"dtype": "uint16", "stages": None, "bn": 8, "epilogue": "store"}])
def test_a_ragged_16_bit_copy_into_shared_memory(target_name: str, change: dict[str, object]) -> None:
    _run(dataclasses.replace(RAGGED_INT16_SHARED_COPY, **change), target_name)  # type: ignore[arg-type]


# A bfloat16 shared tile of 4 columns: TVM declares the dynamic shared array with its vector type,
# `extern __shared__ nv_bfloat164 W_ptr[]`, a type its own prelude in the kernel source defines;
# the emulator's wrapper defined the array before including the source ("'nv_bfloat164' does
# not name a type"). Found by the campaign of 2026-11-27 on sm_80; the wrapper now defines such
# an array after the source (tile.backends.cpu.simt wrapper_source).
BFLOAT16_FOUR_COLUMN_SHARED_TILE = Program(
    dtype="bfloat16", M=22, N=36, bm=32, bn=4, threads=32, scope="shared", stages=None, ops=(),
    style="named", guard="inline", epilogue="store",
)


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "cuda-emu-sm_90a"])
def test_a_vector_typed_dynamic_shared_array_under_emulation(target_name: str) -> None:
    _run(BFLOAT16_FOUR_COLUMN_SHARED_TILE, target_name)


# A pipelined loop over one-row (or one-column) shared tiles failed on every GPU target in TVM's
# MergeSharedMemoryAllocations ("Check failed: (it != scope.buffer_byte_offsets.end())"): the
# pass keeps dynamic shared arrays of at most 4 bytes off the free lists it later computes
# offsets from, so with two shared buffers a tiny one had none. Found by the session-9 campaign
# (seed 26) and twice more by the campaign of 2026-11-27; tile.ir.gpu.codegen now widens such
# buffers to 8 bytes before TVM's pipeline (pad_small_shared_buffers).
ONE_ROW_PIPELINED_TILE = Program(
    dtype="float16", M=1, N=63, bm=1, bn=1, threads=32, scope="shared", stages=1, ops=(("max", -0.5),),
    style="inline", guard="none", epilogue="reduce", clear=False, init=1.0,
)  # fmt: skip


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "cuda-emu-sm_90a", "rocm-emu-gfx90a"])
@pytest.mark.parametrize(
    "change",  # and two of the campaign of 2026-11-27 (seed 27): one row of four uint8, one int16 column
    [{}, {"dtype": "uint8", "M": 48, "N": 7, "bn": 4, "threads": 64, "stages": 2, "ops": (), "style": "named",
          "guard": "inline", "epilogue": "cumsum", "reverse": True},
     {"dtype": "int16", "M": 44, "N": 13, "bm": 2, "threads": 128, "ops": (), "guard": "inline",
      "epilogue": "cumsum"}],
)  # fmt: skip
def test_a_pipelined_loop_over_one_row_shared_tiles(target_name: str, change: dict[str, object]) -> None:
    _run(dataclasses.replace(ONE_ROW_PIPELINED_TILE, **change), target_name)  # type: ignore[arg-type]


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80"])
def test_the_same_tiles_unpipelined_or_two_rows_compile(target_name: str) -> None:
    _run(dataclasses.replace(ONE_ROW_PIPELINED_TILE, stages=None), target_name)
    _run(dataclasses.replace(ONE_ROW_PIPELINED_TILE, bm=2, bn=2, M=2), target_name)


# One-element shared tiles rewritten through named values: "Cannot insert syncs inside condition"
# in TVM's ThreadSync. Found by the session-9 campaign on sm_80 (int8, guarded); gfx90a failed the
# same way, and so did float32 and the unguarded program (campaign of 2026-11-27, also with an
# atomic epilogue). The one-element T.Parallel runs on thread 0 only (`if threadIdx.x < 1`), where
# `v = W[0, 0]` and then `W[0, 0] = f(v)` are two statements at one thread-independent address;
# ThreadSync assumed every thread runs them (a read/write race needing a barrier between them)
# and could not put that barrier under the thread condition. tile now plans the barriers itself
# (tile.ir.gpu.barriers): a region only one thread passes needs none among its own accesses, and
# the barriers its accesses need against the rest of the block go outside the condition.
GUARDED_ONE_ELEMENT_STORE = Program(
    dtype="int8", M=16, N=53, bm=1, bn=1, threads=128, scope="shared", stages=None, ops=(("mul", 1.0),),
    style="named", guard="named", epilogue="store",
)  # fmt: skip


@pytest.mark.parametrize("target_name", ["cuda-emu-sm_80", "cuda-emu-sm_90a", "rocm-emu-gfx90a"])
@pytest.mark.parametrize(
    "change",  # and one of the campaign of 2026-11-27 (seed 27): float32, folded by T.atomic_max;
    # and the nightly run of 2026-11-27 (seed 1127, on 3f5df41): the tile scanned by T.cumsum
    [{}, {"dtype": "float32", "M": 10, "N": 58, "threads": 64, "ops": (("max", -1.5), ("max", -1.5)),
          "guard": "inline", "epilogue": "atomic", "atomic_kind": "max"},
     {"dtype": "int32", "M": 33, "N": 68, "threads": 64, "ops": (("neg", 1.0),), "guard": "none",
      "epilogue": "cumsum", "dim": 1}],
)  # fmt: skip
def test_a_guarded_store_of_one_element_shared_tiles(target_name: str, change: dict[str, object]) -> None:
    _run(dataclasses.replace(GUARDED_ONE_ELEMENT_STORE, **change), target_name)  # type: ignore[arg-type]


@pytest.mark.parametrize("change", [{"style": "inline"}, {"bm": 2}])
def test_the_same_store_in_one_statement_or_two_rows_compiles(change: dict[str, object]) -> None:
    _run(dataclasses.replace(GUARDED_ONE_ELEMENT_STORE, **change), "cuda-emu-sm_80")  # type: ignore[arg-type]
