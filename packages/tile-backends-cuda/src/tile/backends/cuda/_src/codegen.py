"""CUDA C++ source from lowered tile IR, through apache-tvm's CUDA code generator.

TVM's default TIR pipeline flattens buffers, merges shared memory into one dynamic
arena, places ``__syncthreads()`` between shared-memory producers and consumers
(its ``ThreadSync`` pass), and splits the module into a host function and a
``__global__`` kernel. We keep the kernel's source and read the launch recipe from
the host function's ``call_ffi_kernel``: which kernel parameter is which tensor or
scalar, and the grid, block and dynamic shared memory size as expressions of the
kernel's symbolic dims. Special instructions are ``call_extern`` calls into
``tile_cuda.h`` (included at the top), never inline PTX.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

from tile.ir.annotations import DYNAMIC_SHARED_ALIGN, NAMED_BARRIER_THREADS, TMA_MAPS
from tile.ir.errors import BackendError

from .cute_headers import with_header
from .legalize_vectors import legalize_vectors_module

HEADER = "tile_cuda.h"


@dataclasses.dataclass(frozen=True)
class KernelParam:
    """One ``__global__`` parameter: a tensor's data pointer or a scalar.

    ``source`` is the kernel function's tensor parameter name (``kind="tensor"``), or
    the name of a scalar parameter or symbolic dim (``kind="scalar"``).
    """

    kind: str
    source: str
    dtype: str
    tma: dict[str, Any] | None = None
    """``kind="tensormap"``: the box plan (``tma.plan_to_json``) of ``source``'s tensor map."""


@dataclasses.dataclass(frozen=True)
class LaunchRecipe:
    """How to launch the kernel: its symbol, parameters and launch dims.

    ``grid``/``block`` are three Python expressions each (of symbolic dim names);
    ``dynamic_shared`` is the dynamic shared-memory size in bytes (an expression).
    """

    kernel_name: str
    params: tuple[KernelParam, ...]
    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    dynamic_shared: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchRecipe:
        return cls(
            kernel_name=data["kernel_name"],
            params=tuple(KernelParam(**p) for p in data["params"]),
            grid=tuple(data["grid"]),  # type: ignore[arg-type]
            block=tuple(data["block"]),  # type: ignore[arg-type]
            dynamic_shared=data["dynamic_shared"],
        )


def kernel_params(func: Any) -> list[tuple[str, str, tuple[int | str, ...] | None]]:
    """``(name, dtype, shape)`` of each parameter of ``func`` (shape ``None`` for a scalar;
    symbolic dims by name): what the launchers check arguments against."""
    out: list[tuple[str, str, tuple[int | str, ...] | None]] = []
    for param in func.params:
        if tirx.is_buffer_var(param):
            shape = tuple(int(d.value) if isinstance(d, tirx.IntImm) else str(d) for d in param.shape)
            out.append((str(param.name), str(param.dtype), shape))
        else:
            out.append((str(param.name), str(param.ty), None))
    return out


_BINOPS = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "FloorDiv": "//",
    "FloorMod": "%",
    "Div": "//",
    "Mod": "%",
}


def python_expr(expr: Any) -> str:
    """An integer TIR expression as Python source over its variable names."""
    if isinstance(expr, int):
        return str(expr)
    if isinstance(expr, tirx.IntImm):
        return str(int(expr.value))
    if isinstance(expr, tirx.Var):
        return str(expr.name)
    kind = type(expr).__name__
    if kind in _BINOPS:
        return f"({python_expr(expr.a)} {_BINOPS[kind]} {python_expr(expr.b)})"
    if kind in ("Min", "Max"):
        return f"{kind.lower()}({python_expr(expr.a)}, {python_expr(expr.b)})"
    if kind == "Cast":
        return python_expr(expr.value)
    raise BackendError(f"cannot evaluate the launch dimension {expr} on the host")


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


def _param_of(arg: Any, device_param: Any, maps: dict[str, KernelParam]) -> KernelParam:
    dtype = str(device_param.ty)
    if isinstance(arg, tirx.Var) and str(arg.name) in maps:
        return maps[str(arg.name)]
    if isinstance(arg, ir.Call) and str(arg.op.name) == "tirx.buffer_data":
        buffer = arg.args[0]
        return KernelParam("tensor", str(buffer.name), str(buffer.dtype))
    if isinstance(arg, tirx.Var):
        return KernelParam("scalar", str(arg.name), str(arg.ty))
    raise BackendError(f"cannot pass {arg} ({dtype}) to the kernel from the host")


