"""The beginner tier: hardware-agnostic array programs, compiled to tile programs.

Write numpy-style code; tile partitions it into kernels (element-wise chains fused, epilogues
fused into matmuls, softmax/RMSNorm/LayerNorm one kernel per row block, attention written
with primitives one FlashAttention-style kernel) and writes a developer-tier tile program
for each, which runs on every backend::

    import tile.lang.beginner as tb

    @tb.jit
    def mlp(x, w, b):
        return tb.gelu(x @ w + b).astype("float16")

    y = mlp(x, w, b)                      # numpy arrays or torch tensors in, the same kind out
    print(mlp.plan(x, w, b))              # the kernels it launches and what each fused
    print(mlp.developer_source(x, w, b))  # the generated tile program, as Python source

Arguments annotated ``x: tb.Tensor[("M", 64), "float16"]`` have symbolic extents: one
compile serves every size. Without annotations each argument signature compiles once.
"""

from ._src.beginner.api import JitFunction as JitFunction
from ._src.beginner.api import Plan as Plan
from ._src.beginner.api import Tensor as Tensor
from ._src.beginner.api import abs as abs
from ._src.beginner.api import clip as clip
from ._src.beginner.api import exp as exp
from ._src.beginner.api import exp2 as exp2
from ._src.beginner.api import gelu as gelu
from ._src.beginner.api import jit as jit
from ._src.beginner.api import log as log
from ._src.beginner.api import maximum as maximum
from ._src.beginner.api import minimum as minimum
from ._src.beginner.api import relu as relu
from ._src.beginner.api import rsqrt as rsqrt
from ._src.beginner.api import sigmoid as sigmoid
from ._src.beginner.api import silu as silu
from ._src.beginner.api import softmax as softmax
from ._src.beginner.api import sqrt as sqrt
from ._src.beginner.api import tanh as tanh
from ._src.beginner.api import transpose as transpose
from ._src.beginner.api import where as where
from ._src.beginner.graph import Array as Array
from ._src.beginner.graph import BeginnerError as BeginnerError
