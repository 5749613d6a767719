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


def _sources_under(monkeypatch, tmp_path, root):
    """The source digest as if the tile namespace were ``root`` only, memos under ``tmp_path``."""
    import tile

    monkeypatch.setattr(tile, "__path__", [str(root)])
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_fingerprint", None)
    return cache.toolchain_fingerprint()["sources"]


def _fake_tree(tmp_path):
    root = tmp_path / "ns" / "tile"
    (root / "backends" / "include").mkdir(parents=True)
    (root / "backends" / "include" / "device.h").write_text("// a device header\n")
    (root / "passes.py").write_text("X = 1\n")
    (root / "notes.txt").write_text("not a source\n")
    return root


def test_device_headers_are_in_the_source_digest(monkeypatch, tmp_path):
    # Kernels compile against tile_cuda.h / tile_hip.h and the emulator's runtime: an edit
    # to one must change the key, like an edit to a pass
    import pathlib

    import tile

    headers = [p for root in tile.__path__ for p in pathlib.Path(root).rglob("*.h")]
    assert headers, "no device headers found under the tile namespace"
    root = _fake_tree(tmp_path)
    before = _sources_under(monkeypatch, tmp_path, root)
    (root / "backends" / "include" / "device.h").write_text("// a device header, edited\n")
    assert _sources_under(monkeypatch, tmp_path, root) != before
    (root / "notes.txt").write_text("still not a source\n")  # other files do not count
    edited = _sources_under(monkeypatch, tmp_path, root)
    (root / "passes.py").write_text("X = 2\n")
    assert _sources_under(monkeypatch, tmp_path, root) != edited


def test_the_source_digest_is_read_once_per_state_of_the_files(monkeypatch, tmp_path):
    # a new process finds the digest of unchanged sources under the cache root by their stats
    # (path, size, mtime: Python's rule for its bytecode cache) instead of hashing every file
    import os

    root = _fake_tree(tmp_path)
    first = _sources_under(monkeypatch, tmp_path, root)
    [memo] = (tmp_path / "cache" / cache.FORMAT / cache.FINGERPRINTS_DIR).iterdir()
    assert memo.read_text() == first
    reads = []
    real_digest = cache._content_digest
    monkeypatch.setattr(cache, "_content_digest", lambda files: reads.append(files) or "0" * 64)
    assert _sources_under(monkeypatch, tmp_path, root) == first and reads == []
    # the same size, a later mtime: read again (and a new memo)
    header = root / "backends" / "include" / "device.h"
    stat = header.stat()
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _sources_under(monkeypatch, tmp_path, root) == "0" * 64 and len(reads) == 1
    # a damaged memo is not believed, and an unwritable cache root only costs the reading
    monkeypatch.setattr(cache, "_content_digest", real_digest)
    memo.write_text("garbage")
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # back to the first memo's state
    assert _sources_under(monkeypatch, tmp_path, root) == real_digest(cache._source_files()) != "garbage"
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache root should be")
    monkeypatch.setenv("TILE_CACHE_DIR", str(blocked))
    monkeypatch.setattr(cache, "_fingerprint", None)
    assert cache.toolchain_fingerprint()["sources"] == cache._content_digest(cache._source_files())
