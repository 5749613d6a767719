"""tile.ir.gpu.barriers: the block barriers a kernel's shared-memory accesses need.

Before/after pairs on hand-written kernels, no device. Where TVM's ThreadSync plans a
kernel, tile's plan must be the same one (the same barriers before the same statements);
the kernels it refused (a region one thread runs, a block-uniform ``if``) get barriers
only where threads of the block really race, outside every thread-dependent condition.
"""

from __future__ import annotations

from typing import Any

import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from tile.ir.errors import BackendError
from tile.ir.gpu.barriers import THREAD_RANGE_SYNC, plan_barriers


def _tvm_plan(func: Any) -> Any:
    mod = tvm.IRModule({"main": func})
    for scope in ("shared", "shared.dyn"):
        mod = tvm.s_tir.transform.ThreadSync(scope)(mod)
    return mod["main"]


def _tile_plan(func: Any, range_barriers: int | None = None) -> Any:
    return plan_barriers(tvm.IRModule({"main": func}), range_barriers)["main"]


def _outline(func: Any) -> list[str]:
    """The kernel's control flow and shared accesses, one entry per statement, barriers as ``sync``."""
    out: list[str] = []

    def visit(stmt: Any, depth: int) -> None:
        pad = "  " * depth
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, depth)
        elif isinstance(stmt, tirx.AttrStmt):
            visit(stmt.body, depth)
        elif isinstance(stmt, tirx.For):
            out.append(f"{pad}for {stmt.loop_var.name}")
            visit(stmt.body, depth + 1)
        elif isinstance(stmt, tirx.IfThenElse):
            out.append(f"{pad}if")
            visit(stmt.then_case, depth + 1)
            if stmt.else_case is not None:
                out.append(f"{pad}else")
                visit(stmt.else_case, depth + 1)
        elif isinstance(stmt, tirx.Evaluate) and "tvm_storage_sync" in str(stmt):
            out.append(f"{pad}sync")
        elif isinstance(stmt, tirx.Evaluate) and THREAD_RANGE_SYNC in str(stmt):
            first, count = (int(a.value) for a in stmt.value.args[1:])
            out.append(f"{pad}sync threads [{first}, {first + count})")
        elif isinstance(stmt, tirx.Evaluate) and "tvm_access_ptr" in str(stmt):
            out.append(f"{pad}call {stmt.value.args[0].value}")
        elif isinstance(stmt, tirx.BufferStore):
            out.append(f"{pad}store {stmt.buffer.name}")
        elif isinstance(stmt, tirx.Bind):
            out.append(f"{pad}let {stmt.var.name}")

    visit(func.body, 0)
    return out


def _same_plan_as_tvm(func: Any) -> list[str]:
    ours = _tile_plan(func)
    theirs = _tvm_plan(func)
    assert _outline(ours) == _outline(theirs)
    return _outline(ours)


# ---- kernels TVM plans: the plan must be TVM's ------------------------------------------


