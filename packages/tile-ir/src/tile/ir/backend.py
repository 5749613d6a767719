"""The backend plug-in interface: manifests, capabilities, discovery.

A backend is a distribution that advertises a ``BackendManifest`` in the
``tile.backends`` entry-point group::

    [project.entry-points."tile.backends"]
    cpu = "tile.backends.cpu:MANIFEST"

Loading a manifest must be cheap: it imports no vendor SDK and does no device work.
Everything heavy (pass pipeline, code generation, runtime) sits behind the
manifest's callables and is imported when first called. A backend whose entry point
fails to load is reported with ``warnings.warn`` and skipped; the others keep working.

Capabilities are data, read by the compiler, the op library and test skips alike:
code outside a backend asks ``caps.warp_size``, never ``target.kind == "cuda"``.

Example::

    >>> from tile.ir.backend import available_backends, resolve_target
    >>> "cpu" in available_backends()
    True
    >>> target, manifest = resolve_target("cpu")
    >>> manifest.name, target.kind
    ('cpu', 'cpu')
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import pathlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tile.layout.errors import did_you_mean

from .errors import BackendError, BackendUnavailableError, TargetError
from .target import AUTO, KIND_ALIASES, Target

if TYPE_CHECKING:
    from .transform.pipeline import Pass

ENTRY_POINT_GROUP = "tile.backends"


class BackendLoadWarning(UserWarning):
    """A backend entry point could not be loaded; the other backends are unaffected."""


@dataclasses.dataclass(frozen=True)
class MmaInstruction:
    """One matrix instruction ``T.gemm`` can lower to: its shape and operand/accumulator dtypes."""

    m: int
    n: int
    k: int
    input_dtype: str
    accumulator_dtype: str


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a target can do, as plain data.

    Attributes:
        warp_size: threads that execute in lock step (1 on a CPU).
        max_threads: largest ``threads=`` a kernel block may ask for.
        shared_bytes: on-chip memory a block may allocate (shared + fragments spill).
        dtypes: element types the backend can load, store and compute with.
        vector_bits: width of the widest vector register.
        has_device: whether the hardware is present, so kernels can run (not only compile).
        thread_binding: whether kernels may read their thread id (``T.get_thread_binding``).
        async_copy: whether global->shared copies can be asynchronous.
        mma_shapes: (m, n, k) shapes of the matrix instructions ``T.gemm`` may use.
        mma_instructions: the matrix instructions the backend's ``T.gemm`` lowering has,
            with their dtypes, where the instruction (and so the register layouts) depends
            on the dtype (AMD MFMA: int8 is 16x16x32 on CDNA3, f16 16x16x16).
        param_alignment: bytes the compiled code assumes tensor arguments' data is aligned
            to (at least the element size); callers stage less aligned arrays through a copy.
        devices: where else than the native device kernels can be made to run, selected
            with the ``TILE_DEVICE`` environment variable (``"emu"``: the CPU emulator).
        float32_gemm: the precision ``T.gemm`` multiplies float32 operands in:
            ``"float32"``, or ``"tfloat32"`` where tensor cores read only the top 19 bits
            of each operand (10 mantissa bits; products then carry a relative error of up
            to 2^-9), as TileLang does on NVIDIA GPUs. Sums stay float32.
        gemm_impls: the implementations ``T.gemm(..., impl=...)`` may name besides tile's
            own (``"tile"``, the default), e.g. ``("cute",)`` on CUDA; any other is a
            compile-time error.
        matrix_store: whether a warp stores 8x8 matrices of 16-bit elements from its
            registers to shared memory in one instruction (``stmatrix``, sm_90): then a
            fragment stored into a 16-bit shared tile gets that tile a swizzled layout.
        warp_matrix_calls: whether kernels may issue warp matrix instructions by hand, each
            thread naming its own registers (``T.ptx_ldmatrix``, ``T.ptx_mma``: PTX
            ``ldmatrix`` and ``mma.sync``); other targets refuse such kernels.
        device_name: the device kernels are built for, as the tuning cache keys it
            (``"NVIDIA sm_90a"``, ``"AMD gfx90a"``, ``"x86 skylake-avx512"``).
        compute_units: streaming multiprocessors, compute units or CPU cores a grid spreads over
            (a GPU's count is its reference product's unless the device here says otherwise).
        max_threads_per_unit: resident threads one SM/CU holds (0 where it does not apply).
        registers_per_unit: 32-bit registers of one SM/CU (0 where it does not apply).
        registers_per_thread: the most 32-bit registers one thread may use (0: not applicable).
        shared_bytes_per_unit: shared memory/LDS of one SM/CU, split among resident blocks.
        cache_bytes: data cache sizes of one core, innermost first (a CPU's L1d, L2, L3).
        emulated: kernels run on a CPU emulator of the device (``TILE_DEVICE=emu``), so
            their timings say nothing about the device.
        fast_math_intrinsics: the device language has approximate single-precision intrinsics
            ``__expf``, ``__exp10f``, ``__logf``, ``__log2f``, ``__log10f``, ``__sinf``,
            ``__cosf``, ``__tanf`` (CUDA, HIP) that ``T.__exp`` ... ``T.__sin`` call; elsewhere
            those compute the precise functions.
        imported_sources: where the code a kernel brings in with ``T.import_source`` goes:
            ``"host"``, compiled by the host C compiler into a library loaded into the process
            before the kernel is built (the CPU, whose JIT-compiled kernel resolves the
            functions there); ``"device"``, into the kernel's own device source, which the
            backend's compiler compiles with it (CUDA: ``__device__`` functions and inline PTX,
            as TileLang emits them).
        packed_subbyte: kernels may load and store elements of the sub-byte types
            (``float4_e2m1fn``, ``int4``, ``uint4``) of tensors held as their packed bytes
            (``tile.ir.packed``), and cast them; elsewhere such a tensor may only be passed along.
    """

    warp_size: int
    max_threads: int
    shared_bytes: int
    dtypes: frozenset[str]
    vector_bits: int
    has_device: bool
    thread_binding: bool = True
    async_copy: bool = False
    mma_shapes: tuple[tuple[int, int, int], ...] = ()
    mma_instructions: tuple[MmaInstruction, ...] = ()
    param_alignment: int = 64
    devices: tuple[str, ...] = ()
    float32_gemm: str = "float32"
    gemm_impls: tuple[str, ...] = ()
    matrix_store: bool = False
    warp_matrix_calls: bool = False
    device_name: str = ""
    compute_units: int = 1
    max_threads_per_unit: int = 0
    registers_per_unit: int = 0
    registers_per_thread: int = 0
    shared_bytes_per_unit: int = 0
    cache_bytes: tuple[int, ...] = ()
    emulated: bool = False
    fast_math_intrinsics: bool = False
    imported_sources: str = "host"
    packed_subbyte: bool = False


