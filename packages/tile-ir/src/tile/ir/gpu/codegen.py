"""CUDA-dialect C++ source of one kernel, and its launch recipe, through apache-tvm.

The scaffolding both C++-dialect GPU backends share. TVM's default TIR pipeline for a
``cuda`` target flattens buffers, merges shared memory into one dynamic arena, places
``__syncthreads()`` between shared-memory producers and consumers (planned by tile before
it, :mod:`tile.ir.gpu.barriers`, in place of TVM's ``ThreadSync``), and splits the module
into a host function and a ``__global__`` kernel. We keep
the kernel's source and read the launch recipe from the host function's
``call_ffi_kernel`` (:mod:`tile.ir.gpu.launch`). The text is plain CUDA dialect:
``__global__``, ``__shared__``, ``threadIdx``, ``__syncthreads()``, which HIP-Clang
accepts as well. Special instructions are ``call_extern`` calls into the vendor's device
header (``tile_cuda.h``, ``tile_hip.h``), never inline assembly; the vendor backend puts
its header on top (:func:`tidy`) or re-renders the text (ROCm).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..errors import BackendError
from ..transform._named_values import NamedValues, is_scalar_local
from ..transform.pipeline import map_prim_funcs, replace_nodes
from .barriers import TVM_THREAD_SYNC, plan_barriers
from .launch import POINTER_DTYPE, KernelParam, LaunchRecipe, python_expr
from .legalize_vectors import legalize_vectors_module, split_wide_vector_loops
from .narrow_integers import wrap_narrow_integers


@dataclasses.dataclass(frozen=True)
class DeviceSource:
    """What :func:`generate_device_source` returns for the one kernel of a module."""

    source: str
    """TVM's CUDA-dialect text, as TVM printed it (its prelude included)."""
    recipe: LaunchRecipe
    device_tir: str
    """The device module as TVMScript (for ``kernel.get_kernel_source("device_tir")``)."""


def _target(arch: str) -> Any:
    from tvm.target import Target as TvmTarget  # type: ignore[import-untyped]

    return TvmTarget({"kind": "cuda", "arch": arch}).with_host(TvmTarget("llvm"))


def _launch_call(host_mod: Any) -> Any:
    found: list[Any] = []

    def on_call(call: Any) -> None:
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_ffi_kernel":
            found.append(call)

    for func in host_mod.functions.values():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, (ir.Call, on_call))
    if len(found) != 1:
        raise BackendError(f"expected one kernel launch in the host code, found {len(found)}")
    return found[0]


def pointer_buffers(mod: Any) -> dict[str, str]:
    """``{buffer: parameter}`` for each buffer a kernel declares over a pointer parameter
    (``A = T.make_tensor(a_ptr, (m, k), dtype)`` over ``a_ptr: T.ptr``): the launch passes
    that parameter's address where the kernel takes the buffer's data."""
    found: dict[str, str] = {}
    for func in mod.functions.values():
        if not isinstance(func, tirx.PrimFunc):
            continue
        handles = {p.__chandle__(): str(p.name) for p in func.params if not tirx.is_buffer_var(p)}

        def on_decl(decl: Any, handles: dict[int, str] = handles) -> None:
            data = decl.data
            if isinstance(data, tirx.Var) and data.__chandle__() in handles:
                found[str(decl.buffer.name)] = handles[data.__chandle__()]

        tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, on_decl))
    return found


def _param_of(arg: Any, device_param: Any, pointers: dict[str, str]) -> KernelParam:
    dtype = str(device_param.ty)
    if isinstance(arg, ir.Call) and str(arg.op.name) == "tirx.buffer_data":
        buffer = arg.args[0]
        if str(buffer.name) in pointers:  # a T.ptr parameter: the caller's address, as a scalar
            return KernelParam("scalar", pointers[str(buffer.name)], POINTER_DTYPE)
        return KernelParam("tensor", str(buffer.name), str(buffer.dtype))
    if isinstance(arg, tirx.Var):
        return KernelParam("scalar", str(arg.name), str(arg.ty))
    raise BackendError(f"cannot pass {arg} ({dtype}) to the kernel from the host")


