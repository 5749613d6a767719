"""``tile.lang.rocm`` (TileLang's ``tilelang.rocm``): AMD helpers for hand-written matrix-core code.

``intrinsics.mfma_layout`` places the elements of an MFMA operand block on a wavefront's 64
lanes; ``intrinsics.utils.get_mma_micro_size`` gives the block of one MFMA instruction. TileLang's
macro generators (``mfma_macro_generator``, ``wmma_macro_generator``) are not provided:
``T.gemm`` picks tile's MFMA instructions on AMD targets.
"""

from . import intrinsics as intrinsics

__all__ = ["intrinsics"]
