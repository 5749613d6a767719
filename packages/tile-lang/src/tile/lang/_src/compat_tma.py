"""TileLang's hand-written TMA loads (expert tier, CUDA sm_90): ``T.create_tma_descriptor`` and
``T.tma_load``.

``T.create_tma_descriptor(data_type, rank, A.data, dims..., byte_strides..., box...,
element_strides..., interleave, swizzle, l2_promotion, oob_fill)`` takes
``cuTensorMapEncodeTiled``'s arguments (innermost dim first). tile checks them against the
tensor ``A`` (its element type, shape and row-major strides) and hands the box to the CUDA
backend, whose launcher encodes the tensor map from the tensor actually passed (tile's own
TMA copies work the same way); the call stands for that map. ``T.tma_load(map, bar, dst,
c0, c1, ...)`` loads the box at coordinates ``c0`` (innermost), ``c1``, ... into shared
memory at ``dst`` and completes its bytes on the mbarrier ``bar`` (the program announces
them with ``T.mbarrier_expect_tx`` / ``T.mbarrier_arrive_expect_tx``); parts of the box
outside the tensor land as zeros. One thread issues it.

Limits (typed errors): one map per tensor per kernel, element strides 1, no interleave,
zero out-of-bounds fill, a swizzled box exactly one swizzle span wide.
"""

from __future__ import annotations

from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.annotations import TMA_MAPS

from ..errors import TileTypeError
from .compat_wgmma import _buffer_of_data
from .session import current_session

TENSOR_MAP_DATA_TYPES = {
    0: ("uint8", "int8"),
    1: ("uint16", "int16"),
    2: ("uint32",),
    3: ("int32",),
    4: ("uint64",),
    5: ("int64",),
    6: ("float16",),
    7: ("float32",),
    8: ("float64",),
    9: ("bfloat16",),
}
"""``CUtensorMapDataType`` codes (cuda.h) -> the element types they copy."""

SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
"""``CUtensorMapSwizzle`` codes (cuda.h) -> swizzle width in bytes."""

_MAP_CALL = "tile_tmap_"  # the CUDA backend's placeholder for a tensor's map parameter


class TensorMap:
    """What ``T.create_tma_descriptor`` gives: the map of one kernel tensor (bindable to a name)."""

    _is_meta_class = True
    """TVMScript binds it as a Python value: ``tmap = T.create_tma_descriptor(...)`` works."""

    def __init__(self, tensor: str, rank: int) -> None:
        self.tensor = tensor
        self.rank = rank

    def address(self) -> Any:
        """The CUDA backend's placeholder for the map parameter it adds to the kernel."""
        return tirx.call_extern("handle", _MAP_CALL + self.tensor)


