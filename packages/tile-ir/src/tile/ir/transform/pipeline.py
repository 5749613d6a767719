"""Passes, the compile context, and the pipeline runner.

A pass is a named function ``(IRModule, CompileContext) -> IRModule``. A backend's
pipeline is a flat list of them. ``run_pipeline`` verifies the IR on entry and exit
(and after every pass with ``TILE_VERIFY_EACH_PASS=1``) and, with
``TILE_DUMP_IR=<dir>``, writes the IR as TVMScript text after every pass.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
from tvm import tirx

from .. import env
from ..backend import Capabilities
from ..target import Target


@dataclasses.dataclass(frozen=True)
class CompileContext:
    """What passes may read about the compilation: the target and its capabilities."""

    target: Target
    capabilities: Capabilities


PassFn = Callable[[Any, CompileContext], Any]


@dataclasses.dataclass(frozen=True)
class Pass:
    """A named module-to-module transformation."""

    name: str
    run: PassFn

    def __call__(self, mod: Any, ctx: CompileContext) -> Any:
        return self.run(mod, ctx)


def map_prim_funcs(mod: Any, fn: Callable[[Any], Any]) -> Any:
    """A new module with ``fn`` applied to every ``PrimFunc`` (others are kept)."""
    funcs = {}
    for gvar, func in mod.functions.items():
        funcs[gvar.name_hint] = fn(func) if isinstance(func, tirx.PrimFunc) else func
    return tvm.IRModule(funcs, attrs=mod.attrs)


def dump_ir(mod: Any, directory: str, index: int, stage: str) -> pathlib.Path:
    """Write ``mod`` as TVMScript text to ``directory/<index>-<stage>.py``."""
    path = pathlib.Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    out = path / f"{index:02d}-{stage}.py"
    out.write_text(mod.script())
    return out


def run_pipeline(mod: Any, passes: Sequence[Pass], ctx: CompileContext) -> Any:
    """Run ``passes`` in order, with verification and optional IR dumps."""
    from .verify import check_stage, first_bad_pass

    source = mod
    check_stage(mod, False, "the front end (@T.prim_func)")
    dump_dir = env.DUMP_IR.get()
    each = env.VERIFY_EACH_PASS.get()
    if dump_dir:
        dump_ir(mod, dump_dir, 0, "input")
    for index, step in enumerate(passes, start=1):
        mod = step(mod, ctx)
        if dump_dir:
            dump_ir(mod, dump_dir, index, step.name)
        if each:
            check_stage(mod, None, f"pass {step.name!r}")
    check_stage(mod, True, "the pipeline", locate=lambda: first_bad_pass(source, passes, ctx))
    return mod