@dataclasses.dataclass(frozen=True)
class BuildArtifact:
    """What ``BackendManifest.build`` returns and ``load`` turns into a callable.

    Attributes:
        target: the target it was built for.
        entry_name: the symbol of the kernel entry point.
        payload: backend-specific compiled object (a TVM executable, a cubin, ...).
        sources: textual forms by name (``"tir"``, ``"llvm"``, ``"cuda"``, ...).

    Texts that cost time to produce (a disassembly) need not be in ``sources``: a
    payload may offer them on demand through ``payload.lazy_source_kinds`` (names) and
    ``payload.lazy_source(kind) -> str``, which ``get_kernel_source`` calls only when
    asked, so compiling does not pay for them (and a cache hit, which restores the
    payload, still has them).
    """

    target: Target
    entry_name: str
    payload: Any
    sources: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class BackendManifest:
    """A backend's frozen description; the value its entry point names.

    Attributes:
        name: the backend's name (the entry-point name).
        target_kinds: canonical target kinds the backend compiles for.
        capabilities: ``Target -> Capabilities``.
        pipeline: ``Target -> [Pass]``, the flat pass list ending in backend-ready IR.
        build: ``(IRModule, Target) -> BuildArtifact``.
        load: ``BuildArtifact -> callable`` taking DLPack-compatible arrays.
        device_present: a probe that never raises; ``True`` when kernels can run here.
        default_target: the concrete target ``"auto"`` resolves to for this backend.
        auto_priority: among backends with a device present, ``"auto"`` picks the highest.
        save: ``(BuildArtifact, directory)``: write the artifact's payload as files into an
            existing empty directory, for the kernel cache. ``None``: not cacheable.
        restore: ``(directory, Target) -> payload``: read back what ``save`` wrote; raises
            when the files cannot be used here (the cache then rebuilds the kernel).
        complete_target: ``Target -> Target``: fills in what a target leaves to the machine
            (the CUDA backend: the arch of the GPU here when the target names none), so
            every pass and the cache key see the target the kernel is really built for.
        device_target: ``(dlpack_device_type, device_index) -> Target | None``: the target
            for arrays that live on that DLPack device (``__dlpack_device__()``; 1 is the
            host, 2 CUDA, 10 ROCm), or ``None`` when this backend does not run there. Target
            ``"auto"`` asks it at a kernel's first call, so a kernel follows its tensors.
    """

    name: str
    target_kinds: tuple[str, ...]
    capabilities: Callable[[Target], Capabilities]
    pipeline: Callable[[Target], Sequence[Pass]]
    build: Callable[[Any, Target], BuildArtifact]
    load: Callable[[BuildArtifact], Callable[..., Any]]
    device_present: Callable[[], bool]
    default_target: Callable[[], Target]
    auto_priority: int = 0
    save: Callable[[BuildArtifact, pathlib.Path], None] | None = None
    restore: Callable[[pathlib.Path, Target], Any] | None = None
    complete_target: Callable[[Target], Target] | None = None
    device_target: Callable[[int, int], Target | None] | None = None