def _int(value: Any, what: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    raise TileTypeError(
        f"T.create_tma_descriptor: {what} must be a constant, got {value}", hint="pass an int"
    )


def _fail(message: str, hint: str) -> TileTypeError:
    return TileTypeError(f"T.create_tma_descriptor: {message}", hint=hint)


def create_tma_descriptor(data_type: Any, rank: Any, global_address: Any, *rest: Any) -> TensorMap:
    """The TMA tensor map of the tensor at ``global_address`` (``A.data``), for ``T.tma_load``."""
    code, n = _int(data_type, "data_type"), _int(rank, "rank")
    if not 2 <= n <= 5 or len(rest) != 4 * n + 4:
        raise _fail(
            f"rank {n} with {len(rest) + 3} arguments",
            hint="pass data_type, rank (2-5), A.data, then rank dims, strides, box and element strides "
            "(innermost first), interleave, swizzle, l2_promotion, oob_fill: 7 + 4 * rank in all",
        )
    tensor = _buffer_of_data(global_address)
    if not tirx.is_buffer_var(tensor) or len(tensor.shape) != n:
        raise _fail("the address must be a kernel tensor's .data of that rank", hint="pass A.data")
    dtype = str(tensor.dtype)
    if dtype not in TENSOR_MAP_DATA_TYPES.get(code, ()):
        raise _fail(
            f"data type code {code} does not copy {tensor.name}'s {dtype}", hint="use its CUtensorMapDataType"
        )
    values = [_int(v, "every dim, stride and box") for v in rest]
    dims, strides, box, steps = (values[i * n : (i + 1) * n] for i in range(4))
    interleave, swizzle, _l2_promotion, oob_fill = values[4 * n :]
    shape = [int(d) for d in reversed(tensor.shape)]  # innermost first, as the map lists them
    elem = _bytes(dtype)
    row_major = [elem]
    for extent in shape[:-1]:
        row_major.append(row_major[-1] * extent)
    if dims != shape or strides != row_major:
        raise _fail(
            f"dims {dims} / byte strides {strides} are not {tensor.name}'s "
            f"({shape} / {row_major}, innermost first)",
            hint="describe the whole row-major tensor; the box picks the tile",
        )
    if any(s != 1 for s in steps) or interleave != 0 or oob_fill != 0 or swizzle not in SWIZZLE_BYTES:
        raise _fail(
            "tile's TMA loads use element strides 1, no interleave and zero out-of-bounds fill",
            hint="pass element strides 1, interleave 0, a swizzle code 0-3 and oob_fill 0",
        )
    span = SWIZZLE_BYTES[swizzle]
    if not all(1 <= b <= 256 for b in box):
        raise _fail(f"box {box} has a dim outside [1, 256]", hint="TMA boxes are 1 to 256 elements per dim")
    if any(b != 1 for b in box[2:]):
        raise _fail(
            f"box {box}: tile loads 2-D boxes (outer dims of extent 1)", hint="load one 2-D box per call"
        )
    if (span and box[0] * elem != span) or (not span and (box[0] * elem) % 16):
        raise _fail(
            f"an inner box of {box[0] * elem} bytes with a {span or 'no'}-byte swizzle",
            hint="a swizzled box is one swizzle span wide; an unswizzled one a multiple of 16 bytes",
        )
    plan = {
        "rows": box[1],
        "cols": box[0],
        "dtype": dtype,
        "swizzle_bytes": span,
        "rank": n,
        "row_dim": n - 2,
    }
    attrs = current_session("T.create_tma_descriptor").func_attrs
    maps = dict(attrs.get(TMA_MAPS, {}))
    if maps.get(str(tensor.name), plan) != plan:
        raise _fail(
            f"{tensor.name} already has a tensor map with another box in this kernel",
            hint="use one box shape per tensor in a kernel",
        )
    maps[str(tensor.name)] = plan
    attrs[TMA_MAPS] = maps
    return TensorMap(str(tensor.name), n)


def _bytes(dtype: str) -> int:
    import tvm  # type: ignore[import-untyped]

    return int(tvm.DataType(dtype).bits) // 8


def _pointer(value: Any, what: str) -> Any:
    if tirx.is_buffer_var(value):
        return tirx.address_of(value[tuple(0 for _ in value.shape)])
    if isinstance(value, TensorLoad):
        return tirx.address_of(value)
    if isinstance(value, ir.Expr):
        return value
    raise TileTypeError(
        f"T.tma_load: {what} must be a buffer, an element or a pointer", hint="see T.access_ptr"
    )


def tma_load(descriptor: Any, barrier: Any, destination: Any, *coordinates: Any) -> None:
    """Load the map's box at ``coordinates`` (innermost first; a trailing eviction policy is
    accepted) into shared memory at ``destination``, completing on ``barrier``."""
    if not isinstance(descriptor, TensorMap):
        raise TileTypeError(
            "T.tma_load takes the map from T.create_tma_descriptor(...)",
            hint="pass T.create_tma_descriptor(...) (or a name bound to it) as the first argument",
        )
    coords = list(coordinates[: descriptor.rank])
    if len(coords) != descriptor.rank:
        raise TileTypeError(
            f"T.tma_load: the map of {descriptor.tensor} is {descriptor.rank}-D, "
            f"got {len(coords)} coordinates",
            hint="pass one coordinate per dim, innermost first",
        )
    B.evaluate(
        tirx.call_extern(
            "void",
            f"tile_tma_load_{descriptor.rank}d",
            _pointer(destination, "the destination"),
            descriptor.address(),
            _pointer(barrier, "the barrier"),
            *(tirx.Cast("int32", c) if isinstance(c, ir.Expr) else c for c in coords),
        )
    )
