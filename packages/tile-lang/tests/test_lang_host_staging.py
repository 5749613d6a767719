"""numpy arrays on their way to and from a GPU kernel: the dtypes torch.from_numpy refuses.

The staging itself runs on a GPU (tile-backends-cuda's gpu tests); the conversions are
plain CPU code, checked here against the values ml_dtypes gives.
"""

import ml_dtypes
import numpy as np
import pytest
import torch

from tile.lang._src.jit import _to_host, _torch_from_numpy


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_arrays_cross_to_torch_and_back_bit_exact(name):
    values = np.array([1.5, -2.0, 0.25, 3.0, -0.0], dtype=getattr(ml_dtypes, name))
    tensor = _torch_from_numpy(torch, values)
    assert tensor.dtype == getattr(torch, name)
    assert tensor.float().tolist() == values.astype(np.float32).tolist()
    back = _to_host(tensor)
    assert back.dtype == values.dtype
    assert back.tobytes() == values.tobytes()


def test_plain_numpy_dtypes_round_trip():
    values = np.arange(12, dtype=np.float16).reshape(3, 4)
    back = _to_host(_torch_from_numpy(torch, values))
    assert back.dtype == np.float16 and np.array_equal(back, values)
