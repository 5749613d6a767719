"""Devices the carver gives hints for (TileLang's ``carver.arch`` names)."""

from .._src import cuda_driver as driver  # noqa: F401  (TileLang's carver.arch.driver)
from .._src.carver_arch import CDNA as CDNA
from .._src.carver_arch import CPU as CPU
from .._src.carver_arch import CUDA as CUDA
from .._src.carver_arch import TileDevice as TileDevice
from .._src.carver_arch import auto_infer_current_arch as auto_infer_current_arch
