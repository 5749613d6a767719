"""What a GPU backend's build payload shares: the launch metadata it caches, and the
disassembly it gives lazily.

A vendor's payload (CUDA's cubin, ROCm's code object) keeps its machine code under its
own name; the kernel cache stores the machine code and the source beside one
``launch.json`` (:func:`launch_meta`), read back with :func:`params_from_meta`.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, ClassVar

from ..errors import BackendError
from .launch import LaunchRecipe, ParamList

LAUNCH_FILE = "launch.json"
"""The launch metadata's file in a kernel-cache entry."""


def launch_meta(arch: str, recipe: LaunchRecipe, params: ParamList, stats: Any) -> dict[str, Any]:
    """The JSON-ready launch metadata of a built kernel: arch, recipe, parameters, stats
    (a dataclass of the vendor's compiler statistics)."""
    return {
        "arch": arch,
        "recipe": recipe.to_json(),
        "params": [[n, d, list(s) if s is not None else None] for n, d, s in params],
        "stats": dataclasses.asdict(stats),
    }


def params_from_meta(meta: dict[str, Any]) -> ParamList:
    """The parameter list :func:`launch_meta` wrote."""
    return [(n, d, tuple(s) if s is not None else None) for n, d, s in meta["params"]]


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


def write_launch_entry(
    directory: pathlib.Path, binary: GpuBinary, files: dict[str, bytes | str], extra: dict[str, Any]
) -> None:
    """:func:`write_cache_entry` of a kernel's ``files``, the :func:`launch_meta` of ``binary``
    and the backend's ``extra`` metadata (what the cache key does not hold but a restore must check)."""
    meta = launch_meta(binary.arch, binary.recipe, binary.params, binary.stats)
    write_cache_entry(directory, files, {**meta, **extra})


def read_launch_entry(
    directory: pathlib.Path, arch: str, code: str, stats_type: type
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata :func:`write_launch_entry` wrote, for machine code (``code``) that must be
    for ``arch`` (see :func:`read_launch_meta`), and the :class:`GpuBinary` fields it holds, as
    keywords: ``arch``, ``recipe``, ``params`` and ``stats`` (a ``stats_type``)."""
    meta = read_launch_meta(directory, arch, code)
    fields = {
        "arch": meta["arch"],
        "recipe": LaunchRecipe.from_json(meta["recipe"]),
        "params": params_from_meta(meta),
        "stats": stats_type(**meta["stats"]),
    }
    return meta, fields


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

    arch: str
    source: str
    """The generated device source the machine code was compiled from (and the emulator runs)."""
    recipe: LaunchRecipe
    params: ParamList
    stats: Any
    """The vendor compiler's statistics (a dataclass: registers, spills, shared memory, ...)."""
