"""Config hints from the device's facts (TileLang's ``carver``): ranked tile configs per op.

Example::

    from tile.lang.carver.arch import CUDA
    from tile.lang.carver.template import MatmulTemplate

    hints = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float16", accum_dtype="float32") \\
        .with_arch(CUDA({"kind": "cuda", "arch": "sm_90a"})).recommend_hints(topk=8)
    configs = [h.config for h in hints]   # block_M, block_N, block_K, num_stages, threads

``recommend_config(op, target, **problem)`` answers "which config for this op here" in one call
(the op library's defaults); ``recommend_configs`` gives a ``configs=`` list for ``@autotune``.
"""

from .._src.carver_arch import CDNA as CDNA
from .._src.carver_arch import CPU as CPU
from .._src.carver_arch import CUDA as CUDA
from .._src.carver_arch import TileDevice as TileDevice
from .._src.carver_templates import ElementwiseTemplate as ElementwiseTemplate
from .._src.carver_templates import FlashAttentionTemplate as FlashAttentionTemplate
from .._src.carver_templates import GEMVTemplate as GEMVTemplate
from .._src.carver_templates import GeneralReductionTemplate as GeneralReductionTemplate
from .._src.carver_templates import Hint as Hint
from .._src.carver_templates import HintError as HintError
from .._src.carver_templates import MatmulTemplate as MatmulTemplate
from .._src.carver_templates import recommend_config as recommend_config
from .._src.carver_templates import recommend_configs as recommend_configs
from . import arch as arch
from . import template as template
