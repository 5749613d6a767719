"""``tile.lang.compile`` / ``tile.lang.jit`` and the callable ``JITKernel``."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tile.ir.annotations import CHECK_OPTION
from tile.ir.backend import BackendManifest, BuildArtifact, resolve_target
from tile.ir.errors import ResourceLimitError, TileError
from tile.ir.packed import subbyte_bits
from tile.ir.target import AUTO, Target

from .. import env
from ..errors import ArgumentValueError, KernelArgumentError
from .arguments import (
    ALIGNMENT,
    ArgumentChecker,
    ParamSpec,
    _dtype_name,
    _numpy_dtype,
    allocate_output,
    dim_value,
    is_numpy_array,
    is_torch_tensor,
    logical_layout,
    param_specs,
    stage_aligned,
    torch_installed,
)
from .assumptions import check_assumptions, host_assumptions
from .auto_target import AutoTargetKernel
from .cache import build_with_cache
from .callsite import call_site
from .compat_lang import precise_fast_math
from .debug import raise_if_assertion_failed
from .eager import EagerKernel, is_eager_function
from .expert import load_host_sources
from .fastcall import MISS, FastPath
from .kernel_sequence import KernelSequence, kernel_parts, scratch_count
from .pass_config import annotated_pass_configs, apply_compile_flags, apply_pass_configs
from .pointers import is_pointer, pointer_argument
from .session import kernel_location
from .suggestions import check_keywords
from .symbolic import bind_shape_expressions
from .tracebacks import api_boundary, user_facing

TargetSpec = str | dict[str, Any] | Target


def _pick_target(target: TargetSpec) -> tuple[Target, BackendManifest]:
    """``target`` resolved; "auto" takes ``TILE_DEFAULT_TARGET`` where set. A bare kind ("cuda")
    means the device at hand: under the emulator (no real device to ask) that is the one
    ``TILE_DEFAULT_TARGET`` names when it is of that kind, as the test markers also read it."""
    try:
        override = env.DEFAULT_TARGET.get()
        if isinstance(target, str) and override and target.strip() == AUTO:
            return resolve_target(override)
        resolved, manifest = resolve_target(target)
        if isinstance(target, str) and override:
            asked, default = Target.parse(target), Target.parse(override)
            bare = asked.arch is None and not asked.options
            if bare and default.kind == resolved.kind and manifest.capabilities(resolved).emulated:
                return resolve_target(default)
        return resolved, manifest
    except TileError as exc:
        raise exc.with_location(call_site()) from None


def scoped_target(target: Any) -> Any:
    """``target``, where it is "auto" inside ``with tvm.target.Target(...):`` the scope's target
    (TileLang's rule: the scope beats detection), as a kind name or a dict; an apache-tvm
    ``Target`` passed directly becomes the same."""
    if isinstance(target, str) and target.strip() == AUTO:
        import tvm  # type: ignore[import-untyped]

        target = tvm.target.Target.current(allow_none=True) or target
    if isinstance(target, str | Mapping | Target):
        return target
    try:
        parsed = Target.parse(target)
    except TileError as exc:
        raise exc.with_location(call_site()) from None
    return parsed.kind if parsed.arch is None and not parsed.options else parsed.to_json()


def _check_options(api: str, options: dict[str, Any]) -> None:
    try:
        check_keywords(api, options, ["out_idx", "target", *COMPILE_OPTIONS])
    except TileError as exc:
        raise exc.with_location(call_site()) from None


def _normalize_out_idx(out_idx: int | Sequence[int] | None, count: int) -> list[int]:
    if out_idx is None:
        return []
    raw = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    result = []
    for idx in raw:
        pos = idx + count if idx < 0 else idx
        if not 0 <= pos < count:
            raise KernelArgumentError(
                f"out_idx {idx} is out of range for a kernel with {count} parameters",
                hint=f"out_idx entries index the kernel's parameters: 0..{count - 1}, or -1 for the last",
                location=call_site(),
            )
        result.append(pos)
    return sorted(set(result))


COMPILE_OPTIONS = (
    "pass_configs",
    "execution_backend",
    "target_host",
    "verbose",
    "compile_flags",
    "debug_root_path",
)
"""Keywords ``compile``/``jit`` take besides ``out_idx`` and ``target``: ``pass_configs``, and the
rest of TileLang's signature, accepted so its programs run unchanged (tile builds one way)."""

DEVICE_SOURCE_KINDS = ("cuda", "hip")
"""Source kinds ``get_kernel_source()`` returns by default, first found (TileLang returns the device code)."""


def default_source_kind(sources: Mapping[str, str]) -> str:
    """The kind of text a kernel's source is by default: its device source (``DEVICE_SOURCE_KINDS``),
    else the lowered TIR (the CPU)."""
    return next((k for k in DEVICE_SOURCE_KINDS if k in sources), "tir")


def require_prim_func(func: Any, api: str) -> None:
    """Raise a ``TileError`` at the call site unless ``func`` is a parsed ``@T.prim_func``."""
    if not hasattr(func, "params") or not hasattr(func, "body"):
        raise TileError(
            f"{api} expects a kernel made with @T.prim_func, got {type(func).__name__}",
            hint="decorate the kernel function with @T.prim_func",
            location=call_site(),
        )


class _BuildsOnConstruction(type):
    """``JITKernel(func, out_idx=None, target="auto", **options)``, TileLang's way to build a
    kernel, is ``tile.lang.compile(func, out_idx, target, **options)``; tile builds a
    ``JITKernel`` itself from a ``BuildArtifact``."""

    def __call__(cls, func: Any = None, *args: Any, **kwargs: Any) -> Any:
        given = args[0] if args else kwargs.get("artifact")
        if isinstance(given, BuildArtifact):
            return super().__call__(func, *args, **kwargs)
        if func is None:
            raise TileError(
                "JITKernel() needs the kernel to compile",
                hint="pass a @T.prim_func kernel: JITKernel(func, out_idx=[-1], target=...)",
                location=call_site(),
            )
        return compile(func, *args, **kwargs)


class JITKernel(metaclass=_BuildsOnConstruction):
    """A compiled kernel. Call it with numpy arrays or torch tensors.

    ``JITKernel(func, out_idx=..., target=..., **options)`` compiles ``func`` as
    ``tile.lang.compile`` does (TileLang's constructor form).

    Parameters listed in ``out_idx`` are not passed: they are allocated, filled by
    the kernel and returned (one value, or a tuple). Torch inputs give torch outputs, numpy
    inputs numpy outputs, and a call with no array argument torch outputs where torch is
    installed (TileLang's outputs are torch tensors).
    A GPU kernel takes torch tensors on its device; numpy arrays passed to it are
    copied to the device and back after the call (every one, since the kernel may
    write any), and its outputs then come back as numpy arrays: a convenience for
    scripts that run on every backend, not a fast path.

    Example::

        kernel = tilelang.compile(add_kernel, out_idx=[-1], target="cpu")
        c = kernel(a, b)
    """

    def __init__(
        self,
        func: Any,
        artifact: BuildArtifact,
        fn: Callable[..., Any],
        out_idx: list[int],
        param_alignment: int = ALIGNMENT,
    ) -> None:
        self.func = func
        self.artifact = artifact
        self.target = artifact.target
        self.out_idx = out_idx
        self._fn = fn
        self.param_alignment = param_alignment
        self.params: list[ParamSpec] = param_specs(func)
        self.name = artifact.entry_name
        # A backend's loaded kernel may say where its tensors live (``device_type``,
        # e.g. "cuda"); tensors are then checked and outputs allocated there.
        self.device = str(getattr(fn, "device_type", "cpu"))
        self._checker = ArgumentChecker(self.name, self.params, kernel_location(func), self.device)
        # the CPU entry checks its arguments' types itself: its 4-bit tensors get a 4-bit view
        # (GPU launchers, the emulators' too, take the packed bytes and check them)
        self._subbyte_params = frozenset(
            i for i, p in enumerate(self.params) if self.target.kind == "cpu" and subbyte_bits(p.dtype)
        )
        self._fast = FastPath(self.params, out_idx, param_alignment, self.device)
        self._fast_call: Callable[[tuple[Any, ...]], Any] = functools.partial(self._fast.call, fn)
        bind_call = getattr(fn, "bind_call", None)
        if bind_call is not None:  # a GPU launcher: its own per-signature fast path, outputs from torch
            self._fast_call = bind_call(out_idx, kernel_location(func), param_alignment, MISS)
        for idx in out_idx:
            if not self.params[idx].is_tensor:
                raise KernelArgumentError(f"out_idx {idx} names the scalar parameter {self.params[idx].name}")
        self._pointers = [  # (position among the call's arguments, parameter) of each T.ptr
            (position, spec) for position, spec in enumerate(self.input_params) if is_pointer(spec)
        ]
        # T.assume conditions over dims and scalars: checked on the full path, which every new
        # argument signature takes first; one that reads a scalar (no part of a signature) or is
        # always false keeps every call on that path.
        self._assumptions = host_assumptions(func, self.params)
        if any(a.needs_every_call for a in self._assumptions):
            self._fast_call = lambda args: MISS

    def _subbyte_view(self, spec: ParamSpec, value: Any) -> Any:
        """A 4-bit parameter's packed bytes as the 4-bit tensor of its logical shape, for the CPU
        backend's compiled entry (``_subbyte_params``)."""
        if _dtype_name(value) == spec.dtype:
            return value
        import tvm_ffi

        shape, _ = logical_layout(spec.dtype, value)
        contiguous = value.is_contiguous() if is_torch_tensor(value) else bool(value.flags["C_CONTIGUOUS"])
        if not contiguous:
            raise self._checker._fail(
                f"argument {spec.name} ({spec.dtype}, passed as its packed bytes) is not contiguous; "
                "the CPU backend reads such a tensor as one run of bytes",
                "pass x.contiguous() (torch) or np.ascontiguousarray(x)",
            )
        return tvm_ffi.from_dlpack(value)._create_view(shape, spec.dtype)  # type: ignore[attr-defined]

    @property
    def input_params(self) -> list[ParamSpec]:
        return [p for i, p in enumerate(self.params) if i not in self.out_idx]

    def get_kernel_source(self, kind: str | None = None, kernel_only: bool = False) -> str:
        """The compiled kernel as text: ``"tir"`` (lowered TIR), ``"llvm"`` (LLVM IR on the CPU),
        ``"cuda"``/``"ptx"``/``"sass"`` on CUDA, ``"hip"`` on ROCm, ...; a ``KeyError`` lists what
        the backend has. By default, as in TileLang, the device source a GPU backend compiled
        (CUDA or HIP C++), and the lowered TIR where there is none (the CPU).

        ``kernel_only`` is TileLang's keyword: tile's device source holds no host code, so the
        text is the same either way."""
        del kernel_only
        if kind is None:
            kind = default_source_kind(self.artifact.sources)
        if kind in self.artifact.sources:
            return self.artifact.sources[kind]
        payload = self.artifact.payload
        lazy = tuple(getattr(payload, "lazy_source_kinds", ()))
        if kind in lazy:
            return str(payload.lazy_source(kind))
        raise KeyError(f"no {kind!r} source; available: {sorted([*self.artifact.sources, *lazy])}")

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """A ``Profiler``: ``assert_allclose(reference)``, ``do_bench()``, ``run_once()``."""
        from .profiler import Profiler

        return Profiler(self, tensor_supply_type)

    def run_once(self, func: Any = None) -> Any:
        """Run the kernel (or ``func``) once on inputs the profiler makes; return what it returns."""
        return self.get_profiler().run_once(func)

    def __call__(self, *args: Any) -> Any:
        try:
            if self._pointers and len(args) == len(self.input_params):  # T.ptr: addresses
                given = list(args)
                for position, spec in self._pointers:
                    address = pointer_argument(given[position])
                    if address is None:
                        raise self._checker._fail(
                            f"parameter {spec.name} is a pointer (T.ptr), but the call passes "
                            f"{type(given[position]).__name__}",
                            f"pass a tensor or its address (x.data_ptr()) for {spec.name}",
                        )
                    given[position] = address
                args = tuple(given)
            result = self._fast_call(args)  # arguments of a signature seen before: precomputed checks
            return result if result is not MISS else self._call_checked(args)
        except TileError as error:
            raise user_facing(error) from error.__cause__  # frames hidden; TILE_TRACEBACK=full shows all

    def _call_checked(self, args: tuple[Any, ...]) -> Any:
        """A call the fast path declined: check every argument, allocate outputs, stage, run."""
        if self.device != "cpu" and any(is_numpy_array(a) for a in args):
            return self._call_with_host_arrays(args)
        inputs = self.input_params
        if len(args) != len(inputs):
            names = ", ".join(p.name for p in inputs)
            raise self._checker._fail(
                f"expected {len(inputs)} arguments ({names}), got {len(args)}",
                "outputs listed in out_idx are allocated for you; do not pass them",
            )
        bindings: dict[str, int] = {}
        # numpy in, numpy out; torch in, torch out; no array in: torch, as in TileLang
        use_torch = any(is_torch_tensor(a) for a in args) or (
            not any(is_numpy_array(a) for a in args) and torch_installed()
        )
        full: list[Any] = []
        it = iter(args)
        for index, spec in enumerate(self.params):
            if index in self.out_idx:
                full.append(None)
                continue
            value = next(it)
            if spec.is_tensor:
                self._checker.check_tensor(index, spec, value, bindings)
            full.append(value)
        if self._assumptions:
            check_assumptions(self._assumptions, self.params, full, bindings, self.name)
        outputs = []
        # a GPU kernel's outputs go on its inputs' device (multi-GPU), else the current one
        on_device = (a for a in args if is_torch_tensor(a) and a.device.type == self.device)
        out_device = next(on_device, None) if self.device != "cpu" else None
        out_device = out_device.device if out_device is not None else self.device
        for index in self.out_idx:
            spec = self.params[index]
            missing = [d for d in spec.shape or () if dim_value(spec, d, bindings) is None]
            if missing:
                raise self._checker._fail(
                    f"cannot size output {spec.name}: dims {missing} appear in no input",
                    "make the output's symbolic dims also appear in an input tensor",
                )
            out = allocate_output(spec, bindings, use_torch or self.device != "cpu", out_device)
            full[index] = out
            outputs.append(out)
        passed, copy_back = [], []
        for position, (spec, value) in enumerate(zip(self.params, full, strict=True)):
            if spec.is_tensor:
                staged, back = stage_aligned(value, self.param_alignment)
                if position in self._subbyte_params:
                    staged = self._subbyte_view(spec, staged)
                passed.append(staged)
                if back is not None:
                    copy_back.append((value, back))
            else:
                passed.append(value)
        try:
            self._fn(*passed)
        except Exception as exc:
            raise_if_assertion_failed(exc)  # T.device_assert -> KernelAssertionError
            raise
        raise_if_assertion_failed()  # a failure inside a parallel block may not reach the return code
        for original, staged in copy_back:
            original[...] = staged
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _call_with_host_arrays(self, args: Sequence[Any]) -> Any:
        """A GPU kernel called with numpy arrays: copy them to the device, call, copy back."""
        import numpy as np

        try:
            import torch
        except ImportError as exc:
            raise self._checker._fail(
                f"this kernel runs on a {self.device} device and numpy arrays reach it through torch, "
                "which is not installed",
                "install torch with GPU support, or pass device tensors",
            ) from exc
        device = next(
            (a.device for a in args if is_torch_tensor(a) and a.device.type == self.device),
            torch.device(self.device),
        )
        staged: list[Any] = []
        for position, value in enumerate(args):
            if not is_numpy_array(value):
                staged.append(value)
                continue
            try:
                host = _torch_from_numpy(torch, np.ascontiguousarray(value))
            except (TypeError, AttributeError) as exc:
                raise self._checker._fail(
                    f"argument {position} is a numpy array of dtype {value.dtype}, which torch cannot hold",
                    f"pass a torch tensor on the device, e.g. torch.empty(..., device='{self.device}')",
                ) from exc
            try:
                staged.append(host.to(device))
            except (RuntimeError, AssertionError) as exc:  # torch without GPU support, or no device
                raise self._checker._fail(
                    f"argument {position} is a numpy array and copying it to the {self.device} device "
                    f"failed: {str(exc).strip()[:200]}",
                    f"run on a machine with a {self.device} device (or TILE_DEVICE=emu for CUDA kernels), "
                    f"or pass torch tensors on the device",
                ) from exc
        result = self(*staged)
        for value, tensor in zip(args, staged, strict=True):
            if is_numpy_array(value) and value.flags.writeable:
                value[...] = _to_host(tensor)
        if result is None:
            return None
        if isinstance(result, tuple):
            return tuple(_to_host(out) for out in result)
        return _to_host(result)


def _torch_from_numpy(torch: Any, array: Any) -> Any:
    """``torch.from_numpy``, also for ml_dtypes arrays (bfloat16, float8_*), through their bits."""
    if array.dtype.type.__module__ == "ml_dtypes":  # torch.from_numpy refuses these
        bits = array.view(f"uint{8 * array.dtype.itemsize}")
        return torch.from_numpy(bits).view(getattr(torch, array.dtype.name))
    return torch.from_numpy(array)


def _to_host(tensor: Any) -> Any:
    """A device tensor as a numpy array; bfloat16 and float8 as ml_dtypes arrays (numpy has
    no such types), or as a CPU torch tensor where ml_dtypes is not installed."""
    host = tensor.cpu()
    try:
        return host.numpy()
    except TypeError:  # a dtype numpy lacks: its bits, typed by ml_dtypes
        torch = sys.modules["torch"]
        try:
            dtype = _numpy_dtype(str(host.dtype).removeprefix("torch."))
        except (ImportError, TypeError):
            return host
        bits = host.view({1: torch.uint8, 2: torch.int16}[host.element_size()]).numpy()
        return bits.view(dtype)


@api_boundary
def compile(
    func: Any,
    out_idx: int | Sequence[int] | None = None,
    target: TargetSpec = AUTO,
    **_options: Any,
) -> Any:
    """Compile a ``@T.prim_func`` kernel for ``target`` and return a callable ``JITKernel``.

    ``target`` is a name ("cpu", "cuda", ...), a JSON dict/string, or "auto": then
    ``TILE_DEFAULT_TARGET`` decides where set, and otherwise the kernel compiles at its
    first call for the device its tensors live on (an ``AutoTargetKernel``: CUDA tensors
    give that GPU's arch, ROCm tensors its gfx arch, host arrays the CPU).
    ``pass_configs`` (TileLang's spelling: ``{tile.lang.PassConfigKey.X: value}``) become
    options of the target, which the backend's passes read.
    """
    _check_options("tile.lang.compile", _options)
    target = scoped_target(target)
    require_prim_func(func, "tile.lang.compile")
    visible = len(func.params) - scratch_count(func)  # T.alloc_global scratch is not passed
    returned = None
    if func.attrs is not None and OUT_IDX_ATTR in func.attrs:  # a @T.prim_func that returns T.empty
        returned = [int(i) for i in func.attrs[OUT_IDX_ATTR]]
    if returned is not None and out_idx is not None:  # one place says what the outputs are
        raise ArgumentValueError(
            f"Out index conflict: the kernel returns its T.empty outputs (out_idx {returned}), "
            f"and the call gives out_idx={out_idx} too",
            hint="drop out_idx= (the returned tensors are the outputs), as TileLang requires",
            location=call_site(),
        )
    outputs = _normalize_out_idx(out_idx if out_idx is not None else returned, visible)
    func = bind_shape_expressions(func, outputs)
    if _follows_tensors(target):
        names = [p.name for i, p in enumerate(param_specs(func)[:visible]) if i not in outputs]
        return AutoTargetKernel(
            func, lambda resolved, manifest: _compile_for(func, outputs, resolved, manifest, _options), names
        )
    resolved, manifest = _pick_target(target)
    return _compile_for(func, outputs, resolved, manifest, _options)


OUT_IDX_ATTR = "tilelang_out_idx"
"""The outputs a ``@T.prim_func`` in the eager style returns (``B = T.empty(...)``, ``return B``),
as negative positions: what ``compile`` takes as ``out_idx`` when none is given (TileLang's attr)."""


def _with_name_of(func: Any, new: Any) -> Any:
    """``new`` (a rewrite of ``func``) keeping the kernel name the front end gave ``func``."""
    if new is not func and hasattr(func, "__name__"):
        new.__name__ = func.__name__
    return new


def _follows_tensors(target: TargetSpec) -> bool:
    """Target "auto" with no TILE_DEFAULT_TARGET: the kernel's tensors choose at the first call."""
    return isinstance(target, str) and target.strip() == AUTO and not env.DEFAULT_TARGET.get()


def _compile_for(
    func: Any, outputs: list[int], resolved: Target, manifest: BackendManifest, options: dict[str, Any]
) -> JITKernel:
    if kernel_parts(func):  # several T.Kernel blocks, or function-scope T.alloc_global scratch
        return KernelSequence(  # type: ignore[return-value]
            func, outputs, lambda part, allocated: _compile_for(part, allocated, resolved, manifest, options)
        )
    func, resolved, artifact = build_kernel(func, outputs, resolved, manifest, options)
    alignment = manifest.capabilities(resolved).param_alignment
    return JITKernel(func, artifact, manifest.load(artifact), outputs, alignment)


def build_kernel(
    func: Any,
    outputs: list[int],
    resolved: Target,
    manifest: BackendManifest,
    options: dict[str, Any],
    lowered: list[Any] | None = None,
) -> tuple[Any, Target, BuildArtifact]:
    """Run the backend's pipeline on one kernel and build it: ``(func as compiled, the target
    with the program's pass configs, the artifact)``. With ``lowered`` (a list) the build
    skips the cache and appends the module the pipeline handed to the backend's build."""
    import tvm  # type: ignore[import-untyped]

    from tile.ir.transform import CompileContext, run_pipeline
    from tile.ir.transform.pack_subbyte_tiles import pack_subbyte_tiles

    try:
        resolved = apply_pass_configs(resolved, options.get("pass_configs"))
        resolved = apply_pass_configs(resolved, annotated_pass_configs(func))  # T.annotate_pass_configs
    except TileError as exc:
        raise exc.with_location(call_site()) from None
    resolved = apply_compile_flags(resolved, func)  # T.annotate_compile_flags (errors at its line)
    if env.checking():  # TILE_CHECK=1: checked kernels, a target option so they are cached apart
        checked = dict(resolved.options)
        # the checks carry kernel lines, which the program's key ignores: key on the file's text too
        checked[CHECK_OPTION] = "1:" + _source_digest(func)
        resolved = Target(kind=resolved.kind, arch=resolved.arch, options=tuple(sorted(checked.items())))
    capabilities = manifest.capabilities(resolved)
    if not capabilities.fast_math_intrinsics:  # T.__exp ...: the precise functions
        func = precise_fast_math(func)
    func = _with_name_of(func, pack_subbyte_tiles(func))  # int4 tiles as bytes, for every backend
    if capabilities.imported_sources == "host":  # T.import_source: C the kernel calls in-process
        load_host_sources(func)  # before the cache, whose hit loads a kernel that needs them
    name = str(getattr(func, "__name__", None) or "main")
    mod = tvm.IRModule({name: func.with_attr("global_symbol", name)})

    def build_for(target: Any) -> BuildArtifact:
        ctx = CompileContext(target=target, capabilities=manifest.capabilities(target))
        done = run_pipeline(mod, manifest.pipeline(target), ctx)
        if lowered is not None:
            lowered.append(done)
        return manifest.build(done, target)

    def build() -> BuildArtifact:
        try:
            return build_for(resolved)
        except ResourceLimitError as exc:
            if exc.fallback_target is None:
                raise
            try:
                return build_for(exc.fallback_target)  # e.g. without warp specialization
            except ResourceLimitError as again:
                exc.message += f"; the fallback build for {exc.fallback_target} does not fit either"
                raise exc from again

    if lowered is not None:
        return func, resolved, build()
    return func, resolved, build_with_cache(func, outputs, resolved, manifest, options, build)


def _source_digest(func: Any) -> str:
    """A digest of the path and text of the file that defines ``func`` (empty when it cannot be
    read): the checks name ``file:line``, so the same text at another path is another kernel."""
    import hashlib

    where = kernel_location(func)
    try:
        with open(where.filename, "rb") as f:  # type: ignore[union-attr]
            text = f.read()
        return hashlib.sha256(str(where.filename).encode() + b"\0" + text).hexdigest()[:16]  # type: ignore[union-attr]
    except (AttributeError, OSError):
        return ""


class _JitFactory:
    __test__ = False
    """A ``@jit`` kernel named ``test_*`` in a test module is a kernel, not a test: pytest must not
    collect it (it would see the wrapped function's parameters as fixtures)."""

    def __init__(
        self, factory: Callable[..., Any], out_idx: Any, target: TargetSpec, options: dict[str, Any]
    ) -> None:
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.options = options
        self._cache: dict[Any, Any] = {}
        functools.update_wrapper(self, factory)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The kernel for these factory arguments (TileLang's ``@jit`` objects have it):
        the same as calling the factory."""
        return self(*args, **kwargs)

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The device source of the kernel for these factory arguments (TileLang's ``@jit``
        objects have it: ``factory.get_kernel_source()`` for a factory without parameters)."""
        return str(self.compile(*args, **kwargs).get_kernel_source())

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The ``PrimFunc`` the factory builds for these arguments, not compiled (TileLang's
        ``@jit`` objects have it; ``tile.lang.lower(factory.get_tir())`` reads its code)."""
        return self.factory(*args, **kwargs)

    @api_boundary
    def par_compile(
        self, configs: Sequence[Any], num_workers: int | None = None, ignore_error: bool = False
    ) -> list[Any]:
        """The kernel for each config, in order (TileLang's ``@jit`` objects have it): a dict
        config is passed as keyword arguments, a tuple as positional ones. Kernels compile one
        after another (``num_workers`` is accepted and unused, as in ``tile.lang.par_compile``);
        with ``ignore_error=True`` a config that fails gives ``None``."""

        def one(config: Any) -> Any:
            if isinstance(config, Mapping):
                return self(**config)
            return self(*config)

        return _compile_each(one, configs, ignore_error)

    @api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key: Any = (args, tuple(sorted(kwargs.items())))
        try:
            cached = self._cache.get(key)
        except TypeError:  # unhashable arguments: no caching
            cached, key = None, None
        if cached is not None:
            return cached
        func = self.factory(*args, **kwargs)
        kernel = compile(func, out_idx=self.out_idx, target=self.target, **self.options)
        if key is not None:
            self._cache[key] = kernel
        return kernel


@api_boundary
def jit(
    func: Callable[..., Any] | None = None,
    *,
    out_idx: int | Sequence[int] | None = None,
    target: TargetSpec = AUTO,
    **options: Any,
) -> Any:
    """Decorate a kernel factory; calling the factory compiles (once per argument set).

    Example::

        @tilelang.jit(out_idx=[-1])
        def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float32"), ...):
                ...
            return main

        kernel = matmul(256, 256, 256)
        c = kernel(a, b)
    """

    _check_options("tile.lang.jit", options)

    def decorate(factory: Callable[..., Any]) -> Any:
        if is_eager_function(factory):
            return EagerKernel(
                factory,
                lambda func, outs: compile(func, out_idx=outs, target=target, **options),
                target,
                options,
            )
        return _JitFactory(factory, out_idx, target, options)

    return decorate(func) if func is not None else decorate


def par_compile(
    funcs: Sequence[Any],
    out_idx: int | Sequence[int] | None = None,
    target: TargetSpec = AUTO,
    num_workers: int | None = None,
    ignore_error: bool = False,
    **options: Any,
) -> list[Any]:
    """Compile several kernels (TileLang API): ``[compile(f, out_idx, target) for f in funcs]``.

    Kernels compile one after another in this process (``num_workers`` is accepted and
    unused: TVM's compiler holds the GIL). With ``ignore_error=True`` a kernel that fails
    to compile gives ``None`` in its place instead of raising.
    """
    return _compile_each(
        lambda func: compile(func, out_idx=out_idx, target=target, **options), funcs, ignore_error
    )


def _compile_each(compile_one: Callable[[Any], Any], items: Iterable[Any], ignore_error: bool) -> list[Any]:
    """``[compile_one(x) for x in items]``; with ``ignore_error`` a TileError gives ``None``."""
    kernels: list[Any] = []
    for item in items:
        try:
            kernels.append(compile_one(item))
        except TileError:
            if not ignore_error:
                raise
            kernels.append(None)
    return kernels
