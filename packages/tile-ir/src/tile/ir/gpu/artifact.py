"""What a GPU backend's build payload shares: the launch metadata it caches, and the
disassembly it gives lazily.

A vendor's payload (CUDA's cubin, ROCm's code object) keeps its machine code under its
own name (its class says which, and its cache files); the kernel cache stores the machine
code and the source beside one ``launch.json`` (:func:`launch_meta`): :func:`write_binary_entry`
writes an entry, :func:`read_binary_entry` reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, ClassVar

from ..errors import BackendError
from .launch import LaunchRecipe, ParamList, ParamStrides

LAUNCH_FILE = "launch.json"
"""The launch metadata's file in a kernel-cache entry."""


@dataclasses.dataclass(frozen=True)
class MachineCode:
    """How a vendor's :class:`GpuBinary` holds its machine code, and the files of its cache entry."""

    field: str
    """The payload's field with the machine code (``"cubin"``); the entry's metadata says under
    the same name whether there is any (an emulator-only build has none)."""
    kind: str
    """What the machine code is called in messages (``"cubin"``, ``"code object"``)."""
    file: str
    """The machine code's file in a kernel-cache entry (``"kernel.cubin"``)."""
    source_file: str
    """The device source's file in a kernel-cache entry (``"kernel.cu"``)."""
    stats_type: type
    """The dataclass of the vendor compiler's statistics (the payload's ``stats``)."""


def launch_meta(
    arch: str, recipe: LaunchRecipe, params: ParamList, stats: Any, strides: ParamStrides | None = None
) -> dict[str, Any]:
    """The JSON-ready launch metadata of a built kernel: arch, recipe, parameters, stats
    (a dataclass of the vendor's compiler statistics) and, where it has ``T.StridedTensor``
    parameters, their declared strides."""
    meta = {
        "arch": arch,
        "recipe": recipe.to_json(),
        "params": [[n, d, list(s) if s is not None else None] for n, d, s in params],
        "stats": dataclasses.asdict(stats),
    }
    if strides:
        meta["strides"] = {name: list(steps) for name, steps in strides.items()}
    return meta


def params_from_meta(meta: dict[str, Any]) -> ParamList:
    """The parameter list :func:`launch_meta` wrote."""
    return [(n, d, tuple(s) if s is not None else None) for n, d, s in meta["params"]]


def strides_from_meta(meta: dict[str, Any]) -> dict[str, tuple[int | str, ...]]:
    """The declared strides of the ``T.StridedTensor`` parameters :func:`launch_meta` wrote."""
    return {name: tuple(steps) for name, steps in meta.get("strides", {}).items()}


def write_cache_entry(directory: pathlib.Path, files: dict[str, bytes | str], meta: dict[str, Any]) -> None:
    """Write a built kernel's files (machine code as bytes, texts as str) and its launch metadata."""
    for name, data in files.items():
        if isinstance(data, bytes):
            (directory / name).write_bytes(data)
        else:
            (directory / name).write_text(data)
    (directory / LAUNCH_FILE).write_text(json.dumps(meta, sort_keys=True, indent=1))


def read_launch_meta(directory: pathlib.Path, arch: str, code: str) -> dict[str, Any]:
    """The launch metadata of a cache entry whose machine code (``code``: "cubin", "code object")
    must be for ``arch``.

    Raises:
        BackendError: the entry was built for another arch (the cache then rebuilds it).
    """
    meta: dict[str, Any] = json.loads((directory / LAUNCH_FILE).read_text())
    if meta["arch"] != arch:
        raise BackendError(f"the {code} was built for {meta['arch']}, this target needs {arch}")
    return meta


