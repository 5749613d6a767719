"""TVMScript (``tvm.script.tirx``) builtins that ``T`` re-exports, as TileLang's namespace does.

Math (``T.sin``, ``T.erf``, ...), vector and narrow-float dtypes (``T.float16x2``,
``T.float4_e2m1fn``), TIR intrinsics (``T.tvm_storage_sync``, ``T.call_intrin``,
``T.address_of``, ``T.dp4a``, ...) and loop kinds (``T.grid``, ``T.thread_binding``).
They build the same IR as in TVMScript; backends lower what they support and reject the
rest when compiling. This list is TileLang's public names that TVMScript also has
(``tools/compat/tilelang_names.py`` finds them); the values are TVM's.
"""

from tvm.script import tirx as _script  # type: ignore[import-untyped]

IntImm = _script.IntImm
Select = _script.Select
Shuffle = _script.Shuffle
TVMBackendAllocWorkspace = _script.TVMBackendAllocWorkspace
TVMBackendFreeWorkspace = _script.TVMBackendFreeWorkspace
acos = _script.acos
acosh = _script.acosh
address_of = _script.address_of
anylist_getitem = _script.anylist_getitem
anylist_resetitem = _script.anylist_resetitem
anylist_setitem_call_cpacked = _script.anylist_setitem_call_cpacked
anylist_setitem_call_packed = _script.anylist_setitem_call_packed
asin = _script.asin
asinh = _script.asinh
assume = _script.assume
atan = _script.atan
atan2 = _script.atan2
atanh = _script.atanh
call_cpacked = _script.call_cpacked
call_cpacked_lowered = _script.call_cpacked_lowered
call_intrin = _script.call_intrin
call_llvm_intrin = _script.call_llvm_intrin
call_llvm_pure_intrin = _script.call_llvm_pure_intrin
call_packed = _script.call_packed
call_packed_lowered = _script.call_packed_lowered
call_pure_extern = _script.call_pure_extern
clz = _script.clz
copysign = _script.copysign
cos = _script.cos
cosh = _script.cosh
dp4a = _script.dp4a
end_profile_intrinsic = _script.end_profile_intrinsic
erf = _script.erf
exp10 = _script.exp10
float16x16 = _script.float16x16
float16x2 = _script.float16x2
float16x32 = _script.float16x32
float16x4 = _script.float16x4
float16x64 = _script.float16x64
float16x8 = _script.float16x8
float32x16 = _script.float32x16
float32x2 = _script.float32x2
float32x32 = _script.float32x32
float32x4 = _script.float32x4
float32x64 = _script.float32x64
float32x8 = _script.float32x8
float4_e2m1fn = _script.float4_e2m1fn
float4_e2m1fnx16 = _script.float4_e2m1fnx16
float4_e2m1fnx2 = _script.float4_e2m1fnx2
float4_e2m1fnx32 = _script.float4_e2m1fnx32
float4_e2m1fnx4 = _script.float4_e2m1fnx4
float4_e2m1fnx64 = _script.float4_e2m1fnx64
float4_e2m1fnx8 = _script.float4_e2m1fnx8
float64x16 = _script.float64x16
float64x2 = _script.float64x2
float64x32 = _script.float64x32
float64x4 = _script.float64x4
float64x64 = _script.float64x64
float64x8 = _script.float64x8
float6_e2m3fn = _script.float6_e2m3fn
float6_e2m3fnx16 = _script.float6_e2m3fnx16
float6_e2m3fnx2 = _script.float6_e2m3fnx2
float6_e2m3fnx32 = _script.float6_e2m3fnx32
float6_e2m3fnx4 = _script.float6_e2m3fnx4
float6_e2m3fnx64 = _script.float6_e2m3fnx64
float6_e2m3fnx8 = _script.float6_e2m3fnx8
float6_e3m2fn = _script.float6_e3m2fn
float6_e3m2fnx16 = _script.float6_e3m2fnx16
float6_e3m2fnx2 = _script.float6_e3m2fnx2
float6_e3m2fnx32 = _script.float6_e3m2fnx32
float6_e3m2fnx4 = _script.float6_e3m2fnx4
float6_e3m2fnx64 = _script.float6_e3m2fnx64
float6_e3m2fnx8 = _script.float6_e3m2fnx8
float8_e3m4 = _script.float8_e3m4
float8_e3m4x16 = _script.float8_e3m4x16
float8_e3m4x2 = _script.float8_e3m4x2
float8_e3m4x32 = _script.float8_e3m4x32
float8_e3m4x4 = _script.float8_e3m4x4
float8_e3m4x64 = _script.float8_e3m4x64
float8_e3m4x8 = _script.float8_e3m4x8
float8_e4m3 = _script.float8_e4m3
float8_e4m3b11fnuz = _script.float8_e4m3b11fnuz
float8_e4m3b11fnuzx16 = _script.float8_e4m3b11fnuzx16
float8_e4m3b11fnuzx2 = _script.float8_e4m3b11fnuzx2
float8_e4m3b11fnuzx32 = _script.float8_e4m3b11fnuzx32
float8_e4m3b11fnuzx4 = _script.float8_e4m3b11fnuzx4
float8_e4m3b11fnuzx64 = _script.float8_e4m3b11fnuzx64
float8_e4m3b11fnuzx8 = _script.float8_e4m3b11fnuzx8
float8_e4m3fnuz = _script.float8_e4m3fnuz
float8_e4m3fnuzx16 = _script.float8_e4m3fnuzx16
float8_e4m3fnuzx2 = _script.float8_e4m3fnuzx2
float8_e4m3fnuzx32 = _script.float8_e4m3fnuzx32
float8_e4m3fnuzx4 = _script.float8_e4m3fnuzx4
float8_e4m3fnuzx64 = _script.float8_e4m3fnuzx64
float8_e4m3fnuzx8 = _script.float8_e4m3fnuzx8
float8_e4m3fnx16 = _script.float8_e4m3fnx16
float8_e4m3fnx2 = _script.float8_e4m3fnx2
float8_e4m3fnx32 = _script.float8_e4m3fnx32
float8_e4m3fnx4 = _script.float8_e4m3fnx4
float8_e4m3fnx64 = _script.float8_e4m3fnx64
float8_e4m3fnx8 = _script.float8_e4m3fnx8
float8_e4m3x16 = _script.float8_e4m3x16
float8_e4m3x2 = _script.float8_e4m3x2
float8_e4m3x32 = _script.float8_e4m3x32
float8_e4m3x4 = _script.float8_e4m3x4
float8_e4m3x64 = _script.float8_e4m3x64
float8_e4m3x8 = _script.float8_e4m3x8
float8_e5m2fnuz = _script.float8_e5m2fnuz
float8_e5m2fnuzx16 = _script.float8_e5m2fnuzx16
float8_e5m2fnuzx2 = _script.float8_e5m2fnuzx2
float8_e5m2fnuzx32 = _script.float8_e5m2fnuzx32
float8_e5m2fnuzx4 = _script.float8_e5m2fnuzx4
float8_e5m2fnuzx64 = _script.float8_e5m2fnuzx64
float8_e5m2fnuzx8 = _script.float8_e5m2fnuzx8
float8_e5m2x16 = _script.float8_e5m2x16
float8_e5m2x2 = _script.float8_e5m2x2
float8_e5m2x32 = _script.float8_e5m2x32
float8_e5m2x4 = _script.float8_e5m2x4
float8_e5m2x64 = _script.float8_e5m2x64
float8_e5m2x8 = _script.float8_e5m2x8
float8_e8m0fnu = _script.float8_e8m0fnu
float8_e8m0fnux16 = _script.float8_e8m0fnux16
float8_e8m0fnux2 = _script.float8_e8m0fnux2
float8_e8m0fnux32 = _script.float8_e8m0fnux32
float8_e8m0fnux4 = _script.float8_e8m0fnux4
float8_e8m0fnux64 = _script.float8_e8m0fnux64
float8_e8m0fnux8 = _script.float8_e8m0fnux8
fmod = _script.fmod
grid = _script.grid
hypot = _script.hypot
inline = _script.inline
int16x16 = _script.int16x16
int16x2 = _script.int16x2
int16x32 = _script.int16x32
int16x4 = _script.int16x4
int16x64 = _script.int16x64
int16x8 = _script.int16x8
int32x16 = _script.int32x16
int32x2 = _script.int32x2
int32x32 = _script.int32x32
int32x4 = _script.int32x4
int32x64 = _script.int32x64
int32x8 = _script.int32x8
int64x16 = _script.int64x16
int64x2 = _script.int64x2
int64x32 = _script.int64x32
int64x4 = _script.int64x4
int64x64 = _script.int64x64
int64x8 = _script.int64x8
int8x16 = _script.int8x16
int8x2 = _script.int8x2
int8x32 = _script.int8x32
int8x4 = _script.int8x4
int8x64 = _script.int8x64
int8x8 = _script.int8x8
isnullptr = _script.isnullptr
ldexp = _script.ldexp
likely = _script.likely
log10 = _script.log10
log1p = _script.log1p
lookup_param = _script.lookup_param
meta_class = _script.meta_class
nearbyint = _script.nearbyint
nextafter = _script.nextafter
parallel = _script.parallel
popcount = _script.popcount
q_multiply_shift = _script.q_multiply_shift
q_multiply_shift_per_axis = _script.q_multiply_shift_per_axis
round = _script.round
sin = _script.sin
sinh = _script.sinh
start_profile_intrinsic = _script.start_profile_intrinsic
tan = _script.tan
thread_binding = _script.thread_binding
trunc = _script.trunc
truncdiv = _script.truncdiv
truncmod = _script.truncmod
tvm_access_ptr = _script.tvm_access_ptr
tvm_bmma_sync = _script.tvm_bmma_sync
tvm_fill_fragment = _script.tvm_fill_fragment
tvm_load_matrix_sync = _script.tvm_load_matrix_sync
tvm_mma_sync = _script.tvm_mma_sync
tvm_stack_alloca = _script.tvm_stack_alloca
tvm_stack_make_array = _script.tvm_stack_make_array
tvm_stack_make_shape = _script.tvm_stack_make_shape
tvm_storage_sync = _script.tvm_storage_sync
tvm_store_matrix_sync = _script.tvm_store_matrix_sync
tvm_struct_get = _script.tvm_struct_get
tvm_struct_set = _script.tvm_struct_set
tvm_thread_allreduce = _script.tvm_thread_allreduce
tvm_thread_invariant = _script.tvm_thread_invariant
tvm_throw_last_error = _script.tvm_throw_last_error
tvm_tuple = _script.tvm_tuple
tvm_warp_activemask = _script.tvm_warp_activemask
tvm_warp_shuffle = _script.tvm_warp_shuffle
tvm_warp_shuffle_down = _script.tvm_warp_shuffle_down
tvm_warp_shuffle_up = _script.tvm_warp_shuffle_up
uint16x16 = _script.uint16x16
uint16x2 = _script.uint16x2
uint16x32 = _script.uint16x32
uint16x4 = _script.uint16x4
uint16x64 = _script.uint16x64
uint16x8 = _script.uint16x8
uint32x16 = _script.uint32x16
uint32x2 = _script.uint32x2
uint32x32 = _script.uint32x32
uint32x4 = _script.uint32x4
uint32x64 = _script.uint32x64
uint32x8 = _script.uint32x8
uint64x16 = _script.uint64x16
uint64x2 = _script.uint64x2
uint64x32 = _script.uint64x32
uint64x4 = _script.uint64x4
uint64x64 = _script.uint64x64
uint64x8 = _script.uint64x8
uint8x16 = _script.uint8x16
uint8x2 = _script.uint8x2
uint8x32 = _script.uint8x32
uint8x4 = _script.uint8x4
uint8x64 = _script.uint8x64
uint8x8 = _script.uint8x8
undef = _script.undef
vectorcombine = _script.vectorcombine
vectorhigh = _script.vectorhigh
vectorlow = _script.vectorlow
vscale = _script.vscale

