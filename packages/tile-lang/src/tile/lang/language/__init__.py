"""``import tile.lang.language as T``: the tile language namespace.

API policy: this is the *developer tier*. It exposes tiles, memory placement
(``alloc_shared``/``alloc_fragment``), dataflow tile operators (``copy``, ``fill``,
``clear``, ``gemm``, ``reduce_*``) and schedule annotations (``Parallel``,
``Pipelined``); the compiler decides thread bindings, layouts and vectorization.
Names in this tier are stable: they change only with a deprecation period.
The *expert tier* lives in ``tile.lang.language.expert`` (thread ids, explicit
layouts, external C functions) with its own, weaker policy; its names are also
reachable here because TileLang programs spell them ``T.<name>``. The beginner
tier is not written yet.

A TileLang program runs after changing only its imports::

    import tile.lang as tilelang
    import tile.lang.language as T
"""

from tvm.script import tirx as _tvm_script  # type: ignore[import-untyped]

from .._src.builtins import Kernel as Kernel
from .._src.builtins import Parallel as Parallel
from .._src.builtins import Pipelined as Pipelined
from .._src.builtins import alloc_fragment as alloc_fragment
from .._src.builtins import alloc_local as alloc_local
from .._src.builtins import alloc_shared as alloc_shared
from .._src.builtins import cast as cast
from .._src.builtins import ceildiv as ceildiv
from .._src.builtins import clear as clear
from .._src.builtins import copy as copy
from .._src.builtins import fill as fill
from .._src.builtins import gemm as gemm
from .._src.builtins import get_thread_binding as get_thread_binding
from .._src.builtins import prim_func as prim_func
from .._src.builtins import reduce_absmax as reduce_absmax
from .._src.builtins import reduce_abssum as reduce_abssum
from .._src.builtins import reduce_max as reduce_max
from .._src.builtins import reduce_min as reduce_min
from .._src.builtins import reduce_sum as reduce_sum
from .._src.builtins import unroll as unroll
from .._src.builtins import vectorized as vectorized

# Symbolic dims, eager kernels, scalars/macros (developer tier).
from .._src.debug import device_assert as device_assert
from .._src.debug import print as print
from .._src.dtypes import Tensor as Tensor
from .._src.eager import const as const
from .._src.eager import empty as empty
from .._src.expert import call_extern as call_extern
from .._src.expert import import_source as import_source
from .._src.scalars import alloc_var as alloc_var
from .._src.scalars import macro as macro
from .._src.scalars import serial as serial
from .._src.schedule import GemmWarpPolicy as GemmWarpPolicy
from .._src.schedule import annotate_layout as annotate_layout
from .._src.schedule import use_swizzle as use_swizzle
from .._src.suggestions import missing_name_hook as _missing_name_hook
from .._src.symbolic import dynamic as dynamic
from .._src.symbolic import symbolic as symbolic
from .._src.tile_ops_builtins import atomic_add as atomic_add
from .._src.tile_ops_builtins import atomic_max as atomic_max
from .._src.tile_ops_builtins import atomic_min as atomic_min
from .._src.tile_ops_builtins import cumsum as cumsum
from ..layout import Fragment as Fragment
from ..layout import Layout as Layout

# Typed tensor annotations: ``A: T.Tensor((M, N), "float16")`` (``T.Buffer`` is the same).
Buffer = Tensor

# Scalar math and expression helpers, shared with TVMScript.
exp = _tvm_script.exp
exp2 = _tvm_script.exp2
log = _tvm_script.log
log2 = _tvm_script.log2
sqrt = _tvm_script.sqrt
rsqrt = _tvm_script.rsqrt
tanh = _tvm_script.tanh
sigmoid = _tvm_script.sigmoid
pow = _tvm_script.pow
floor = _tvm_script.floor
ceil = _tvm_script.ceil
max = _tvm_script.max
min = _tvm_script.min
abs = _tvm_script.abs
if_then_else = _tvm_script.if_then_else
infinity = _tvm_script.infinity
max_value = _tvm_script.max_value
min_value = _tvm_script.min_value

Cast = _tvm_script.Cast
floordiv = _tvm_script.floordiv
floormod = _tvm_script.floormod
evaluate = _tvm_script.evaluate

# Element types: usable as names ("float16") and as constructors (T.float32(0)).
bool = _tvm_script.bool
int8 = _tvm_script.int8
int16 = _tvm_script.int16
int32 = _tvm_script.int32
int64 = _tvm_script.int64
uint8 = _tvm_script.uint8
uint16 = _tvm_script.uint16
uint32 = _tvm_script.uint32
uint64 = _tvm_script.uint64
float16 = _tvm_script.float16
bfloat16 = _tvm_script.bfloat16
float32 = _tvm_script.float32
float64 = _tvm_script.float64
float8_e4m3fn = _tvm_script.float8_e4m3fn
float8_e5m2 = _tvm_script.float8_e5m2

# Bit manipulation (packed int4/fp4 weights) and float classification.
shift_left = _tvm_script.shift_left
shift_right = _tvm_script.shift_right
bitwise_and = _tvm_script.bitwise_and
bitwise_or = _tvm_script.bitwise_or
bitwise_xor = _tvm_script.bitwise_xor
bitwise_not = _tvm_script.bitwise_not
reinterpret = _tvm_script.reinterpret
isnan = _tvm_script.isnan
isinf = _tvm_script.isinf
isfinite = _tvm_script.isfinite

# `T.Paralel` -> "did you mean `T.Parallel`?" (candidates: this module's names at error time).
__getattr__ = _missing_name_hook(__name__)
