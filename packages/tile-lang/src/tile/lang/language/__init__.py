"""``import tile.lang.language as T``: the tile language namespace.

API policy: this is the *developer tier*. It exposes tiles, memory placement
(``alloc_shared``/``alloc_fragment``), dataflow tile operators (``copy``, ``fill``,
``clear``, ``gemm``, ``reduce_*``) and schedule annotations (``Parallel``,
``Pipelined``); the compiler decides thread bindings, layouts and vectorization.
Names in this tier are stable: they change only with a deprecation period.
The *expert tier* lives in ``tile.lang.language.expert`` (thread ids, explicit
layouts, external C functions) with its own, weaker policy; its names are also
reachable here because TileLang programs spell them ``T.<name>``. The beginner
tier (``tile.lang.beginner``) writes programs in this tier from array functions.

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
from .._src.builtins import reduce_bitand as reduce_bitand
from .._src.builtins import reduce_bitor as reduce_bitor
from .._src.builtins import reduce_bitxor as reduce_bitxor
from .._src.builtins import reduce_max as reduce_max
from .._src.builtins import reduce_min as reduce_min
from .._src.builtins import reduce_sum as reduce_sum
from .._src.builtins import unroll as unroll
from .._src.builtins import vectorized as vectorized
from .._src.compat_allreduce import attr as _attr
from .._src.compat_allreduce import comm_reducer as _comm_reducer
from .._src.compat_allreduce import thread_binding as _thread_binding
from .._src.compat_allreduce import tvm_thread_allreduce as _tvm_thread_allreduce

# TileLang names that are expressions, dtypes, buffer views and index helpers.
from .._src.compat_fp4 import float4_e2m1_unpacked as float4_e2m1_unpacked
from .._src.compat_lang import FAST_MATH as _FAST_MATH
from .._src.compat_lang import Serial as Serial
from .._src.compat_lang import While as While
from .._src.compat_lang import abs2 as abs2
from .._src.compat_lang import access_ptr as access_ptr
from .._src.compat_lang import add2 as add2
from .._src.compat_lang import align_up as align_up
from .._src.compat_lang import alloc_buffer as alloc_buffer
from .._src.compat_lang import alloc_global as alloc_global
from .._src.compat_lang import bfloat16x2 as bfloat16x2
from .._src.compat_lang import bfloat16x4 as bfloat16x4
from .._src.compat_lang import bfloat16x8 as bfloat16x8
from .._src.compat_lang import broadcast as _broadcast
from .._src.compat_lang import c2d_im2col as c2d_im2col
from .._src.compat_lang import clamp as clamp
from .._src.compat_lang import dtype as dtype
from .._src.compat_lang import fast_rcp as fast_rcp
from .._src.compat_lang import fma2 as fma2
from .._src.compat_lang import func_attr as func_attr
from .._src.compat_lang import get_block_binding as get_block_binding
from .._src.compat_lang import get_block_bindings as get_block_bindings
from .._src.compat_lang import ieee_add as ieee_add
from .._src.compat_lang import ieee_fdiv as ieee_fdiv
from .._src.compat_lang import ieee_fmaf as ieee_fmaf
from .._src.compat_lang import ieee_frcp as ieee_frcp
from .._src.compat_lang import ieee_frsqrt as ieee_frsqrt
from .._src.compat_lang import ieee_fsqrt as ieee_fsqrt
from .._src.compat_lang import ieee_mul as ieee_mul
from .._src.compat_lang import ieee_sub as ieee_sub
from .._src.compat_lang import im2col as im2col
from .._src.compat_lang import index_to_coordinates as index_to_coordinates
from .._src.compat_lang import infinity as infinity
from .._src.compat_lang import int4 as int4
from .._src.compat_lang import is_dtype_constructor as _is_dtype_constructor
from .._src.compat_lang import launch_thread as launch_thread
from .._src.compat_lang import ldg as _ldg
from .._src.compat_lang import let as let
from .._src.compat_lang import make_tensor as make_tensor
from .._src.compat_lang import max2 as max2
from .._src.compat_lang import min2 as min2
from .._src.compat_lang import mul2 as mul2
from .._src.compat_lang import pdl_sync as pdl_sync
from .._src.compat_lang import pdl_trigger as pdl_trigger
from .._src.compat_lang import ramp as _ramp
from .._src.compat_lang import reinterpret as _reinterpret
from .._src.compat_lang import reshape as reshape
from .._src.compat_lang import round_ as _round
from .._src.compat_lang import script_dtype as _script_dtype
from .._src.compat_lang import sub2 as sub2
from .._src.compat_lang import sync_threads as sync_threads
from .._src.compat_lang import uint4 as uint4
from .._src.compat_lang import view as view
from .._src.compat_ops import TFLOAT32_VECTORS as _TFLOAT32_VECTORS
from .._src.compat_ops import all_of as all_of
from .._src.compat_ops import any_of as any_of
from .._src.compat_ops import async_copy as async_copy
from .._src.compat_ops import atomic_addx2 as atomic_addx2
from .._src.compat_ops import atomic_addx4 as atomic_addx4
from .._src.compat_ops import dp4a as _dp4a
from .._src.compat_ops import extract_lane as extract_lane
from .._src.compat_ops import tfloat32 as tfloat32
from .._src.compat_ops import tma_copy as tma_copy
from .._src.compat_ops import transpose as transpose
from .._src.compat_ops import wgmma_gemm as wgmma_gemm
from .._src.compat_schedule import WSID as WSID
from .._src.compat_schedule import FragmentBuffer as FragmentBuffer
from .._src.compat_schedule import Persistent as Persistent
from .._src.compat_schedule import PersistentTileScheduler as PersistentTileScheduler
from .._src.compat_schedule import PrimExpr as PrimExpr
from .._src.compat_schedule import SharedBuffer as SharedBuffer
from .._src.compat_schedule import Var as Var
from .._src.compat_schedule import WSPipeline as WSPipeline
from .._src.compat_schedule import WSRole as WSRole
from .._src.compat_schedule import WSSchedule as WSSchedule
from .._src.compat_schedule import WSScope as WSScope
from .._src.compat_schedule import WSSync as WSSync
from .._src.compat_schedule import WSSyncKind as WSSyncKind
from .._src.compat_schedule import annotate_restrict_buffers as annotate_restrict_buffers
from .._src.compat_schedule import annotate_safe_value as annotate_safe_value
from .._src.compat_schedule import annotate_ws_schedule as annotate_ws_schedule
from .._src.compat_schedule import ws_op as ws_op
from .._src.compat_sparse import gemm_sp as gemm_sp
from .._src.compat_tma import create_tma_descriptor as create_tma_descriptor
from .._src.compat_tma import tma_load as tma_load
from .._src.compat_wgmma import alloc_wgmma_desc as alloc_wgmma_desc
from .._src.compat_wgmma import initialize_wgmma_descriptor as initialize_wgmma_descriptor
from .._src.compat_wgmma import ptx_wgmma_ss as ptx_wgmma_ss
from .._src.compat_wgmma import wgmma_mma as wgmma_mma
from .._src.cuda_expert import activemask as activemask
from .._src.cuda_expert import all_sync as all_sync
from .._src.cuda_expert import alloc_barrier as alloc_barrier
from .._src.cuda_expert import annotate_consumer_reg_alloc as annotate_consumer_reg_alloc
from .._src.cuda_expert import annotate_l2_hit_ratio as annotate_l2_hit_ratio
from .._src.cuda_expert import annotate_min_blocks_per_sm as annotate_min_blocks_per_sm
from .._src.cuda_expert import annotate_producer_reg_dealloc as annotate_producer_reg_dealloc
from .._src.cuda_expert import any_sync as any_sync
from .._src.cuda_expert import atomic_and as atomic_and
from .._src.cuda_expert import atomic_or as atomic_or
from .._src.cuda_expert import atomic_xor as atomic_xor
from .._src.cuda_expert import ballot as ballot
from .._src.cuda_expert import ballot_sync as ballot_sync
from .._src.cuda_expert import barrier_arrive as barrier_arrive
from .._src.cuda_expert import barrier_wait as barrier_wait
from .._src.cuda_expert import cp_async_barrier_noinc as cp_async_barrier_noinc
from .._src.cuda_expert import disable_warp_group_reg_alloc as disable_warp_group_reg_alloc
from .._src.cuda_expert import fence_proxy_async as fence_proxy_async
from .._src.cuda_expert import find_first_set as _find_first_set
from .._src.cuda_expert import find_nth_set as _find_nth_set
from .._src.cuda_expert import get_lane_idx as get_lane_idx
from .._src.cuda_expert import get_warp_group_idx as get_warp_group_idx
from .._src.cuda_expert import get_warp_idx as get_warp_idx
from .._src.cuda_expert import get_warp_idx_sync as get_warp_idx_sync
from .._src.cuda_expert import match_all_sync as match_all_sync
from .._src.cuda_expert import match_any_sync as match_any_sync
from .._src.cuda_expert import mbarrier_arrive as mbarrier_arrive
from .._src.cuda_expert import mbarrier_arrive_expect_tx as mbarrier_arrive_expect_tx
from .._src.cuda_expert import mbarrier_expect_tx as mbarrier_expect_tx
from .._src.cuda_expert import mbarrier_wait_parity as mbarrier_wait_parity
from .._src.cuda_expert import named_barrier_arrive as named_barrier_arrive
from .._src.cuda_expert import no_set_max_nreg as no_set_max_nreg
from .._src.cuda_expert import ptx_arrive_barrier as ptx_arrive_barrier
from .._src.cuda_expert import ptx_commit_group as ptx_commit_group
from .._src.cuda_expert import ptx_cp_async as ptx_cp_async
from .._src.cuda_expert import ptx_fence_barrier_init as ptx_fence_barrier_init
from .._src.cuda_expert import ptx_init_barrier_thread_count as ptx_init_barrier_thread_count
from .._src.cuda_expert import ptx_wait_group as ptx_wait_group
from .._src.cuda_expert import set_max_nreg as set_max_nreg
from .._src.cuda_expert import shfl_sync as shfl_sync
from .._src.cuda_expert import shuffle_elect as shuffle_elect
from .._src.cuda_expert import sync_warp as sync_warp
from .._src.cuda_expert import syncthreads_and as syncthreads_and
from .._src.cuda_expert import syncthreads_count as syncthreads_count
from .._src.cuda_expert import syncthreads_or as syncthreads_or
from .._src.cuda_expert import tma_store_arrive as tma_store_arrive
from .._src.cuda_expert import tma_store_wait as tma_store_wait
from .._src.cuda_expert import wait_wgmma as wait_wgmma
from .._src.cuda_expert import warp_reduce_bitand as warp_reduce_bitand
from .._src.cuda_expert import warp_reduce_bitor as warp_reduce_bitor
from .._src.cuda_expert import warp_reduce_max as warp_reduce_max
from .._src.cuda_expert import warp_reduce_min as warp_reduce_min
from .._src.cuda_expert import warp_reduce_sum as warp_reduce_sum
from .._src.cuda_expert import warpgroup_arrive as warpgroup_arrive
from .._src.cuda_expert import warpgroup_commit_batch as warpgroup_commit_batch
from .._src.cuda_expert import warpgroup_fence_operand as warpgroup_fence_operand
from .._src.cuda_expert import warpgroup_wait as warpgroup_wait
from .._src.cuda_expert import ws as ws

# Symbolic dims, eager kernels, scalars/macros (developer tier).
from .._src.debug import device_assert as device_assert
from .._src.debug import print as print
from .._src.dtypes import StridedTensor as StridedTensor
from .._src.dtypes import Tensor as Tensor
from .._src.eager import const as const
from .._src.eager import empty as empty
from .._src.expert import call_extern as call_extern
from .._src.expert import import_source as import_source
from .._src.kernel_sequence import sync_grid as sync_grid
from .._src.pass_config import annotate_compile_flags as annotate_compile_flags
from .._src.pass_config import annotate_pass_configs as annotate_pass_configs
from .._src.pointers import ptr as ptr
from .._src.reducers import alloc_reducer as alloc_reducer
from .._src.reducers import finalize_reducer as finalize_reducer
from .._src.reducers import reducer_init as reducer_init
from .._src.reducers import reducer_update as reducer_update
from .._src.rng import rng_init as rng_init
from .._src.rng import rng_rand as rng_rand
from .._src.rng import rng_rand_float as rng_rand_float
from .._src.scalars import Ref as Ref
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
from .._src.tile_ops_builtins import cummax as cummax
from .._src.tile_ops_builtins import cumsum as cumsum

# TVMScript's math, vector/narrow dtypes and TIR intrinsics, as TileLang re-exports them.
from .._src.tir_builtins import *  # noqa: F403
from .._src.unsupported import REFUSERS as _REFUSERS
from .._src.warp_mma import ptx_ldmatrix as ptx_ldmatrix
from .._src.warp_mma import ptx_mma as ptx_mma
from .._src.wide_access import atomic_load as atomic_load
from .._src.wide_access import atomic_store as atomic_store
from .._src.wide_access import ldg32 as ldg32
from .._src.wide_access import ldg64 as ldg64
from .._src.wide_access import ldg128 as ldg128
from .._src.wide_access import ldg256 as ldg256
from .._src.wide_access import lds32 as lds32
from .._src.wide_access import lds64 as lds64
from .._src.wide_access import lds128 as lds128
from .._src.wide_access import stg32 as stg32
from .._src.wide_access import stg64 as stg64
from .._src.wide_access import stg128 as stg128
from .._src.wide_access import stg256 as stg256
from .._src.wide_access import sts32 as sts32
from .._src.wide_access import sts64 as sts64
from .._src.wide_access import sts128 as sts128
from ..layout import Fragment as Fragment
from ..layout import Layout as Layout

# Typed tensor annotations: ``A: T.Tensor((M, N), "float16")`` (``T.Buffer`` is the same).
Buffer = Tensor

# Scalar math and expression helpers, shared with TVMScript.
globals().update(_FAST_MATH)  # TileLang's fast-math T.__exp, T.__log, ..., T.__sin
globals().update(__ffs=_find_first_set, __fns=_find_nth_set, __ldg=_ldg)  # CUDA's spellings
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
max_value = _tvm_script.max_value
min_value = _tvm_script.min_value

Cast = _tvm_script.Cast
# ``with T.attr(T.comm_reducer(...), "reduce_scope", ...)`` around T.tvm_thread_allreduce (after the
# TIR builtins above, whose plain versions these replace)
attr = _attr
comm_reducer = _comm_reducer
tvm_thread_allreduce = _tvm_thread_allreduce
thread_binding = _thread_binding
round = _round  # T.round(x, rounding_mode="ties-to-even" | "ties-away-from-zero")
dp4a = _dp4a  # TileLang's C += dot4(A, B) on int8 buffers; TVMScript's form on int8x4 values
Broadcast = _broadcast  # T.Broadcast(v, n): an n-lane vector of v
Ramp = _ramp  # T.Ramp(base, stride, n): an n-lane index vector
floordiv = _tvm_script.floordiv
floormod = _tvm_script.floormod
evaluate = _tvm_script.evaluate
# TVMScript's untyped parameter and its typing inside the body (`def f(A_ptr: T.handle): A =
# T.match_buffer(A_ptr, (16, 16), "float32")`): the parsed kernel's parameter is the buffer A
handle = _tvm_script.handle
match_buffer = _tvm_script.match_buffer

# TVMScript's element types (``T.float16x2``, ``T.float8_e4m3fnuz``, ...) re-exported above are each
# a T.dtype here, as in TileLang: their name (a str) and a ``tvm.DataType`` that still constructs
# as TVMScript's.
globals().update(
    {name: _script_dtype(name) for name, value in dict(globals()).items() if _is_dtype_constructor(value)}
)

# Element types: usable as names ("float16") and as constructors (T.float32(0)).
# Each is also its name, a str (``getattr(torch, T.float16)``), as TileLang's dtypes are.
bool = _script_dtype("bool")
int8 = _script_dtype("int8")
int16 = _script_dtype("int16")
int32 = _script_dtype("int32")
int64 = _script_dtype("int64")
uint8 = _script_dtype("uint8")
uint16 = _script_dtype("uint16")
uint32 = _script_dtype("uint32")
uint64 = _script_dtype("uint64")
float16 = _script_dtype("float16")
bfloat16 = _script_dtype("bfloat16")
float32 = _script_dtype("float32")
float64 = _script_dtype("float64")
float8_e4m3fn = _script_dtype("float8_e4m3fn")
float8_e5m2 = _script_dtype("float8_e5m2")
float8_e4m3 = _script_dtype("float8_e4m3")  # float8_e4m3fn: TileLang's name for it (_src.dtypes.ALIASES)

# TileLang's short spellings of element types: ``T.dtype`` objects, strings (so that
# ``dtype = T.float`` may be bound inside a kernel body) that also make constants (``T.float(0)``).
float = dtype("float32")
half = dtype("float16")
int = dtype("int32")
uint = dtype("uint32")
short = dtype("int16")
long = dtype("int64")
double = dtype("float64")
globals().update(_TFLOAT32_VECTORS)

# Bit manipulation (packed int4/fp4 weights) and float classification.
shift_left = _tvm_script.shift_left
shift_right = _tvm_script.shift_right
bitwise_and = _tvm_script.bitwise_and
bitwise_or = _tvm_script.bitwise_or
bitwise_xor = _tvm_script.bitwise_xor
bitwise_not = _tvm_script.bitwise_not
reinterpret = _reinterpret  # (value, dtype) as in TileLang, or TVMScript's (dtype, value)
isnan = _tvm_script.isnan
isinf = _tvm_script.isinf
isfinite = _tvm_script.isfinite

# Names that need hardware tile does not target (sm_100 tcgen05/TMEM, clusters, ...): each
# raises UnsupportedOnTargetError at its line, saying why and what to write instead.
globals().update(_REFUSERS)

# `T.Paralel` -> "did you mean `T.Parallel`?" (candidates: this module's names at error time).
__getattr__ = _missing_name_hook(__name__)
