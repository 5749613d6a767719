"""``inline_names_into_unwritten_reads``: reads of a never-stored buffer index by expressions.

TVM's buffer compaction sized a local buffer that no statement stores from the index of its
one read, ``f[idx]`` with ``idx`` a named value (a one-element local buffer stored once),
outside ``idx``'s scope, and code generation stopped ("Buffer idx is used before its
definition"; TileLang's layout_fused_replicate test). The pass puts the named value's
expression in those reads; everything else keeps its names.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir  # type: ignore[import-untyped]

from tile.ir.gpu.codegen import inline_names_into_unwritten_reads

_SOURCE = """
@I.ir_module
class Module:
    @T.prim_func
    def main(src: T.Buffer((64,), "int32"), out: T.Buffer((4, 64), "float32")):
        v = T.launch_thread("threadIdx.x", 32)
        never = T.alloc_local((64,))
        written = T.alloc_local((64,))
        for k in range(2):
            idx: T.int32 = k * 32 + v
            nxt: T.int32 = idx + 1
            via_load: T.int32 = src[v]
            twice: T.int32 = 0
            twice = v
            written[idx] = T.float32(1)
            out[0, idx] = never[nxt % 64]
            out[1, idx] = written[idx]
            out[2, idx] = never[via_load]
            out[3, idx] = never[twice]
"""


def _reads(mod: Any, name: str) -> list[str]:
    found: list[str] = []

    def on_load(load: Any) -> None:
        if str(load.source.name) == name:
            found.append(str(load.indices[0]))

    tvm_ffi.structural_walk(mod["main"].body, (ir.TensorLoad, on_load))
    return found


def test_reads_of_a_never_stored_buffer_get_the_named_expressions() -> None:
    mod = tvm.script.from_source(_SOURCE)
    before = _reads(mod, "never")
    assert before == ["nxt % 64", "via_load", "twice"]
    after = inline_names_into_unwritten_reads(mod)
    # `nxt` names `idx + 1`, `idx` names `k * 32 + v`: both replaced, in order
    # `via_load` loads a tensor and `twice` is stored twice: their names stay
    assert _reads(after, "never") == ["(k * 32 + v + 1) % 64", "via_load", "twice"]
    assert _reads(after, "written") == _reads(mod, "written") == ["idx"]  # a stored buffer keeps its names


def test_a_module_without_such_reads_is_returned_as_is() -> None:
    source = _SOURCE.replace("            out[0, idx] = never[nxt % 64]\n", "").replace(
        "            out[2, idx] = never[via_load]\n            out[3, idx] = never[twice]\n",
        "            never[idx] = T.float32(0)\n",
    )
    mod = tvm.script.from_source(source)
    assert inline_names_into_unwritten_reads(mod).same_as(mod)
