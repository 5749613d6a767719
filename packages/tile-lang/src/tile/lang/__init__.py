"""tile.lang: the TileLang-compatible front end (``import tile.lang as tilelang``).

Example::

    import tile.lang as tilelang
    import tile.lang.language as T

    kernel = tilelang.compile(my_prim_func, out_idx=[-1], target="cpu")
"""

import tvm as tvm  # type: ignore[import-untyped]  # TileLang programs reach TVM as tilelang.tvm
from tvm import DataType as DataType  # type: ignore[import-untyped]

from . import cuda as cuda
from . import language as language
from . import layout as layout
from . import math as math
from ._src.autotune_decorator import autotune as autotune
from ._src.cache import cache_enabled as is_cache_enabled
from ._src.cache import disable_cache as disable_cache
from ._src.cache import enable_cache as enable_cache
from ._src.int_constants import convert_int_operands as _convert_int_operands
from ._src.jit import JITKernel as JITKernel
from ._src.jit import compile as compile
from ._src.jit import jit as jit
from ._src.jit import par_compile as par_compile
from ._src.lower import CompiledArtifact as CompiledArtifact
from ._src.lower import lower as lower
from ._src.math import cdiv as cdiv
from ._src.math import next_power_of_2 as next_power_of_2
from ._src.pass_config import PassConfigKey as PassConfigKey
from ._src.profiler import Profiler as Profiler
from ._src.profiler import TensorSupplyType as TensorSupplyType
from ._src.tvm_names import add_tirx_aliases as _add_tirx_aliases
from .errors import KernelArgumentError as KernelArgumentError
from .errors import TileParseError as TileParseError
from .errors import TileScopeError as TileScopeError
from .layout import Fragment as Fragment
from .layout import Layout as Layout

__all__ = [
    "DataType",
    "Fragment",
    "JITKernel",
    "KernelArgumentError",
    "Layout",
    "PassConfigKey",
    "Profiler",
    "TensorSupplyType",
    "TileParseError",
    "TileScopeError",
    "autotune",
    "cdiv",
    "compile",
    "cuda",
    "disable_cache",
    "enable_cache",
    "is_cache_enabled",
    "jit",
    "language",
    "layout",
    "lower",
    "math",
    "next_power_of_2",
    "par_compile",
    "tvm",
]

_add_tirx_aliases()  # tirx.PrimExpr / tirx.Call, as TileLang's TVM names them

_convert_int_operands()  # x & 0xFFFFFFFF: the int takes x's type, as in TileLang (int_constants.py)

LAZY_SUBMODULES = frozenset(
    {"autotuner", "carver", "contrib", "engine", "env", "profiler", "rocm", "testing", "tools", "transform",
     "utils"}
)
"""Submodules reachable as attributes without their own import, as TileLang's ``import tilelang``
makes them (``tilelang.transform.PassConfigKey``, ``tilelang.env``); imported on first use."""


def __getattr__(name: str) -> object:
    if name in LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
