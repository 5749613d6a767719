"""tile.ops: operators written in tile.lang, for numpy arrays and torch tensors.

``import tile.ops`` gives the ops (``matmul``, ``flash_attention``, ``flash_decode``,
``mla_decode``, ``rms_norm``, ``layer_norm``, ``softmax``, ``dequant_matmul``, ``chunk_state``,
``chunk_scan``) and, when torch is installed, registers each as ``torch.ops.tile.<name>``
(autograd and ``torch.compile`` included). The kernel programs themselves are in the
submodules (``tile.ops.gemm``, ``tile.ops.attention``, ...); each takes its tiling as keyword
arguments or as one ``Tiling``.
"""

from ._src.api import chunk_scan as chunk_scan
from ._src.api import chunk_state as chunk_state
from ._src.api import dequant_matmul as dequant_matmul
from ._src.api import flash_attention as flash_attention
from ._src.api import flash_decode as flash_decode
from ._src.api import layer_norm as layer_norm
from ._src.api import matmul as matmul
from ._src.api import mla_decode as mla_decode
from ._src.api import rms_norm as rms_norm
from ._src.api import softmax as softmax
from ._src.configs import Tiling as Tiling
from ._src.errors import OpArgumentError as OpArgumentError
from ._src.quant import dequantize_reference as dequantize_reference
from ._src.quant import pack_codes as pack_codes

try:
    import torch as _torch  # noqa: F401
except ImportError:  # tile.ops works on numpy arrays without torch
    pass
else:
    from ._src import torch_ops as _torch_ops  # noqa: F401  (registers torch.ops.tile.*)