def _recipe(host_mod: Any, kernel: Any, kernel_name: str, pointers: dict[str, str]) -> LaunchRecipe:
    call = _launch_call(host_mod)
    args = list(call.args)[1:]
    names = [str(n) for n in call.attrs.launch_params]
    count = len(kernel.params)
    params = tuple(_param_of(a, p, pointers) for a, p in zip(args[:count], kernel.params, strict=True))
    launch = dict(zip(names, [python_expr(a) for a in args[count:]], strict=True))
    x, y, z = (launch.get(f"blockIdx.{d}", "1") for d in "xyz")
    tx, ty, tz = (launch.get(f"threadIdx.{d}", "1") for d in "xyz")
    dynamic = launch.get("tirx.use_dyn_shared_memory", "0")
    return LaunchRecipe(kernel_name, params, (x, y, z), (tx, ty, tz), dynamic)


def tidy(source: str, header: str, prelude: Sequence[str] = ()) -> str:
    """Readable output: ``#include "<header>"`` first, no kernel prototype twice, fewer blank
    lines; the ``prelude`` code (a kernel's ``T.import_source`` functions) right before the
    kernel, after the type names TVM's preamble defines (``uint``), which such code uses."""
    out: list[str] = [f'#include "{header}"']
    pending = [code.strip("\n") + "\n" for code in prelude]
    for line in source.splitlines():
        if line.startswith('extern "C" __global__') and line.rstrip().endswith(");"):
            continue  # forward declaration of the kernel defined right below
        if line.startswith('extern "C" __global__') and pending:
            out += pending
            pending = []
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def void_extern_statements(mod: Any) -> Any:
    """``mod`` with each ``call_extern`` of a pointer type (``handle``) that is a statement typed ``void``.

    TileLang programs spell a ``void`` external function's result type ``"handle"``
    (``T.call_extern("handle", "decode", ...)`` as a statement); TVM's printer casts such a
    call's value to ``void*``, which the compiler refuses for a ``void`` function. A
    statement's value is discarded, so the call is the same as a ``void`` one.
    """

    def on_evaluate(stmt: Any) -> Any:
        call = stmt.value
        if not (isinstance(call, ir.Call) and isinstance(call.op, ir.Op)):
            return stmt
        if str(call.op.name) != "tirx.call_extern" or not isinstance(call.ty, ir.PointerType):
            return stmt  # "handle" is TVM's void pointer type
        return tirx.Evaluate(tirx.call_extern("void", str(call.args[0].value), *call.args[1:]))

    return map_prim_funcs(mod, lambda func: tvm_ffi.structural_map(func, (tirx.Evaluate, on_evaluate)))


