"""The cache key covers a vendor backend's code, and tile's own backends through the tile sources."""

from __future__ import annotations

import importlib
import sys
import types

from tile.ir.backend import available_backends
from tile.lang._src import cache


def _vendor_manifest(tmp_path, name: str, body: str) -> types.SimpleNamespace:
    package = tmp_path / name
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(f"def build(mod, target):\n    {body}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop(name, None)
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
    return types.SimpleNamespace(name=name, build=module.build)


def test_tile_backends_are_covered_by_the_tile_sources():
    assert cache.backend_fingerprint(available_backends()["cpu"]) == "tile"


def test_editing_a_vendor_backend_changes_its_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_backend_digests", {})
    first = cache.backend_fingerprint(_vendor_manifest(tmp_path, "vendor_fp_backend", "return 1"))
    assert first != "tile"
    monkeypatch.setattr(cache, "_backend_digests", {})
    second = cache.backend_fingerprint(_vendor_manifest(tmp_path, "vendor_fp_backend", "return 2"))
    assert second != first
    monkeypatch.setattr(cache, "_backend_digests", {})
    again = cache.backend_fingerprint(_vendor_manifest(tmp_path, "vendor_fp_backend", "return 2"))
    assert again == second


def test_device_headers_are_in_the_source_digest(monkeypatch):
    # Kernels compile against tile_cuda.h / tile_hip.h and the emulator's runtime: an edit
    # to one must change the key, like an edit to a pass
    import pathlib

    import tile

    headers = [p for root in tile.__path__ for p in pathlib.Path(root).rglob("*.h")]
    assert headers, "no device headers found under the tile namespace"
    target = headers[0]
    monkeypatch.setattr(cache, "_fingerprint", None)
    before = cache.toolchain_fingerprint()["sources"]
    original = pathlib.Path.read_bytes

    def edited(path: pathlib.Path) -> bytes:
        data = original(path)
        return data + b"\n// edited" if path == target else data

    monkeypatch.setattr(pathlib.Path, "read_bytes", edited)
    monkeypatch.setattr(cache, "_fingerprint", None)
    assert cache.toolchain_fingerprint()["sources"] != before
