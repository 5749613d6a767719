"""CUDA C++ source from lowered tile IR.

The kernel text and its launch recipe come from the GPU layer
(:func:`tile.ir.gpu.codegen.generate_device_source`, TVM's CUDA generator). What is
CUDA's is added here, all of it from the IR, never by editing the text: ``tile_cuda.h`` on
top (and ``tile_cuda/cute.h`` where a ``T.gemm(impl="cute")`` calls CuTe), the named
barriers and dynamic shared memory alignment a warp-specialized kernel's attributes ask
for (``annotations.NAMED_BARRIER_THREADS``, ``DYNAMIC_SHARED_ALIGN``; its launch bounds
are an ``annotations.MIN_BLOCKS_PER_SM`` statement TVM prints itself), a named barrier for
each barrier the plan placed over a warp-aligned range of threads (``THREAD_RANGE_SYNC``,
inside ``T.ws(g)`` / ``if tx < 128``: ``bar.sync id, count``), and one by-value
``CUtensorMap`` parameter per TMA-loaded tensor (``annotations.TMA_MAPS``), and the code of
the kernel's ``T.import_source`` calls after the header (``annotations.IMPORTED_SOURCES``).
Special instructions are ``call_extern`` calls into ``tile_cuda.h``, never inline PTX (the
user's imported code may have some).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import DYNAMIC_SHARED_ALIGN, IMPORTED_SOURCES, NAMED_BARRIER_THREADS, TMA_MAPS
from tile.ir.errors import BackendError
from tile.ir.gpu import THREAD_RANGE_SYNC, KernelParam, LaunchRecipe, generate_device_source, tidy

from .cute_headers import with_header

HEADER = "tile_cuda.h"

WARP_THREADS = 32
"""``bar.sync id, count`` counts whole warps: a range barrier's threads start and end on warps."""

CONSUMER_BARRIER = 1
"""The named barrier of a warp-specialized kernel's consumers (``annotations.NAMED_BARRIER_THREADS``);
id 0 is ``__syncthreads()``. Range barriers take the ids after it that the kernel leaves free."""

NAMED_BARRIER_IDS = 16
"""Named barriers per block (PTX ``bar.sync``: ids 0-15)."""

TMA_MAPS_ATTR = TMA_MAPS
"""PrimFunc attr set by the TMA lowering: ``{tensor: box plan json}`` of the maps it reads."""


def generate(mod: Any, arch: str) -> tuple[str, LaunchRecipe, str]:
    """``(cuda_source, launch_recipe, device_tir)`` of the one kernel in ``mod``."""
    attrs = _attrs_of(mod)
    mod, maps = _tensor_map_params(mod)
    device = generate_device_source(
        mod, arch, lambda device_mod: _kernel_attributes(device_mod, attrs), range_barriers=WARP_THREADS
    )
    imported = [str(code) for code in attrs.get(IMPORTED_SOURCES, [])]  # T.import_source
    source = with_header(tidy(device.source, HEADER, prelude=imported))
    params = tuple(maps.get(p.source, p) if p.kind == "scalar" else p for p in device.recipe.params)
    return source, dataclasses.replace(device.recipe, params=params), device.device_tir


def _attrs_of(mod: Any) -> dict[str, Any]:
    """The function attributes of the one kernel in ``mod`` (the IR before TVM's lowering)."""
    for func in mod.functions.values():
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None:
            return {str(k): v for k, v in func.attrs.items()}
    return {}


def _named_barriers(body: Any, threads: int) -> Any:
    """Every shared-memory barrier of ``body`` on named barrier 1 over the first ``threads`` threads."""

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_storage_sync"):
            return call
        if str(call.args[0].value) not in ("shared", "shared.dyn"):
            return call
        one, count = tirx.const(1, "uint32"), tirx.const(threads, "uint32")
        return tirx.call_extern("void", "tile_named_barrier_sync", one, count)

    return tvm_ffi.structural_map(body, (ir.Call, on_call))


def _named_barrier_ids(body: Any) -> set[int]:
    """The named barrier ids ``body`` uses already (the user's ``T.sync_threads(id, n)`` and
    ``T.named_barrier_arrive``), and those of ``__syncthreads()`` and the consumers."""
    used = {0, CONSUMER_BARRIER}

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern":
            name = str(call.args[0].value)
            if name in ("tile_named_barrier_sync", "tile_named_barrier_arrive"):
                barrier = call.args[1]  # an id known only at run time may be any of them
                known = isinstance(barrier, tirx.IntImm)
                used.update([int(barrier.value)] if known else range(NAMED_BARRIER_IDS))

    tvm_ffi.structural_walk(body, (ir.Call, on_call))
    return used


