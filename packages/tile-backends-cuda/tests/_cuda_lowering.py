"""Running the CUDA backend's pass pipeline on one kernel, for the tests that inspect its IR."""

from __future__ import annotations

from typing import Any

import tvm

from tile.backends.cuda._src import backend
from tile.ir.target import Target
from tile.ir.transform import CompileContext


def lowered(func: Any, arch: str = "sm_80") -> Any:
    """``func`` after every pass the CUDA backend runs for ``arch`` (no code generation)."""
    target = Target(kind="cuda", arch=arch)
    ctx = CompileContext(target=target, capabilities=backend.capabilities(target))
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in backend.pipeline(target):
        mod = step(mod, ctx)
    return mod["main"]
