"""``tile.lang.lower``: a kernel's generated code without a runnable kernel (TileLang's ``tilelang.lower``).

TileLang programs call ``tilelang.lower(func, target=...)`` to read what the compiler made of
a kernel, most often ``artifact.kernel_source``. tile runs the same pipeline and build as
``tile.lang.compile`` (the device compiler included: nvcc or hipcc checks the source), skips
the kernel cache and loads nothing, so a CUDA or HIP kernel lowers on a machine without a
GPU.

Example::

    artifact = tilelang.lower(my_kernel, target="cuda")
    print(artifact.kernel_source)          # the CUDA C++ tile generated
    print(artifact.device_mod)             # the TIR handed to the backend's build
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tile.ir.target import AUTO, Target

from ..errors import ArgumentValueError, TileTypeError
from .arguments import ParamSpec, param_specs
from .callsite import call_site
from .jit import _pick_target, build_kernel, default_source_kind, require_prim_func, scoped_target
from .kernel_sequence import kernel_parts
from .symbolic import bind_shape_expressions
from .tracebacks import api_boundary


@dataclasses.dataclass(frozen=True)
class CompiledArtifact:
    """What ``lower`` made of one kernel (TileLang's field names where tile has the thing).

    Attributes:
        device_mod: the kernel's TIR after tile's passes, as the backend's build received it.
        params: the kernel's parameters (name, dtype, shape), in order.
        kernel_source: the code a kernel call runs: CUDA or HIP C++ on GPU targets, the
            lowered TIR where the backend generates no source language (the CPU, whose
            LLVM IR is ``sources["llvm"]``); what ``JITKernel.get_kernel_source()`` returns.
        sources: every text the backend keeps, by kind (``"tir"``, ``"llvm"``, ``"cuda"``,
            ``"ptx"``, ``"hip"``, ...).
        target: the target the kernel was built for.
    """

    device_mod: Any
    params: list[ParamSpec]
    kernel_source: str
    sources: Mapping[str, str]
    target: Target

    @property
    def host_mod(self) -> Any:
        """TileLang's host-side module. tile's backends generate no separate host module (the
        CPU's entry is the kernel itself; GPU launches are planned in Python), so this is
        refused rather than faked."""
        raise TileTypeError(
            "tile.lang.lower gives no host module: tile's backends build no separate host code",
            hint="read artifact.device_mod (the kernel's TIR) or artifact.kernel_source",
        )

    @property
    def rt_mod(self) -> Any:
        """TileLang's runtime module: ``lower`` loads nothing here."""
        raise TileTypeError(
            "tile.lang.lower loads no runtime module",
            hint="call tile.lang.compile(func, target=...) for a kernel you can run",
        )


@api_boundary
def lower(
    func: Any,
    target: Any = AUTO,
    target_host: Any = None,
    runtime_only: bool = False,
    enable_host_codegen: bool = False,
    enable_device_compile: bool = False,
) -> CompiledArtifact:
    """Lower and build ``func`` (a ``@T.prim_func`` with one ``T.Kernel``) for ``target``.

    ``target`` is anything ``compile`` takes, or an apache-tvm ``tvm.target.Target``; "auto"
    takes the enclosing ``with tvm.target.Target(...):`` scope, then ``TILE_DEFAULT_TARGET``,
    then the default backend (there are no tensors to follow). ``target_host``,
    ``runtime_only``, ``enable_host_codegen`` and ``enable_device_compile`` are TileLang's
    switches for its host and device compilation stages; tile always builds the device code
    (its compiler checks the source) and has no host stage, so they change nothing.
    """
    del target_host, runtime_only, enable_host_codegen, enable_device_compile
    require_prim_func(func, "tile.lang.lower")
    if kernel_parts(func):
        raise ArgumentValueError(
            "tile.lang.lower takes a kernel with one T.Kernel block and no function-scope scratch",
            hint="compile it with tile.lang.compile and read each part's get_kernel_source()",
            location=call_site(),
        )
    resolved, manifest = _pick_target(scoped_target(target))
    func = bind_shape_expressions(func, [])
    lowered: list[Any] = []
    func, resolved, artifact = build_kernel(func, [], resolved, manifest, {}, lowered)
    return CompiledArtifact(
        device_mod=lowered[-1],
        params=param_specs(func),
        kernel_source=artifact.sources[default_source_kind(artifact.sources)],
        sources=dict(artifact.sources),
        target=artifact.target,
    )
