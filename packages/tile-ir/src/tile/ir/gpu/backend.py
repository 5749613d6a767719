"""The parts of a GPU backend module that do not depend on the vendor.

Every C++-dialect GPU backend (``tile.backends.cuda``, ``tile.backends.rocm``) plans a
kernel's memory with the same front passes, appends ``mark_kernel_lines`` under
``TILE_CHECK=1``, and reports a code generator's failure the same way; they differ in the
passes between and in their instructions, compilers and runtimes.

Example::

    PIPELINE = (*PLANNING_PASSES, LOWER_TILE_OPS, ..., RASTERIZE_BLOCKS)

    def pipeline(target):
        return with_kernel_lines(PIPELINE, target)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..annotations import CHECK_OPTION
from ..backend import generation_failed
from ..errors import BackendError
from ..target import Target
from ..transform import (
    CHECK_PLANNED_SHARED,
    CHECK_RESOURCES_UNPLANNED,
    INFER_LAYOUT,
    NORMALIZE,
    PLAN_PIPELINE,
    PLAN_STORAGE,
    Pass,
)
from .kernel_lines import MARK_KERNEL_LINES

PLANNING_PASSES: tuple[Pass, ...] = (
    CHECK_RESOURCES_UNPLANNED,  # shared memory is checked once planned
    NORMALIZE,
    INFER_LAYOUT,
    PLAN_PIPELINE,
    PLAN_STORAGE,
    CHECK_PLANNED_SHARED,  # buffers with disjoint lifetimes share bytes
)
"""The front of every GPU pipeline: layouts inferred, pipelines and shared memory planned
and checked against the target's limits, before any tile op is lowered."""


def with_kernel_lines(passes: Sequence[Pass], target: Target) -> Sequence[Pass]:
    """``passes``, then ``mark_kernel_lines`` where ``target`` asks for checked kernels
    (``TILE_CHECK=1``: an emulated fault names the user's kernel line)."""
    if (target.option(CHECK_OPTION) or "0").startswith("1"):
        return (*passes, MARK_KERNEL_LINES)
    return passes


Generated = TypeVar("Generated")


def generate_device_code(
    generate: Callable[[Any, str], Generated], mod: Any, arch: str, kernel: str, language: str
) -> Generated:
    """``generate(mod, arch)``, with any failure but a ``BackendError`` reported as a typed
    error that names ``kernel`` and the ``language`` generator, and says how to see its input."""
    try:
        return generate(mod, arch)
    except BackendError:
        raise
    except Exception as exc:
        hint = f"set TILE_DUMP_IR=<dir> to inspect the IR handed to the {language} code generator"
        raise generation_failed(exc, f"{language} code generation", kernel, hint) from exc
