"""TVM's host lowering for CPU kernels, plus the device every CPU kernel runs on.

TVM's ``LowerTVMBuiltin`` serves a buffer above its stack limit (1 KiB) with a
``TVMBackendAllocWorkspace(device_type, device_id, ...)`` call, and reads that device from
the ``device_type`` / ``device_id`` attributes ``MakePackedAPI`` binds to the first tensor
parameter. A kernel without tensor parameters (TileLang's ``@tilelang.jit`` functions
that allocate only fragments, ``for i in T.parallel(256)`` over them) got no device, and LLVM
code generation stopped at "Unknown device id in current IR". A CPU kernel's memory is the
host's: after ``MakePackedAPI`` the pipeline ``PIPELINE`` states CPU device 0 for every entry
function that does not state a device.
"""

from __future__ import annotations

from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

PIPELINE = "tile_cpu"
"""The name ``tvm.compile(..., tir_pipeline=PIPELINE)`` builds CPU kernels with."""

_DEVICE_ATTRS = ("device_id", "device_type")
_KDLCPU = 1


def _states_a_device(body: Any) -> bool:
    found: list[bool] = []

    def on_attr(node: Any) -> None:
        if str(node.attr_key) in _DEVICE_ATTRS:
            found.append(True)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, on_attr))
    return bool(found)


def state_cpu_device(func: Any) -> Any:
    """``func`` with its body inside ``device_type = kDLCPU, device_id = 0`` unless it states a
    device already (a kernel with tensor parameters: ``MakePackedAPI`` bound theirs)."""
    if _states_a_device(func.body):
        return func
    node = ir.StringImm("default")
    body = tirx.AttrStmt(node, "device_type", tirx.const(_KDLCPU, "int32"), func.body)
    return func.with_body(tirx.AttrStmt(node, "device_id", tirx.const(0, "int32"), body))


@tvm.transform.module_pass(opt_level=0, name="tile.StateCpuDevice")
def _state_cpu_devices(mod: Any, _ctx: Any) -> Any:
    updates = {gv: state_cpu_device(f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
    for gv, func in updates.items():
        mod[gv] = func
    return mod


def _pipeline() -> tuple[Any, Any, Any]:
    lower, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")
    return tvm.transform.Sequential([lower, _state_cpu_devices]), finalize_host, finalize_device


def register_pipeline() -> str:
    """Register ``PIPELINE`` with TVM (idempotent) and return its name."""
    tvm.tirx.compilation_pipeline.register_tir_pipeline(PIPELINE, _pipeline)
    return PIPELINE
