"""T.cumsum and T.atomic_*: building, encode/decode round trips, errors, and lowering.

The atomic pass pairs check the CPU contract: a lowered atomic update carries the
``ATOMIC_UPDATE`` marker, and ``serialize_block_grid`` removes it, running the blocks
serially only when the update targets memory other blocks can see.
"""

import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.backend import Capabilities
from tile.ir.errors import TileShapeError, TileTypeError
from tile.ir.ops import ATOMIC_UPDATE, Atomic, Cumsum, LowerContext, decode
from tile.ir.ops.region import as_int
from tile.ir.target import Target
from tile.ir.transform import CompileContext, lower_tile_ops, serialize_block_grid, verify

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 20, frozenset({"float32"}), 256, True, False))


def buf(shape, dtype="float32", name="X", scope="global"):
    return tirx.decl_buffer(shape, dtype, name=name, scope=scope)


def ints(exprs):
    return [as_int(e) for e in exprs]


def collect(stmt, kind):
    found = []
    tvm_ffi.structural_walk(stmt, (kind, found.append))
    return found


def test_cumsum_defaults_to_in_place_and_round_trips():
    S = buf((4, 8), name="S", scope="shared")
    op = Cumsum.build(S, None, -1, True)
    assert op.dst.buffer.same_as(S) and op.dim == 1 and op.reverse
    back = decode(op.encode())
    assert isinstance(back, Cumsum)
    assert back.dim == 1 and back.reverse and ints(back.src.extents) == [4, 8]


def test_cumsum_errors():
    S = buf((4, 8), name="S", scope="shared")
    with pytest.raises(TileShapeError, match="out of range"):
        Cumsum.build(S, None, 2, False)
    with pytest.raises(TileShapeError, match="spans"):
        Cumsum.build(S, buf((8, 4), name="D"), 0, False)
    with pytest.raises(TileTypeError, match="single elements"):
        Cumsum.build(tirx.BufferLoad(S, [0, 0]), None, 0, False)


def test_cumsum_lowers_to_a_serial_scan_inside_a_parallel_nest():
    S = buf((4, 8), name="S", scope="shared")
    ctx = LowerContext(target=Target("cpu"), capabilities=CTX.capabilities)
    stmt = Cumsum.build(S, None, 1, False).lower(ctx)
    assert isinstance(stmt, tirx.For) and as_int(stmt.extent) == 4  # the rows, in parallel
    (scan,) = [loop for loop in collect(stmt, tirx.For) if not loop.same_as(stmt)]
    assert (as_int(scan.min), as_int(scan.extent)) == (1, 7)  # the steps after the first


def test_atomic_scalar_and_region_forms():
    C = buf((64, 64), name="C")
    L = buf((16, 16), name="L", scope="local.fragment")
    scalar = Atomic.build("max", tirx.BufferLoad(C, [3, 4]), 2.5)
    assert not scalar.is_region and ints(scalar.dst.extents) == [1, 1]
    assert not scalar.over_tile
    region = Atomic.build("add", tirx.BufferLoad(C, [16, 32]), L)
    assert region.is_region and ints(region.dst.extents) == [16, 16] and ints(region.dst.mins) == [16, 32]
    # TileLang's T.atomic_add(C[0:8, 16:32], 1.0): one scalar into every element of the tile
    over_tile = Atomic.build("add", C[0:8, 16:32], 1.0)
    assert over_tile.over_tile and not over_tile.is_region and ints(over_tile.dst.extents) == [8, 16]
    for op in (scalar, region, over_tile):
        back = decode(op.encode())
        assert isinstance(back, Atomic) and back.kind == op.kind and back.is_region == op.is_region
        assert back.over_tile == op.over_tile


def test_atomic_scalar_over_a_tile_updates_each_element_once_per_block():
    C = buf((64, 64), name="C")
    ctx = LowerContext(target=Target("cpu"), capabilities=CTX.capabilities)
    stmt = Atomic.build("max", C[0:8, 16:32], 0.5).lower(ctx)
    assert isinstance(stmt, tirx.AttrStmt) and str(stmt.attr_key) == ATOMIC_UPDATE
    loops = collect(stmt, tirx.For)
    assert sorted(as_int(loop.extent) for loop in loops) == [8, 16]  # the tile, split over threads
    assert all(PARALLEL_LOOP in loop.annotations for loop in loops)  # T.Parallel loops
    (store,) = collect(stmt, tirx.BufferStore)
    assert "C[i0, 16 + i1] = T.max(C[i0, 16 + i1], T.float32(0.5))" in str(store)


def test_atomic_errors():
    C = buf((64, 64), name="C")
    L = buf((16, 16), name="L", scope="local.fragment")
    with pytest.raises(TileShapeError, match="extents differ"):
        Atomic.build("add", C[0:8, 0:16], L)
    with pytest.raises(TileTypeError, match="float32x2 vector"):
        Atomic.build("add", C, tirx.Broadcast(tirx.const(1.0, "float32"), 2))
    with pytest.raises(TileTypeError, match="unknown atomic"):
        Atomic.build("nand", tirx.BufferLoad(C, [0, 0]), 1)
    with pytest.raises(TileTypeError, match="no bitwise operations"):
        Atomic.build("xor", tirx.BufferLoad(C, [0, 0]), 1)  # C is float32


def atomic_kernel(scope):
    """Four blocks, each adds 1.0 to element 0 of a buffer in ``scope``."""
    A = buf((4,), name="A")
    T_ = buf((4,), name="T", scope=scope)
    bx = tirx.Var("bx", "int32")
    stmts = []
    if scope != "global":
        stmts.append(tirx.AllocBuffer(T_))
    stmts.append(tirx.Evaluate(Atomic.build("add", tirx.BufferLoad(T_, [0]), 1.0).encode()))
    if scope != "global":
        stmts.append(tirx.BufferStore(A, tirx.BufferLoad(T_, [0]), [bx]))
    iv = tirx.IterVar(ir.Range(0, 4), bx, 1, "blockIdx.x")
    body = tirx.AttrStmt(iv, "thread_extent", 4, stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts))
    params = [A] if scope != "global" else [T_]
    return tvm.IRModule({"k": tirx.PrimFunc(params, body).with_attr("global_symbol", "k")})


@pytest.mark.parametrize(
    "scope,grid_kind", [("global", tirx.ForKind.SERIAL), ("shared", tirx.ForKind.PARALLEL)]
)
def test_serialize_block_grid_runs_blocks_serially_only_for_global_atomics(scope, grid_kind):
    lowered = lower_tile_ops(atomic_kernel(scope), CTX)
    markers = [a for a in collect(lowered["k"].body, tirx.AttrStmt) if str(a.attr_key) == ATOMIC_UPDATE]
    assert len(markers) == 1
    after = serialize_block_grid(lowered, CTX)
    verify(after, lowered=True)
    assert not [a for a in collect(after["k"].body, tirx.AttrStmt) if str(a.attr_key) == ATOMIC_UPDATE]
    assert after["k"].body.kind == grid_kind
