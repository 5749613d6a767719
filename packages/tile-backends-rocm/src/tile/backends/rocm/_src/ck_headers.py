"""Where ``T.gemm(..., impl="ck")`` kernels find composable_kernel: the ``amd-aiter`` wheel.

The wheel ships CK's headers as package data (``aiter_meta/3rdparty/composable_kernel/include``,
a namespace package); they are found through importlib, nothing is vendored. Only kernels
whose source calls a ``tile_ck_*`` wrapper include ``tile_hip/ck.h`` and get the folder on the
compiler's include path. Debian's clang++-19 compiles them (clang 15 could not: constexpr
``__builtin_fmaxf``, no ``__builtin_amdgcn_exp2f``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import ToolchainNotFoundError

HEADER = "tile_hip/ck.h"
CALL_PREFIX = "tile_ck_"
INSTALL_HINT = "pip install --no-deps amd-aiter (its wheel ships composable_kernel's headers)"


def ck_include_dir() -> Path | None:
    """composable_kernel's ``include/`` folder from the installed ``amd-aiter`` wheel, or None."""
    try:
        spec = importlib.util.find_spec("aiter_meta")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(root) / "3rdparty" / "composable_kernel" / "include"
        if (folder / "ck_tile" / "core.hpp").is_file():
            return folder
    return None


def uses_ck(source: str) -> bool:
    """Whether a generated HIP source calls a ``tile_ck_*`` wrapper."""
    return CALL_PREFIX in source


def include_flags(source: str) -> tuple[str, ...]:
    """``("-I", <CK include>)`` for a source that uses CK, ``()`` otherwise.

    Raises:
        ToolchainNotFoundError: the source uses CK and the amd-aiter wheel is not installed.
    """
    if not uses_ck(source):
        return ()
    folder = ck_include_dir()
    if folder is None:
        raise ToolchainNotFoundError(
            "this kernel uses T.gemm(impl='ck') but composable_kernel's headers are not installed",
            hint=INSTALL_HINT,
        )
    return ("-I", str(folder))
