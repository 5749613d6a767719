"""``tile.lang.utils`` (TileLang's ``tilelang.utils``): tensor helpers for tests and benchmarks."""

from . import tensor as tensor
from .tensor import TensorSupplyType as TensorSupplyType
