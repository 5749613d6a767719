"""Pass ``check_arch_helpers``: the expert tier's device-header calls the target arch has.

Hand-written synchronisation and copies (``T.alloc_barrier``, ``T.mbarrier_expect_tx``,
``T.fence_proxy_async``, ``T.set_max_nreg``, ``T.ptx_cp_async``) are calls of ``tile_*`` helpers
of the device header, whichever arch the kernel is for. Where the arch lacks the instruction,
ptxas refused the PTX after code generation ("Feature 'mbarrier.init' requires .target sm_80 or higher") and
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

SYNC = "synchronise with T.sync_threads() instead"
TMA = "leave it out: there is no asynchronous copy for it to order on that arch"

Requirement = tuple[str, str, str, str, str]
"""(the T.* call that writes the helper, the capability it needs, what that is, from which arch,
what to do instead)"""

HELPERS: dict[str, Requirement] = {
    "tile_mbarrier_init": ("T.alloc_barrier", "mbarrier", "mbarrier objects", "sm_80", SYNC),
    "tile_fence_barrier_init": ("T.alloc_barrier", "mbarrier", "mbarrier objects", "sm_80", SYNC),
    "tile_mbarrier_arrive": ("T.mbarrier_arrive", "mbarrier", "mbarrier objects", "sm_80", SYNC),
    "tile_mbarrier_wait": ("T.mbarrier_wait_parity", "mbarrier", "mbarrier objects", "sm_80", SYNC),
    "tile_mbarrier_expect_tx": (
        "T.mbarrier_expect_tx", "mbarrier_tx", "mbarrier transaction counts", "sm_90", TMA
    ),
    "tile_mbarrier_arrive_expect_tx": (
        "T.mbarrier_arrive_expect_tx", "mbarrier_tx", "mbarrier transaction counts", "sm_90", TMA
    ),
    "tile_fence_proxy_async": (
        "T.fence_proxy_async", "tma", "the async proxy (fence.proxy.async)", "sm_90", TMA
    ),
    "tile_setmaxnreg_inc": (
        "T.set_max_nreg", "wgmma", "setmaxnreg", "sm_90a", "leave it out: it only moves registers"
    ),
    "tile_setmaxnreg_dec": (
        "T.set_max_nreg", "wgmma", "setmaxnreg", "sm_90a", "leave it out: it only moves registers"
    ),
}  # fmt: skip

PREFIXES: dict[str, Requirement] = {
    "tile_cp_async_": (
        "T.ptx_cp_async (and its commit/wait calls)", "async_copy", "cp.async", "sm_80",
        "copy with T.copy, or with plain loads and stores",
    ),
}  # fmt: skip
"""Helpers named by a prefix: ``tile_cp_async_16``, ``tile_cp_async_zfill_8``, ``tile_cp_async_wait<0>``."""


def _requirement(name: str) -> Requirement | None:
    if name in HELPERS:
        return HELPERS[name]
    return next((req for prefix, req in PREFIXES.items() if name.startswith(prefix)), None)


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
        found: list[tuple[Requirement, Any]] = []

        def on_evaluate(stmt: Any, found: list[tuple[Requirement, Any]] = found) -> None:
            call = stmt.value
            name = _helper_name(call) if isinstance(call, ir.Call) else None
            need = _requirement(name) if name is not None else None
            if need is not None and not getattr(caps, need[1]):
                found.append((need, stmt))

        tvm_ffi.structural_walk(func.body, (tirx.Evaluate, on_evaluate))
        if found:
            (api, _flag, what, since, instead), stmt = found[0]
            raise UnsupportedOnTargetError(
                f"kernel {gv.name_hint}: {api} needs {what} ({since}+); the target is {caps.arch.name}",
                hint=f"compile for {since} or newer, or {instead}",
                location=location_from_span(stmt.span),
            )
    return mod


CHECK_ARCH_HELPERS = Pass("check_arch_helpers", check_arch_helpers)
