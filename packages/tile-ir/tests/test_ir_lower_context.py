"""LowerContext during lower_tile_ops: the inferred layouts and the thread variable."""

import tvm
from tvm import ir, tirx

from tile.ir.backend import Capabilities
from tile.ir.ops import Fill, register_lowering
from tile.ir.ops.fill import lower_fill_loops
from tile.ir.ops.region import Region
from tile.ir.target import Target
from tile.ir.transform import CompileContext, infer_layout, lower_tile_ops
from tile.layout import Fragment

PROBE = CompileContext(
    Target("ctxprobe", "x"),
    Capabilities(32, 1024, 48 * 1024, frozenset({"float32"}), 128, False, True, True, ((16, 8, 16),)),
)
seen: list = []


@register_lowering(Fill, target="ctxprobe")
def _record(op, ctx):
    seen.append((dict(ctx.layouts), ctx.thread_var))
    return lower_fill_loops(op, ctx)


def test_rules_see_layouts_and_thread_var():
    C = tirx.decl_buffer((16, 64), "float32", name="C", scope="local.fragment")
    fill = tirx.Evaluate(Fill(Region.full(C), tirx.const(0.0, "float32")).encode())
    tx = tirx.Var("tx", "int32")
    body = tirx.AttrStmt(tirx.IterVar(ir.Range(0, 128), tx, 1, "threadIdx.x"), "thread_extent", 128, fill)
    func = tirx.PrimFunc([], tirx.SeqStmt([tirx.AllocBuffer(C), body])).with_attr("global_symbol", "k")
    mod = tvm.IRModule({"k": func})
    seen.clear()
    lower_tile_ops(infer_layout(mod, PROBE), PROBE)
    (layouts, thread_var), = seen
    assert thread_var.same_as(tx)
    frag = layouts["C"]
    assert isinstance(frag, Fragment) and int(frag.get_thread_size()) == 128
    assert frag.locals_per_thread() == 16 * 64 // 128
