"""``tile.lang.cuda.intrinsics.macro.mma_macro_generator``: ``TensorCoreIntrinEmitter``."""

from ...._src.mma_emitter import TensorCoreIntrinEmitter as TensorCoreIntrinEmitter
