"""``T.*`` names of TileLang that need hardware features tile does not target, or that are
TileLang's own forms of operations tile does differently (source kernels).

Each is a callable that raises ``UnsupportedOnTargetError`` saying what the feature is,
which GPUs have it, and what to write instead, so a TileLang program that uses one
fails at that line with a reason rather than with a missing-attribute error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from tile.ir.errors import UnsupportedOnTargetError

from .naming import named
from .session import current_location

_BLACKWELL = (
    "needs Blackwell's tcgen05 tensor cores and tensor memory (sm_100); tile targets sm_75-sm_90a and gfx90a",
    "use T.gemm, which lowers to mma.sync (sm_80+) or wgmma (sm_90a)",
)
_BLOCKSCALED = (
    "needs block-scaled MMA (sm_100's tcgen05 / sm_120's mma with scale factors); tile does not target it",
    "dequantize the scales into the operands and use T.gemm",
)
_CLC = (
    "needs cluster launch control (sm_100); tile does not target it",
    "use a persistent loop over tiles in an ordinary T.Kernel",
)
_CLUSTERS = (
    "needs thread-block clusters (sm_90+ cluster launch and distributed shared memory); "
    "tile launches ordinary grids without clusters",
    "share data between blocks through global memory, or keep the work within one block",
)

UNSUPPORTED: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        (
            "tcgen05_gemm",
            "tcgen05_gemm_sp",
            "tcgen05_mma",
            "tcgen05_mma_arrive",
            "tcgen05_cp_warpx4",
            "tcgen05_sf_warp_transpose",
            "tcgen05_before_thread_sync",
            "tcgen05_after_thread_sync",
            "alloc_tmem",
            "deallocate_tmem",
            "alloc_tcgen05_smem_desc",
            "compute_umma_descriptor",
            "tma_load_2sm",
        ),
        _BLACKWELL,
    ),
    **dict.fromkeys(
        (
            "tcgen05_gemm_blockscaled",
            "tcgen05_mma_blockscaled",
            "ptx_tcgen05_mma_blockscaled_ss",
            "mma_gemm_blockscaled",
            "ptx_mma_block_scale",
            "make_blockscaled_gemm_layout",
        ),
        _BLOCKSCALED,
    ),
    **dict.fromkeys(
        (
            "clc_try_cancel",
            "clc_try_cancel_multicast",
            "clc_is_canceled",
            "clc_get_first_ctaid_x",
            "clc_get_first_ctaid_y",
            "clc_get_first_ctaid_z",
        ),
        _CLC,
    ),
    **dict.fromkeys(
        (
            "ClusterKernel",
            "alloc_cluster_barrier",
            "block_rank_in_cluster",
            "cluster_arrive",
            "cluster_arrive_relaxed",
            "cluster_sync",
            "cluster_wait",
            "copy_cluster",
            "ptx_arrive_cluster_barrier",
        ),
        _CLUSTERS,
    ),
}
UNSUPPORTED.update(
    dict.fromkeys(
        ("tma_gather4", "tma_scatter4", "tma_gather4_bytes"),
        (
            "needs TMA gather4/scatter4 (cp.async.bulk.tensor tile::gather4, sm_100); "
            "tile targets sm_75-sm_90a and gfx90a",
            "copy the rows one by one with T.copy(A[row_index[i], k0], S[i, 0])",
        ),
    )
)
UNSUPPORTED["CUDASourceCodeKernel"] = (
    "runs a hand-written CUDA __global__ function as the kernel; tile's backends compile the "
    "kernels tile generates, not foreign source",
    "write the kernel body with T.* operations, or launch the CUDA source outside tile "
    "(e.g. torch.utils.cpp_extension.load_inline or cupy.RawKernel)",
)
"""Name -> (why it cannot run, what to write instead)."""


def _refuser(name: str, why: str, hint: str) -> Callable[..., NoReturn]:
    def refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise UnsupportedOnTargetError(f"T.{name} {why}", hint=hint, location=current_location())

    return named(refuse, name, f"Not available in tile: {why}. Instead: {hint}.")


REFUSERS: dict[str, Callable[..., NoReturn]] = {
    name: _refuser(name, why, hint) for name, (why, hint) in UNSUPPORTED.items()
}
