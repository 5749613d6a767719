"""``tile.lang.cuda.intrinsics.layout``: TileLang's module path of the MMA layout helpers."""

from . import mma_layout as mma_layout
from . import utils as utils
