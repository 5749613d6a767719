"""tile.backends.cuda: NVIDIA CUDA backend (arch capabilities and nvcc discovery so far)."""

from .arch import CAPABILITIES as CAPABILITIES
from .arch import SUPPORTED_ARCHS as SUPPORTED_ARCHS
from .arch import CudaArch as CudaArch
from .arch import CudaCapabilities as CudaCapabilities
from .arch import MmaInstr as MmaInstr
from .arch import capabilities as capabilities
from .arch import parse_arch as parse_arch
from .errors import ArchSpecError as ArchSpecError
from .errors import CudaArchError as CudaArchError
from .errors import ToolchainError as ToolchainError
from .errors import ToolchainNotFoundError as ToolchainNotFoundError
from .errors import UnsupportedArchError as UnsupportedArchError
from .toolchain import NvccToolchain as NvccToolchain
from .toolchain import NvccVersion as NvccVersion
from .toolchain import find_nvcc as find_nvcc
from .toolchain import probe_nvcc as probe_nvcc
