"""Names of the annotations tile programs put on loops and functions.

Kept in one table so passes, the front end and tests never spell them ad hoc.
"""

from __future__ import annotations

from typing import Any


def has_annotation(loop: Any, key: str) -> bool:
    """Whether ``loop`` (a ``For``) carries the annotation ``key``."""
    notes = getattr(loop, "annotations", None)
    return notes is not None and key in [str(k) for k in notes]

PARALLEL_LOOP = "tile.parallel"
"""On a ``For``: the loop came from ``T.Parallel``; its iterations are independent."""

PIPELINED_LOOP = "tile.pipelined"
"""On a ``For``: the loop came from ``T.Pipelined``."""

NUM_STAGES = "tile.num_stages"
"""On a pipelined ``For``: how many stages the software pipeline may keep in flight."""

PIPELINE_ORDER = "tile.pipeline_order"
"""On a pipelined ``For``: the user's statement order, one entry per body statement."""

PIPELINE_STAGE = "tile.pipeline_stage"
"""On a pipelined ``For``: the user's stage per body statement."""

KERNEL_SOURCE = "tile.source"
"""On a ``PrimFunc`` (set by the front end): ``file:line`` of the kernel's ``def``."""

THREAD_ID_READS = "tile.thread_id_reads"
"""On a ``PrimFunc``: source locations (``file:line:col``) where the kernel reads its thread id."""

THREAD_ATOMICS = "tile.thread_atomics"
"""On a ``PrimFunc``: source locations (``file:line:col``) of thread-level atomics that return the
old value (``T.atomic_add(..., return_prev=True)``, ``T.atomic_or``): GPU targets run them as
they are, the CPU through ``lower_host_atomics``, which names the first in its errors."""

THREAD_LEVEL_CALLS = "tile.thread_level_calls"
"""Function attribute: ``file:line:col`` of each expert-tier GPU call (mbarriers, wgmma
waits, shuffles, ...), which the CPU backend refuses at that line instead of leaving an
unresolved device symbol to its JIT."""

WARP_MATRIX_CALLS = "tile.warp_matrix_calls"
"""Function attribute: ``file:line:col`` of each hand-written warp matrix instruction
(``T.ptx_ldmatrix``, ``T.ptx_mma``), which a target without them
(``Capabilities.warp_matrix_calls`` false) refuses at that line (``check_resources``)."""

PIPELINE_VERSIONED = "tile.pipeline_versioned"
"""On a pipelined ``For`` (set by ``plan_pipeline``): shared buffers to keep ``num_stages`` copies of."""

LAYOUT_MAP = "tile.layout_map"
"""On a ``PrimFunc`` (set by ``infer_layout``): buffer name -> encoded Layout/Fragment."""

ANNOTATED_LAYOUTS = "tile.annotated_layouts"
"""On a ``PrimFunc`` (set by ``T.annotate_layout``): buffer name -> encoded Layout/Fragment.

Encode with ``tile.ir.transform.infer_layout.encode_layout``; inference treats these as
level-1 (strict) requirements.
"""

LOOP_FRAGMENT = "tile.loop_fragment"
"""On the outermost ``For`` of a ``T.Parallel`` nest (set by ``infer_layout``): the encoded
fragment binding its iterations to threads."""

USER_LOOP_LAYOUT = "tile.user_loop_layout"
"""On the outermost ``For`` of a ``T.Parallel`` nest (``T.Parallel(..., loop_layout=frag)``):
the program's encoded fragment for the nest, which ``infer_layout`` takes as the nest's
binding on targets whose blocks have threads and then removes."""

SHARED_ARENA = "tile.shared_arena"
"""On a ``PrimFunc`` (set by ``plan_storage``): shared buffer name -> byte offset in one arena."""

SHARED_BYTES = "tile.shared_bytes"
"""On a ``PrimFunc`` (set by ``plan_storage``): bytes of shared memory after lifetime merging."""

DEBUG_PRINT = "tile.lang.debug_print"
"""The packed function ``T.print`` calls: ``(msg, bx, by, bz, label, value, *index)``.

The CPU runtime resolves it to a Python function; SIMT backends lower it to ``printf``
(``tile.ir.transform.lower_device_prints``)."""

DEVICE_ASSERT = "tile.lang.device_assert_failed"
"""The packed function a failed ``T.device_assert`` calls: ``(msg, "file:line:col", bx, by, bz)``.

SIMT backends lower it to a ``printf`` of the report and ``tile::device_trap``."""

CHECK_FAILED = "tile.lang.check_failed"
"""The packed function a checked access calls when it is out of bounds (``TILE_CHECK=1``):
``(tensor, "load"|"store", "file:line", bx, by, bz, *indices, *extents)``."""

SOURCE_LINE = "tile.source_line"
"""``AttrStmt`` key (``check_bounds``): the ``file:line`` of the tile op the body was lowered from."""

CHECK_OPTION = "check"
"""Target option ``"1"`` or ``"1:<digest of the kernel's file>"`` (``TILE_CHECK=1``): backends
build checked kernels (bounds, races), whose messages carry kernel lines."""

SCHEDULE_ANNOTATIONS = (PARALLEL_LOOP, PIPELINED_LOOP, NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE)
"""Loop annotations that a backend pipeline must consume before code generation."""

MIN_BLOCKS_PER_SM = "tirx.launch_bounds_min_blocks_per_sm"
"""An ``AttrStmt`` key inside a kernel's launch (TVM's own): its value becomes the second argument
of the kernel's ``__launch_bounds__``, the fewest blocks per SM its registers must allow."""

NAMED_BARRIER_THREADS = "tile.named_barrier_threads"
"""On a ``PrimFunc``: its shared-memory barriers synchronize only this many threads (the first
ones), on a named barrier, not the whole block (a warp-specialized kernel's consumers)."""

DYNAMIC_SHARED_ALIGN = "tile.dynamic_shared_align"
"""On a ``PrimFunc``: the byte alignment its dynamic shared memory must start on (a 128B-swizzled
tile read by TMA or wgmma must start on a 1024-byte period)."""

TMA_MAPS = "tile.tma_maps"
"""On a ``PrimFunc`` (set by a backend's TMA lowering): tensor name -> the box plan of the tensor
map it reads; code generation gives the kernel one by-value tensor-map parameter per entry."""

DEVICE_COMPILE_FLAGS = "device_compile_flags"
"""Target option: a JSON list of flags a kernel adds to its device compiler
(``T.annotate_compile_flags``); backends that take flags read it, and it is part of the cache key."""

IMPORTED_SOURCES = "tile.imported_sources"
"""On a ``PrimFunc``: the code given to ``T.import_source``, in order. Where it goes is the
backend's ``Capabilities.imported_sources``: loaded into the process before the build
(``"host"``), or printed into the kernel's device source after its header (``"device"``)."""

IMPORTED_SOURCE_LINES = "tile.imported_source_lines"
"""On a ``PrimFunc``: ``file:line`` of each ``T.import_source`` call, in the order of
``IMPORTED_SOURCES``."""
