"""``pass_configs``: per-kernel compiler switches, spelled as in TileLang.

``tile.lang.compile(func, target=..., pass_configs={PassConfigKey.X: value})`` hands
each switch a backend honours to it as a target option named by the key
(``"tl.disable_warp_specialized"``), so a switch is part of the target, of the kernel
cache key, and visible to the pass pipeline, which is built from the target alone.
TileLang's other keys are accepted with no effect, each with its reason written in
``NO_EFFECT`` (docs/compat.md lists them); the two in ``REJECTED`` and unknown keys are
a ``TargetError``.

Example::

    >>> from tile.lang import PassConfigKey
    >>> PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value
    'tl.disable_warp_specialized'
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from tile.ir.annotations import DEVICE_COMPILE_FLAGS
from tile.ir.errors import SourceLocation, TargetError, UnsupportedOnTargetError
from tile.ir.target import Target


class PassConfigKey(enum.StrEnum):
    """The ``pass_configs`` keys of TileLang, with its spellings.

    Three are honoured by tile's backends (they become target options); the others are
    accepted and have no effect, each for the reason in ``NO_EFFECT`` (they tune passes
    tile does not have, or ask for output tile gives another way); ``REJECTED`` ones
    cannot be honoured and raise a ``TargetError`` that says what to do instead.
    """

    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    """True: sm_90a ``T.Pipelined`` loops keep the cp.async ring, no TMA producer warpgroup."""
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    """True: no TMA loads (on CUDA these come only with warp specialization, so that goes too)."""
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    """True: global accesses run as written, none guarded by its tensor's shape (TILE_CHECK=1 then
    reports those outside)."""
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"


HONOURED = frozenset(
    {
        PassConfigKey.TL_DISABLE_WARP_SPECIALIZED,
        PassConfigKey.TL_DISABLE_TMA_LOWER,
        PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS,
        PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC,
    }
)
"""Keys the backends read: they become target options (and part of the kernel cache key)."""

_TUNES_ABSENT_PASSES = "tunes a TileLang/TVM pass that tile's pipelines do not run"
_DIAGNOSTIC = "asks for diagnostic output; tile's is TILE_DUMP_IR=dir and the error messages"
_SAFE_DEFAULT = "disables a safety check or sync; tile keeps it, which changes no correct result"
NO_EFFECT: dict[PassConfigKey, str] = {
    **dict.fromkeys(
        (
            PassConfigKey.TL_SIMPLIFY,
            PassConfigKey.TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES,
            PassConfigKey.TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS,
            PassConfigKey.TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES,
            PassConfigKey.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL,
            PassConfigKey.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS,
            PassConfigKey.TL_SIMPLIFY_ENABLE_LET_INLINE,
            PassConfigKey.TL_LAYOUT_COST_MODEL,
            PassConfigKey.TL_REDUCER_FORCE_BASELINE,
            PassConfigKey.TL_DISABLE_VECTORIZE_256,
            PassConfigKey.TL_ENABLE_ASYNC_COPY,
            PassConfigKey.TL_ENABLE_LOWER_LDGSTG,
            PassConfigKey.TL_ENABLE_LOWER_LDGSTG_PREDICATED,
            PassConfigKey.TL_DISABLE_WGMMA,
            PassConfigKey.TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS,
            PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE,
            PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE,
            PassConfigKey.TL_DISABLE_SHUFFLE_ELECT,
            PassConfigKey.TL_DISABLE_LOOP_UNSWITCHING,
            PassConfigKey.TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE,
            PassConfigKey.TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS,
            PassConfigKey.TL_FORCE_LET_INLINE,
            PassConfigKey.TL_STORAGE_REWRITE_DETECT_INPLACE,
            PassConfigKey.TL_CONFIG_INDEX_BITWIDTH,
            PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL,
            PassConfigKey.TIR_ENABLE_EQUIV_TERMS_IN_CSE,
            PassConfigKey.TIR_DISABLE_CSE,
            PassConfigKey.TIR_SIMPLIFY,
            PassConfigKey.TIR_DISABLE_STORAGE_REWRITE,
            PassConfigKey.TIR_DISABLE_VECTORIZE,
            PassConfigKey.TIR_USE_ASYNC_COPY,
            PassConfigKey.TIR_MERGE_STATIC_SMEM,
            PassConfigKey.TIR_NOALIAS,
        ),
        _TUNES_ABSENT_PASSES,
    ),
    **dict.fromkeys(
        (
            PassConfigKey.TL_ENABLE_REDUCER_PLAN_VERBOSE,
            PassConfigKey.TL_ENABLE_VECTORIZE_PLANNER_VERBOSE,
            PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT,
            PassConfigKey.TL_EMIT_LINE_DIRECTIVES,
            PassConfigKey.TL_AST_PRINT_ENABLE,
            PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE,
            PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS,
            PassConfigKey.TL_ENABLE_DUMP_IR,
            PassConfigKey.TL_DUMP_IR_DIR,
            PassConfigKey.TL_PASS_PROFILE,
            PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS,
            PassConfigKey.TIR_ENABLE_DEBUG,
            PassConfigKey.CUDA_KERNELS_OUTPUT_DIR,
            PassConfigKey.TL_DISABLE_OUT_OF_BOUND_WARNING,
        ),
        _DIAGNOSTIC,
    ),
    **dict.fromkeys(
        (
            PassConfigKey.TL_DISABLE_BUFFER_INIT_CHECK,
            PassConfigKey.TL_DISABLE_DATA_RACE_CHECK,
            PassConfigKey.TL_DISABLE_PRELOWER_SEMANTIC_CHECK,
        ),
        _SAFE_DEFAULT,
    ),
    PassConfigKey.TL_ENABLE_FAST_MATH: "permits approximate math; tile's backends compute with IEEE "
    "functions, which the permission does not forbid",
    PassConfigKey.TL_DISABLE_FAST_MATH: "tile's backends compute with IEEE functions already",
}
"""Keys accepted with no effect, and why."""

REJECTED: dict[PassConfigKey, str] = {
    PassConfigKey.TL_DEVICE_COMPILE_FLAGS: "give device compiler flags in the kernel with "
    'T.annotate_compile_flags(["..."]) (CUDA targets)',
    PassConfigKey.TIR_ADD_LOWER_PASS: "tile's pass pipelines are fixed per backend; "
    "a backend plug-in (tile.backends entry point) states its own pipeline",
}
"""Keys that cannot be honoured: a ``TargetError`` with this hint."""

assert HONOURED | NO_EFFECT.keys() | REJECTED.keys() == set(PassConfigKey), "every key has a status"

_KNOWN = {key.value for key in PassConfigKey}


def _value_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise TargetError(
        f"pass config {key} = {value!r} is not a bool, int or string",
        hint=f"write pass_configs={{{key!r}: True}} or False",
    )


def apply_pass_configs(target: Target, configs: Any) -> Target:
    """``target`` with every ``pass_configs`` entry added as an option (see module docstring)."""
    if configs is None:
        return target
    if not isinstance(configs, Mapping):
        raise TargetError(
            f"pass_configs must be a dict, got {type(configs).__name__}",
            hint="write pass_configs={tile.lang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}",
        )
    options = dict(target.options)
    for raw_key, value in configs.items():
        key = raw_key.value if isinstance(raw_key, enum.Enum) else raw_key
        if not isinstance(key, str) or key not in _KNOWN:
            raise TargetError(
                f"unknown pass config {raw_key!r}",
                hint=f"the pass configs tile understands are {sorted(_KNOWN)} (tile.lang.PassConfigKey)",
            )
        member = PassConfigKey(key)
        if member in REJECTED:
            raise TargetError(f"pass config {key} is not supported by tile", hint=REJECTED[member])
        text = _value_text(key, value)
        if member not in HONOURED:
            continue  # NO_EFFECT: accepted, and kept out of the target and the cache key
        if options.get(key, text) != text:
            raise TargetError(
                f"pass config {key} = {text!r} contradicts the target's own {key} = {options[key]!r}",
                hint="set the switch in one place: pass_configs or the target dict",
            )
        options[key] = text
    return dataclasses.replace(target, options=tuple(sorted(options.items())))


ANNOTATED = "tilelang_pass_configs"
"""``PrimFunc`` attribute holding the pass configs a kernel sets with ``T.annotate_pass_configs``
(TileLang's name: programs look for it in ``kernel.attrs``)."""


def annotate_pass_configs(configs: Mapping[Any, Any]) -> None:
    """``T.annotate_pass_configs({...})`` in a kernel: the pass configs it is compiled with, as
    if passed to ``compile(..., pass_configs=...)`` (they are checked here, at the kernel line)."""
    from .session import current_session

    checked = apply_pass_configs(Target(kind="cpu"), configs)  # raises for unknown/rejected keys
    del checked
    attrs = current_session("T.annotate_pass_configs").func_attrs
    merged = dict(attrs.get(ANNOTATED, {}))
    for raw_key, value in configs.items():
        key = raw_key.value if isinstance(raw_key, enum.Enum) else str(raw_key)
        merged[key] = _value_text(key, value)
    attrs[ANNOTATED] = merged


def annotated_pass_configs(func: Any) -> dict[str, str] | None:
    """The pass configs ``func`` set with ``T.annotate_pass_configs``, if any."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or ANNOTATED not in attrs:
        return None
    return {str(k): str(v) for k, v in attrs[ANNOTATED].items()}


COMPILE_FLAGS = "tilelang_compile_flags"
"""``PrimFunc`` attribute: the device compiler flags a kernel adds with ``T.annotate_compile_flags``
(TileLang's name)."""
COMPILE_FLAGS_AT = "tile.compile_flags_at"
"""``PrimFunc`` attribute: ``file:line:col`` of the kernel's first ``T.annotate_compile_flags``."""
COMPILE_FLAGS_OPTION = DEVICE_COMPILE_FLAGS


def annotate_compile_flags(flags: Any) -> None:
    """``T.annotate_compile_flags(["-maxrregcount=64"])`` in a kernel: extra flags for the device
    compiler (nvcc or NVRTC on CUDA targets), after tile's own; a string is one flag."""
    from .session import current_location, current_session

    items = [flags] if isinstance(flags, str) else flags
    if not isinstance(items, list | tuple) or not all(isinstance(f, str) and f.strip() for f in items):
        raise TargetError(
            f"T.annotate_compile_flags takes a flag or a list of flags, got {flags!r}",
            hint='write T.annotate_compile_flags(["-maxrregcount=64"])',
        )
    attrs = current_session("T.annotate_compile_flags").func_attrs
    attrs[COMPILE_FLAGS] = [*attrs.get(COMPILE_FLAGS, []), *(f.strip() for f in items)]
    where = current_location()
    if where is not None and COMPILE_FLAGS_AT not in attrs:
        attrs[COMPILE_FLAGS_AT] = f"{where.filename}:{where.line}:{where.column}"


def apply_compile_flags(target: Target, func: Any) -> Target:
    """``target`` with the kernel's annotated compiler flags as an option; other backends than
    CUDA take none, which is an error at the annotation's line."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or COMPILE_FLAGS not in attrs:
        return target
    flags = [str(f) for f in attrs[COMPILE_FLAGS]]
    if target.kind != "cuda":
        location = None
        if COMPILE_FLAGS_AT in attrs:
            filename, line, column = str(attrs[COMPILE_FLAGS_AT]).rsplit(":", 2)
            location = SourceLocation.from_file(filename, int(line), int(column))
        raise UnsupportedOnTargetError(
            f"T.annotate_compile_flags({flags}): the {target.kind} backend takes no device compiler flags",
            hint="compile for a CUDA target, or drop the annotation",
            location=location,
        )
    options = dict(target.options)
    options[COMPILE_FLAGS_OPTION] = json.dumps(flags)
    return dataclasses.replace(target, options=tuple(sorted(options.items())))
