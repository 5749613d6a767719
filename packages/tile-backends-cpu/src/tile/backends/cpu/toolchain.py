"""The host C/C++ toolchain that tile-backends-cpu builds native code with.

The CPU backend's micro-kernels (``ukernels/*.c``) and the GPU emulator
(``tile.backends.cpu.simt``) build with tile-ir's host toolchain, which the GPU layer's
native launcher uses too: these names are :mod:`tile.ir.host_toolchain`'s, re-exported.
"""

from tile.ir.host_toolchain import HostCompilerNotFoundError as HostCompilerNotFoundError
from tile.ir.host_toolchain import accepts_flag as accepts_flag
from tile.ir.host_toolchain import build_shared_library as build_shared_library
from tile.ir.host_toolchain import cache_dir as cache_dir
from tile.ir.host_toolchain import compiler_identity as compiler_identity
from tile.ir.host_toolchain import content_digest as content_digest
from tile.ir.host_toolchain import find_host_compiler as find_host_compiler
from tile.ir.host_toolchain import is_built as is_built
