"""Pass ``check_resources``: reject kernels that ask the target for more than it has.

Needs: kernels as written (allocations and ``T.Kernel`` thread extents still carry
their source spans), and ``CompileContext.capabilities``. Guarantees: the module is
returned unchanged; on return,

* the block's thread count (product of the ``threadIdx`` extents) is at most
  ``capabilities.max_threads``;
* the shared-memory allocations of one kernel sum to at most
  ``capabilities.shared_bytes`` (counted as written: a backend whose storage planner
  reuses memory across lifetimes runs ``CHECK_RESOURCES_UNPLANNED`` first, which checks
  everything but shared memory, and ``CHECK_PLANNED_SHARED`` after ``plan_storage``,
  which checks the planned arena: buffers with disjoint lifetimes share bytes, a
  pipelined buffer counts once per stage);
* every buffer's element type is in ``capabilities.dtypes``;
* hand-written warp matrix instructions (``annotations.WARP_MATRIX_CALLS``) appear only
  where ``capabilities.warp_matrix_calls`` allows them.

Otherwise it raises ``ResourceLimitError`` / ``UnsupportedOnTargetError`` naming the
allocation sites.
"""

from __future__ import annotations

import math
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..annotations import KERNEL_SOURCE, SHARED_BYTES, WARP_MATRIX_CALLS
from ..errors import ResourceLimitError, SourceLocation, UnsupportedOnTargetError, location_from_span
from ..ops.region import as_int
from ..packed import subbyte_bits
from .pipeline import CompileContext, Pass
from .plan_storage import storage_plan
from .properties import RESOURCES_FIT, SHARED_FITS, STORAGE_PLANNED

_SHARED_PREFIX = "shared"


def _size_bytes(buffer: Any) -> int | None:
    dims = [as_int(d) for d in buffer.shape]
    if any(d is None for d in dims):
        return None
    count = math.prod(d for d in dims if d is not None)
    return (count * int(tvm.DataType(str(buffer.dtype)).bits) + 7) // 8


def _describe(buffer: Any, size: int, where: SourceLocation | None) -> str:
    """``A_s (256x256 float16 x 2 stages, 262144 bytes) at k.py:12``: ``size`` may count
    several pipeline stages of the buffer, and then says how many."""
    shape = "x".join(str(d) for d in buffer.shape)
    one = _size_bytes(buffer)
    stages = size // one if one and size > one and size % one == 0 else 1
    copies = f" x {stages} stages" if stages > 1 else ""
    site = f" at {where.filename}:{where.line}" if where is not None else ""
    return f"{buffer.name} ({shape} {buffer.dtype}{copies}, {size} bytes){site}"


def _element_type(dtype: str) -> str:
    """``uint32x4`` -> ``uint32`` (a vector value bound to a name is a local of its lanes)."""
    base, _, lanes = dtype.rpartition("x")
    return base if base and lanes.isdigit() else dtype


def _kernel_line(func: Any) -> SourceLocation | None:
    """The line of the kernel's definition (``@T.prim_func``), where the front end recorded it."""
    source = func.attrs.get(KERNEL_SOURCE) if func.attrs is not None else None
    if source is not None and str(source).rpartition(":")[2].isdigit():
        filename, _, line = str(source).rpartition(":")
        return SourceLocation.from_file(filename, int(line))
    return None


def _accessed_buffers(body: Any, params: Any) -> dict[str, SourceLocation | None]:
    """The parameter buffers ``body`` refers to (an element access, a ``T.copy`` region, ...),
    each with the line of its first element access where there is one."""
    wanted = [p for p in params if tirx.is_buffer_var(p)]
    found: dict[str, SourceLocation | None] = {}

    subbyte = {str(p.name) for p in wanted if subbyte_bits(str(p.dtype))}

    def note(buffer: Any, node: Any) -> None:
        if str(buffer.name) in subbyte and str(buffer.dtype) in ("int8", "uint8"):
            return  # a 4-bit tensor read as its bytes (pack_subbyte_tiles' view): plain bytes
        if str(buffer.name) not in found or found[str(buffer.name)] is None:
            found[str(buffer.name)] = location_from_span(getattr(node, "span", None))

    uses: dict[str, int] = {}
    byte_views: dict[str, int] = {}  # a 4-bit tensor's bytes (pack_subbyte_tiles): plain bytes

    def on_var(var: Any) -> None:
        for param in wanted:
            if var.same_as(param):
                uses[str(param.name)] = uses.get(str(param.name), 0) + 1

    def on_decl(node: Any) -> None:
        data = node.data
        if str(node.buffer.dtype) in ("int8", "uint8") and isinstance(data, ir.Call) and len(data.args) == 1:
            for param in wanted:
                if data.args[0].same_as(param) and subbyte_bits(str(param.dtype)):
                    byte_views[str(param.name)] = byte_views.get(str(param.name), 0) + 1

    tvm_ffi.structural_walk(
        body,
        [
            (tirx.BufferStore, lambda node: note(node.buffer, node)),
            (ir.TensorLoad, lambda node: note(node.source, node)),
            (tirx.DeclBuffer, on_decl),
            (ir.Var, on_var),
        ],
    )
    for name, count in uses.items():
        if count > byte_views.get(name, 0):
            found.setdefault(name, None)
    return found


