"""CUDA C++ source from lowered tile IR.

The kernel text and its launch recipe come from the GPU layer
(:func:`tile.ir.gpu.codegen.generate_device_source`, TVM's CUDA generator). What is
CUDA's is added here: ``tile_cuda.h`` on top (and ``tile_cuda/cute.h`` where a
``T.gemm(impl="cute")`` calls CuTe), the warp-specialized kernel's launch bounds and named
barriers, and one by-value ``CUtensorMap`` parameter per TMA-loaded tensor. Special
instructions are ``call_extern`` calls into ``tile_cuda.h``, never inline PTX.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tile.ir.gpu import KernelParam, LaunchRecipe, generate_device_source, tidy

from .cute_headers import with_header

HEADER = "tile_cuda.h"


def generate(mod: Any, arch: str) -> tuple[str, LaunchRecipe, str]:
    """``(cuda_source, launch_recipe, device_tir)`` of the one kernel in ``mod``."""
    device = generate_device_source(mod, arch)
    source = with_header(tidy(device.source, HEADER))
    source, recipe = _with_tensor_maps(mod, source, device.recipe)
    return source, recipe, device.device_tir


TMA_MAPS_ATTR = "tile.tma_maps"
"""PrimFunc attr set by the TMA lowering: ``{tensor: box plan json}`` of the maps it reads."""


def _with_tensor_maps(mod: Any, source: str, recipe: LaunchRecipe) -> tuple[str, LaunchRecipe]:
    """Append one by-value tensor-map parameter per TMA-loaded tensor (none: unchanged)."""
    from .tma import add_map_params

    maps: dict[str, dict[str, Any]] = {}
    for func in mod.functions.values():
        attrs = getattr(func, "attrs", None)
        found = attrs.get(TMA_MAPS_ATTR) if attrs is not None else None
        if found:
            for tensor, plan in found.items():
                maps[str(tensor)] = {
                    str(k): (str(v) if str(k) == "dtype" else int(v)) for k, v in plan.items()
                }
    if not maps:
        return source, recipe
    for func in mod.functions.values():
        attrs = getattr(func, "attrs", None)
        if attrs is not None and "tile.warp_specialized" in attrs:
            from .warp_specialize import finish_source

            source = finish_source(source, recipe.kernel_name, int(attrs["tile.warp_specialized"]))
    names = sorted(maps)
    source = add_map_params(source, recipe.kernel_name, names)
    extra = tuple(KernelParam("tensormap", t, str(maps[t]["dtype"]), maps[t]) for t in names)
    return source, dataclasses.replace(recipe, params=recipe.params + extra)
