"""CPU lowering rules that differ from the generic ones every backend inherits."""

from __future__ import annotations

from tile.ir.ops import Gemm, lower_gemm_loops, register_lowering

# A block runs on one core, so the i-k-j loop nest with a vectorized j loop is the
# CPU's gemm. GPU backends register their own (thread-bound, tensor-core) rules.
register_lowering(Gemm, target="cpu")(lower_gemm_loops)
