"""Targets of one backend for a chosen architecture (the suite's ``--tile-arch``, the fuzzer's
emulated architectures)."""

from __future__ import annotations

from typing import Any


def target_with_arch(default: Any, arch: str) -> dict[str, Any]:
    """The target spec of ``default`` (a backend's ``Target``) for architecture ``arch``:
    ``mcpu`` on HIP, ``arch`` on every other kind."""
    spec = dict(default.to_json()) if hasattr(default, "to_json") else {"kind": default.kind}
    spec.pop("mcpu", None)
    spec.pop("arch", None)
    key = "mcpu" if default.kind == "hip" else "arch"
    return {**spec, "kind": default.kind, key: arch}
