"""``tile.lang.cuda.intrinsics.macro``: TileLang's module path of the MMA code emitters."""

from . import mma_macro_generator as mma_macro_generator