@T.prim_func
def streamed(A: T.Buffer((1024,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    for k in range(8):
        S[tx] = A[k * 128 + tx]
        C[tx] = C[tx] + S[127 - tx]


def test_a_loop_carried_overwrite_gets_a_barrier_at_the_top() -> None:
    assert _same_plan_as_tvm(streamed) == ["for k", "  sync", "  store S", "  sync", "  store C"]


@T.prim_func
def static_buffers_in_turn(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared")
    S[tx] = A[tx]
    C[tx] = S[127 - tx]
    U = T.alloc_buffer((128,), "float32", scope="shared")
    U[tx] = C[tx]
    C[tx] = U[127 - tx]


def side_by_side(scope: str) -> Any:
    @T.prim_func
    def func(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
        tx = T.launch_thread("threadIdx.x", 128)
        S = T.alloc_buffer((128,), "float32", scope=scope)
        U = T.alloc_buffer((128,), "float32", scope=scope)
        S[tx] = A[tx]
        C[tx] = S[127 - tx]
        U[tx] = A[tx] * T.float32(2)
        C[tx] = C[tx] + S[tx]

    return func


def test_static_buffers_that_may_share_bytes_are_ordered() -> None:
    # S is dead when U is born: TVM's StorageRewrite may give U the bytes S had, so U's
    # first write waits for the other threads' last reads of S (TVM plans after the merge)
    assert _outline(_tile_plan(static_buffers_in_turn)) == ["store S", "sync", "store C", "sync", "store U",
                                                            "sync", "store C"]  # fmt: skip


def test_a_producer_consumer_pair_gets_one_barrier_and_own_elements_none() -> None:
    # S[127 - tx] waits for the other threads' writes; S[tx] is the thread's own element;
    # U, alive beside S, is other memory
    expected = ["store S", "sync", "store C", "store U", "store C"]
    assert _same_plan_as_tvm(side_by_side("shared")) == expected


def test_dynamic_shared_buffers_count_as_one_memory() -> None:
    # TVM merges the shared.dyn buffers into one arena and plans them as one memory
    expected = ["store S", "sync", "store C", "sync", "store U", "store C"]
    assert _same_plan_as_tvm(side_by_side("shared.dyn")) == expected


# ---- a region one thread runs: fuzz finding 9 -----------------------------------------


@T.prim_func
def one_thread_update(A: T.Buffer((128,), "int8"), C: T.Buffer((128,), "int8")):
    tx = T.launch_thread("threadIdx.x", 128)
    W = T.alloc_buffer((1, 1), "int8", scope="shared.dyn")
    W[0, 0] = A[0]
    if tx < 1:
        v: T.int8 = W[0, 0]
        W[0, 0] = v * T.int8(3)
    C[tx] = W[0, 0]


def test_tvm_refuses_a_region_one_thread_runs() -> None:
    with pytest.raises(Exception, match="Cannot insert syncs inside condition"):
        _tvm_plan(one_thread_update)


def test_a_region_one_thread_runs_needs_no_barrier_inside_it() -> None:
    # the block's write before the region and its reads after it are still ordered
    assert _outline(_tile_plan(one_thread_update)) == ["store W", "sync", "if", "  store v", "  store W",
                                                       "sync", "store C"]  # fmt: skip


@T.prim_func
def one_thread_loop(C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((16,), "float32", scope="shared")
    if tx == 5:
        for i in range(15):
            S[i + 1] = S[i] + T.float32(1)
    C[tx] = S[tx % 16]


def test_a_loop_one_thread_runs_carries_nothing_across_threads() -> None:
    assert _outline(_tile_plan(one_thread_loop)) == ["if", "  for i", "    store S", "sync", "store C"]


@T.prim_func
def many_threads_guarded(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared")
    if tx < 64:
        S[tx] = A[tx]
        C[tx] = S[63 - tx]


def test_a_race_under_a_thread_condition_is_an_error_without_range_barriers() -> None:
    # a target that cannot synchronize part of a block (ROCm): no barrier fits inside the if
    with pytest.raises(BackendError, match=r"keeps threads \[0, 64\)") as caught:
        _tile_plan(many_threads_guarded)
    assert "no barrier over part of a block" in (caught.value.hint or "")


# ---- a warp-aligned range of threads: a barrier of those threads alone ------------------


@T.prim_func
def warp_group_1(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    tx = T.launch_thread("threadIdx.x", 256)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    if tx // 128 == 1:  # T.ws(1)
        S[tx - 128] = A[tx]
        C[tx] = S[255 - tx]


@pytest.mark.parametrize(("func", "kept"), [(many_threads_guarded, "[0, 64)"), (warp_group_1, "[128, 256)")])
def test_a_race_under_a_warp_aligned_range_gets_that_ranges_barrier(func: Any, kept: str) -> None:
    expected = ["if", "  store S", f"  sync threads {kept}", "  store C"]
    assert _outline(_tile_plan(func, range_barriers=32)) == expected


@T.prim_func
def range_then_block(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared")
    R = T.alloc_buffer((64,), "float32", scope="shared")
    S[tx] = A[tx]
    if tx < 64:
        R[tx] = A[tx] * T.float32(2)
        C[tx] = R[63 - tx]
        C[tx] = C[tx] + S[127 - tx]  # written by threads 64..127 too


def test_a_range_barrier_does_not_order_the_rest_of_the_block() -> None:
    # the barrier of threads 0..63 inside the if does not wait for threads 64..127, whose
    # writes of S the last read needs: a block barrier before the if orders those
    assert _outline(_tile_plan(range_then_block, range_barriers=32)) == [
        "store S", "sync", "if", "  store R", "  sync threads [0, 64)", "  store C", "  store C",
    ]  # fmt: skip


def test_a_range_that_splits_a_warp_is_an_error() -> None:
    # many_threads_guarded under `if tx < 48`: warp 1 would be split by the barrier
    def to_48(imm: Any) -> Any:
        return tirx.const(48, imm.ty) if int(imm.value) == 64 else imm

    ragged_range = tvm_ffi.structural_map(many_threads_guarded, (tirx.IntImm, to_48))
    with pytest.raises(BackendError, match=r"keeps threads \[0, 48\)") as caught:
        _tile_plan(ragged_range, range_barriers=32)
    assert "multiples of 32" in (caught.value.hint or "")


# ---- a block-uniform condition: TileLang's block-sparse attention ------------------------


@T.prim_func
def register_mask(A: T.Buffer((1024,), "float32"), Mask: T.Buffer((4, 8), "bool"),
                  C: T.Buffer((512,), "float32")):  # fmt: skip
    bx = T.launch_thread("blockIdx.x", 4)
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    m = T.alloc_buffer((8,), "bool", scope="local")
    for i in range(8):
        m[i] = Mask[bx, i]
    for k in range(8):
        if m[k]:
            S[tx] = A[k * 128 + tx]
            C[bx * 128 + tx] = C[bx * 128 + tx] + S[127 - tx]


def test_tvm_refuses_a_barrier_under_a_block_mask() -> None:
    with pytest.raises(Exception, match="Cannot insert syncs inside condition"):
        _tvm_plan(register_mask)


def test_a_block_mask_in_registers_every_thread_stored_alike_holds_its_barrier() -> None:
    expected = ["for i", "  store m", "for k", "  sync", "  if", "    store S", "    sync", "    store C"]
    assert _outline(_tile_plan(register_mask)) == expected


@T.prim_func
def split_by_block(A: T.Buffer((1024,), "float32"), C: T.Buffer((512,), "float32")):
    bx = T.launch_thread("blockIdx.x", 4)
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    trips = T.alloc_buffer((1,), "int32", scope="local")
    trips[0] = 4 + T.if_then_else(bx < 2, 1, 0)  # the sparse GQA decoders' share of the KV blocks
    if trips[0] > 4:
        S[tx] = A[tx]
        C[bx * 128 + tx] = S[127 - tx]


def test_a_register_chosen_by_if_then_else_on_the_block_index_is_block_uniform() -> None:
    # before: the if_then_else call made the register thread-dependent, and the barrier a
    # refusal ("a condition that depends on the thread index")
    assert _outline(_tile_plan(split_by_block)) == ["store trips", "if", "  store S", "  sync", "  store C"]


@T.prim_func
def barrier_only_on_one_path(A: T.Buffer((256,), "float32"), Mask: T.Buffer((4,), "bool"),
                             C: T.Buffer((512,), "float32")):  # fmt: skip
    bx = T.launch_thread("blockIdx.x", 4)
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
    S[tx] = A[tx]
    if Mask[bx]:
        S[128 + tx] = A[128 + tx]
        C[bx * 128 + tx] = S[255 - tx]
    C[bx * 128 + tx] = C[bx * 128 + tx] + S[127 - tx]


def test_a_barrier_inside_a_block_uniform_if_orders_nothing_after_it() -> None:
    # when Mask[bx] is false the barrier inside never runs: the last read needs its own
    assert _outline(_tile_plan(barrier_only_on_one_path)) == [
        "store S", "if", "  store S", "  sync", "  store C", "sync", "store C",
    ]  # fmt: skip


@T.prim_func
def thread_dependent_mask(A: T.Buffer((1024,), "float32"), Mask: T.Buffer((128,), "bool"),
                          C: T.Buffer((128,), "float32")):  # fmt: skip
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    if Mask[tx]:
        S[tx] = A[tx]
        C[tx] = S[127 - tx]


def test_a_mask_read_at_the_thread_index_is_not_block_uniform() -> None:
    for range_barriers in (None, 32):  # no range of threads either
        with pytest.raises(BackendError, match="depends on the thread index"):
            _tile_plan(thread_dependent_mask, range_barriers)


def test_planning_twice_adds_nothing() -> None:
    kernels = (static_buffers_in_turn, streamed, one_thread_update, register_mask, barrier_only_on_one_path)
    for func in kernels:
        once = _tile_plan(func)
        assert tvm_ffi.structural_equal(_tile_plan(once), once)
    for func in (many_threads_guarded, warp_group_1, range_then_block, user_sync_in_warp_group_1):
        once = _tile_plan(func, range_barriers=32)
        assert tvm_ffi.structural_equal(_tile_plan(once, range_barriers=32), once)


@T.prim_func
def register_by_pointer(A: T.Buffer((1024,), "float32"), C: T.Buffer((512,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    m = T.alloc_buffer((8,), "int32", scope="local")
    T.evaluate(T.call_extern("int32", "fill_per_thread", T.address_of(m[0])))
    for k in range(8):
        if m[k] > 0:
            S[tx] = A[k * 128 + tx]
            C[tx] = C[tx] + S[127 - tx]


def test_a_register_written_through_a_pointer_is_not() -> None:
    with pytest.raises(BackendError, match="depends on the thread index"):
        _tile_plan(register_by_pointer)


# ---- accesses no two threads kept by the condition share --------------------------------


@T.prim_func
def even_threads_write_odd(C: T.Buffer((32,), "float32")):
    tx = T.launch_thread("threadIdx.x", 32)
    S = T.alloc_buffer((32,), "float32", scope="shared")
    if tx % 2 == 0:  # TileLang's issue 1026
        a: T.float32 = S[tx]
        S[tx ^ 1] = a
    C[tx] = S[tx]


def test_even_threads_reading_even_and_writing_odd_elements_need_no_barrier() -> None:
    # inside the if, the even threads read even elements and write odd ones: no race there;
    # the block's read after the if still waits for the odd writes
    for range_barriers in (None, 32):
        assert _outline(_tile_plan(even_threads_write_odd, range_barriers)) == [
            "if", "  store a", "  store S", "sync", "store C",
        ]  # fmt: skip


@T.prim_func
def even_threads_write_even(C: T.Buffer((32,), "float32")):
    tx = T.launch_thread("threadIdx.x", 32)
    S = T.alloc_buffer((32,), "float32", scope="shared")
    if tx % 2 == 0:
        a: T.float32 = S[tx]
        S[(tx + 2) % 32] = a  # the element thread tx + 2 reads
    C[tx] = S[tx]


def test_even_threads_writing_what_other_even_threads_read_still_race() -> None:
    with pytest.raises(BackendError, match="depends on the thread index"):
        _tile_plan(even_threads_write_even, range_barriers=32)


@T.prim_func
def user_sync_in_warp_group_1(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    tx = T.launch_thread("threadIdx.x", 256)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    if tx >= 128:
        S[tx - 128] = A[tx]
        T.tvm_storage_sync("shared")  # T.sync_threads() inside T.ws(1)
        C[tx] = S[255 - tx]


def test_the_users_block_barrier_inside_a_range_syncs_that_range() -> None:
    # threads 0..127 never reach it: __syncthreads() there would hang the block
    assert _outline(_tile_plan(user_sync_in_warp_group_1, range_barriers=32)) == [
        "if", "  store S", "  sync threads [128, 256)", "  store C",
    ]  # fmt: skip
    with pytest.raises(BackendError, match=r"T.sync_threads\(\) waits for the whole block inside"):
        _tile_plan(user_sync_in_warp_group_1)


# ---- atomics: one kind on one element commutes -------------------------------------------


@T.prim_func
def atomic_adds_in_a_loop(A: T.Buffer((32,), "float32"), C: T.Buffer((8,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((1,), "float32", scope="shared.dyn")
    for k in range(4):
        if tx < 8:  # a reducer's T.Parallel(8) over a block of 128 threads
            T.evaluate(T.call_extern("float32", "tile::atomic_add", T.address_of(S[0]), A[k * 8 + tx]))


@T.prim_func
def atomic_add_then_max(A: T.Buffer((32,), "float32"), C: T.Buffer((8,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((1,), "float32", scope="shared.dyn")
    if tx < 8:
        T.evaluate(T.call_extern("float32", "tile::atomic_add", T.address_of(S[0]), A[tx]))
        T.evaluate(T.call_extern("float32", "tile::atomic_max", T.address_of(S[0]), A[tx]))


def test_atomics_of_one_kind_need_no_barrier_between_them() -> None:
    # every thread's add lands whatever the order (issue: the loop-carried add looked like a
    # read of the element the other threads wrote, and a barrier inside `tx < 8` is refused)
    assert _outline(_tile_plan(atomic_adds_in_a_loop, range_barriers=32)) == ["for k", "  if"]


def test_an_atomic_of_another_kind_on_the_element_still_waits() -> None:
    # max after add: without a barrier a thread's max could see the element before the adds
    with pytest.raises(BackendError, match=r"keeps threads \[0, 8\)"):
        _tile_plan(atomic_add_then_max, range_barriers=32)


# ---- writes after writes ------------------------------------------------------------------


@T.prim_func
def fill_then_copy(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
    for i in range(2):  # T.fill: element i * 128 + tx on thread tx
        S[i * 128 + tx] = T.float32(0)
    for i in range(2):  # T.copy in pairs: element 2 * tx + i on thread tx
        S[tx * 2 + i] = A[tx * 2 + i]
    for i in range(2):
        C[i * 128 + tx] = S[i * 128 + tx]


@T.prim_func
def own_element_overwritten(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    S[tx] = T.float32(0)
    S[tx] = A[tx]
    C[tx] = S[tx]


def test_another_threads_write_to_the_element_waits_for_the_first() -> None:
    # thread 1 fills element 2, which thread 1 copies into as well, but element 128 is filled by
    # thread 0 and copied into by thread 64: without a barrier thread 0's fill may land last
    planned = _outline(_tile_plan(fill_then_copy))
    assert planned == ["for i", "  store S", "sync", "for i", "  store S", "sync", "for i", "  store C"]
    # TVM's ThreadSync orders reads against writes only: it lets this race through
    assert _outline(_tvm_plan(fill_then_copy)) == ["for i", "  store S", "for i", "  store S", "sync",
                                                   "for i", "  store C"]  # fmt: skip


def test_a_thread_overwriting_its_own_element_needs_no_barrier() -> None:
    assert _same_plan_as_tvm(own_element_overwritten) == ["store S", "store S", "store C"]


@T.prim_func
def row_of_columns(A: T.Buffer((128, 4), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128, 4), "float32", scope="shared.dyn")
    S[tx, 0] = A[tx, 0]  # an unrolled store of each thread's own row: elements 4 * tx + c
    S[tx, 1] = A[tx, 1]
    S[tx, 2] = A[tx, 2]
    S[tx, 3] = A[tx, 3]
    C[tx] = S[127 - tx, 0]


@T.prim_func
def one_thread_rewrites_its_own(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    S[tx] = A[tx]
    if tx == 0:
        S[0] = T.float32(0)  # thread 0 wrote element 0 above: no other thread did
    C[tx] = S[127 - tx]


@T.prim_func
def two_threads_meet_under_a_condition(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((128,), "float32", scope="shared.dyn")
    S[tx] = A[tx]
    if tx == 1:
        S[0] = T.float32(0)  # thread 0 wrote element 0 above
    C[tx] = S[127 - tx]


def test_writes_that_never_meet_across_threads_need_no_barrier() -> None:
    assert _same_plan_as_tvm(row_of_columns) == ["store S"] * 4 + ["sync", "store C"]
    expected = ["store S", "if", "  store S", "sync", "store C"]
    assert _outline(_tile_plan(one_thread_rewrites_its_own)) == expected
    assert _outline(_tile_plan(two_threads_meet_under_a_condition)) == [
        "store S", "sync", "if", "  store S", "sync", "store C",
    ]  # fmt: skip


@T.prim_func
def fill_then_matrix_store(A: T.Buffer((256,), "float16"), C: T.Buffer((256,), "float16")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((256,), "float16", scope="shared.dyn")
    for i in range(2):  # T.fill
        S[i * 128 + tx] = T.float16(7)
    # stmatrix: a warp stores four 8x8 matrices; which thread's values land where is the
    # instruction's business, the pointer names only the region
    T.evaluate(T.call_extern("void", "tile_stmatrix_x4", T.tvm_access_ptr(
        T.type_annotation("float16"), S.data, (tx // 32) * 64, 64, 2)))
    for i in range(2):
        C[i * 128 + tx] = S[i * 128 + tx]


@T.prim_func
def matrix_store_then_fix_up(A: T.Buffer((256,), "float16"), C: T.Buffer((256,), "float16")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((256,), "float16", scope="shared.dyn")
    T.evaluate(T.call_extern("void", "tile_stmatrix_x4", T.tvm_access_ptr(
        T.type_annotation("float16"), S.data, (tx // 32) * 64, 64, 2)))
    if tx == 5:
        S[0] = T.float16(0)
    for i in range(2):
        C[i * 128 + tx] = S[i * 128 + tx]


@T.prim_func
def two_async_copies(A: T.Buffer((512,), "float16"), C: T.Buffer((256,), "float16")):
    tx = T.launch_thread("threadIdx.x", 128)
    S = T.alloc_buffer((2, 256), "float16", scope="shared.dyn")
    for stage in range(2):  # a cp.async ring's prologue: one stage after the other
        T.evaluate(T.call_extern("void", "tile_cp_async_16", T.tvm_access_ptr(
            T.type_annotation("float16"), S.data, stage * 256 + tx * 2, 2, 2),
            T.address_of(A[stage * 256 + tx * 2])))
    for i in range(2):
        C[i * 128 + tx] = S[1, i * 128 + tx]


def test_a_pointer_write_over_another_threads_store_waits_for_it() -> None:
    # T.fill(S, 7) then stmatrix into S: without a barrier a warp's fill may land after another
    # warp's matrices (the sm_90a emulator kept fill values where the GEMM's were due)
    assert _outline(_tile_plan(fill_then_matrix_store)) == [
        "for i", "  store S", "sync", "call tile_stmatrix_x4", "sync", "for i", "  store C",
    ]  # fmt: skip
    # TVM's ThreadSync lets it through
    assert _outline(_tvm_plan(fill_then_matrix_store)) == [
        "for i", "  store S", "call tile_stmatrix_x4", "sync", "for i", "  store C",
    ]  # fmt: skip
    # and a store after a pointer write waits for it: the pointer names no owner thread
    assert _outline(_tile_plan(matrix_store_then_fix_up)) == [
        "call tile_stmatrix_x4", "sync", "if", "  store S", "sync", "for i", "  store C",
    ]  # fmt: skip


def test_pointer_writes_after_pointer_writes_keep_tvms_plan() -> None:
    # a cp.async ring's stages are written back to back: no barrier between them
    assert _same_plan_as_tvm(two_async_copies) == [
        "for stage", "  call tile_cp_async_16", "sync", "for i", "  store C",
    ]  # fmt: skip


@T.prim_func
def fill_then_copy_2d_threads(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    tx = T.launch_thread("threadIdx.x", 64)
    ty = T.launch_thread("threadIdx.y", 2)
    S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
    for i in range(2):  # T.fill: element i * 128 + ty * 64 + tx on thread (tx, ty)
        S[i * 128 + ty * 64 + tx] = T.float32(0)
    for i in range(2):  # T.copy in pairs: element (ty * 64 + tx) * 2 + i
        S[(ty * 64 + tx) * 2 + i] = A[(ty * 64 + tx) * 2 + i]
    for i in range(2):
        C[i * 128 + ty * 64 + tx] = S[i * 128 + ty * 64 + tx]


@T.prim_func
def rows_of_2d_threads(A: T.Buffer((256,), "float32"), C: T.Buffer((128,), "float32")):
    tx = T.launch_thread("threadIdx.x", 64)
    ty = T.launch_thread("threadIdx.y", 2)
    S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
    S[(ty * 64 + tx) * 2] = A[(ty * 64 + tx) * 2]  # each thread its own pair of elements
    S[(ty * 64 + tx) * 2 + 1] = A[(ty * 64 + tx) * 2 + 1]
    C[ty * 64 + tx] = S[255 - ty * 64 - tx]


def test_writes_of_a_block_of_two_thread_dims_are_enumerated_too() -> None:
    # threads=(64, 2): the two dims are one index for the enumeration; before, a store in such
    # a block was not enumerable and the fill's elements could land after the copy's
    assert _outline(_tile_plan(fill_then_copy_2d_threads)) == [
        "for i", "  store S", "sync", "for i", "  store S", "sync", "for i", "  store C",
    ]  # fmt: skip
    assert _same_plan_as_tvm(rows_of_2d_threads) == ["store S", "store S", "sync", "store C"]
