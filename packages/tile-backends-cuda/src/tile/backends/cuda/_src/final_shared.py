"""The shared memory a generated CUDA kernel will ask for, checked at compile time.

``CHECK_PLANNED_SHARED`` checks the storage plan; passes after it (cp.async and TMA
rings, warp specialization, mbarriers, reduction workspaces) and TVM's own merging of
shared allocations decide what the launch really asks for. That number (dynamic shared
memory from the launch recipe, static from ptxas or, without a cubin, from the final
IR) is checked here, so a kernel that cannot launch fails to compile with a
``ResourceLimitError`` instead of failing at launch on the GPU.

A warp-specialized kernel that does not fit names a fallback target, the same target
without warp specialization; ``tile.lang.compile`` builds for it once.
"""

from __future__ import annotations

from typing import Any

from tile.ir.target import Target
from tile.ir.transform.check_resources import check_final_shared
from tile.ir.transform.pipeline import CompileContext

from .tma import WARP_SPECIALIZE_OPTION
from .warp_specialize import WS_ATTR

WS_FALLBACK_OPTION = "warp_specialize_fallback"
"""Target option of the fallback build: warp specialization was asked for and did not fit."""


def without_warp_specialization(target: Target) -> Target:
    options = dict(target.options)
    options[WARP_SPECIALIZE_OPTION] = "0"
    options[WS_FALLBACK_OPTION] = "1"
    return Target(kind=target.kind, arch=target.arch, options=tuple(sorted(options.items())))


def check_launch_shared(
    func: Any, kernel: str, dynamic: str, static_bytes: int | None, ctx: CompileContext
) -> None:
    """Raise ``ResourceLimitError`` if ``func``'s generated kernel needs more shared memory than
    ``ctx``'s target has; a warp-specialized one names the fallback target without it."""
    specialized = func.attrs is not None and WS_ATTR in func.attrs
    note = ", warp-specialized" if specialized else ""
    fallback = without_warp_specialization(ctx.target) if specialized else None
    check_final_shared(func, kernel, dynamic, static_bytes, ctx, note, fallback_target=fallback)
