"""Low-bit weight formats of ``tile.ops.dequant_matmul`` (int4, int2, nf4, fp4): packing and a
numpy reference decode. The formats are described in ``tile.ops._src.quant``'s docstring.

Example::

    >>> from tile.ops.quant import pack_codes, values
    >>> pack_codes([[1, 2]], "int4").tolist(), float(values("fp4")[3])
    ([[33]], 1.5)
"""

from ._src.quant import BITS as BITS
from ._src.quant import CODES_PER_BYTE as CODES_PER_BYTE
from ._src.quant import FORMATS as FORMATS
from ._src.quant import dequantize_reference as dequantize_reference
from ._src.quant import pack_codes as pack_codes
from ._src.quant import values as values
