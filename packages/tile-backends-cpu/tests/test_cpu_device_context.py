"""A kernel without tensor parameters gets CPU device 0 for its workspace buffers."""

from __future__ import annotations

from tvm import ir, tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu._src.device_context import state_cpu_device


@tilelang.jit
def _sum_of_multiples(n: T.int32):
    with T.Kernel(1) as _:
        x = T.alloc_fragment([512], T.float32)  # 2 KiB: above TVM's stack limit, a workspace buffer
        s = T.alloc_var(T.float32)
        for i in T.parallel(512):  # TVM's parallel loop, as TileLang's language/parallel writes it
            x[i] = T.Cast("float32", i * n)
        s = 0.0
        for i in T.serial(512):
            s += x[i]
        T.print(s)


def test_a_kernel_without_tensor_parameters_allocates_its_workspace(capfd):
    # LLVM code generation stopped at "Unknown device id in current IR" before
    _sum_of_multiples(3)
    assert "s[0] = 392448.0" in capfd.readouterr().out  # 3 * (0 + 1 + ... + 511)


def test_a_stated_device_is_kept():
    node = ir.StringImm("default")
    body = tirx.AttrStmt(node, "device_id", tirx.const(2, "int32"), tirx.Evaluate(tirx.const(0, "int32")))
    func = tirx.PrimFunc([], body)
    assert state_cpu_device(func).same_as(func)
    stated = state_cpu_device(tirx.PrimFunc([], tirx.Evaluate(tirx.const(0, "int32"))))
    assert str(stated.body.attr_key) == "device_id" and str(stated.body.body.attr_key) == "device_type"
    assert int(stated.body.value) == 0 and int(stated.body.body.value) == 1  # kDLCPU, device 0
