"""Tensor maps for emulated TMA: the 128 bytes a kernel's ``tile_tensor_map`` parameter holds.

On a GPU the launcher encodes a ``CUtensorMap`` with the driver's
``cuTensorMapEncodeTiled``; under emulation there is no driver, so the same arguments are
packed into the emulator's own layout (``tile_simt_tensor_map`` in ``include/tile_simt.h``),
which ``runtime/simt_hopper.cpp`` reads at each ``cp.async.bulk.tensor``. The checks are
the driver's documented ones, so a map the GPU would refuse is refused here too.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import Any

from .errors import SimtLaunchError

MAGIC = 0x31554D4554494C54
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
"""Bytes per element of each ``CUtensorMapDataType`` code (UINT8 ... TFLOAT32_FTZ)."""
SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
"""Swizzle span in bytes of each ``CUtensorMapSwizzle`` code."""


def encode_tensor_map(
    data_type: int,
    rank: int,
    global_address: int,
    global_dim: Sequence[int],
    global_strides: Sequence[int],
    box_dim: Sequence[int],
    element_strides: Sequence[int],
    interleave: int = 0,
    swizzle: int = 0,
    l2_promotion: int = 0,
    oob_fill: int = 0,
) -> bytes:
    """The 128 bytes of an emulated tensor map (``cuTensorMapEncodeTiled``'s arguments, same order).

    Dims are innermost first; ``global_strides`` are the byte strides of dims 1..rank-1.

    Raises:
        SimtLaunchError: an argument breaks a rule of ``cuTensorMapEncodeTiled``.

    Example::

        raw = encode_tensor_map(6, 2, a.ctypes.data, (64, 128), (128,), (64, 32), (1, 1), swizzle=3)
    """
    del l2_promotion  # a cache hint: nothing to emulate

    def refuse(why: str) -> SimtLaunchError:
        return SimtLaunchError(
            f"cannot encode a TMA tensor map: {why}",
            hint="the same tensor would be refused by cuTensorMapEncodeTiled on a GPU",
        )

    if data_type not in ELEMENT_BYTES:
        raise refuse(f"unknown data type code {data_type}")
    if not 1 <= rank <= 5:
        raise refuse(f"rank {rank} is not in 1..5")
    if len(global_dim) != rank or len(box_dim) != rank or len(element_strides) != rank:
        raise refuse("global_dim, box_dim and element_strides need one entry per dim")
    if len(global_strides) != rank - 1:
        raise refuse(f"a rank-{rank} map takes {rank - 1} global strides")
    if swizzle not in SWIZZLE_SPAN:
        raise refuse(f"unknown swizzle code {swizzle}")
    if interleave != 0:
        raise refuse("interleaved layouts are not emulated")
    elem = ELEMENT_BYTES[data_type]
    if global_address % 16:
        raise refuse(f"the global address {global_address:#x} is not 16-byte aligned")
    if any(not 1 <= d <= 1 << 32 for d in global_dim):
        raise refuse(f"global dims {list(global_dim)} must be in [1, 2^32]")
    if any(s % 16 or s >= 1 << 40 or s <= 0 for s in global_strides):
        raise refuse(f"global strides {list(global_strides)} must be positive multiples of 16 below 2^40")
    if any(not 1 <= b <= 256 for b in box_dim):
        raise refuse(f"box dims {list(box_dim)} must be in [1, 256]")
    if any(not 1 <= e <= 8 for e in element_strides):
        raise refuse(f"element strides {list(element_strides)} must be in [1, 8]")
    inner = box_dim[0] * elem
    if inner % 16:
        raise refuse(f"the inner box dim is {inner} bytes, not a multiple of 16")
    span = SWIZZLE_SPAN[swizzle]
    if span and inner > span:
        raise refuse(f"the inner box dim ({inner} bytes) exceeds the {span}-byte swizzle span")
    raw = struct.pack(
        "<QQBBBBBB2x5Q4Q6I8B",
        MAGIC,
        global_address,
        rank,
        elem,
        swizzle,
        oob_fill,
        interleave,
        data_type,
        *(list(global_dim) + [1] * (5 - rank)),
        *(list(global_strides) + [0] * (4 - len(global_strides))),
        *(list(box_dim) + [1] * (6 - rank)),
        *(list(element_strides) + [1] * (8 - rank)),
    )
    assert len(raw) == TENSOR_MAP_BYTES
    return raw


class TensorMapArgument:
    """A 64-byte aligned copy of an encoded map, passed to ``SimtKernel.launch`` as a by-value argument."""

    def __init__(self, raw: bytes) -> None:
        self._storage = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
        base = ctypes.addressof(self._storage)
        address = base + (-base) % TENSOR_MAP_ALIGN
        ctypes.memmove(address, raw, TENSOR_MAP_BYTES)
        self.value: Any = (ctypes.c_ubyte * TENSOR_MAP_BYTES).from_address(address)
