"""tile.ir.gpu: what every C++-dialect GPU backend shares, whatever the vendor.

A GPU vendor's backend adds only what is its own (instructions and their lowerings,
device headers, toolchain, runtime) to these pieces:

* SIMT lowering rules for ``T.copy``, ``T.fill``, ``T.atomic_*``, ``T.cumsum`` and
  ``T.reduce_*`` (:mod:`.simt_lowering`; ``register_simt_lowerings("hip")``), and the
  shared parts of ``T.gemm`` with its SIMT fallback (:mod:`.gemm`);
* passes: ``apply_shared_layouts`` (swizzled shared tiles stored as their layouts,
  :mod:`.shared_layouts`), ``lower_gpu_atomics`` (:mod:`.atomics`) and, under
  ``TILE_CHECK=1``, ``mark_kernel_lines`` (faults name the user's line, :mod:`.kernel_lines`); the async-copy
  ring behind ``T.Pipelined`` that a vendor's copy engine plugs a :class:`RingSync` into
  (:mod:`.async_ring`);
* source emission through TVM's CUDA-dialect generator, with the launch recipe read from
  the host function (:mod:`.codegen`), and the launch recipe, argument checks and
  argument packing every runtime uses (:mod:`.launch`);
* the launch path of every GPU runtime: a plan per argument signature, the driver
  interface a vendor implements, torch's current stream (:mod:`.launcher`), and a
  recording driver that replaces the vendor's in host-side tests (:mod:`.testing`);
* the vendor-neutral part of running a kernel on the CPU emulator (:mod:`.emulation`).

Example::

    from tile.ir.gpu import generate_device_source, register_simt_lowerings

    register_simt_lowerings("my_gpu")          # copy/fill/atomic/cumsum/reduce for the kind
    device = generate_device_source(mod, "sm_80")  # CUDA-dialect text + launch recipe
"""

from .async_ring import RingSync as RingSync
from .async_ring import mark_pipelined_loops as mark_pipelined_loops
from .async_ring import pipeline_rings as pipeline_rings
from .atomics import LOWER_GPU_ATOMICS as LOWER_GPU_ATOMICS
from .barriers import THREAD_RANGE_SYNC as THREAD_RANGE_SYNC
from .codegen import DeviceSource as DeviceSource
from .codegen import generate_device_source as generate_device_source
from .codegen import tidy as tidy
from .emulation import EmulatedKernel as EmulatedKernel
from .gemm import lower_gemm_simt as lower_gemm_simt
from .kernel_lines import MARK_KERNEL_LINES as MARK_KERNEL_LINES
from .launch import SCALAR_CTYPES as SCALAR_CTYPES
from .launch import KernelLauncher as KernelLauncher
from .launch import KernelParam as KernelParam
from .launch import LaunchRecipe as LaunchRecipe
from .launch import ParamList as ParamList
from .launch import ParamSpecs as ParamSpecs
from .launch import ParamStrides as ParamStrides
from .launch import check_torch_arguments as check_torch_arguments
from .launch import evaluate as evaluate
from .launch import kernel_params as kernel_params
from .launch import kernel_strides as kernel_strides
from .launch import launch_dims as launch_dims
from .launch import python_expr as python_expr
from .launch import scalar_argument as scalar_argument
from .shared_layouts import APPLY_SHARED_LAYOUTS as APPLY_SHARED_LAYOUTS
from .simt_lowering import held_in_place as held_in_place
from .simt_lowering import lower_copy_simt as lower_copy_simt
from .simt_lowering import register_simt_lowerings as register_simt_lowerings
from .subbyte_accesses import LOWER_SUBBYTE_ACCESSES as LOWER_SUBBYTE_ACCESSES
