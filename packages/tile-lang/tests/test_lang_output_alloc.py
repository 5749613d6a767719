"""Large CPU torch outputs come from numpy memory; small ones from torch; both are ordinary tensors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _lang_kernels import row_scale  # noqa: E402

import tile.lang as tilelang  # noqa: E402
from tile.lang._src.arguments import LARGE_OUTPUT_BYTES, torch_cpu_empty  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int8])
@pytest.mark.parametrize("shape", [(3, 5), (1024, 1024 + 3)])
def test_torch_cpu_empty_is_a_plain_contiguous_tensor(shape, dtype):
    out = torch_cpu_empty(shape, dtype)
    assert out.shape == shape and out.dtype == dtype and out.is_contiguous() and out.device.type == "cpu"
    out.fill_(3)
    assert float(out.float().sum()) == 3 * shape[0] * shape[1]
    large = shape[0] * shape[1] * dtype.itemsize >= LARGE_OUTPUT_BYTES
    assert (out.untyped_storage().nbytes() == out.numel() * dtype.itemsize) or not large


def test_kernel_outputs_for_torch_inputs_are_torch_tensors_with_the_right_values():
    n = 512  # 512 x 768 fp32 = 1.5 MiB: the numpy-backed path

    kernel = tilelang.compile(row_scale(n, 768, 2.0, rows=32), out_idx=[-1], target="cpu")
    a = torch.randn(n, 768)
    out = kernel(a)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), (a * 2).numpy())
    del a
    again = kernel(torch.ones(n, 768))
    assert float(again.sum()) == 2 * n * 768
