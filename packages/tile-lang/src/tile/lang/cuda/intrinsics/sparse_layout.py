"""``tile.lang.cuda.intrinsics.sparse_layout`` (TileLang's module of that name): the 2:4
structured-sparse format's group sizes and metadata factors, as ``T.gemm_sp`` reads them.

* ``GROUP_CONFIG[dtype]`` is ``(kept, group)``: ``kept`` values are stored out of each
  ``group`` consecutive elements of a row along K (``(2, 4)`` for 8- and 16-bit types,
  ``(1, 2)`` for ``float32``).
* ``get_e_factor(a_dtype, meta_dtype)``: how many dense K elements one metadata element
  describes (four metadata bits per group).
* ``get_e_replicate_factor(a_dtype)``: how many consecutive lanes of a warp read the same
  metadata register in PTX's ``mma.sp`` (the "sparsity selector" picks one lane of each pair
  for 16-bit operands, so two share it; 8-bit operands give every lane its own).

tile runs ``T.gemm_sp`` on the dense instructions (``tile.lang._src.compat_sparse``), so the
replication factor describes the hardware format a compressor writes, not tile's reads.

Example::

    >>> import tile.lang.language as T
    >>> get_e_factor(T.float16, T.int16), get_e_factor(T.float32, T.int32), get_e_replicate_factor(T.int8)
    (16, 16, 1)
"""

from __future__ import annotations

from typing import Any

from ..._src.compat_lang import dtype
from ..._src.compat_sparse import BITS_PER_GROUP, metadata_factor, sparsity_of

GROUP_CONFIG: dict[dtype, tuple[int, int]] = {
    dtype(name): sparsity_of(name)
    for name in ("float32", "float16", "bfloat16", "int8", "uint8", "float8_e4m3fn", "float8_e5m2")
}
"""``(kept, group)`` per element type of the sparse operand."""


def get_e_factor(a_dtype: Any, meta_dtype: Any) -> int:
    """Dense K elements per metadata element of ``meta_dtype`` (``BITS_PER_GROUP`` bits a group)."""
    return metadata_factor(str(dtype(a_dtype)), str(dtype(meta_dtype)))


def get_e_replicate_factor(a_dtype: Any) -> int:
    """Lanes of a warp sharing one metadata register in ``mma.sp``: 2 for 16- and 32-bit
    operands (one lane of each pair supplies it), 1 for 8-bit ones."""
    return 1 if dtype(a_dtype).bits <= 8 else 2


__all__ = ["BITS_PER_GROUP", "GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]
