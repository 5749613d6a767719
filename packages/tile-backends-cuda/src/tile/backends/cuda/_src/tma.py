"""TMA on sm_90: which boxes a shared tile is loaded in, and the host-built tensor map.

A tile kernel that loads a global->shared tile with TMA gets one extra kernel
parameter per global tensor: a 128-byte ``CUtensorMap`` (``tile_tensor_map`` in
``tile_cuda/hopper.h``) passed by value as ``const __grid_constant__``. It cannot be
built at compile time: it holds the tensor's address and extents, so the launcher
encodes it with ``cuTensorMapEncodeTiled`` from the actual tensor (cached per
pointer/shape/strides on the kernel object). Compiling therefore needs no driver.

What this module decides, all checkable without a GPU:

* :func:`plan_boxes`: how a ``(rows, cols)`` shared tile in its shared layout is
  filled by TMA boxes. A swizzled layout (``tile.layout.SwizzledLayout``) stores the
  tile as ``cols / span`` dense blocks of ``rows x span`` elements (``span`` = the
  swizzle width in elements), each block exactly one TMA box ``{span, rows}`` with
  the same 32/64/128-byte swizzle; an unswizzled row-major tile is one box
  ``{cols, rows}``. The limits are those of ``cuTensorMapEncodeTiled``: box dims in
  [1, 256], inner box bytes a multiple of 16 and at most the swizzle span.
* :func:`encode_arguments`: every argument of ``cuTensorMapEncodeTiled`` for a
  row-major tensor of 2 to 5 dims (dims and strides innermost first, strides in bytes
  for dims 1.., alignment rules checked), as plain integers. A tile of a higher-rank
  tensor (``K[b, k * 64 : (k + 1) * 64, h, :]`` in attention) takes its rows along one
  outer dim (``BoxPlan.row_dim``) and its columns along the innermost; every other dim
  has a box extent of 1.
* :func:`encode`: the driver call itself (``libcuda`` through ctypes), only at launch.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import CudaLaunchError

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64

# CUtensorMapDataType (cuda.h): the element type TMA copies. TMA does not convert, so
# types without an entry of their own travel as unsigned integers of their width.
DATA_TYPES = {
    "uint8": 0,
    "int8": 0,
    "float8_e4m3fn": 0,
    "float8_e5m2": 0,
    "bool": 0,
    "uint16": 1,
    "int16": 1,
    "uint32": 2,
    "int32": 3,
    "uint64": 4,
    "int64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
ELEMENT_BYTES = {
    "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1,
    "uint16": 2, "int16": 2, "float16": 2, "bfloat16": 2,
    "uint32": 4, "int32": 4, "float32": 4,
    "uint64": 8, "int64": 8, "float64": 8,
}  # fmt: skip
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
"""CUtensorMapSwizzle by swizzle span in bytes (0 = none)."""
INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2
OOB_FILL_ZERO = 0
"""CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: elements outside the tensor read as zero."""
MAX_BOX = 256


class TmaUnsupported(Exception):
    """This tile cannot be loaded with TMA; the caller keeps the cp.async path."""


@dataclasses.dataclass(frozen=True)
class Box:
    """One TMA load into a shared tile: the box origin relative to the tile's origin.

    ``col`` is the element offset of the box along the tensor's inner dim, ``smem_offset``
    the byte offset of the box inside the shared tile's storage.
    """

    col: int
    smem_offset: int


@dataclasses.dataclass(frozen=True)
class BoxPlan:
    """How a ``rows x cols`` shared tile is filled: equal boxes of ``box_rows x box_cols``."""

    dtype: str
    rows: int
    cols: int
    box_rows: int
    box_cols: int
    swizzle_bytes: int
    boxes: tuple[Box, ...]
    rank: int = 2
    """Dims of the global tensor (2 to 5)."""
    row_dim: int = 0
    """The global dim (outer-first order) the tile's rows run along; its columns run along the last."""

    @property
    def box_dim(self) -> tuple[int, ...]:
        """The box extent per global dim, innermost first (``cuTensorMapEncodeTiled`` order)."""
        outer_first = [1] * self.rank
        outer_first[self.row_dim] = self.box_rows
        outer_first[-1] = self.box_cols
        return tuple(reversed(outer_first))

    @property
    def box_bytes(self) -> int:
        return self.box_rows * self.box_cols * ELEMENT_BYTES[self.dtype]

    @property
    def tile_bytes(self) -> int:
        """Bytes one stage's loads complete on the mbarrier (``expect_tx``), OOB fill included."""
        return self.box_bytes * len(self.boxes)

    @property
    def smem_align(self) -> int:
        """Alignment the shared tile needs so the swizzle pattern starts at its base."""
        return {0: 128, 32: 256, 64: 512, 128: 1024}[self.swizzle_bytes]


