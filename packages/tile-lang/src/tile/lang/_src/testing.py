"""``tile.lang.testing``: the test helpers TileLang's own tests import.

The ``requires_*`` markers skip a test unless a backend can run kernels for that target
here. They ask the backends through the plug-in interface (``has_device`` of the
target's capabilities), so the CUDA emulator (``TILE_DEVICE=emu``) counts as a CUDA
device and CUDA tests then run on the CPU.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import random
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tile.ir.backend import resolve_target
from tile.ir.errors import TileError
from tile.ir.target import Target

from .. import env


def _preferred_spec(kind: str) -> str:
    """``TILE_DEFAULT_TARGET`` where it names a target of ``kind`` (its arch then counts), else ``kind``."""
    chosen = env.DEFAULT_TARGET.get()
    try:
        return chosen if chosen and Target.parse(chosen).kind == Target.parse(kind).kind else kind
    except TileError:
        return kind


@functools.cache
def _runnable(kind: str) -> Target | None:
    """The target of ``kind`` when an installed backend can run its kernels here, else None."""
    try:
        target, manifest = resolve_target(_preferred_spec(kind))
        return target if manifest.capabilities(target).has_device else None
    except (TileError, ImportError, OSError):
        return None


def _cuda_version() -> tuple[int, int] | None:
    target = _runnable("cuda")
    match = re.fullmatch(r"sm_(\d+)(\d)a?", str(target.arch)) if target is not None else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _gfx_arch() -> str | None:
    target = _runnable("hip")
    return (target.option("mcpu") or target.arch) if target is not None else None


def _marker(runs: bool, why: str) -> Any:
    return pytest.mark.skipif(not runs, reason=why)


def _decorate(runs: Callable[[], bool], why: str) -> Callable[[Any], Any]:
    def apply(func: Any) -> Any:
        return _marker(runs(), why)(func)

    return apply


requires_cuda = _decorate(lambda: _runnable("cuda") is not None, "needs a CUDA device (or TILE_DEVICE=emu)")
requires_rocm = _decorate(lambda: _runnable("hip") is not None, "needs a ROCm device (or TILE_DEVICE=emu)")
requires_llvm = _decorate(lambda: _runnable("cpu") is not None, "needs the LLVM CPU backend")
requires_metal = _decorate(lambda: _runnable("metal") is not None, "needs a Metal backend")
requires_cdna = _decorate(lambda: (_gfx_arch() or "").startswith("gfx9"), "needs an AMD CDNA GPU (gfx9xx)")
requires_gfx950 = _decorate(lambda: (_gfx_arch() or "").startswith("gfx950"), "needs an AMD gfx950 GPU")
requires_cuda_or_cdna = _decorate(
    lambda: _runnable("cuda") is not None or (_gfx_arch() or "").startswith("gfx9"),
    "needs a CUDA device or an AMD CDNA GPU",
)


def requires_package(*names: str) -> Callable[[Any], Any]:
    """Skip unless every named Python package can be imported."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return _decorate(lambda: not missing, f"needs the packages {', '.join(missing)}")


_COMPARE: dict[str, Callable[[tuple[int, int], tuple[int, int]], bool]] = {
    "ge": lambda a, b: a >= b,
    "gt": lambda a, b: a > b,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
}


def requires_cuda_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge") -> Any:
    """Skip unless a CUDA device runs here whose compute capability compares to
    ``major.minor`` as ``mode`` says ("ge", "gt", "eq", "lt", "le")."""
    if mode not in _COMPARE:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(_COMPARE)}")
    wanted = (major_version, minor_version)

    def runs() -> bool:
        have = _cuda_version()
        return have is not None and _COMPARE[mode](have, wanted)

    return _decorate(
        runs, f"needs a CUDA device with compute capability {mode} {major_version}.{minor_version}"
    )


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0) -> Any:
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0) -> Any:
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0) -> Any:
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0) -> Any:
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0) -> Any:
    return requires_cuda_compute_version(major_version, minor_version, "le")


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, numpy and (when installed) torch on every device."""
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        import torch
    if torch is not None:
        torch.manual_seed(seed)


def main() -> None:
    """Run the calling test file under pytest (``if __name__ == "__main__": tilelang.testing.main()``)."""
    frame = inspect.stack()[1]
    sys.exit(pytest.main([frame.filename, *sys.argv[1:]]))
