"""``scope_bindings_that_load_registers``: kernel-level bindings that load a register get a scope.

TVM's ``MergeSharedMemoryAllocations`` refuses a load of a buffer allocated at the scope
level of the load unless a statement or a scope encloses it; a ``Bind`` is neither. The
grouped GEMM over pointer tables binds ``a_ptrs[group]`` with ``group`` a ``T.alloc_var``.
The rewrite wraps such a binding and what follows it in an ``extern_scope`` attribute; the
merge then accepts the kernel (checked here by running it), and bindings in loops or of
parameters alone stay as they were.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import s_tir, tirx  # type: ignore[import-untyped]

from tile.ir.gpu.codegen import EXTERN_SCOPE, scope_bindings_that_load_registers

_SOURCE = """
@I.ir_module
class Module:
    @T.prim_func
    def main(ptrs: T.Buffer((4,), "int64"), firsts: T.Buffer((4,), "int32")):
        bx = T.launch_thread("blockIdx.x", 4)
        tx = T.launch_thread("threadIdx.x", 32)
        group = T.alloc_local((1,), "int32")
        S = T.alloc_buffer((64,), "float16", scope="shared.dyn")
        U = T.alloc_buffer((64,), "float16", scope="shared.dyn")
        group[0] = firsts[bx]
        address: T.let[T.handle] = T.reinterpret(T.handle().ty, ptrs[group[0]])
        A = T.decl_buffer((64,), "float16", data=address)
        S[tx] = A[tx]
        U[tx] = S[31 - tx]
        for k in range(2):
            inner: T.let[T.int32] = group[0] + k
            U[tx + 32] = T.Cast("float16", inner)
"""


def _extern_scopes(mod: Any) -> list[Any]:
    found: list[Any] = []

    def on_attr(attr: Any) -> None:
        if str(attr.attr_key) == EXTERN_SCOPE:
            found.append(attr)

    tvm_ffi.structural_walk(mod["main"].body, (tirx.AttrStmt, on_attr))
    return found


def _flattened(mod: Any) -> Any:
    for step in (s_tir.transform.LowerOpaqueBlock(), tirx.transform.FlattenBuffer()):
        mod = step(mod)
    return mod


def test_a_kernel_level_binding_that_loads_a_register_gets_a_scope() -> None:
    mod = tvm.script.from_source(_SOURCE)
    merge = s_tir.transform.MergeSharedMemoryAllocations()
    try:
        merge(_flattened(mod))
        refused = False
    except Exception as error:  # TVM's InternalError: the failure this rewrite avoids
        refused = "Load memory in places other than store" in str(error)
    assert refused
    scoped = scope_bindings_that_load_registers(mod)
    (attr,) = _extern_scopes(scoped)  # one scope, from the binding on: the loop's binding stays inside
    assert isinstance(attr.body, tirx.SeqStmt) and isinstance(attr.body.seq[0], tirx.Bind)
    merge(_flattened(scoped))  # accepted now


def test_bindings_of_parameters_alone_are_left_as_they_are() -> None:
    mod = tvm.script.from_source(_SOURCE.replace("ptrs[group[0]]", "ptrs[bx]"))
    assert scope_bindings_that_load_registers(mod).same_as(mod)
