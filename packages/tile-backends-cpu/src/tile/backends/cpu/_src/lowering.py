"""CPU lowering rules that differ from the generic ones every backend inherits."""

from __future__ import annotations

from tile.ir.ops import Gemm, register_lowering

from .gemm import lower_gemm_cpu

# A block runs on one core: T.gemm becomes register-blocked vector micro-kernels
# (gemm.py). GPU backends register their own (thread-bound, tensor-core) rules.
register_lowering(Gemm, target="cpu")(lower_gemm_cpu)
