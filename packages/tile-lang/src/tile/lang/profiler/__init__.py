"""``tile.lang.profiler`` (TileLang's ``tilelang.profiler``): ``Profiler`` and ``do_bench``.

Example::

    from tile.lang.profiler import do_bench
    ms = do_bench(lambda: kernel(a, b))
"""

from .._src.bench import BenchError as BenchError
from .._src.bench import do_bench as do_bench
from .._src.profiler import AllcloseError as AllcloseError
from .._src.profiler import Profiler as Profiler
from .._src.profiler import ProfilerError as ProfilerError
from .._src.profiler import TensorSupplyType as TensorSupplyType

__all__ = ["AllcloseError", "BenchError", "Profiler", "ProfilerError", "TensorSupplyType", "do_bench"]
