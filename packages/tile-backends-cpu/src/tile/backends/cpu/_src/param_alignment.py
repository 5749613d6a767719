"""Pass ``declare_param_alignment``: promise LLVM only the alignment callers really give.

TVMScript declares every tensor parameter 64-byte aligned, and TVM turns that into
``llvm.assume(align 64)`` plus aligned vector loads. numpy hands out 16-byte aligned
data (a large array is ``mmap`` + 16) and a torch view may start at any element, so
a 64-byte promise would force every call to stage its arrays through aligned copies.
x86 vector loads and stores do not need aligned addresses, so the CPU kernels are
generated for element-aligned data instead: each parameter (and each ``DeclBuffer``
view of a parameter's data, such as the byte views of fp8 tensors) is re-declared
with ``data_alignment`` = its element size, which every well-formed array satisfies.

Needs: lowered IR (after every pass that creates buffer views). Guarantees: the same
program; no parameter buffer promises more than
``max(Capabilities.param_alignment, element size)`` bytes.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.transform import CompileContext, Pass, Property, map_prim_funcs, replace_nodes
from tile.ir.transform.properties import TILE_OPS_LOWERED


def element_bytes(dtype: Any) -> int:
    """Bytes of one element of ``dtype`` (at least 1; vector types count all lanes)."""
    dt = tvm_ffi.dtype(str(dtype))
    return max(1, (int(dt.bits) * int(dt.lanes) + 7) // 8)


def _redeclare(buffer: Any, alignment: int, name: str | None = None) -> Any:
    return tirx.decl_buffer(
        buffer.shape,
        buffer.dtype,
        name=name or str(buffer.name),
        data=tirx.buffer_data(buffer),
        strides=buffer.strides,
        elem_offset=buffer.elem_offset,
        scope=buffer.scope(),
        data_alignment=alignment,
        offset_factor=buffer.offset_factor,
    )


def _relax(func: Any, minimum: int) -> Any:
    table: dict[Any, Any] = {}
    param_data: list[Any] = []
    params = []
    for param in func.params:
        if tirx.is_buffer_var(param):
            align = max(minimum, element_bytes(param.dtype))
            new = param if int(param.data_alignment) == align else _redeclare(param, align)
            if not new.same_as(param):
                table[param] = new
            param_data.append(tirx.buffer_data(param))
            params.append(new)
        else:
            params.append(param)

    def on_decl(node: Any) -> None:
        data = node.data
        if any(data.same_as(d) for d in param_data):
            align = max(minimum, element_bytes(node.buffer.dtype))
            if int(node.buffer.data_alignment) != align:
                table[node.buffer] = _redeclare(node.buffer, align)

    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, on_decl))
    if not table:
        return func
    body = replace_nodes(func.body, table, ir.Var)
    out = tirx.PrimFunc(params, body, func.ret_type)
    return out.with_attrs(dict(func.attrs)) if func.attrs is not None else out


def declare_param_alignment(mod: Any, ctx: CompileContext) -> Any:
    """Re-declare parameter buffers with the alignment the target promises (module docstring)."""
    minimum = ctx.capabilities.param_alignment
    return map_prim_funcs(mod, lambda f: _relax(f, minimum))


PARAM_ALIGNMENT_DECLARED = Property(
    "param_alignment_declared",
    "no parameter buffer promises more alignment than its element size or the target's",
)
DECLARE_PARAM_ALIGNMENT = Pass(
    "declare_param_alignment",
    declare_param_alignment,
    needs={TILE_OPS_LOWERED},
    guarantees={PARAM_ALIGNMENT_DECLARED},
)
