"""Tile ops: building, encoding as IR calls, decoding, and the lowering registry."""

import pytest
from tvm import tirx

from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.errors import TileShapeError, UnsupportedOnTargetError
from tile.ir.ops import (
    Copy,
    Fill,
    Gemm,
    LowerContext,
    Reduce,
    TileOp,
    decode,
    find_lowering,
    register_lowering,
)
from tile.ir.ops.region import as_int
from tile.ir.target import Target


def buf(shape, dtype="float32", name="X", scope="global"):
    return tirx.decl_buffer(shape, dtype, name=name, scope=scope)


def ints(exprs):
    return [as_int(e) for e in exprs]


def test_copy_corner_form_infers_extents_from_other_operand():
    A = buf((100, 70), name="A")
    S = buf((32, 16), name="S", scope="shared")
    op = Copy.build(tirx.BufferLoad(A, [3, 5]), S)
    assert ints(op.src.extents) == [32, 16]
    assert ints(op.src.mins) == [3, 5]
    back = decode(op.encode())
    assert isinstance(back, Copy)
    assert back.src.buffer.same_as(A) and back.dst.buffer.same_as(S)
    assert ints(back.dst.extents) == [32, 16]


def test_copy_corner_pads_leading_unit_dims():
    A = buf((4, 100, 70), name="A")
    S = buf((32, 16), name="S")
    op = Copy.build(tirx.BufferLoad(A, [2, 0, 0]), S)
    assert ints(op.src.extents) == [1, 32, 16]


def _build_warned(src, dst):
    told: list[str] = []
    return Copy.build(src, dst, warn=told.append), told


def test_copy_of_different_extents_covers_the_source_region_on_a_tie():
    A, B = buf((64, 64), name="A"), buf((64, 64), name="B")
    op, told = _build_warned(A[0:64, 0:2], B[0:64, 0:3])
    assert ints(op.src.extents) == ints(op.dst.extents) == [64, 2]
    assert len(told) == 1 and "(64, 2)" in told[0] and "(64, 3)" in told[0] and "source's region" in told[0]


def test_copy_of_different_extents_covers_the_more_local_region():
    A = buf((64, 64), name="A")
    S = buf((32, 32), name="S", scope="shared.dyn")
    op, told = _build_warned(A[0:16, 0:32], S)  # shared is more local: its 32 x 32 are copied
    assert ints(op.src.extents) == ints(op.dst.extents) == [32, 32]
    assert "destination's region" in told[0]
    F = buf((8, 32), name="F", scope="local.fragment")
    op, _ = _build_warned(F, A[0:16, 0:32])  # a fragment source is more local: its 8 rows
    assert ints(op.src.extents) == ints(op.dst.extents) == [8, 32]


def test_copy_keeps_unit_dims_when_extents_differ():
    A = buf((4, 64, 64), name="A")
    B = buf((64, 64), name="B")
    op, _ = _build_warned(A[2:3, 0:16, 0:32], B[0:16, 0:48])
    assert ints(op.src.extents) == [1, 16, 32] and ints(op.src.mins) == [2, 0, 0]
    assert ints(op.dst.extents) == [16, 32]


def test_copy_into_a_smaller_more_local_region_is_a_shape_error():
    A = buf((64, 64), name="A")
    S = buf((32, 32), name="S", scope="shared.dyn")
    with pytest.raises(TileShapeError) as info:
        Copy.build(A[0:32, 0:64], S)  # half of the source would be dropped
    assert "(32, 64)" in info.value.message and "(32, 32)" in info.value.message


def test_copy_two_corners_cannot_infer():
    A, B = buf((8, 8), name="A"), buf((8, 8), name="B")
    with pytest.raises(TileShapeError):
        Copy.build(tirx.BufferLoad(A, [0, 0]), tirx.BufferLoad(B, [0, 0]))


def test_gemm_checks_shapes_and_round_trips_flags():
    A, B, C = buf((64, 32), name="A"), buf((48, 32), name="B"), buf((64, 48), name="C")
    op = Gemm.build(A, B, C, False, True, True)
    back = decode(op.encode())
    assert (back.transpose_a, back.transpose_b, back.clear_accum) == (False, True, True)
    assert ints(back.mnk) == [64, 48, 32]
    with pytest.raises(TileShapeError):
        Gemm.build(A, B, C, False, False, False)  # K of A (32) != rows of B (48)


def test_reduce_checks_destination_shape():
    S, D = buf((16, 8), name="S"), buf((16,), name="D")
    op = decode(Reduce.build("max", S, D, 1, True).encode())
    assert (op.kind, op.dim, op.clear) == ("max", 1, True)
    with pytest.raises(TileShapeError):
        Reduce.build("sum", S, D, 0, True)  # reducing dim 0 leaves (8,)


def test_fill_value_is_cast_to_buffer_dtype():
    F = buf((4, 4), "float16", name="F")
    op = decode(Fill.build(F, 1).encode())
    assert str(op.value.ty) == "float16"


def test_fill_of_one_shared_or_global_element_is_one_threads_store():
    # T.clear(B) of a (1,) global B, then T.atomic_add(B, 1): were every thread to store the
    # zero, a late thread's store would undo the update made after the fill
    caps = Capabilities(1, 1024, 1 << 20, frozenset({"float32"}), 256, True)
    ctx = LowerContext(target=Target("cpu"), capabilities=caps)
    for scope, one_trip_parallel in (("global", True), ("shared", True), ("local", False)):
        stmt = Fill.build(buf((1,), scope=scope), 0).lower(ctx)
        if one_trip_parallel:
            assert isinstance(stmt, tirx.For) and stmt.extent.value == 1 and PARALLEL_LOOP in stmt.annotations
        else:
            assert isinstance(stmt, tirx.BufferStore)  # a per-thread array: every thread's own


def test_target_specific_rule_wins_over_generic_and_falls_back():
    class Probe(TileOp):
        op_name = "tile.test_probe"

    calls = []
    register_lowering(Probe)(lambda op, ctx: calls.append("generic"))
    register_lowering(Probe, target="cuda", when=lambda t: t.arch == "sm_90a")(
        lambda op, ctx: calls.append("h")
    )
    assert find_lowering(Probe, Target("cpu")) is not None
    find_lowering(Probe, Target("cuda", "sm_90a"))(Probe(), None)
    find_lowering(Probe, Target("cuda", "sm_80"))(Probe(), None)
    assert calls == ["h", "generic"]


def test_op_without_rule_raises_unsupported():
    class Orphan(TileOp):
        op_name = "tile.test_orphan"

    caps = Capabilities(1, 1024, 1 << 20, frozenset({"float32"}), 256, True)
    ctx = LowerContext(target=Target("cpu"), capabilities=caps)
    with pytest.raises(UnsupportedOnTargetError):
        Orphan().lower(ctx)
