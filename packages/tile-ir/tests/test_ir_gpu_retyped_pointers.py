"""``retype_pointers_into_merged_shared``: typed pointers into a merged byte arena become byte pointers.

TVM's shared-memory merge put the float16 tiles of the fp8 MLA decoder into a byte buffer and
kept their ``tvm_access_ptr`` element type, which its device finalization refused; the pass
rewrites such a pointer to the same bytes and leaves every other pointer alone.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.gpu.codegen import retype_pointers_into_merged_shared


def _module(*pointers: Any) -> Any:
    body = tirx.SeqStmt([tirx.Evaluate(tirx.call_extern("void", "use", p)) for p in pointers])
    return tvm.IRModule({"main": tirx.PrimFunc([], body)})


def _pointers(mod: Any) -> list[Any]:
    found: list[Any] = []

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_access_ptr":
            found.append(call)

    tvm_ffi.structural_walk(mod["main"].body, (ir.Call, on_call))
    return found


def test_a_wider_pointer_into_a_narrower_buffer_names_the_same_memory() -> None:
    arena = tirx.decl_buffer([4096], "uint8", "arena", scope="shared.dyn")
    half = tirx.decl_buffer([64], "float16", "tile", scope="shared.dyn")
    plain = tirx.decl_buffer([64], "uint8", "other", scope="shared")
    mod = _module(
        tirx.tvm_access_ptr(tirx.type_annotation("float16"), arena.data, 40, 8, 2),  # elements 40..47
        tirx.tvm_access_ptr(tirx.type_annotation("float32"), half.data, 6, 4, 1),  # floats 6..9
        tirx.tvm_access_ptr(tirx.type_annotation("uint8"), arena.data, 3, 5, 1),  # already bytes
        tirx.tvm_access_ptr(tirx.type_annotation("float16"), half.data, 4, 8, 1),  # its own type
        tirx.tvm_access_ptr(tirx.type_annotation("float16"), plain.data, 4, 8, 1),  # static shared
    )
    first, second, *others = _pointers(retype_pointers_into_merged_shared(mod))
    analyzer = tvm.sym.Analyzer()
    assert str(first.args[0].ty) == "uint8"
    assert [int(analyzer.simplify(a)) for a in first.args[2:]] == [80, 16, 2]  # bytes 80..95, written
    assert str(second.args[0].ty) == "float16"
    assert [int(analyzer.simplify(a)) for a in second.args[2:]] == [12, 8, 1]  # halves 12..19, read
    assert all(new.same_as(old) for new, old in zip(others, _pointers(mod)[2:], strict=True))


def test_a_narrower_pointer_into_a_wider_buffer_starts_on_one_of_its_elements() -> None:
    # TileLang's GDN chunk_o backward: TVM gave a bfloat16 tile (stmatrix rows, wgmma
    # descriptors) the bytes of a float32 tile; its pointers are 16-byte aligned, so in the
    # float32 buffer's elements they start at half the offset
    floats = tirx.decl_buffer([8192], "float32", "floats", scope="shared.dyn")
    v = tirx.Var("v", "int32")
    mod = _module(
        tirx.tvm_access_ptr(tirx.type_annotation("bfloat16"), floats.data, 14336, 4096, 1),
        tirx.tvm_access_ptr(tirx.type_annotation("bfloat16"), floats.data, 14336 + v * 8, 8, 2),
        tirx.tvm_access_ptr(tirx.type_annotation("bfloat16"), floats.data, 14337, 8, 1),  # odd: kept
        tirx.tvm_access_ptr(tirx.type_annotation("bfloat16"), floats.data, 14336 + v, 8, 1),  # unknown: kept
    )
    whole, row, *kept = _pointers(retype_pointers_into_merged_shared(mod))
    analyzer = tvm.sym.Analyzer()
    assert str(whole.args[0].ty) == str(row.args[0].ty) == "float32"
    assert [int(analyzer.simplify(a)) for a in whole.args[2:]] == [7168, 2048, 1]  # floats 7168..9215
    assert analyzer.can_prove(row.args[2] == 7168 + v * 4) and int(analyzer.simplify(row.args[3])) == 4
    assert all(new.same_as(old) for new, old in zip(kept, _pointers(mod)[2:], strict=True))
