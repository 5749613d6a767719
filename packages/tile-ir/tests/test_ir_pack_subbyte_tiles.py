"""pack_subbyte_tiles: a tile of 4-bit elements becomes a tile of its bytes; the operators on it
move or decode bytes. End-to-end results (CPU and the GPU emulators against numpy) are in
tile-lang's test_lang_int4_tiles.py; these check the IR the pass leaves."""

import tvm_ffi
from tvm import tirx

from tile.ir.ops import Copy, Fill, Gemm, decode
from tile.ir.transform.pack_subbyte_tiles import decode_nibble, pack_subbyte_tiles


def func(body, params):
    return tirx.PrimFunc(params, body).with_attr("global_symbol", "k")


def walk(node, kind):
    found = []
    tvm_ffi.structural_walk(node, (kind, found.append))
    return found


def test_a_function_without_4bit_tiles_is_returned_as_it_is():
    A = tirx.decl_buffer((64,), "int8", name="A")
    S = tirx.decl_buffer((64,), "int8", name="S", scope="shared.dyn")
    f = func(tirx.SeqStmt([tirx.AllocBuffer(S), tirx.Evaluate(Copy.build(A, S).encode())]), [A])
    assert pack_subbyte_tiles(f) is f


def test_tiles_become_half_as_wide_byte_tiles_and_a_gemm_reads_decoded_twins():
    A = tirx.decl_buffer((32, 128), "int4", name="A")
    B = tirx.decl_buffer((16, 128), "int4", name="B")
    SA = tirx.decl_buffer((32, 64), "int4", name="SA", scope="shared.dyn")
    SB = tirx.decl_buffer((16, 64), "int4", name="SB", scope="shared.dyn")
    C = tirx.decl_buffer((32, 16), "int32", name="C", scope="local.fragment")
    body = tirx.SeqStmt([
        tirx.AllocBuffer(SA), tirx.AllocBuffer(SB), tirx.AllocBuffer(C),
        tirx.Evaluate(Copy.build(tirx.BufferLoad(A, [0, 64]), SA).encode()),
        tirx.Evaluate(Copy.build(tirx.BufferLoad(B, [0, 64]), SB).encode()),
        tirx.Evaluate(Fill.build(C, 0).encode()),
        tirx.Evaluate(Gemm.build(SA, SB, C, False, True, False).encode()),
    ])  # fmt: skip
    after = pack_subbyte_tiles(func(body, [A, B]))
    allocs = {
        str(a.buffer.name): (str(a.buffer.dtype), [int(d) for d in a.buffer.shape])
        for a in walk(after.body, tirx.AllocBuffer)
    }
    assert allocs == {
        "SA": ("int8", [32, 32]), "SA_unpacked": ("int8", [32, 64]),
        "SB": ("int8", [16, 32]), "SB_unpacked": ("int8", [16, 64]),
        "C": ("int32", [32, 16]),
    }  # fmt: skip
    ops = [decode(e.value) for e in walk(after.body, tirx.Evaluate) if "tile." in str(e.value)]
    copies = [op for op in ops if isinstance(op, Copy)]
    # the tensor is read through a byte view of its data, from byte 32 of each row, 32 bytes wide
    assert [(str(c.src.buffer.dtype), int(c.src.mins[1]), int(c.src.extents[1])) for c in copies] == [
        ("int8", 32, 32), ("int8", 32, 32)
    ]  # fmt: skip
    gemm = next(op for op in ops if isinstance(op, Gemm))
    assert (gemm.a.name, gemm.b.name, str(gemm.a.dtype)) == ("SA_unpacked", "SB_unpacked", "int8")
    assert [str(p.dtype) for p in after.params] == ["int4", "int4"]  # the caller's types


def test_decode_nibble_every_byte_through_llvm():
    # every byte, both nibbles, against the hand rule: low nibble b & 15, high b >> 4; int4 codes
    # 8..15 are -8..-1. The tile's bytes are int8: the decoder must read them as unsigned.
    import numpy as np
    import tvm

    bytes_ = np.arange(256, dtype=np.uint8).view(np.int8)
    for dtype, out in (("int4", "int8"), ("uint4", "uint8")):
        X = tirx.decl_buffer((256,), "int8", name="X")
        Y = tirx.decl_buffer((2, 256), out, name="Y")
        i = tirx.Var("i", "int32")
        nibble = [decode_nibble(tirx.BufferLoad(X, [i]), tirx.const(h, "int32"), dtype) for h in (0, 1)]
        stores = [tirx.BufferStore(Y, nibble[h], [h, i]) for h in (0, 1)]
        f = func(tirx.For(i, 0, 256, tirx.ForKind.SERIAL, tirx.SeqStmt(stores)), [X, Y])
        kernel = tvm.compile(tvm.IRModule({"k": f}), target={"kind": "llvm"})
        y = tvm.runtime.tensor(np.zeros((2, 256), out))
        kernel(tvm.runtime.tensor(bytes_), y)
        codes = np.stack([np.arange(256) & 15, np.arange(256) >> 4])
        want = np.where(codes >= 8, codes - 16, codes) if dtype == "int4" else codes
        np.testing.assert_array_equal(y.numpy(), want)