__all__ = [
    "IntImm",
    "Select",
    "Shuffle",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
    "acos",
    "acosh",
    "address_of",
    "anylist_getitem",
    "anylist_resetitem",
    "anylist_setitem_call_cpacked",
    "anylist_setitem_call_packed",
    "asin",
    "asinh",
    "assume",
    "atan",
    "atan2",
    "atanh",
    "call_cpacked",
    "call_cpacked_lowered",
    "call_intrin",
    "call_llvm_intrin",
    "call_llvm_pure_intrin",
    "call_packed",
    "call_packed_lowered",
    "call_pure_extern",
    "clz",
    "copysign",
    "cos",
    "cosh",
    "dp4a",
    "end_profile_intrinsic",
    "erf",
    "exp10",
    "float4_e2m1fn",
    "float4_e2m1fnx2",
    "float4_e2m1fnx4",
    "float4_e2m1fnx8",
    "float4_e2m1fnx16",
    "float4_e2m1fnx32",
    "float4_e2m1fnx64",
    "float6_e2m3fn",
    "float6_e2m3fnx2",
    "float6_e2m3fnx4",
    "float6_e2m3fnx8",
    "float6_e2m3fnx16",
    "float6_e2m3fnx32",
    "float6_e2m3fnx64",
    "float6_e3m2fn",
    "float6_e3m2fnx2",
    "float6_e3m2fnx4",
    "float6_e3m2fnx8",
    "float6_e3m2fnx16",
    "float6_e3m2fnx32",
    "float6_e3m2fnx64",
    "float8_e3m4",
    "float8_e3m4x2",
    "float8_e3m4x4",
    "float8_e3m4x8",
    "float8_e3m4x16",
    "float8_e3m4x32",
    "float8_e3m4x64",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3b11fnuzx2",
    "float8_e4m3b11fnuzx4",
    "float8_e4m3b11fnuzx8",
    "float8_e4m3b11fnuzx16",
    "float8_e4m3b11fnuzx32",
    "float8_e4m3b11fnuzx64",
    "float8_e4m3fnuz",
    "float8_e4m3fnuzx2",
    "float8_e4m3fnuzx4",
    "float8_e4m3fnuzx8",
    "float8_e4m3fnuzx16",
    "float8_e4m3fnuzx32",
    "float8_e4m3fnuzx64",
    "float8_e4m3fnx2",
    "float8_e4m3fnx4",
    "float8_e4m3fnx8",
    "float8_e4m3fnx16",
    "float8_e4m3fnx32",
    "float8_e4m3fnx64",
    "float8_e4m3x2",
    "float8_e4m3x4",
    "float8_e4m3x8",
    "float8_e4m3x16",
    "float8_e4m3x32",
    "float8_e4m3x64",
    "float8_e5m2fnuz",
    "float8_e5m2fnuzx2",
    "float8_e5m2fnuzx4",
    "float8_e5m2fnuzx8",
    "float8_e5m2fnuzx16",
    "float8_e5m2fnuzx32",
    "float8_e5m2fnuzx64",
    "float8_e5m2x2",
    "float8_e5m2x4",
    "float8_e5m2x8",
    "float8_e5m2x16",
    "float8_e5m2x32",
    "float8_e5m2x64",
    "float8_e8m0fnu",
    "float8_e8m0fnux2",
    "float8_e8m0fnux4",
    "float8_e8m0fnux8",
    "float8_e8m0fnux16",
    "float8_e8m0fnux32",
    "float8_e8m0fnux64",
    "float16x2",
    "float16x4",
    "float16x8",
    "float16x16",
    "float16x32",
    "float16x64",
    "float32x2",
    "float32x4",
    "float32x8",
    "float32x16",
    "float32x32",
    "float32x64",
    "float64x2",
    "float64x4",
    "float64x8",
    "float64x16",
    "float64x32",
    "float64x64",
    "fmod",
    "grid",
    "hypot",
    "inline",
    "int8x2",
    "int8x4",
    "int8x8",
    "int8x16",
    "int8x32",
    "int8x64",
    "int16x2",
    "int16x4",
    "int16x8",
    "int16x16",
    "int16x32",
    "int16x64",
    "int32x2",
    "int32x4",
    "int32x8",
    "int32x16",
    "int32x32",
    "int32x64",
    "int64x2",
    "int64x4",
    "int64x8",
    "int64x16",
    "int64x32",
    "int64x64",
    "isnullptr",
    "ldexp",
    "likely",
    "log1p",
    "log10",
    "lookup_param",
    "meta_class",
    "nearbyint",
    "nextafter",
    "parallel",
    "popcount",
    "q_multiply_shift",
    "q_multiply_shift_per_axis",
    "round",
    "sin",
    "sinh",
    "start_profile_intrinsic",
    "tan",
    "thread_binding",
    "trunc",
    "truncdiv",
    "truncmod",
    "tvm_access_ptr",
    "tvm_bmma_sync",
    "tvm_fill_fragment",
    "tvm_load_matrix_sync",
    "tvm_mma_sync",
    "tvm_stack_alloca",
    "tvm_stack_make_array",
    "tvm_stack_make_shape",
    "tvm_storage_sync",
    "tvm_store_matrix_sync",
    "tvm_struct_get",
    "tvm_struct_set",
    "tvm_thread_allreduce",
    "tvm_thread_invariant",
    "tvm_throw_last_error",
    "tvm_tuple",
    "tvm_warp_activemask",
    "tvm_warp_shuffle",
    "tvm_warp_shuffle_down",
    "tvm_warp_shuffle_up",
    "uint8x2",
    "uint8x4",
    "uint8x8",
    "uint8x16",
    "uint8x32",
    "uint8x64",
    "uint16x2",
    "uint16x4",
    "uint16x8",
    "uint16x16",
    "uint16x32",
    "uint16x64",
    "uint32x2",
    "uint32x4",
    "uint32x8",
    "uint32x16",
    "uint32x32",
    "uint32x64",
    "uint64x2",
    "uint64x4",
    "uint64x8",
    "uint64x16",
    "uint64x32",
    "uint64x64",
    "undef",
    "vectorcombine",
    "vectorhigh",
    "vectorlow",
    "vscale",
]
