"""A kernel whose body lowers to no device code (TileLang's issue 1810; ``T.Kernel(1): pass``).

TVM splits no device function off such a body, and code generation stopped ("expected one
device module, got 0"). ``tile.ir.gpu.codegen`` gives it an empty ``__global__`` function
launched over an empty grid: a call checks its arguments and returns.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import KernelArgumentError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]


@T.prim_func
def hints_only(A: T.Tensor((4,), "float16")):
    with T.Kernel():
        T.annotate_l2_hit_ratio({A: 0.9})
        T.evaluate(0)


def test_kernel_with_no_device_code_runs_and_checks_arguments() -> None:
    kernel = tilelang.compile(hints_only, target={"kind": "cuda", "arch": "sm_80"})
    assert "__global__ void" in kernel.get_kernel_source()
    a = np.arange(4, dtype=np.float16)
    assert kernel(a) is None
    np.testing.assert_array_equal(a, np.arange(4, dtype=np.float16))  # untouched
    with pytest.raises(KernelArgumentError, match="shape"):
        kernel(np.zeros(5, np.float16))