DLPACK_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm"}
"""Names of DLPack device types (``__dlpack_device__()[0]``), for messages."""


def target_for_device(device_type: int, index: int = 0) -> tuple[Target, BackendManifest]:
    """The target and backend for arrays on DLPack device ``(device_type, index)``.

    Each backend's ``device_target`` is asked, highest ``auto_priority`` first; the first
    that claims the device wins.

    Example::

        >>> target, manifest = target_for_device(1)   # host memory
        >>> manifest.name
        'cpu'

    Raises:
        BackendUnavailableError: no installed backend runs on that device.
    """
    backends = available_backends()
    for manifest in sorted(backends.values(), key=lambda m: (-m.auto_priority, m.name)):
        if manifest.device_target is None:
            continue
        target = manifest.device_target(device_type, index)
        if target is not None:
            return target, manifest
    where = DLPACK_DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
    raise BackendUnavailableError(
        f"no installed backend runs kernels on {where} device {index}",
        hint=f"installed backends: {_installed_summary(backends)}; pass target=... explicitly "
        "or install the backend for that device",
    )


class Deferred:
    """A callable that imports ``module`` when first called and calls its ``attribute``.

    What keeps a manifest cheap to load: the module holding the pass pipeline, code
    generation and runtime is imported by the first compile, not by discovery.
    """

    def __init__(self, module: str, attribute: str) -> None:
        self.module = module
        self.attribute = attribute

    def __call__(self, *args: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.attribute)(*args)

    def __repr__(self) -> str:
        return f"Deferred({self.module}.{self.attribute})"


class _DeviceTypeFilter:
    """A ``device_target`` hook that answers None for other DLPack device types, importing nothing."""

    def __init__(self, device_type: int, device_target: Callable[[int, int], Target | None]) -> None:
        self.device_type = device_type
        self.device_target = device_target

    def __call__(self, device_type: int, index: int) -> Target | None:
        if device_type != self.device_type:
            return None
        return self.device_target(device_type, index)


def lazy_manifest(
    name: str,
    target_kinds: tuple[str, ...],
    implementation: str,
    *,
    device_present: Callable[[], bool],
    auto_priority: int = 0,
    complete_target: Callable[[Target], Target] | None = None,
    device_target: Callable[[int, int], Target | None] | None = None,
    dlpack_device: int | None = None,
) -> BackendManifest:
    """A manifest whose hooks live in the module ``implementation``, imported on first call.

    ``implementation`` defines ``capabilities``, ``pipeline``, ``build``, ``load``,
    ``save``, ``restore`` and ``default_target`` with the signatures of
    :class:`BackendManifest`'s fields. With ``dlpack_device`` (a DLPack device type, e.g.
    ``kDLCUDA = 2``) and no ``device_target``, arrays on that device type get the target
    from ``implementation``'s ``device_target``; other devices import nothing.

    Example::

        MANIFEST = lazy_manifest("mygpu", ("mygpu",), "tile_mygpu._src.backend",
                                 device_present=lambda: False, auto_priority=-10)
    """

    def hook(attribute: str) -> Deferred:
        return Deferred(implementation, attribute)

    if device_target is None and dlpack_device is not None:
        device_target = _DeviceTypeFilter(dlpack_device, hook("device_target"))

    return BackendManifest(
        name=name,
        target_kinds=target_kinds,
        capabilities=hook("capabilities"),
        pipeline=hook("pipeline"),
        build=hook("build"),
        load=hook("load"),
        device_present=device_present,
        default_target=hook("default_target"),
        auto_priority=auto_priority,
        save=hook("save"),
        restore=hook("restore"),
        complete_target=complete_target,
        device_target=device_target,
    )


