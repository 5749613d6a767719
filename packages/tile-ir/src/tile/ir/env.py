"""Environment variables read by tile-ir (declared once, read through ``EnvVar``)."""

from __future__ import annotations

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


def parse_device(text: str) -> str:
    """``emu`` runs kernels under the CPU emulator; empty or ``gpu`` on the GPU."""
    value = text.strip().lower()
    if value not in ("", "gpu", "emu"):
        raise ValueError(f"expected 'emu' or 'gpu', got {text!r}")
    return value


TILE_DEVICE: EnvVar[str] = EnvVar(
    "TILE_DEVICE",
    parse_device,
    "",
    "where kernels built for a GPU target (CUDA, HIP) run: 'emu' runs the generated source on the "
    "CPU emulator (tile.backends.cpu.simt; wave64 for HIP) with numpy arrays and CPU torch tensors; "
    "empty or 'gpu' launches on the vendor's device",
)

NATIVE_LAUNCH = EnvVar(
    "TILE_NATIVE_LAUNCH",
    parse_bool,
    True,
    "GPU kernel calls go through the native launch path (tile.ir.gpu.native_launch: one C++ call "
    "checks the arguments and launches; built with the host C++ compiler on first use, cached); "
    "0 keeps every call in Python",
)