def _check_func(func: Any, name: str, ctx: CompileContext, shared_mode: str = "written") -> None:
    """``shared_mode``: ``"written"`` (sum of the allocations), ``"planned"`` (the arena of
    ``plan_storage``, and nothing else is checked) or ``"skip"``."""
    caps = ctx.capabilities
    shared: list[tuple[Any, int, SourceLocation | None]] = []
    threads: list[tuple[int, SourceLocation | None]] = []
    bad_dtype: list[tuple[Any, SourceLocation | None]] = []

    def on_alloc(node: Any) -> None:
        buffer = node.buffer
        where = location_from_span(getattr(node, "span", None))
        if _element_type(str(buffer.dtype)) not in caps.dtypes:  # a vector local: its lanes' type
            bad_dtype.append((buffer, where))
        if str(buffer.scope()).startswith(_SHARED_PREFIX):
            size = _size_bytes(buffer)
            if size is not None:
                shared.append((buffer, size, where))

    def on_attr(node: Any) -> None:
        if str(node.attr_key) != "thread_extent":
            return
        tag = str(getattr(node.node, "thread_tag", ""))
        extent = as_int(node.value)
        if tag.startswith("threadIdx") and extent is not None:
            threads.append((extent, location_from_span(getattr(node, "span", None))))

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc), (tirx.AttrStmt, on_attr)])
    if shared_mode == "planned":
        _check_planned_shared(func, name, ctx, shared)
        return

    _check_warp_matrix_calls(func, ctx)
    accessed = _accessed_buffers(func.body, func.params)
    for param in func.params:
        if not tirx.is_buffer_var(param) or str(param.dtype) in caps.dtypes:
            continue
        symbolic = [d for d in param.shape if as_int(d) is None]
        param_bits = subbyte_bits(str(param.dtype))
        if param_bits and symbolic and not caps.packed_subbyte:
            raise UnsupportedOnTargetError(
                f"kernel {name}: {param.dtype} tensor {param.name} has symbolic dims "
                f"({', '.join(str(d) for d in symbolic)}), which target {ctx.target} cannot read from "
                "its packed bytes (its entry binds no dim of a 4-bit tensor)",
                hint=f"give {param.name} constant dims, or declare it as its bytes: "
                f"T.Tensor((..., last // {8 // param_bits}), \"uint8\") and decode "
                "the codes with shifts and masks",
                location=accessed.get(str(param.name)) or _kernel_line(func),
            )
        if subbyte_bits(str(param.dtype)) and (param.name not in accessed or caps.packed_subbyte):
            continue  # packed storage the kernel passes along untouched, or whose codes it reads
        bad_dtype.insert(0, (param, accessed.get(param.name)))
    if bad_dtype:
        buffer, where = bad_dtype[0]
        hint = f"use one of: {', '.join(sorted(caps.dtypes))}"
        bits = subbyte_bits(str(buffer.dtype))
        if bits and caps.packed_subbyte:  # a tile (shared, fragment) of codes: tensors only
            hint = (
                f"keep {buffer.dtype} elements in tensors; a tile of them is not supported: allocate a "
                f"uint8 tile ({8 // bits} codes per byte) or cast the elements to a wider type"
            )
        elif bits:
            hint = (
                f"this target has no {buffer.dtype} loads or stores: declare the tensor uint8 (its packed "
                f"storage, {8 // bits} codes per byte) and take the codes apart with shifts and masks"
            )
        raise UnsupportedOnTargetError(
            f"kernel {name}: buffer {buffer.name} has element type {buffer.dtype}, "
            f"which target {ctx.target} does not support",
            hint=hint,
            location=where,
        )

    block_threads = math.prod(extent for extent, _ in threads) if threads else 1
    if block_threads > caps.max_threads:
        raise ResourceLimitError(
            f"kernel {name} asks for {block_threads} threads per block; "
            f"target {ctx.target} allows at most {caps.max_threads}",
            hint=f"pass threads= at most {caps.max_threads} to T.Kernel",
            location=threads[0][1],
        )

    total = sum(size for _, size, _ in shared)
    if shared_mode == "written" and total > caps.shared_bytes:
        biggest = sorted(shared, key=lambda item: -item[1])
        sites = "; ".join(_describe(buf, size, where) for buf, size, where in biggest)
        raise ResourceLimitError(
            f"kernel {name} allocates {total} bytes of shared memory; "
            f"target {ctx.target} has {caps.shared_bytes}: {sites}",
            hint="use smaller tiles (block sizes) or fewer pipeline stages, or keep tiles in fragments",
            location=biggest[0][2],
        )