def write_binary_entry(
    directory: pathlib.Path, binary: GpuBinary, files: dict[str, bytes | str], extra: dict[str, Any]
) -> None:
    """Write ``binary`` to a kernel-cache entry: its machine code and source under the file names
    its class gives, the backend's other ``files``, and the :func:`launch_meta` of ``binary`` with
    the backend's ``extra`` metadata (what the cache key does not hold but a restore must check).
    The metadata also says whether there is machine code at all (an emulator-only build has none)."""
    layout = binary.machine_code
    code: bytes = getattr(binary, layout.field)
    files = {layout.file: code, layout.source_file: binary.source, **files}
    meta = launch_meta(binary.arch, binary.recipe, binary.params, binary.stats, binary.strides)
    write_cache_entry(directory, files, {**meta, layout.field: bool(code), **extra})


def read_binary_entry(
    directory: pathlib.Path, binary_type: type[GpuBinary], arch: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata :func:`write_binary_entry` wrote, for machine code that must be for ``arch``
    (see :func:`read_launch_meta`), and the ``binary_type`` fields the entry holds, as keywords:
    the machine code, ``source``, ``arch``, ``recipe``, ``params``, ``strides`` and ``stats``."""
    layout = binary_type.machine_code
    meta = read_launch_meta(directory, arch, layout.kind)
    fields = {
        layout.field: (directory / layout.file).read_bytes(),
        "source": (directory / layout.source_file).read_text(),
        "arch": meta["arch"],
        "recipe": LaunchRecipe.from_json(meta["recipe"]),
        "params": params_from_meta(meta),
        "strides": strides_from_meta(meta),
        "stats": layout.stats_type(**meta["stats"]),
    }
    return meta, fields


def require_machine_code(
    meta: dict[str, Any], binary_type: type[GpuBinary], wanted: bool, compiler: str
) -> None:
    """Refuse an entry built without machine code (under ``TILE_DEVICE=emu`` with no ``compiler``
    or ``TILE_EMU_VENDOR_COMPILE=0``) where this build ``wanted`` it.

    Raises:
        BackendError: the entry has no machine code and one is wanted (the cache then rebuilds it).
    """
    layout = binary_type.machine_code
    if wanted and not meta.get(layout.field, True):
        raise BackendError(
            f"the cache entry was built under TILE_DEVICE=emu without {compiler} "
            f"(or TILE_EMU_VENDOR_COMPILE=0) and has no {layout.kind}"
        )


class LazyDisassembly:
    """A payload whose disassembly (``kernel.get_kernel_source(kind)``) is made only when asked.

    Disassembling costs a tool run (cuobjdump, llvm-objdump), so ``tile.ir.backend``'s
    ``BuildArtifact`` asks ``lazy_source`` for the kinds in ``lazy_source_kinds``; the
    text is computed once by ``disassemble_payload``.
    """

    disassembly_kind: ClassVar[str]
    """The source kind the disassembly is listed under (``"sass"``, ``"asm"``)."""

    @property
    def lazy_source_kinds(self) -> tuple[str, ...]:
        return (self.disassembly_kind,)

    def disassemble_payload(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} must say how its machine code is disassembled")

    def lazy_source(self, kind: str) -> str:
        if kind != self.disassembly_kind:
            raise KeyError(kind)
        cached: str | None = self.__dict__.get("_disassembly")
        if cached is None:
            cached = self.disassemble_payload()
            self.__dict__["_disassembly"] = cached
        return cached


@dataclasses.dataclass(kw_only=True)
class GpuBinary(LazyDisassembly):
    """What every GPU backend's build payload holds beside its machine code (which each vendor
    keeps under its own name: CUDA's ``cubin``, ROCm's ``code_object``)."""

    machine_code: ClassVar[MachineCode]
    """Where the vendor's payload keeps its machine code, and its kernel-cache files."""

    arch: str
    source: str
    """The generated device source the machine code was compiled from (and the emulator runs)."""
    recipe: LaunchRecipe
    params: ParamList
    stats: Any
    """The vendor compiler's statistics (a dataclass: registers, spills, shared memory, ...)."""
    strides: dict[str, tuple[int | str, ...]] = dataclasses.field(default_factory=dict)
    """The declared element strides of the kernel's ``T.StridedTensor`` parameters, by name
    (:func:`~tile.ir.gpu.launch.kernel_strides`); the launchers check and bind them."""
