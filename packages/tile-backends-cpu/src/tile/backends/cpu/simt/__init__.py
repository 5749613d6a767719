"""tile.backends.cpu.simt: run GPU kernel sources on the host CPU (the SIMT emulator).

A GPU backend's generated source (CUDA, HIP) is compiled with the host C++ compiler
against a CPU implementation of its device header, which the vendor's package ships and
registers here as an ``EmulatedDevice`` (``register_device``), and launched by a runtime that
runs every block on a pool of OS threads and every GPU thread of a block as a fiber:
barriers, warp collectives (shuffles, votes, ldmatrix, mma.sync), cp.async groups and the
sm_90 wgmma, mbarrier and TMA operations behave as on the GPU, and a barrier that can never
complete is reported, not hung.

Example::

    from tile.backends.cpu.simt import SimtKernel, kernel_library
    from tile.backends.cuda.emu import DEVICE  # registers the CUDA device "cuda"
    kernel = SimtKernel(kernel_library(cuda_source, "main_kernel", DEVICE), device=DEVICE)
    kernel.launch(grid=(4, 1, 1), block=(128, 1, 1), dynamic_shared=0, args=[...])
"""

from __future__ import annotations

from ..toolchain import find_host_compiler as find_host_compiler
from ._device import EmulatedDevice as EmulatedDevice
from ._device import register_device as register_device
from ._device import registered_devices as registered_devices
from ._device import resolve_device as resolve_device
from ._launch import SimtKernel as SimtKernel
from ._launch import default_workers as default_workers
from ._launch import load_device as load_device
from ._launch import runtime as runtime
from ._tensor_map import TensorMapArgument as TensorMapArgument
from ._tensor_map import encode_tensor_map as encode_tensor_map
from ._toolchain import DYNAMIC_SHARED_CAPACITY as DYNAMIC_SHARED_CAPACITY
from ._toolchain import INCLUDE_DIR as INCLUDE_DIR
from ._toolchain import device_library as device_library
from ._toolchain import kernel_library as kernel_library
from ._toolchain import runtime_library as runtime_library
from .errors import HostCompilerNotFoundError as HostCompilerNotFoundError
from .errors import SimtCompileError as SimtCompileError
from .errors import SimtDeadlockError as SimtDeadlockError
from .errors import SimtDeviceError as SimtDeviceError
from .errors import SimtDivergenceError as SimtDivergenceError
from .errors import SimtFault as SimtFault
from .errors import SimtLaunchError as SimtLaunchError
from .errors import SimtMisuseError as SimtMisuseError
from .errors import SimtRaceError as SimtRaceError
