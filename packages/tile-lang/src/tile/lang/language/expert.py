"""``import tile.lang.language.expert as TX``: the expert tier.

API policy: the expert tier gives thread-level and machine-level control that the
developer tier (``tile.lang.language``) leaves to the compiler: reading the thread
index (``get_thread_binding``), explicit buffer layouts (``Layout``, ``Fragment``,
``annotate_layout``) and calls into external code (``import_source`` +
``call_extern``). Programs using it give up portability: each name documents the
targets that honour it, and a backend that cannot honour one rejects the kernel
with ``UnsupportedOnTargetError`` (the CPU runs ``import_source``/``call_extern``
and explicit layouts, and rejects thread-id reads). The synchronisation names (mbarriers,
``T.ws``, warp votes/shuffles, ``cp.async``) are CUDA-only; see ``_src/cuda_expert.py``.
Names here may change between minor versions; the developer tier is the stable surface.

Every name is also reachable as ``T.<name>`` for TileLang compatibility.
"""

from .._src.builtins import get_thread_binding as get_thread_binding
from .._src.cuda_expert import activemask as activemask
from .._src.cuda_expert import all_sync as all_sync
from .._src.cuda_expert import alloc_barrier as alloc_barrier
from .._src.cuda_expert import any_sync as any_sync
from .._src.cuda_expert import ballot_sync as ballot_sync
from .._src.cuda_expert import barrier_arrive as barrier_arrive
from .._src.cuda_expert import barrier_wait as barrier_wait
from .._src.cuda_expert import fence_proxy_async as fence_proxy_async
from .._src.cuda_expert import get_lane_idx as get_lane_idx
from .._src.cuda_expert import get_warp_group_idx as get_warp_group_idx
from .._src.cuda_expert import get_warp_idx as get_warp_idx
from .._src.cuda_expert import mbarrier_arrive as mbarrier_arrive
from .._src.cuda_expert import mbarrier_arrive_expect_tx as mbarrier_arrive_expect_tx
from .._src.cuda_expert import mbarrier_wait_parity as mbarrier_wait_parity
from .._src.cuda_expert import ptx_commit_group as ptx_commit_group
from .._src.cuda_expert import ptx_cp_async as ptx_cp_async
from .._src.cuda_expert import ptx_wait_group as ptx_wait_group
from .._src.cuda_expert import set_max_nreg as set_max_nreg
from .._src.cuda_expert import shfl_sync as shfl_sync
from .._src.cuda_expert import shuffle_elect as shuffle_elect
from .._src.cuda_expert import sync_warp as sync_warp
from .._src.cuda_expert import ws as ws
from .._src.expert import call_extern as call_extern
from .._src.expert import import_source as import_source
from .._src.schedule import annotate_layout as annotate_layout
from .._src.suggestions import missing_name_hook as _missing_name_hook
from .._src.warp_mma import ptx_ldmatrix as ptx_ldmatrix
from .._src.warp_mma import ptx_mma as ptx_mma
from ..layout import Fragment as Fragment
from ..layout import Layout as Layout

__all__ = [
    "Fragment",
    "Layout",
    "activemask",
    "all_sync",
    "alloc_barrier",
    "annotate_layout",
    "any_sync",
    "ballot_sync",
    "barrier_arrive",
    "barrier_wait",
    "call_extern",
    "fence_proxy_async",
    "get_lane_idx",
    "get_thread_binding",
    "get_warp_group_idx",
    "get_warp_idx",
    "import_source",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_wait_parity",
    "ptx_commit_group",
    "ptx_cp_async",
    "ptx_wait_group",
    "set_max_nreg",
    "shfl_sync",
    "shuffle_elect",
    "sync_warp",
    "ws",
]

__getattr__ = _missing_name_hook(__name__)
