"""Environment variables read by tile-ir (declared once, read through ``EnvVar``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tile.layout.env import EnvVar, parse_bool

DUMP_IR = EnvVar(
    "TILE_DUMP_IR",
    str,
    "",
    "directory to write the IR (TVMScript text) after every pass; empty disables dumping",
)

VERIFY_EACH_PASS = EnvVar(
    "TILE_VERIFY_EACH_PASS",
    parse_bool,
    False,
    "run the IR verifier and the expensive pass-contract checks after every pass, not only at "
    "pipeline entry and exit",
)


def parse_optional_path(text: str) -> Path | None:
    """An empty value means unset; anything else is a path (``~`` expanded). For the
    backends' toolchain variables (``TILE_NVCC``, ``TILE_HIPCC``, ``CUDA_HOME``, ...)."""
    text = text.strip()
    return Path(text).expanduser() if text else None


def path_variable(name: str, description: str) -> EnvVar[Path | None]:
    """A toolchain location variable (``TILE_NVCC``, ``ROCM_PATH``, ...) that every GPU backend
    declares alike: unset or empty is None, anything else a path (``~`` expanded).

    A backend searches its ``TILE_*`` variables before the conventional ones (``CUDA_HOME``,
    ``ROCM_PATH``), so that tile can be pointed at a toolkit without disturbing other tools
    that read the conventional names."""
    return EnvVar(name, parse_optional_path, None, description)


def choice_parser(choices: tuple[str, ...], empty: str) -> Callable[[str], str]:
    """A parser for one of ``choices`` (any case, spaces stripped); an empty value is ``empty``.

    Example::

        >>> choice_parser(("on", "off"), empty="on")(" OFF ")
        'off'
    """
    quoted = [repr(c) for c in choices]
    expected = ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]

    def parse(text: str) -> str:
        value = text.strip().lower() or empty
        if value != empty and value not in choices:
            raise ValueError(f"expected {expected}, got {text!r}")
        return value

    return parse


parse_device = choice_parser(("emu", "gpu"), empty="")
"""``emu`` runs kernels under the CPU emulator; empty or ``gpu`` on the GPU."""


TILE_DEVICE: EnvVar[str] = EnvVar(
    "TILE_DEVICE",
    parse_device,
    "",
    "where kernels built for a GPU target (CUDA, HIP) run: 'emu' runs the generated source on the "
    "CPU emulator (tile.backends.cpu.simt; wave64 for HIP) with numpy arrays and CPU torch tensors; "
    "empty or 'gpu' launches on the vendor's device",
)

EMU_VENDOR_COMPILE = EnvVar(
    "TILE_EMU_VENDOR_COMPILE",
    parse_bool,
    True,
    "under TILE_DEVICE=emu a kernel is also compiled by the vendor compiler when one is found (nvcc, "
    "hipcc: it checks that the real toolchain accepts the source and gives a cubin/code object); "
    "0 skips that compile, which is most of an emulated kernel's build time; the kernel then has "
    "no cubin/code object, as without the vendor compiler",
)

NATIVE_LAUNCH = EnvVar(
    "TILE_NATIVE_LAUNCH",
    parse_bool,
    True,
    "GPU kernel calls go through the native launch path (tile.ir.gpu.native_launch: one C++ call "
    "checks the arguments and launches; built with the host C++ compiler on first use, cached); "
    "0 keeps every call in Python",
)
