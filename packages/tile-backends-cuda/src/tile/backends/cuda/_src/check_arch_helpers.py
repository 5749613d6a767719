"""Pass ``check_arch_helpers``: the expert tier's device-header calls the target arch has.

Hand-written synchronisation (``T.alloc_barrier``, ``T.mbarrier_expect_tx``,
``T.fence_proxy_async``, ``T.set_max_nreg``) is a call of a ``tile_*`` helper of the device
header, whichever arch the kernel is for. Where the arch lacks the instruction, ptxas refused
the PTX after code generation ("Feature 'mbarrier.init' requires .target sm_80 or higher") and
named no line of the kernel. This pass names the ``T.*`` call, its line, and the archs that
have it, before anything is lowered. tile's own lowerings emit these helpers only where the
capability holds, so they never meet this check.

Needs: nothing (it reads the parsed kernel). Guarantees: nothing new; raises
``UnsupportedOnTargetError``.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.errors import UnsupportedOnTargetError, location_from_span
from tile.ir.transform import Pass

from ..arch import capabilities

# helper -> (the T.* call that writes it, the capability it needs, what that is, from which arch)
HELPERS: dict[str, tuple[str, str, str, str]] = {
    "tile_mbarrier_init": ("T.alloc_barrier", "mbarrier", "mbarrier objects", "sm_80"),
    "tile_fence_barrier_init": ("T.alloc_barrier", "mbarrier", "mbarrier objects", "sm_80"),
    "tile_mbarrier_arrive": ("T.mbarrier_arrive", "mbarrier", "mbarrier objects", "sm_80"),
    "tile_mbarrier_wait": ("T.mbarrier_wait_parity", "mbarrier", "mbarrier objects", "sm_80"),
    "tile_mbarrier_expect_tx": (
        "T.mbarrier_expect_tx", "mbarrier_tx", "mbarrier transaction counts", "sm_90"
    ),
    "tile_mbarrier_arrive_expect_tx": (
        "T.mbarrier_arrive_expect_tx", "mbarrier_tx", "mbarrier transaction counts", "sm_90"
    ),
    "tile_fence_proxy_async": ("T.fence_proxy_async", "tma", "the async proxy (fence.proxy.async)", "sm_90"),
    "tile_setmaxnreg_inc": ("T.set_max_nreg", "wgmma", "setmaxnreg", "sm_90a"),
    "tile_setmaxnreg_dec": ("T.set_max_nreg", "wgmma", "setmaxnreg", "sm_90a"),
}  # fmt: skip


def _helper_name(call: Any) -> str | None:
    if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern" and call.args):
        return None
    name = call.args[0]
    if not isinstance(name, ir.StringImm):
        return None
    return str(name.value).split("<", 1)[0]  # tile_setmaxnreg_inc<240>


def check_arch_helpers(mod: Any, ctx: Any) -> Any:
    """Raise at the first expert-tier call whose instruction the target arch lacks."""
    from .backend import arch_of  # imports this module

    caps = capabilities(arch_of(ctx.target))

    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        found: list[tuple[str, Any]] = []

        def on_evaluate(stmt: Any, found: list[tuple[str, Any]] = found) -> None:
            call = stmt.value
            if isinstance(call, ir.Call):
                name = _helper_name(call)
                if name in HELPERS and not getattr(caps, HELPERS[name][1]):
                    found.append((name, stmt))

        tvm_ffi.structural_walk(func.body, (tirx.Evaluate, on_evaluate))
        if found:
            name, stmt = found[0]
            api, _flag, what, since = HELPERS[name]
            raise UnsupportedOnTargetError(
                f"kernel {gv.name_hint}: {api} needs {what} ({since}+); the target is {caps.arch.name}",
                hint=f"compile for {since} or newer, or synchronise with T.sync_threads() instead",
                location=location_from_span(stmt.span),
            )
    return mod


CHECK_ARCH_HELPERS = Pass("check_arch_helpers", check_arch_helpers)
