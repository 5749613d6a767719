"""tile.lang: the TileLang-compatible front end (``import tile.lang as tilelang``).

Example::

    import tile.lang as tilelang
    import tile.lang.language as T

    kernel = tilelang.compile(my_prim_func, out_idx=[-1], target="cpu")
"""

from . import language as language
from . import layout as layout
from ._src.jit import JITKernel as JITKernel
from ._src.jit import compile as compile
from ._src.jit import jit as jit
from ._src.pass_config import PassConfigKey as PassConfigKey
from ._src.profiler import Profiler as Profiler
from ._src.profiler import TensorSupplyType as TensorSupplyType
from ._src.tuner import autotune as autotune
from .errors import KernelArgumentError as KernelArgumentError
from .errors import TileParseError as TileParseError
from .errors import TileScopeError as TileScopeError
