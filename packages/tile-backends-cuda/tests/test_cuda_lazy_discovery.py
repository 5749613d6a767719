"""Compiling for the CPU does not import the CUDA backend (a cache hit stays cheap)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import sys
from tile.ir.backend import resolve_target
target, manifest = resolve_target("cpu")
assert manifest.name == "cpu", manifest.name
print("cuda imported:", "tile.backends.cuda" in sys.modules)
target, manifest = resolve_target({"kind": "cuda", "arch": "sm_80"})
print("then:", manifest.name, target.arch)
"""


def test_resolving_a_cpu_target_loads_only_the_cpu_backend():
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True).stdout
    assert "cuda imported: False" in out
    assert "then: cuda sm_80" in out
