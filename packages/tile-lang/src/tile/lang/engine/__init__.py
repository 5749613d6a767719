"""TileLang's ``tilelang.engine`` names that programs call: the device-source callbacks
(``tile.lang.engine.callback``). TileLang's lowering entry points (``lower``, ...) are not
here: tile compiles with ``tile.lang.compile``."""

from . import callback as callback
from .callback import register_cuda_postproc_callback as register_cuda_postproc_callback
from .callback import register_hip_postproc_callback as register_hip_postproc_callback

__all__ = ["callback", "register_cuda_postproc_callback", "register_hip_postproc_callback"]
