"""``tile.lang.utils.tensor`` (TileLang's ``tilelang.utils.tensor``).

Example::

    from tile.lang.utils.tensor import torch_assert_close
    torch_assert_close(out, ref, rtol=1e-2, atol=1e-2)
"""

from .._src.profiler import TensorSupplyType as TensorSupplyType
from .._src.tensor_utils import TorchDtypeError as TorchDtypeError
from .._src.tensor_utils import fp8_remove_negative_zeros_ as fp8_remove_negative_zeros_
from .._src.tensor_utils import get_tensor_supply as get_tensor_supply
from .._src.tensor_utils import is_float8_dtype as is_float8_dtype
from .._src.tensor_utils import map_torch_type as map_torch_type
from .._src.tensor_utils import torch_assert_close as torch_assert_close
