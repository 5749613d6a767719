import warnings

import pytest
from conftest import install_entry_points

from tile.ir.backend import BackendLoadWarning, BackendManifest, available_backends


def test_discovery_finds_an_installed_backend(fake_backend):
    backends = available_backends()
    assert backends["fake"] is fake_backend
    assert isinstance(fake_backend, BackendManifest)
    assert fake_backend.target_kinds == ("fakekind",)


def test_manifest_is_frozen(fake_backend):
    with pytest.raises(AttributeError):
        fake_backend.name = "other"  # type: ignore[misc]


def test_broken_entry_points_warn_and_others_still_load(fake_backend, tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp("broken")
    install_entry_points(
        root, "tile_broken_backend", "broken = tile_no_such_module_xyz:MANIFEST\nnotmanifest = json:dumps"
    )
    monkeypatch.syspath_prepend(str(root))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backends = available_backends(refresh=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, BackendLoadWarning)]
    assert any("'broken'" in m for m in messages)
    assert any("'notmanifest'" in m for m in messages)
    assert "fake" in backends
    assert "broken" not in backends and "notmanifest" not in backends


def test_capabilities_are_data(fake_backend):
    caps = fake_backend.capabilities(fake_backend.default_target())
    assert (caps.warp_size, caps.max_threads, caps.dtypes) == (4, 64, frozenset({"float32"}))
    with pytest.raises(AttributeError):
        caps.warp_size = 32  # type: ignore[misc]
