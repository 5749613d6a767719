"""tile.backends.rocm: AMD ROCm backend (arch capabilities and toolchain discovery so far)."""

from .arch import CAPABILITIES as CAPABILITIES
from .arch import SUPPORTED_ARCHS as SUPPORTED_ARCHS
from .arch import MfmaInstr as MfmaInstr
from .arch import RocmArch as RocmArch
from .arch import RocmCapabilities as RocmCapabilities
from .arch import capabilities as capabilities
from .arch import parse_arch as parse_arch
from .errors import ArchSpecError as ArchSpecError
from .errors import RocmArchError as RocmArchError
from .errors import ToolchainError as ToolchainError
from .errors import ToolchainNotFoundError as ToolchainNotFoundError
from .errors import UnsupportedArchError as UnsupportedArchError
from .toolchain import AmdClang as AmdClang
from .toolchain import Hipcc as Hipcc
from .toolchain import ToolVersion as ToolVersion
from .toolchain import find_amdclang as find_amdclang
from .toolchain import find_hipcc as find_hipcc
from .toolchain import probe_amdclang as probe_amdclang
from .toolchain import probe_hipcc as probe_hipcc
