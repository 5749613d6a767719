"""``carver.matmul_analysis``: the compute-capability parser the GEMM rules share with
``carver.arch.cuda`` (one definition: ``check_sm_version`` is that module's)."""

from .arch.cuda import check_sm_version as check_sm_version

__all__ = ["check_sm_version"]