def _range_barriers(body: Any, kernel: str, consumers: int | None) -> Any:
    """Each ``THREAD_RANGE_SYNC(first, count)`` of ``body`` as ``bar.sync id, count``: one id
    per range of threads, none the kernel uses otherwise (two ranges that run at once must not
    count their warps on one barrier). The consumers of a producer-split kernel (threads
    ``[0, consumers)``) keep their own barrier, ``CONSUMER_BARRIER``."""
    free = [i for i in range(NAMED_BARRIER_IDS) if i not in _named_barrier_ids(body)]
    usable = len(free)
    ids: dict[tuple[int, int], int] = {}

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern"):
            return call
        if str(call.args[0].value) != THREAD_RANGE_SYNC:
            return call
        first, count = (int(a.value) for a in call.args[1:3])
        if (first, count) == (0, consumers):
            ids[first, count] = CONSUMER_BARRIER
        elif (first, count) not in ids:
            if len(free) == 0:
                raise BackendError(
                    f"kernel {kernel} needs barriers over more ranges of threads than CUDA has free "
                    f"named barriers ({usable} of {NAMED_BARRIER_IDS})",
                    hint="use fewer distinct T.ws(g) / `if tx < n` ranges that hold dependent shared-memory "
                    "accesses, or fewer T.sync_threads(id, n) ids",
                )
            ids[first, count] = free.pop(0)
        barrier, threads = tirx.const(ids[first, count], "uint32"), tirx.const(count, "uint32")
        return tirx.call_extern("void", "tile_named_barrier_sync", barrier, threads)

    return tvm_ffi.structural_map(body, (ir.Call, on_call))


def _aligned_dynamic_shared(body: Any, align: int) -> Any:
    """``body`` with its dynamic shared memory declared ``align``-byte aligned.

    The code generator prints a ``shared.dyn`` allocation's ``data_alignment``: the merged
    arena is replaced, everywhere it is referenced, by the same buffer with that alignment.
    """
    found: list[Any] = []

    def find(node: Any) -> None:
        if str(node.buffer.scope()) == "shared.dyn":
            found.append(node.buffer)

    tvm_ffi.structural_walk(body, (tirx.AllocBuffer, find))
    for old in found:
        new = tirx.decl_buffer(old.shape, str(old.dtype), name=str(old.name), scope="shared.dyn",
                               data_alignment=align)  # fmt: skip
        body = tvm_ffi.structural_map(body, (ir.Var, lambda v, o=old, n=new: n if v.same_as(o) else v))
    return body


def _kernel_attributes(device_mod: Any, attrs: dict[str, Any]) -> Any:
    """Emit what the kernel's attributes ask of its source (``annotations.NAMED_BARRIER_THREADS``,
    ``annotations.DYNAMIC_SHARED_ALIGN``) and its range barriers into the device IR the code
    generator prints."""
    threads = attrs.get(NAMED_BARRIER_THREADS)
    align = attrs.get(DYNAMIC_SHARED_ALIGN)

    def rewrite(func: Any) -> Any:
        name = str(func.attrs["global_symbol"]) if func.attrs else "?"
        body = _range_barriers(func.body, name, None if threads is None else int(threads))
        if threads is not None:
            body = _named_barriers(body, int(threads))
        if align is not None:
            body = _aligned_dynamic_shared(body, int(align))
        return func.with_body(body)

    funcs = {gv: rewrite(f) if isinstance(f, tirx.PrimFunc) else f for gv, f in device_mod.functions.items()}
    return tvm.IRModule(funcs, attrs=device_mod.attrs)


def _tensor_map_params(mod: Any) -> tuple[Any, dict[str, KernelParam]]:
    """``mod`` with one by-value tensor-map parameter per tensor of its ``TMA_MAPS_ATTR``.

    The lowering refers to the map of tensor ``X`` through a placeholder call
    ``tile_tmap_X()`` (``tma.map_param_name``): it becomes the address of a parameter of
    TVM's tensor-map type, appended after the function's own in tensor-name order, which
    TVM's code generator declares ``const __grid_constant__ CUtensorMap``. Returns the new
    module and, by parameter name, the launch-recipe entry of each map.
    """
    from .tma import map_param_name

    funcs: dict[str, Any] = {}
    entries: dict[str, KernelParam] = {}
    for gvar, func in mod.functions.items():
        found = func.attrs.get(TMA_MAPS_ATTR) if isinstance(func, tirx.PrimFunc) and func.attrs else None
        if not found:
            funcs[gvar.name_hint] = func
            continue
        params: dict[str, Any] = {}
        for tensor in sorted(str(t) for t in found):
            plan = {str(k): (str(v) if str(k) == "dtype" else int(v)) for k, v in found[tensor].items()}
            name = map_param_name(tensor)
            params[name] = tirx.Var(name, ir.PointerType(tirx.TensorMapType()))
            entries[name] = KernelParam("tensormap", tensor, str(plan["dtype"]), plan)

        def on_call(call: Any, params: dict[str, Any] = params) -> Any:
            if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern"):
                return call
            var = params.get(str(call.args[0].value)) if len(call.args) == 1 else None
            return call if var is None else tirx.address_of(var)

        body = tvm_ffi.structural_map(func.body, (ir.Call, on_call))
        funcs[gvar.name_hint] = tirx.PrimFunc(
            [*func.params, *params.values()], body, ret_type=func.ret_type, attrs=func.attrs, span=func.span
        )
    return (tvm.IRModule(funcs, attrs=mod.attrs), entries) if entries else (mod, entries)