def single_kernel(mod: Any, backend: str) -> tuple[str, Any]:
    """``(name, PrimFunc)`` of the one kernel in ``mod``, which a backend's ``build`` compiles.

    Raises:
        BackendError: the module holds no kernel or several (named).
    """
    from tvm import tirx  # type: ignore[import-untyped]

    funcs = [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    if len(funcs) != 1:
        raise BackendError(f"the {backend} backend builds one kernel per module, got {[n for n, _ in funcs]}")
    name, func = funcs[0]
    return str(name), func


def generation_failed(exc: Exception, what: str, kernel: str, hint: str) -> BackendError:
    """The typed error for an exception a code generator raised: its last line, the kernel named.

    Example::

        except Exception as exc:
            raise generation_failed(exc, "LLVM code generation", name, "set TILE_DUMP_IR=<dir>") from exc
    """
    lines = [line for line in str(exc).splitlines() if line.strip()]
    detail = lines[-1] if lines else type(exc).__name__
    return BackendError(f"{what} failed for kernel {kernel}: {detail}", hint=hint)


_loaded: dict[str, BackendManifest] | None = None


def available_backends(*, refresh: bool = False) -> dict[str, BackendManifest]:
    """Every backend whose entry point loads, by name (cached after the first call).

    A backend that fails to import, or names something that is not a
    ``BackendManifest``, is reported with a ``BackendLoadWarning`` and left out.
    """
    global _loaded
    if _loaded is not None and not refresh:
        return dict(_loaded)
    _by_entry_name.clear()
    found: dict[str, BackendManifest] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in found:
            continue
        try:
            manifest = entry.load()
        except Exception as exc:  # a broken plug-in must not take the others down
            warnings.warn(
                f"tile backend {entry.name!r} ({entry.value}) failed to load and is skipped: "
                f"{type(exc).__name__}: {exc}",
                BackendLoadWarning,
                stacklevel=2,
            )
            continue
        if not isinstance(manifest, BackendManifest):
            warnings.warn(
                f"tile backend {entry.name!r} ({entry.value}) is a {type(manifest).__name__}, "
                "not a tile.ir.backend.BackendManifest; it is skipped",
                BackendLoadWarning,
                stacklevel=2,
            )
            continue
        found[entry.name] = manifest
    _loaded = found
    return dict(found)


_by_entry_name: dict[str, BackendManifest] = {}


def _entry_named(kind: str) -> BackendManifest | None:
    """The backend whose entry point is named ``kind`` and serves that kind, loading only it.

    Backends conventionally name their entry point after their target kind
    (``cpu = "tile.backends.cpu:MANIFEST"``); finding it without importing every
    other backend keeps a warm start (a kernel-cache hit) cheap. Anything unusual
    (another name, a failing load) returns ``None`` and the caller looks through
    ``available_backends()``, which reports broken plug-ins.
    """
    if _loaded is not None:
        manifest = _loaded.get(kind)
        return manifest if manifest is not None and kind in manifest.target_kinds else None
    if kind in _by_entry_name:
        return _by_entry_name[kind]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name != kind:
            continue
        try:
            manifest = entry.load()
        except Exception:
            return None
        if isinstance(manifest, BackendManifest) and kind in manifest.target_kinds:
            _by_entry_name[kind] = manifest
            return manifest
        return None
    return None


def _device_present(manifest: BackendManifest) -> bool:
    try:
        return bool(manifest.device_present())
    except Exception:  # a probe that raises counts as "no device"
        return False


def _installed_summary(backends: Mapping[str, BackendManifest]) -> str:
    if not backends:
        return "none"
    return ", ".join(f"{name} (kinds: {', '.join(m.target_kinds)})" for name, m in sorted(backends.items()))


def _completed(target: Target, manifest: BackendManifest) -> Target:
    return manifest.complete_target(target) if manifest.complete_target is not None else target


def resolve_target(spec: str | Mapping[str, Any] | Target) -> tuple[Target, BackendManifest]:
    """Parse ``spec`` and find the backend that serves it.

    ``"auto"`` picks, among backends with a device present, the one with the highest
    ``auto_priority`` and uses its ``default_target()``.

    Raises:
        TargetError: the spec is malformed or no installed backend handles its kind.
        BackendUnavailableError: ``"auto"`` found no backend with a device.
    """
    if isinstance(spec, str) and spec.strip() == AUTO:
        backends = available_backends()
        ranked = sorted(backends.values(), key=lambda m: (-m.auto_priority, m.name))
        for manifest in ranked:
            if _device_present(manifest):
                return manifest.default_target(), manifest
        raise BackendUnavailableError(
            "target 'auto' found no backend with a device present",
            hint=f"installed backends: {_installed_summary(backends)}; pass target=... explicitly",
        )
    target = Target.parse(spec)
    named = _entry_named(target.kind)
    if named is not None:
        return _completed(target, named), named
    backends = available_backends()
    for manifest in backends.values():
        if target.kind in manifest.target_kinds:
            return _completed(target, manifest), manifest
    known = {kind for m in backends.values() for kind in m.target_kinds} | set(KIND_ALIASES)
    suggestion = did_you_mean(target.kind, known)
    raise TargetError(
        f"no installed backend compiles for target kind {target.kind!r}",
        hint=(f"{suggestion} " if suggestion else "") + f"installed backends: {_installed_summary(backends)}",
    )
