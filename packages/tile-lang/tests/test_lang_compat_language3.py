"""Forms TileLang's testing/python/language files use (third batch): Python ints beside
integer expressions take the expression's type (intimm); tables of pointers,
``T.Tensor([G], T.ptr)`` (ptr); a region stored as a value (let). Results are checked against
numpy or hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import ArgumentValueError, TileTypeError
from tile.testsupport.markers import needs_backend


@T.prim_func
def _masks(A: T.Tensor((4,), "int64"), B: T.Tensor((4,), "uint32"), C: T.Tensor((4,), "int64"),
           D: T.Tensor((4,), "uint32")):  # fmt: skip
    with T.Kernel(1, threads=1):
        for i in T.serial(4):
            C[i] = (A[i] & 0xFFFFFFFF) | (0x7FFFFFFFFFFFFFFF & (A[i] ^ 0x10000000000))
            D[i] = (B[i] & 0xFFFFFFFF) ^ 0x80000001


def test_an_int_mask_takes_the_type_of_the_other_operand():
    # apache-tvm alone makes each int an int32 first: `A & 0xFFFFFFFF` of an int64 became
    # `A & -1` (all 64 bits kept), and the uint32 mask failed to convert.
    a = np.array([2**40 + 5, -1, 2**33 + 2**31, 7], np.int64)
    b = np.array([0, 1, 0xFFFFFFFF, 0x80000000], np.uint32)
    c, d = np.zeros(4, np.int64), np.zeros(4, np.uint32)
    tilelang.compile(_masks, target="cpu")(a, b, c, d)
    np.testing.assert_array_equal(c, (a & 0xFFFFFFFF) | (0x7FFFFFFFFFFFFFFF & (a ^ 0x10000000000)))
    np.testing.assert_array_equal(d, [0x80000001, 0x80000000, 0x7FFFFFFE, 1])


def test_constants_and_masks_outside_a_kernel():
    assert T.uint64(2**64 - 1).value == 2**64 - 1 and str(T.uint64(2**64 - 1).ty) == "uint64"
    assert T.int64(-(2**63)).value == -(2**63) and T.uint32(0xFFFFFFFF).value == 0xFFFFFFFF
    masked = T.uint32() & 0xFFFFFFFF
    assert str(masked.ty) == "uint32" and masked.b.value == 0xFFFFFFFF
    assert (T.int32() & 0xFFFFFFFF).b.value == -1  # the same 32 bits, as in C
    with pytest.raises(ArgumentValueError, match="does not fit uint32"):
        T.uint32(2**32)
    with pytest.raises(ArgumentValueError, match="more than the 32 bits"):
        T.int32() & 2**40


def _gather_rows(G: int, N: int):
    @T.prim_func
    def gather(src_ptrs: T.Tensor([G], T.ptr), out: T.Tensor([G, N], "float16")):
        with T.Kernel(G, threads=1) as bx:
            src = T.make_tensor(src_ptrs[bx], (N,), "float16")  # the address loaded from the table
            for i in T.serial(N):
                out[bx, i] = src[i]

    return gather


def test_a_table_of_pointers_is_a_tensor_of_64_bit_addresses():
    gather = _gather_rows(3, 8)
    table = gather.buffer_map[gather.params[0]]  # TileLang's TVM spelling of the parameter buffer
    assert table.dtype == "int64" and [int(d) for d in table.shape] == [3]
    rows = [np.arange(8, dtype=np.float16) * (r + 1) - r for r in range(3)]
    addresses = np.array([row.ctypes.data for row in rows[::-1]], np.int64)  # rows in reverse order
    out = np.zeros((3, 8), np.float16)
    tilelang.compile(gather, target="cpu")(addresses, out)
    np.testing.assert_array_equal(out, np.stack(rows[::-1]))


@T.prim_func
def _slice_moves(A: T.Tensor((4, 16), "float32")):
    with T.Kernel(1, threads=1):
        b = A[0, 0:4]  # a region bound to a name, then stored: its 4 elements
        A[0, 4:8] = b
        A[1, 2:6] = A[2, 8:12]


def test_a_region_stored_as_a_value_moves_its_elements():
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    ref = a.copy()
    ref[0, 4:8] = ref[0, 0:4]
    ref[1, 2:6] = ref[2, 8:12]
    tilelang.compile(_slice_moves, target="cpu")(a)
    np.testing.assert_array_equal(a, ref)


def test_a_region_of_two_dimensions_is_no_value():
    with pytest.raises(TileTypeError, match="spanning 2 dimensions") as caught:

        @T.prim_func
        def bad(A: T.Tensor((4, 16), "float32")):
            with T.Kernel(1, threads=1):
                A[0, 0:4] = A[0:2, 4:6]

    assert "A[0, 0:4] = A[0:2, 4:6]" in caught.value.location.source_line


def _collatz():
    @T.prim_func
    def main(X: T.Tensor((6,), "int32"), Steps: T.Tensor((6,), "int32")):
        with T.Kernel(6, threads=32) as bx:
            v = T.alloc_fragment((1,), "int32")
            n = T.alloc_fragment((1,), "int32")
            v[0] = X[bx]
            n[0] = 0
            with T.While(v[0] > 1):  # TileLang's spelling of `while v[0] > 1:` (cpu/while_repro)
                v[0] = T.if_then_else(v[0] % 2 == 0, v[0] // 2, 3 * v[0] + 1)
                n[0] += 1
            Steps[bx] = n[0]

    return main


@pytest.mark.parametrize(
    "target",
    ["cpu", pytest.param({"kind": "cuda", "arch": "sm_80"}, marks=needs_backend("cuda"), id="sm_80")],
)
def test_T_While_loops_until_its_condition_fails(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    x = np.array([1, 2, 3, 6, 7, 27], np.int32)
    steps = np.full(6, -1, np.int32)
    tilelang.compile(_collatz(), target=target)(x, steps)

    def collatz(v):
        n = 0
        while v > 1:
            v, n = (v // 2 if v % 2 == 0 else 3 * v + 1), n + 1
        return n

    np.testing.assert_array_equal(steps, [collatz(int(v)) for v in x])  # 27 takes 111 steps


def test_T_While_takes_a_boolean_condition():
    with pytest.raises(TileTypeError, match=r"T\.While takes a boolean"):

        @T.prim_func
        def bad(A: T.Tensor((2,), "int32")):
            with T.Kernel(1), T.While(A[0]):
                A[0] = A[0] - 1
