"""A thread's atomic that returns the old value, and ``T.atomic_or/and/xor``, on every backend.

``T.atomic_add(A[i], v, return_prev=True)`` (and max, min, the x2/x4 forms) and
``T.atomic_or/and/xor`` are per-thread atomics; the CPU backend refused them (TileLang's
testing/python/cpu runs them on its C backend as plain read-modify-writes). The CPU now
makes each the plain update under the atomic marker (``tile.ir.transform.lower_host_atomics``):
a block is one thread there and a kernel that updates global memory runs its blocks in turn,
so the update is atomic and the returned value is the one before it.

References: numpy (prefix sums and running extremes in the CPU's iteration order; where the
order is a GPU's choice, properties every order has: tickets form a permutation, exactly one
block sees the last count). The same kernels run on the CUDA emulator as a cross-check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.testsupport.markers import needs_backend

ORDERLESS_TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
]


@pytest.fixture(autouse=True)
def _emulated(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")


def test_fetch_add_in_a_serial_loop_is_an_exclusive_prefix_sum():
    N = 16

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((1,), T.float32), P: T.Tensor((N,), T.float32)):
        with T.Kernel(1):
            B[0] = 1.5
            for i in T.serial(N):
                P[i] = T.atomic_add(B[0], A[i], return_prev=True)

    kernel = tilelang.compile(main, target="cpu")
    a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    b, p = np.zeros(1, np.float32), np.zeros(N, np.float32)
    kernel(a, b, p)
    running = np.float32(1.5) + np.concatenate([[0], np.cumsum(a, dtype=np.float32)]).astype(np.float32)
    np.testing.assert_allclose(p, running[:-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, running[-1:], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_fetch_max_min_return_the_running_extreme(kind):
    N = 12
    op = T.atomic_max if kind == "max" else T.atomic_min

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((1,), T.float32), P: T.Tensor((N,), T.float32)):
        with T.Kernel(1):
            B[0] = 0.0
            for i in T.serial(N):
                P[i] = op(B[0], A[i], return_prev=True)

    kernel = tilelang.compile(main, target="cpu")
    a = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    b, p = np.zeros(1, np.float32), np.zeros(N, np.float32)
    kernel(a, b, p)
    acc = np.maximum.accumulate if kind == "max" else np.minimum.accumulate
    running = acc(np.concatenate([[0.0], a]).astype(np.float32))
    np.testing.assert_array_equal(p, running[:-1])
    np.testing.assert_array_equal(b, running[-1:])


@pytest.mark.parametrize("kind", ["or", "and", "xor"])
@pytest.mark.parametrize("target", ORDERLESS_TARGETS)
def test_bitwise_atomics_over_a_parallel_loop(kind, target):
    N = 64
    op = {"or": T.atomic_or, "and": T.atomic_and, "xor": T.atomic_xor}[kind]
    start = -1 if kind == "and" else 0

    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), B: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(N):
                op(B[0], A[i])

    kernel = tilelang.compile(main, target=target)
    a = np.random.default_rng(2).integers(0, 1 << 30, N).astype(np.int32)
    if kind == "and":
        a |= np.int32(0x0F0F0F0F)  # keep some bits set in every element
    b = np.full(1, start, np.int32)  # set by the host: a store in the kernel would race the updates
    kernel(a, b)
    ufunc = {"or": np.bitwise_or, "and": np.bitwise_and, "xor": np.bitwise_xor}[kind]
    assert b[0] == ufunc.reduce(a, initial=start)


def tickets(blocks: int, threads: int | None):
    """Every block takes one ticket; with ``threads`` (GPU targets) thread 0 takes it, the CPU
    runs a block as one thread and takes it without the thread test."""
    if threads is None:

        @T.prim_func
        def per_block(Counter: T.Tensor((1,), T.int32), Ticket: T.Tensor((blocks,), T.int32)):
            with T.Kernel(blocks) as bx:
                Ticket[bx] = T.atomic_add(Counter[0], 1, return_prev=True)

        return per_block

    @T.prim_func
    def first_thread(Counter: T.Tensor((1,), T.int32), Ticket: T.Tensor((blocks,), T.int32)):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                Ticket[bx] = T.atomic_add(Counter[0], 1, return_prev=True)

    return first_thread


@pytest.mark.parametrize("target", ORDERLESS_TARGETS)
def test_tickets_from_many_blocks_are_a_permutation(target):
    """Every block takes a ticket from one global counter: whatever the order, the tickets are
    0 .. blocks - 1, each once, and the counter ends at the number of blocks."""
    blocks = 37
    kernel = tilelang.compile(tickets(blocks, None if target == "cpu" else 32), target=target)
    counter, ticket = np.zeros(1, np.int32), np.full(blocks, -1, np.int32)
    kernel(counter, ticket)
    assert sorted(ticket.tolist()) == list(range(blocks))
    assert counter[0] == blocks


def test_the_last_block_test_in_a_condition_holds_for_one_block():
    """``if T.atomic_add(done[0], 1, return_prev=True) == blocks - 1``: the last block to
    finish (split-K's and stream-K's fix-up) is exactly one block."""
    blocks = 9

    @T.prim_func
    def main(Done: T.Tensor((1,), T.int32), Last: T.Tensor((blocks,), T.int32)):
        with T.Kernel(blocks) as bx:
            Last[bx] = 0
            if T.atomic_add(Done[0], 1, return_prev=True) == blocks - 1:
                Last[bx] = 1

    kernel = tilelang.compile(main, target="cpu")
    done, last = np.zeros(1, np.int32), np.full(blocks, 7, np.int32)
    kernel(done, last)
    assert last.sum() == 1 and done[0] == blocks


def test_old_value_bound_to_a_name_and_two_atomics_in_one_statement():
    N = 8

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((2,), T.float32), P: T.Tensor((N,), T.float32),
             Q: T.Tensor((N,), T.float32)):  # fmt: skip
        with T.Kernel(1):
            B[0] = 0.0
            B[1] = 100.0
            for i in T.serial(N):
                old = T.atomic_add(B[0], A[i], return_prev=True)
                P[i] = old * 2.0
                Q[i] = T.atomic_add(B[0], 0.0, return_prev=True) + T.atomic_add(B[1], A[i], return_prev=True)

    kernel = tilelang.compile(main, target="cpu")
    a = np.arange(1, N + 1, dtype=np.float32)
    b, p, q = np.zeros(2, np.float32), np.zeros(N, np.float32), np.zeros(N, np.float32)
    kernel(a, b, p, q)
    before = np.concatenate([[0.0], np.cumsum(a)])[:-1]
    np.testing.assert_array_equal(p, 2 * before)
    np.testing.assert_array_equal(q, (before + a) + (100.0 + before))  # B[0] read after this trip's add
    np.testing.assert_array_equal(b, [a.sum(), 100.0 + a.sum()])


def test_fetch_add_in_a_parallel_loop_hands_out_distinct_slots():
    N = 48

    @T.prim_func
    def main(B: T.Tensor((1,), T.int32), P: T.Tensor((N,), T.int32)):
        with T.Kernel(1):
            for i in T.Parallel(N):
                P[i] = T.atomic_add(B[0], 1, return_prev=True)

    kernel = tilelang.compile(main, target="cpu")
    b, p = np.zeros(1, np.int32), np.full(N, -1, np.int32)
    kernel(b, p)
    assert sorted(p.tolist()) == list(range(N)) and b[0] == N


def test_two_lane_fetch_add():
    @T.prim_func
    def main(Dst: T.Tensor((4,), T.float32), Val: T.Tensor((4,), T.float32), Prev: T.Tensor((4,), T.float32)):
        with T.Kernel(1):
            Prev[0:2] = T.atomic_addx2(Dst[0:2], Val[0:2], return_prev=True)
            Prev[2:4] = T.atomic_addx2(Dst[0:2], Val[2:4], return_prev=True)

    kernel = tilelang.compile(main, target="cpu")
    dst = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    val = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    prev = np.zeros(4, np.float32)
    kernel(dst, val, prev)
    np.testing.assert_array_equal(prev, [1.0, 2.0, 11.0, 22.0])
    np.testing.assert_array_equal(dst, [41.0, 62.0, 3.0, 4.0])


def test_an_old_value_in_a_while_condition_is_refused_at_its_line():
    @T.prim_func
    def main(B: T.Tensor((1,), T.int32)):
        with T.Kernel(1):
            while T.atomic_add(B[0], 1, return_prev=True) < 10:  # refused here
                T.evaluate(0)

    with pytest.raises(UnsupportedOnTargetError, match="while condition") as info:
        tilelang.compile(main, target="cpu")
    lines = Path(__file__).read_text().splitlines()
    assert info.value.location is not None
    assert lines[info.value.location.line - 1].endswith("# refused here")
