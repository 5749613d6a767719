import sys
import warnings

import pytest

from tile.ir.backend import BackendLoadWarning, BackendManifest, available_backends


def test_discovery_finds_the_cpu_backend():
    backends = available_backends(refresh=True)
    assert "cpu" in backends
    manifest = backends["cpu"]
    assert isinstance(manifest, BackendManifest)
    assert "cpu" in manifest.target_kinds


def test_manifest_is_frozen():
    manifest = available_backends()["cpu"]
    with pytest.raises(AttributeError):
        manifest.name = "other"  # type: ignore[misc]


def test_broken_entry_point_warns_and_others_still_load(tmp_path, monkeypatch):
    dist = tmp_path / "tile_broken_backend-0.0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tile-broken-backend\nVersion: 0.0.1\n")
    (dist / "entry_points.txt").write_text(
        "[tile.backends]\nbroken = tile_no_such_module_xyz:MANIFEST\nnotmanifest = json:dumps\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backends = available_backends(refresh=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, BackendLoadWarning)]
    assert any("'broken'" in m for m in messages)
    assert any("'notmanifest'" in m for m in messages)
    assert "cpu" in backends
    assert "broken" not in backends and "notmanifest" not in backends
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    assert "broken" not in available_backends(refresh=True)


def test_capabilities_are_data():
    manifest = available_backends()["cpu"]
    caps = manifest.capabilities(manifest.default_target())
    assert caps.warp_size == 1
    assert caps.thread_binding is False
    assert "float16" in caps.dtypes
    assert caps.vector_bits in (128, 256, 512)
