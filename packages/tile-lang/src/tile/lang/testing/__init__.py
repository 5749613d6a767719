"""``tile.lang.testing`` (TileLang's ``tilelang.testing``): markers, seeds, comparisons.

Example::

    import tile.lang.testing

    @tile.lang.testing.requires_cuda
    def test_gemm(): ...

    if __name__ == "__main__":
        tile.lang.testing.main()
"""

from .._src.tensor_utils import torch_assert_close as torch_assert_close
from .._src.testing import main as main
from .._src.testing import requires_cdna as requires_cdna
from .._src.testing import requires_cuda as requires_cuda
from .._src.testing import requires_cuda_compute_version as requires_cuda_compute_version
from .._src.testing import requires_cuda_compute_version_eq as requires_cuda_compute_version_eq
from .._src.testing import requires_cuda_compute_version_ge as requires_cuda_compute_version_ge
from .._src.testing import requires_cuda_compute_version_gt as requires_cuda_compute_version_gt
from .._src.testing import requires_cuda_compute_version_le as requires_cuda_compute_version_le
from .._src.testing import requires_cuda_compute_version_lt as requires_cuda_compute_version_lt
from .._src.testing import requires_cuda_or_cdna as requires_cuda_or_cdna
from .._src.testing import requires_gfx950 as requires_gfx950
from .._src.testing import requires_llvm as requires_llvm
from .._src.testing import requires_metal as requires_metal
from .._src.testing import requires_package as requires_package
from .._src.testing import requires_rocm as requires_rocm
from .._src.testing import set_random_seed as set_random_seed