def _check_warp_matrix_calls(func: Any, ctx: CompileContext) -> None:
    calls = func.attrs.get(WARP_MATRIX_CALLS) if func.attrs is not None else None
    if not calls or ctx.capabilities.warp_matrix_calls:
        return
    filename, line, column = str(calls[0]).rsplit(":", 2)
    raise UnsupportedOnTargetError(
        f"this kernel issues warp matrix instructions by hand (T.ptx_ldmatrix / T.ptx_mma, PTX "
        f"ldmatrix and mma.sync), which target {ctx.target} does not have",
        hint="compile it for a CUDA target, sm_80 or newer (TILE_DEVICE=emu runs it on the CPU "
        "emulator), or write the product with T.gemm, which every backend lowers",
        location=SourceLocation.from_file(filename, int(line), int(column)),
    )


def _check_planned_shared(
    func: Any, name: str, ctx: CompileContext, shared: list[tuple[Any, int, SourceLocation | None]]
) -> None:
    planned = func.attrs.get(SHARED_BYTES) if func.attrs is not None else None
    if planned is None:
        return
    total, limit = int(planned), ctx.capabilities.shared_bytes
    if total <= limit:
        return
    plan = storage_plan(func)
    biggest = sorted(shared, key=lambda item: -plan.sizes.get(str(item[0].name), item[1]))
    sites = "; ".join(
        _describe(buf, plan.sizes.get(str(buf.name), size), where) for buf, size, where in biggest
    )
    raise ResourceLimitError(
        f"kernel {name} needs {total} bytes of shared memory once buffers with disjoint lifetimes "
        f"share bytes (pipelined buffers count once per stage); target {ctx.target} has {limit}: {sites}",
        hint="use smaller tiles (block sizes) or fewer pipeline stages, or keep tiles in fragments",
        location=biggest[0][2] if biggest else None,
    )


def static_shared_bytes(func: Any) -> int:
    """Bytes of the fixed-size ``shared`` (not ``shared.dyn``) allocations of ``func``."""
    total = 0

    def on_alloc(node: Any) -> None:
        nonlocal total
        size = _size_bytes(node.buffer)
        if str(node.buffer.scope()) == "shared" and size is not None:
            total += size

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    return total


def check_final_shared(
    func: Any,
    kernel: str,
    dynamic: str,
    static: int | None,
    ctx: CompileContext,
    note: str = "",
    fallback_target: Any = None,
) -> None:
    """Raise ``ResourceLimitError`` when the kernel as generated needs more shared memory than
    the target has.

    For GPU backends, after code generation: passes after ``CHECK_PLANNED_SHARED``
    (multi-stage rings, warp specialization, mbarriers, reduction workspaces) and the code
    generator's own merging of allocations decide what the launch asks for: ``dynamic``
    (the launch recipe's dynamic shared memory, an expression: a symbolic one is left to
    the launch) plus ``static`` (the assembler's count; ``None``: counted from ``func``,
    the final IR). ``note`` qualifies the count in the message; ``fallback_target`` is a
    target the kernel may fit (see ``ResourceLimitError.fallback_target``).
    """
    if not dynamic.strip().isdigit():
        return
    static_bytes = static_shared_bytes(func) if static is None else static
    needed, limit = int(dynamic) + static_bytes, ctx.capabilities.shared_bytes
    if needed <= limit:
        return
    where = _kernel_line(func)
    error = ResourceLimitError(
        f"kernel {kernel} needs {needed} bytes of shared memory as generated "
        f"({int(dynamic)} dynamic + {static_bytes} static{note}); target {ctx.target} has {limit}",
        hint="use smaller tiles (block sizes) or fewer pipeline stages, or keep tiles in fragments",
        location=where,
    )
    error.fallback_target = fallback_target
    raise error


def _checker(shared_mode: str) -> Any:
    def run(mod: Any, ctx: CompileContext) -> Any:
        for gvar, func in mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                _check_func(func, gvar.name_hint, ctx, shared_mode)
        return mod

    return run


def check_resources(mod: Any, ctx: CompileContext) -> Any:
    """Check thread count, shared memory and element types against the target (see module docstring)."""
    return _checker("written")(mod, ctx)


CHECK_RESOURCES = Pass("check_resources", check_resources, guarantees={RESOURCES_FIT, SHARED_FITS})
CHECK_RESOURCES_UNPLANNED = Pass("check_resources_unplanned", _checker("skip"), guarantees={RESOURCES_FIT})
"""``check_resources`` without the shared-memory sum, for pipelines that run ``CHECK_PLANNED_SHARED``."""
CHECK_PLANNED_SHARED = Pass(
    "check_planned_shared", _checker("planned"), needs={STORAGE_PLANNED}, guarantees={SHARED_FITS}
)
"""After ``plan_storage``: the planned shared-memory arena against the target's capacity."""
