"""Tile operators: IR nodes (registered TVM Ops) with a Python class each."""

from .atomic import ATOMIC_KINDS as ATOMIC_KINDS
from .atomic import ATOMIC_UPDATE as ATOMIC_UPDATE
from .atomic import Atomic as Atomic
from .base import LowerContext as LowerContext
from .base import TileOp as TileOp
from .base import decode as decode
from .base import op_class_of as op_class_of
from .base import tile_op as tile_op
from .copy import Copy as Copy
from .cumsum import Cumsum as Cumsum
from .fill import Fill as Fill
from .gemm import Gemm as Gemm
from .gemm import lower_gemm_loops as lower_gemm_loops
from .reduce import REDUCE_KINDS as REDUCE_KINDS
from .reduce import Reduce as Reduce
from .reduce import reduce_combine as reduce_combine
from .reduce import reduce_identity as reduce_identity
from .reduce import reduce_start as reduce_start
from .region import REGION_OP as REGION_OP
from .region import Region as Region
from .registry import find_lowering as find_lowering
from .registry import register_lowering as register_lowering