def plan_boxes(
    rows: int, cols: int, dtype: str, swizzle_bytes: int, rank: int = 2, row_dim: int = 0
) -> BoxPlan:
    """The TMA boxes that fill a ``(rows, cols)`` shared tile stored with ``swizzle_bytes``.

    ``swizzle_bytes`` is the tile's ``SwizzledLayout.swizzle_bytes`` or 0 for a dense
    row-major tile. The global tensor has ``rank`` dims; the tile's rows run along dim
    ``row_dim`` (outer-first), its columns along the last. Raises :class:`TmaUnsupported`
    when no box shape fits.
    """
    if not 2 <= rank <= 5 or not 0 <= row_dim < rank - 1:
        raise TmaUnsupported(f"TMA loads 2- to 5-D tensors with rows along an outer dim, got rank {rank}")
    if dtype not in ELEMENT_BYTES:
        raise TmaUnsupported(f"TMA has no element type for {dtype}")
    if swizzle_bytes not in SWIZZLE_MODES:
        raise TmaUnsupported(f"no TMA swizzle mode spans {swizzle_bytes} bytes")
    elem = ELEMENT_BYTES[dtype]
    box_cols = swizzle_bytes // elem if swizzle_bytes else cols
    if box_cols <= 0 or cols % box_cols != 0:
        raise TmaUnsupported(f"{cols} columns are not whole {swizzle_bytes}-byte swizzle rows")
    if (box_cols * elem) % 16 != 0:
        raise TmaUnsupported(f"a box row of {box_cols * elem} bytes is not a multiple of 16")
    if not 1 <= rows <= MAX_BOX or box_cols > MAX_BOX:
        raise TmaUnsupported(f"a {rows} x {box_cols} box exceeds TMA's {MAX_BOX} elements per dim")
    if swizzle_bytes and rows % 8 != 0:
        raise TmaUnsupported(f"{rows} rows are not whole 8-row swizzle atoms")
    box_bytes = rows * box_cols * elem
    boxes = tuple(Box(col=b * box_cols, smem_offset=b * box_bytes) for b in range(cols // box_cols))
    return BoxPlan(dtype, rows, cols, rows, box_cols, swizzle_bytes, boxes, rank, row_dim)


@dataclasses.dataclass(frozen=True)
class TensorMapArgs:
    """The arguments of ``cuTensorMapEncodeTiled`` (cuda.h order), innermost dim first."""

    data_type: int
    rank: int
    global_address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def encode_arguments(
    plan: BoxPlan, data_ptr: int, shape: Sequence[int], strides: Sequence[int]
) -> TensorMapArgs:
    """``cuTensorMapEncodeTiled`` arguments for a tensor of ``shape``/``strides``.

    ``shape`` and ``strides`` are in the tensor's own (row-major, outer first) order and
    strides are in elements, as torch reports them. Raises ``CudaLaunchError`` when the
    tensor breaks TMA's rules (the kernel was compiled for TMA, so there is no fallback
    at this point).
    """
    elem = ELEMENT_BYTES[plan.dtype]
    if len(shape) != plan.rank or len(strides) != plan.rank:
        raise CudaLaunchError(
            f"the kernel's TMA tensor map is {plan.rank}-D, got shape {list(shape)}",
            hint="pass a tensor of the rank the kernel was compiled for",
        )
    dims = [int(s) for s in shape]
    steps = [int(s) for s in strides]
    if steps[-1] != 1:
        raise CudaLaunchError(
            f"TMA needs a contiguous inner dim, got strides {list(strides)}", hint="pass x.contiguous()"
        )
    if data_ptr % 16 != 0 or (plan.swizzle_bytes and data_ptr % 128 != 0):
        need = 128 if plan.swizzle_bytes else 16
        raise CudaLaunchError(
            f"TMA needs a {need}-byte aligned tensor address, got {data_ptr:#x}",
            hint="pass a tensor that owns its storage (not an offset view), or compile without "
            "warp specialization (pass_configs={'tl.disable_warp_specialized': True})",
        )
    if not all(1 <= d <= 1 << 32 for d in dims):
        raise CudaLaunchError(f"TMA cannot describe a tensor of shape {list(shape)}")
    # Byte strides of dims 1.. innermost first. A dim of extent 1 is never stepped over, so
    # its stride is free: give it the next dim's span, which meets the 16-byte rule.
    outer_bytes: list[int] = []
    span = -(-dims[-1] * elem // 16) * 16
    for d in range(plan.rank - 2, -1, -1):
        stride_bytes = steps[d] * elem
        if dims[d] > 1:
            if stride_bytes % 16 != 0 or stride_bytes >= 1 << 40:
                raise CudaLaunchError(
                    f"TMA needs strides that are multiples of 16 bytes, got {stride_bytes} (dim {d})",
                    hint="pad the inner dimension to a multiple of 16 bytes",
                )
        else:
            stride_bytes = span
        outer_bytes.append(stride_bytes)
        span = stride_bytes * dims[d]
    return TensorMapArgs(
        data_type=DATA_TYPES[plan.dtype],
        rank=plan.rank,
        global_address=data_ptr,
        global_dim=tuple(reversed(dims)),
        global_strides=tuple(outer_bytes),
        box_dim=plan.box_dim,
        element_strides=(1,) * plan.rank,
        interleave=INTERLEAVE_NONE,
        swizzle=SWIZZLE_MODES[plan.swizzle_bytes],
        l2_promotion=L2_PROMOTION_128B,
        oob_fill=OOB_FILL_ZERO,
    )


@functools.cache
def _encoder() -> Any:
    """``cuTensorMapEncodeTiled`` of the process's ``libcuda``, its prototype set once."""
    try:
        lib = ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")
    except OSError as exc:
        raise CudaLaunchError("TMA tensor maps need the CUDA driver (libcuda)") from exc
    fn = lib.cuTensorMapEncodeTiled
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    fn.argtypes = [
        ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
        ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    fn.restype = ctypes.c_int
    return fn


def aligned_map() -> tuple[Any, int]:
    """``(owner, address)``: 128 bytes at a 64-byte aligned address, kept alive by ``owner``."""
    raw = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
    base = ctypes.addressof(raw)
    return raw, base + (-base) % TENSOR_MAP_ALIGN


def encode(args: TensorMapArgs) -> tuple[Any, int]:
    """Run ``cuTensorMapEncodeTiled``; ``(owner, address)`` of the encoded 64-byte aligned map."""
    fn = _encoder()
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    owner, address = aligned_map()
    rank = args.rank
    err = fn(
        ctypes.c_void_p(address),
        args.data_type,
        rank,
        ctypes.c_void_p(args.global_address),
        (u64 * rank)(*args.global_dim),
        (u64 * max(rank - 1, 1))(*args.global_strides),
        (u32 * rank)(*args.box_dim),
        (u32 * rank)(*args.element_strides),
        args.interleave,
        args.swizzle,
        args.l2_promotion,
        args.oob_fill,
    )
    if err != 0:
        raise CudaLaunchError(
            f"cuTensorMapEncodeTiled failed with CUresult {err} for {args}",
            hint="TMA needs sm_90+, a 16-byte aligned tensor and 16-byte multiple row strides",
        )
    return owner, address


class TensorMapPacker:
    """The encoded maps of one tensor-map parameter, by (data pointer, shape, strides).

    A launcher calls it per launch with the tensor's address and the shape and strides its
    argument signature fixes; only a new key encodes (``encoder``: the driver's
    ``cuTensorMapEncodeTiled``), so back-to-back calls on the same tensors, or on tensors the
    caching allocator hands the same address again, encode nothing. A call answers the map's
    owner and address: a launch plan that passes the map keeps the owner, so a map this cache
    drops stays alive while a plan still points at it.
    """

    def __init__(self, plan: BoxPlan, encoder: Any = None, limit: int = 64) -> None:
        self.plan = plan
        self.encoder = encoder if encoder is not None else encode
        self._maps: dict[tuple[int, tuple[int, ...], tuple[int, ...]], tuple[Any, int]] = {}
        self._limit = limit

    def __call__(self, data_ptr: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[Any, int]:
        key = (data_ptr, shape, strides)
        found = self._maps.get(key)
        if found is None:
            if len(self._maps) >= self._limit:
                self._maps.pop(next(iter(self._maps)))
            found = self.encoder(encode_arguments(self.plan, data_ptr, shape, strides))
            self._maps[key] = found
        return found


# ---------------------------------------------------------------- kernel parameters
def map_param_name(tensor: str) -> str:
    """The kernel parameter that carries ``tensor``'s tensor map (``codegen`` declares it; the
    lowering names it in a placeholder call ``tile_tmap_<tensor>()`` until then)."""
    return f"tile_tmap_{tensor}"


def plan_to_json(plan: BoxPlan) -> dict[str, Any]:
    return {"rows": plan.rows, "cols": plan.cols, "dtype": plan.dtype, "swizzle_bytes": plan.swizzle_bytes,
            "rank": plan.rank, "row_dim": plan.row_dim}  # fmt: skip


def plan_from_json(data: dict[str, Any]) -> BoxPlan:
    return plan_boxes(int(data["rows"]), int(data["cols"]), str(data["dtype"]), int(data["swizzle_bytes"]),
                      int(data.get("rank", 2)), int(data.get("row_dim", 0)))  # fmt: skip


WARP_SPECIALIZE_OPTION = "warp_specialize"
"""Target option: ``"1"``/``"0"`` turns the TMA + warp-specialized pipeline on/off for this kernel."""
DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
"""TileLang's pass config key (``tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED``): true turns it off."""
DISABLE_TMA_LOWER = "tl.disable_tma_lower"
"""TileLang's pass config key for no TMA; TMA loads come only with warp specialization here, so true
turns that off too."""


def _flag_option(target: Any, name: str) -> bool | None:
    from tile.ir.errors import TargetError

    from .. import env

    value = target.option(name) if hasattr(target, "option") else None
    if value is None:
        return None
    try:
        return env.parse_flag(value)
    except ValueError as exc:
        raise TargetError(
            f"target option {name}={value!r} is not a switch: {exc}",
            hint=f'write {{"{name}": "1"}} or {{"{name}": "0"}} (or True/False in pass_configs)',
        ) from None


def warp_specialize_enabled(target: Any) -> bool:
    """Whether ``target`` asks for the TMA + warp-specialized pipeline (sm_90a, where it applies).

    The kernel's own setting wins: the target option ``warp_specialize``, else the pass
    configs ``tl.disable_warp_specialized`` / ``tl.disable_tma_lower`` when true
    (``tile.lang.compile`` passes ``pass_configs`` as target options, so all of them are in
    the kernel cache key).
    Then the ``TILE_CUDA_WARP_SPECIALIZE`` environment variable; by default it is on.
    """
    from .. import env

    explicit = _flag_option(target, WARP_SPECIALIZE_OPTION)
    if explicit is not None:
        return explicit
    disabled = [_flag_option(target, key) for key in (DISABLE_WARP_SPECIALIZED, DISABLE_TMA_LOWER)]
    if any(disabled):
        return False  # False says "not disabled": the env var or the default decides, as in TileLang
    from_env = env.TILE_CUDA_WARP_SPECIALIZE.get()
    return True if from_env is None else from_env
