"""Compiler passes: one per module, each ``(IRModule, CompileContext) -> IRModule``."""

from .lower_tile_ops import LOWER_TILE_OPS as LOWER_TILE_OPS
from .lower_tile_ops import lower_tile_ops as lower_tile_ops
from .pipeline import CompileContext as CompileContext
from .pipeline import Pass as Pass
from .pipeline import dump_ir as dump_ir
from .pipeline import map_prim_funcs as map_prim_funcs
from .pipeline import run_pipeline as run_pipeline
from .serialize_block_grid import SERIALIZE_BLOCK_GRID as SERIALIZE_BLOCK_GRID
from .serialize_block_grid import serialize_block_grid as serialize_block_grid
from .serialize_pipelined_loops import SERIALIZE_PIPELINED_LOOPS as SERIALIZE_PIPELINED_LOOPS
from .serialize_pipelined_loops import serialize_pipelined_loops as serialize_pipelined_loops
from .vectorize_parallel_loops import VECTORIZE_PARALLEL_LOOPS as VECTORIZE_PARALLEL_LOOPS
from .vectorize_parallel_loops import vectorize_parallel_loops as vectorize_parallel_loops
from .verify import verify as verify