def generate_device_source(
    mod: Any, arch: str, device_ir: Callable[[Any], Any] | None = None, range_barriers: int | None = None
) -> DeviceSource:
    """The CUDA-dialect source, launch recipe and device TIR of the one kernel in ``mod``.

    ``arch`` is the CUDA arch TVM's generator is told (``sm_80``...): a backend that emits
    no arch-specific TVM intrinsic (ROCm) may name any. ``device_ir``, when given, rewrites
    the device module after TVM's lowering, right before its source is printed: where a
    vendor states in the IR what the text must say (a named barrier for TVM's
    ``__syncthreads()``, a stricter alignment of the dynamic shared memory, its own barrier for
    each :data:`~tile.ir.gpu.barriers.THREAD_RANGE_SYNC`). ``range_barriers``: the vendor can
    synchronize a range of a block's threads that starts and ends on multiples of this many
    (see :func:`~tile.ir.gpu.barriers.plan_barriers_in`); None: it cannot.

    Raises:
        BackendError: the module lowers to no kernel or to several.
    """
    from tvm.tirx.build import split_host_device_mods  # type: ignore[import-untyped]

    target = _target(arch)
    pointers = pointer_buffers(mod)
    mod = map_prim_funcs(mod, pass_int4_shape_vars)  # TVM's binder skips int4/uint4 shapes
    mod = split_wide_vector_loops(mod)  # no vector wider than 128 bits: CUDA has no type for it
    mod = inline_names_into_unwritten_reads(mod)  # TVM's compaction misreads them
    padded = pad_small_shared_buffers(mod)
    # tile plans the block barriers (tile.ir.gpu.barriers) where TVM's ThreadSync refused
    # valid programs; the plan is ThreadSync's wherever that one succeeds
    bound = tvm.tirx.transform.BindTarget(target)(plan_barriers(padded, range_barriers))
    bound = tvm.tirx.transform.RemoveAssume()(bound)  # T.assume is a hint; CUDA C has no call for it
    pipeline, _finalize_host, finalize_device = tvm.tirx.get_default_tir_pipeline(target)
    # TVM's common-subexpression elimination runs before SplitHostDevice: an expression
    # shared by a launch extent and the kernel body (the grid width a T.use_swizzle
    # remap reads) became a host variable passed as an extra kernel parameter that no
    # launch recipe can fill. It runs on the kernel alone, after the split, instead.
    bound = scope_bindings_that_load_registers(bound)  # after the barrier plan, which reads Binds
    current = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(
        opt_level=current.opt_level,
        required_pass=list(current.required_pass),
        # compaction would shrink the padded buffers back to the element they use
        disabled_pass=[
            *current.disabled_pass, TVM_THREAD_SYNC, *BF16_LEGALIZE, *([] if padded is mod else [COMPACTION])
        ],
        config={**dict(current.config), "tirx.disable_cse_tir": True},
    ):
        lowered = pipeline(bound)
    host_mod, device_mods = split_host_device_mods(lowered)
    if not device_mods:
        return _no_device_code(host_mod, arch)
    if len(device_mods) != 1:
        raise BackendError(f"expected one device module, got {len(device_mods)}")
    ((device_target, device_mod),) = device_mods.items()
    host_mod, device_mod = pass_declared_dims(host_mod, device_mod)
    # before finalize checks their types, and before CSE names the parts of their offsets
    device_mod = retype_pointers_into_merged_shared(device_mod)
    if not bool(current.config.get("tirx.disable_cse_tir", False)):
        device_mod = tvm.tirx.transform.CommonSubexprElim()(device_mod)
    device_mod = finalize_device()(device_mod)
    device_mod = spell_fused_multiply_add(device_mod)
    device_mod = legalize_vectors_module(device_mod)  # after CSE, which makes one of its cases
    device_mod = spell_non_finite_bfloat16(device_mod)
    device_mod = wrap_narrow_integers(device_mod)  # C++ promotes 8/16-bit sums; TIR wraps them
    device_mod = void_extern_statements(device_mod)  # T.call_extern("handle", ...) as a statement
    if device_ir is not None:
        device_mod = device_ir(device_mod)
    kernels = [(gv.name_hint, f) for gv, f in device_mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if len(kernels) != 1:
        names = [name for name, _ in kernels]
        raise BackendError(
            f"a tile kernel must lower to one GPU kernel, got {names}",
            hint="keep everything inside one `with T.Kernel(...)` block",
        )
    ((kernel_name, kernel),) = kernels
    runtime_mod = source_only_build(device_mod, device_target)
    source = str(runtime_mod.inspect_source("cuda"))
    return DeviceSource(source, _recipe(host_mod, kernel, kernel_name, pointers), str(device_mod.script()))


UNBOUND_SHAPE_DTYPES = frozenset({"int4", "uint4"})
"""Buffer parameter types whose shapes and strides TVM's argument binder (``MakePackedAPI``) skips."""


def pass_int4_shape_vars(func: Any) -> Any:
    """``func`` with each symbolic dim or stride that only an ``int4``/``uint4`` tensor parameter
    declares made a scalar parameter of its own.

    TVM's argument binder binds no shape or stride of an int4/uint4 buffer (a float4_e2m1fn one
    it binds), so a kernel whose ``m`` only such a tensor has failed ("variables (m,) are used,
    but are not passed in as API arguments"). The launchers never run TVM's host function: they
    bind ``m`` from the packed tensor's shape (``tile.ir.packed``), as any symbolic dim, and pass
    it where the launch recipe names it; tile's parameter list (``kernel_params``) is unchanged.
    """

    def names_of(exprs: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def on_var(var: Any) -> None:
            found.setdefault(str(var.name), var)

        for expr in exprs:
            tvm_ffi.structural_walk(expr, (tirx.Var, on_var))
        return found

    buffers = [p for p in func.params if tirx.is_buffer_var(p)]
    unbound = [b for b in buffers if str(b.dtype) in UNBOUND_SHAPE_DTYPES]
    if not unbound:
        return func
    wanted = names_of([e for b in unbound for e in (*b.shape, *b.strides)])
    bound = names_of([e for b in buffers if b not in unbound for e in (*b.shape, *b.strides)])
    bound.update({str(p.name): p for p in func.params if not tirx.is_buffer_var(p)})
    extra = [var for name, var in wanted.items() if name not in bound]
    if not extra:
        return func
    return tirx.PrimFunc([*func.params, *extra], func.body, attrs=func.attrs)


def pass_declared_dims(host_mod: Any, device_mod: Any) -> tuple[Any, Any]:
    """``host_mod`` and ``device_mod`` with every symbolic dim that the kernel's buffer
    declarations name, but the kernel is not passed, added as a kernel parameter.

    TVM's ``SplitHostDevice`` passes the kernel the variables its statements read, not those
    of its buffer declarations' (flattened) sizes. A dim that no index reads (``A: (M, N)``
    read only at ``A[0, j]``; or an index check that ``T.assume(i < M)`` removed) is then
    undefined in the kernel, and once CSE hoists a size shared by two declarations
    (``M * N``) into a variable, the CUDA code generator stops at it ("Find undefined
    Variable M"). The host binds every dim, so it passes the missing ones too.
    """
    kernels = [(gv, f) for gv, f in device_mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if len(kernels) != 1:
        return host_mod, device_mod  # generate_device_source reports it
    ((gv, kernel),) = kernels
    missing = list(tirx.analysis.undefined_vars(kernel.body, list(kernel.params)))
    if not missing:
        return host_mod, device_mod
    count = len(kernel.params)

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_ffi_kernel"):
            return call
        args = list(call.args)
        passed_args = [*args[: 1 + count], *missing, *args[1 + count :]]
        return ir.Call(call.op, passed_args, call.attrs, call.ty_args, call.span, ret_ty=call.ty)

    host = {}
    for hgv, func in host_mod.functions.items():
        is_func = isinstance(func, tirx.PrimFunc)
        host[hgv] = tvm_ffi.structural_map(func, (ir.Call, on_call)) if is_func else func
    passed = tirx.PrimFunc([*kernel.params, *missing], kernel.body, kernel.ret_type, kernel.attrs)
    device = {g: (passed if g.same_as(gv) else f) for g, f in device_mod.functions.items()}
    return tvm.IRModule(host, attrs=host_mod.attrs), tvm.IRModule(device, attrs=device_mod.attrs)


EMPTY_GRID = ("0", "1", "1")
"""The launch dims of a kernel with no device code: no block, so the launch does nothing."""


def _no_device_code(host_mod: Any, arch: str) -> DeviceSource:
    """A kernel whose body lowers to no device code (``with T.Kernel(1): pass``; a body of
    host-side hints such as ``T.annotate_l2_hit_ratio``): an empty ``__global__`` function with
    no parameters, launched over an empty grid, so a call checks its arguments and returns."""
    from tvm.target import Target as TvmTarget

    names = [gv.name_hint for gv, f in host_mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    name = f"{names[0] if names else 'main'}_kernel"
    device_target = TvmTarget({"kind": "cuda", "arch": arch})
    attrs = {"global_symbol": name, "calling_conv": DEVICE_KERNEL_LAUNCH, "target": device_target}
    empty = tirx.PrimFunc([], tirx.Evaluate(tirx.const(0, "int32"))).with_attrs(attrs)
    device_mod = tvm.IRModule({name: empty})
    source = str(source_only_build(device_mod, device_target).inspect_source("cuda"))
    recipe = LaunchRecipe(name, (), EMPTY_GRID, ("1", "1", "1"), "0")
    return DeviceSource(source, recipe, str(device_mod.script()))


DEVICE_KERNEL_LAUNCH = 2
"""TVM's ``CallingConv.kDeviceKernelLaunch``: the function is a ``__global__`` kernel."""


SMALL_SHARED_BITS = 32
"""TVM's shared-memory merge gives no offset to an allocation of at most this many bits."""

COMPACTION = "s_tir.CompactBufferAllocation"
"""TVM's pass that shrinks an allocation to the region its accesses touch."""

BF16_LEGALIZE = ("tirx.BF16ComputeLegalize", "tirx.BF16StorageLegalize")
"""TVM's passes that store bfloat16 as uint16 and compute in float32 where its check says the arch
has no bfloat16 (CUDA below sm_80). They are left out: the device headers' ``__nv_bfloat16``
converts and computes on every arch tile targets (sm_75 through float32 in software), and the
headers' overloads (atomics, shuffles, fp8 conversions) take bfloat16, not its bits."""


def pad_small_shared_buffers(mod: Any) -> Any:
    """``mod`` with every dynamic shared buffer of at most 4 bytes widened to 8 bytes.

    TVM's ``MergeSharedMemoryAllocations`` keeps arrays of at most 32 bits out of its
    free lists ("they will be lowered to registers") and then computes offsets only for
    what is on those lists, so with two or more dynamic shared buffers a 1-4 byte one
    gets no offset and the pass fails ("Check failed: (it !=
    scope.buffer_byte_offsets.end())"; the fuzzer's one-row and one-column shared tiles).
    The buffer's last dim is widened (every access stays in bounds, and one ``Buffer``
    object serves them all, so they stay consistent): at most 7 more bytes of shared
    memory a buffer. ``mod`` itself is returned when no buffer is that small.
    """

    def widened(buffer: Any) -> Any | None:
        if str(buffer.scope()) != "shared.dyn" or not buffer.shape:
            return None
        dims = [int(d.value) if isinstance(d, tirx.IntImm) else None for d in buffer.shape]
        data = tvm.DataType(str(buffer.dtype))
        if any(d is None for d in dims):
            return None
        total = math.prod(d for d in dims if d is not None) * int(data.bits) * int(data.lanes)
        if total > SMALL_SHARED_BITS:
            return None
        factor = -(-2 * SMALL_SHARED_BITS // max(total, 1))
        shape = [*buffer.shape[:-1], buffer.shape[-1] * factor]
        name, dtype = str(buffer.name), str(buffer.dtype)
        return tirx.decl_buffer(shape, dtype, name, data=buffer.data, scope="shared.dyn")

    def pad(func: Any) -> Any:
        table: dict[Any, Any] = {}

        def on_alloc(node: Any) -> None:
            wide = widened(node.buffer)
            if wide is not None:
                table[node.buffer] = wide

        tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
        return func.with_body(replace_nodes(func.body, table, tirx.Buffer)) if table else func

    return map_prim_funcs(mod, pad)  # nothing padded: mod itself, and TVM's compaction stays on


def inline_names_into_unwritten_reads(mod: Any) -> Any:
    """``mod`` with every read of a never-stored buffer indexed by the expressions its named
    values stand for.

    A fragment that no statement writes (TileLang's fused-index test reads one to check
    layout inference: ``idx = i * K + j; out[...] = f[idx // V, idx % V]``) has only
    reads, each at an index that loads the named value ``idx`` (a one-element local buffer
    stored once). TVM's ``CompactBufferAllocation`` then sizes the fragment from that load
    outside ``idx``'s scope and rewrites the read into a load of a new buffer named ``idx``,
    which ``FlattenBuffer`` stops on ("Buffer idx is used before its definition"). The value
    of each such name (and of each ``Bind``) whose expression loads nothing else is
    substituted into those reads' indices: a name stored once holds that expression
    wherever it is in scope, so compaction sees loop and thread variables only. Reads of
    written buffers keep their names; ``mod`` itself is returned when nothing changes.
    """

    def rewrite(func: Any) -> Any:
        allocated: list[Any] = []
        stores: list[Any] = []
        definitions: list[Any] = []  # Binds and stores, in program order

        def on_store(node: Any) -> None:
            stores.append(node)
            definitions.append(node)

        tvm_ffi.structural_walk(
            func.body,
            [
                (tirx.AllocBuffer, lambda node: allocated.append(node.buffer)),
                (tirx.BufferStore, on_store),
                (tirx.Bind, definitions.append),
            ],
        )
        unwritten = [b for b in allocated if not any(b.same_as(s.buffer) for s in stores)]
        if not unwritten:
            return func

        def loads_nothing(expr: Any) -> bool:
            loads: list[Any] = []
            tvm_ffi.structural_walk(expr, (ir.TensorLoad, loads.append))
            return not loads

        def stored_once(buffer: Any) -> bool:
            if not is_scalar_local(buffer) or not any(buffer.same_as(b) for b in allocated):
                return False
            return sum(1 for s in stores if buffer.same_as(s.buffer)) == 1

        names = NamedValues()
        for node in definitions:  # a name's expression may use the names before it
            expr = names.substitute(node.value)
            if not loads_nothing(expr):
                continue
            if isinstance(node, tirx.Bind):
                names.bind(node.var, expr)
            elif stored_once(node.buffer):
                names.store(node.buffer, expr)
        if not names:
            return func

        def on_load(load: Any) -> Any:
            if not any(load.source.same_as(b) for b in unwritten):
                return load
            return tirx.BufferLoad(load.source, [names.substitute(i) for i in load.indices])

        return func.with_body(tvm_ffi.structural_map(func.body, (ir.TensorLoad, on_load)))

    return map_prim_funcs(mod, rewrite)


EXTERN_SCOPE = "extern_scope"
"""An ``AttrStmt`` key that TVM's shared-memory merge treats as a scope and code generation ignores."""


def scope_bindings_that_load_registers(mod: Any) -> Any:
    """``mod`` with each kernel-level ``Bind`` whose value loads a buffer of the kernel (and
    the statements after it) inside an ``extern_scope`` attribute.

    TVM's ``MergeSharedMemoryAllocations`` (run when a kernel has two or more dynamic shared
    buffers) refuses a load of a buffer allocated at the same scope level as the load
    unless a statement encloses it ("Load memory in places other than store"); a ``Bind``
    is no such statement. TileLang's grouped GEMM over a pointer table binds
    ``A = T.make_tensor(a_ptrs[group], ...)``'s address, where ``group`` is a
    ``T.alloc_var``. The attribute is a scope to that pass and nothing to code generation.
    Bindings inside loops and branches are already in a deeper scope and stay as they are;
    ``mod`` itself is returned when nothing changes.
    """

    def rewrite(func: Any) -> Any:
        allocated: list[Any] = []
        tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda node: allocated.append(node.buffer)))

        def loads_allocated(expr: Any) -> bool:
            hit = [False]

            def on_load(load: Any) -> Any:
                if any(load.source.same_as(b) for b in allocated):
                    hit[0] = True
                    return tvm_ffi.VisitInterrupt(True)
                return None

            tvm_ffi.structural_walk(expr, (ir.TensorLoad, on_load))
            return hit[0]

        def kernel_level(stmt: Any) -> Any:
            if isinstance(stmt, tirx.AttrStmt):
                body = kernel_level(stmt.body)
                if body.same_as(stmt.body):
                    return stmt
                return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body, span=stmt.span)
            if not isinstance(stmt, tirx.SeqStmt):
                return stmt
            stmts = list(stmt.seq)
            for i, child in enumerate(stmts):
                if isinstance(child, tirx.Bind) and loads_allocated(child.value):
                    rest = stmts[i:]
                    body = rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)
                    zero = tirx.const(0, "int32")
                    return tirx.SeqStmt([*stmts[:i], tirx.AttrStmt(zero, EXTERN_SCOPE, zero, body)])
                inner = kernel_level(child)
                if not inner.same_as(child):
                    stmts[i] = inner
                    return tirx.SeqStmt(stmts)
            return stmt

        body = kernel_level(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return map_prim_funcs(mod, rewrite)


def retype_pointers_into_merged_shared(mod: Any) -> Any:
    """``mod`` with each pointer into dynamic shared memory whose element type is wider than its
    buffer's made a pointer of the buffer's element type to the same address.

    TVM's ``MergeSharedMemoryAllocations`` can hand the storage of one dynamic shared tile to
    tiles of other element types (an fp8 MLA decoder's byte tile to float16 ones, a Mamba
    chunk scan's float16 tile to float32 ones) and rebases their ``tvm_access_ptr`` onto that
    buffer with their own element type, which TVM's device finalization then refuses
    ("tvm_access_ptr element type must match the source buffer"). The offset and extent are in
    elements of the pointer's type; in elements of the narrower buffer type they name the same
    memory. The vendor headers take shared pointers as ``void*``, so the retyped pointer serves.
    """

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.tvm_access_ptr"):
            return call
        ptype, data, offset, extent, access = call.args
        if not (isinstance(data, ir.Call) and str(data.op.name) == "tirx.buffer_data"):
            return call
        buffer = data.args[0]
        element, stored = tvm.DataType(str(ptype.ty)), tvm.DataType(str(buffer.dtype))
        wide, narrow = int(element.bits) * int(element.lanes), int(stored.bits) * int(stored.lanes)
        if str(buffer.scope()) != "shared.dyn" or element == stored:
            return call
        if wide < narrow and narrow % wide == 0:
            # a narrower tile's pointer into a wider buffer (a bfloat16 tile given a float32
            # tile's bytes): in the buffer's elements when it starts on one of them, as the
            # 16-byte aligned addresses of ldmatrix/stmatrix rows, descriptors and copies do
            ratio = narrow // wide
            if not tvm.sym.Analyzer().can_prove(tirx.floormod(offset, ratio) == 0):
                return call
            retyped = tirx.type_annotation(str(buffer.dtype))
            ext = tirx.floordiv(extent + (ratio - 1), ratio)
            return tirx.tvm_access_ptr(retyped, data, tirx.floordiv(offset, ratio), ext, access)
        if wide <= narrow or wide % narrow:
            return call
        ratio = wide // narrow
        retyped = tirx.type_annotation(str(buffer.dtype))
        return tirx.tvm_access_ptr(retyped, data, offset * ratio, extent * ratio, access)

    out = {}
    for gv, func in mod.functions.items():
        is_func = isinstance(func, tirx.PrimFunc)
        out[gv] = tvm_ffi.structural_map(func, (ir.Call, on_call)) if is_func else func
    return tvm.IRModule(out, attrs=mod.attrs)


def spell_non_finite_bfloat16(mod: Any) -> Any:
    """``mod`` with each infinite or NaN bfloat16 constant written as a float32 one, cast.

    TVM's CUDA code generator prints a bfloat16 ``FloatImm`` through its value's decimal
    text plus ``f``: +inf becomes ``inff``, which nvcc and hipcc reject (the fuzzer found
    it as the -inf identity of every bfloat16 ``T.reduce_max``). Its float32 constants
    spell the special values correctly, and a cast of one is the same bfloat16 value.
    """

    def on_float(imm: Any) -> Any:
        if str(imm.ty) != "bfloat16" or math.isfinite(float(imm.value)):
            return imm
        return tirx.Cast("bfloat16", tirx.FloatImm("float32", float(imm.value)))

    out = {}
    for gv, func in mod.functions.items():
        is_func = isinstance(func, tirx.PrimFunc)
        out[gv] = tvm_ffi.structural_map(func, (tirx.FloatImm, on_float)) if is_func else func
    return tvm.IRModule(out, attrs=mod.attrs)


_FMA_FUNCTIONS = {"float32": "fmaf", "float64": "fma"}
"""The C math functions of a fused multiply-add (CUDA's and HIP's device libraries have both)."""


def spell_fused_multiply_add(mod: Any) -> Any:
    """``mod`` with each ``tirx.fma(x, y, z)`` (``T.fma2``) a call of the C function ``fmaf`` /
    ``fma``, which TVM's CUDA and HIP code generators leave unresolved.

    Lane by lane for a vector (each lane extracted and the results joined by ``Shuffle``);
    float16 and bfloat16 lanes go through float32, whose product of two 16-bit values is
    exact, so only the sum is rounded twice (to float32, then to the 16-bit type).
    """

    def scalar(dtype: str, x: Any, y: Any, z: Any) -> Any:
        if dtype in _FMA_FUNCTIONS:
            return tirx.call_pure_extern(dtype, _FMA_FUNCTIONS[dtype], x, y, z)
        wide = [tirx.Cast("float32", v) for v in (x, y, z)]
        return tirx.Cast(dtype, tirx.call_pure_extern("float32", "fmaf", *wide))

    def on_call(call: Any) -> Any:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.fma"):
            return call
        kind = tvm.DataType(str(call.ty))
        element = str(kind.with_lanes(1))
        if int(kind.lanes) == 1:
            return scalar(element, *call.args)
        lanes = [
            scalar(element, *(tirx.Shuffle([a], [tirx.const(i, "int32")]) for a in call.args))
            for i in range(int(kind.lanes))
        ]
        return tirx.Shuffle(lanes, [tirx.const(i, "int32") for i in range(len(lanes))])

    out = {}
    for gv, func in mod.functions.items():
        is_func = isinstance(func, tirx.PrimFunc)
        out[gv] = tvm_ffi.structural_map(func, (tirx.Call, on_call)) if is_func else func
    return tvm.IRModule(out, attrs=mod.attrs)


_TVM_COMPILE_CALLBACK = "tvm_callback_cuda_compile"


def source_only_build(device_mod: Any, device_target: Any) -> Any:
    """TVM's CUDA codegen, without letting TVM compile the source itself.

    Where a CUDA driver is present, TVM's codegen hands the source to the global
    ``tvm_callback_cuda_compile`` (NVRTC), which knows nothing of the vendor's device
    header. The backends compile the source themselves (nvcc, hipcc, with their include
    path), so for the duration of the codegen the callback returns a placeholder the
    module never loads.
    """
    from tvm.tirx.build import codegen_build

    previous = tvm_ffi.get_global_func(_TVM_COMPILE_CALLBACK, allow_missing=True)
    tvm_ffi.register_global_func(_TVM_COMPILE_CALLBACK, _placeholder_binary, override=True)
    try:
        return codegen_build(device_mod, device_target)
    finally:
        if previous is not None:
            tvm_ffi.register_global_func(_TVM_COMPILE_CALLBACK, previous, override=True)
        else:
            tvm_ffi.remove_global_func(_TVM_COMPILE_CALLBACK)


def _placeholder_binary(*_: Any) -> bytes:
    return b"// compiled by the tile backend with its own compiler, not by TVM"