def _recipe(host_mod: Any, kernel: Any, kernel_name: str, maps: dict[str, KernelParam]) -> LaunchRecipe:
    call = _launch_call(host_mod)
    args = list(call.args)[1:]
    names = [str(n) for n in call.attrs.launch_params]
    count = len(kernel.params)
    params = tuple(_param_of(a, p, maps) for a, p in zip(args[:count], kernel.params, strict=True))
    launch = dict(zip(names, [python_expr(a) for a in args[count:]], strict=True))
    grid = tuple(launch.get(f"blockIdx.{d}", "1") for d in "xyz")
    block = tuple(launch.get(f"threadIdx.{d}", "1") for d in "xyz")
    dynamic = launch.get("tirx.use_dyn_shared_memory", "0")
    return LaunchRecipe(kernel_name, params, grid, block, dynamic)  # type: ignore[arg-type]


def tidy(source: str) -> str:
    """Readable output: our header first, no TVM-internal prototypes twice, fewer blank lines."""
    lines = source.splitlines()
    out: list[str] = [f'#include "{HEADER}"']
    for line in lines:
        if line.startswith('extern "C" __global__') and line.rstrip().endswith(");"):
            continue  # forward declaration of the kernel defined right below
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def generate(mod: Any, arch: str) -> tuple[str, LaunchRecipe, str]:
    """``(cuda_source, launch_recipe, device_tir)`` of the one kernel in ``mod``."""
    from tvm.tirx.build import split_host_device_mods  # type: ignore[import-untyped]

    target = _target(arch)
    kernel_attrs = _attrs_of(mod)
    mod, maps = _tensor_map_params(mod)
    bound = tvm.tirx.transform.BindTarget(target)(mod)
    pipeline, _finalize_host, finalize_device = tvm.tirx.get_default_tir_pipeline(target)
    # TVM's common-subexpression elimination runs before SplitHostDevice: an expression
    # shared by a launch extent and the kernel body (the grid width a T.use_swizzle
    # remap reads) became a host variable passed as an extra kernel parameter that no
    # launch recipe can fill. It runs on the kernel alone, after the split, instead.
    current = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(
        opt_level=current.opt_level,
        required_pass=list(current.required_pass),
        disabled_pass=list(current.disabled_pass),
        config={**dict(current.config), "tirx.disable_cse_tir": True},
    ):
        lowered = pipeline(bound)
    host_mod, device_mods = split_host_device_mods(lowered)
    if len(device_mods) != 1:
        raise BackendError(f"expected one CUDA device module, got {len(device_mods)}")
    ((device_target, device_mod),) = device_mods.items()
    if not bool(current.config.get("tirx.disable_cse_tir", False)):
        device_mod = tvm.tirx.transform.CommonSubexprElim()(device_mod)
    device_mod = finalize_device()(device_mod)
    device_mod = legalize_vectors_module(device_mod)  # after CSE, which makes one of its cases
    device_mod = _kernel_attributes(device_mod, kernel_attrs)
    kernels = [(gv.name_hint, f) for gv, f in device_mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if len(kernels) != 1:
        names = [name for name, _ in kernels]
        raise BackendError(
            f"a tile kernel must lower to one CUDA kernel, got {names}",
            hint="keep everything inside one `with T.Kernel(...)` block",
        )
    ((kernel_name, kernel),) = kernels
    runtime_mod = _source_only_build(device_mod, device_target)
    source = with_header(tidy(runtime_mod.inspect_source("cuda")))
    recipe = _recipe(host_mod, kernel, kernel_name, maps)
    return source, recipe, device_mod.script()


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
    ``annotations.DYNAMIC_SHARED_ALIGN``) into the device IR the code generator prints."""
    threads = attrs.get(NAMED_BARRIER_THREADS)
    align = attrs.get(DYNAMIC_SHARED_ALIGN)
    if threads is None and align is None:
        return device_mod

    def rewrite(func: Any) -> Any:
        body = func.body
        if threads is not None:
            body = _named_barriers(body, int(threads))
        if align is not None:
            body = _aligned_dynamic_shared(body, int(align))
        return func.with_body(body)

    funcs = {gv: rewrite(f) if isinstance(f, tirx.PrimFunc) else f for gv, f in device_mod.functions.items()}
    return tvm.IRModule(funcs, attrs=device_mod.attrs)


TMA_MAPS_ATTR = TMA_MAPS
"""PrimFunc attr set by the TMA lowering: ``{tensor: box plan json}`` of the maps it reads."""


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


_TVM_COMPILE_CALLBACK = "tvm_callback_cuda_compile"


def _source_only_build(device_mod: Any, device_target: Any) -> Any:
    """TVM's CUDA codegen, without letting TVM compile the source itself.

    Where a CUDA driver is present, TVM's codegen hands the source to the global
    ``tvm_callback_cuda_compile`` (NVRTC), which knows nothing of ``tile_cuda.h``.
    We compile the source ourselves (nvcc, with our include path), so for the duration
    of the codegen the callback returns a placeholder the module never loads.
    """
    import tvm_ffi
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
    return b"// compiled by tile.backends.cuda with nvcc, not by TVM"


_SIGNATURE = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(')


def kernel_names(source: str) -> list[str]:
    """The ``__global__`` functions defined in ``source``."""
    return _SIGNATURE.findall(source)
