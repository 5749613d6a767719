"""``tile.lang.rocm.intrinsics``: MFMA operand layouts and instruction sizes (see ``tile.lang.rocm``)."""

from . import mfma_layout as mfma_layout
from . import utils as utils
from .utils import get_mma_micro_size as get_mma_micro_size

__all__ = ["get_mma_micro_size", "mfma_layout", "utils"]
