"""Devices the carver gives hints for (TileLang's ``carver.arch`` names).

``cuda`` (``check_sm_version`` and the generation predicates), ``cdna``, ``cpu`` and
``driver.cuda_driver`` are submodules, as in TileLang.
"""

from ..._src.carver_arch import CDNA as CDNA
from ..._src.carver_arch import CPU as CPU
from ..._src.carver_arch import CUDA as CUDA
from ..._src.carver_arch import TileDevice as TileDevice
from ..._src.carver_arch import auto_infer_current_arch as auto_infer_current_arch
from . import cdna as cdna
from . import cpu as cpu
from . import cuda as cuda
from . import driver as driver
from .cdna import is_cdna_arch as is_cdna_arch
from .cpu import is_cpu_arch as is_cpu_arch
from .cuda import check_sm_version as check_sm_version
from .cuda import has_mma_support as has_mma_support
from .cuda import is_ada_arch as is_ada_arch
from .cuda import is_ampere_arch as is_ampere_arch
from .cuda import is_cuda_arch as is_cuda_arch
from .cuda import is_hopper_arch as is_hopper_arch
from .cuda import is_volta_arch as is_volta_arch
