"""A throw-away backend plug-in, installed for one test through a temporary dist-info.

tile-ir does not depend on any backend, so its tests register their own: a real
``BackendManifest`` in a module on ``sys.path`` plus an ``entry_points.txt`` naming it,
which is exactly what an installed vendor package provides.
"""

from __future__ import annotations

import textwrap

import pytest

from tile.ir.backend import BackendManifest, available_backends

FAKE_BACKEND_MODULE = textwrap.dedent(
    '''
    from tile.ir.backend import BackendManifest, Capabilities
    from tile.ir.target import Target

    def _caps(target):
        return Capabilities(warp_size=4, max_threads=64, shared_bytes=4096,
                            dtypes=frozenset({"float32"}), vector_bits=128, has_device=True)

    def _unbuildable(*args):
        raise RuntimeError("the fake backend builds nothing")

    MANIFEST = BackendManifest(
        name="fake", target_kinds=("fakekind",), capabilities=_caps, pipeline=lambda t: [],
        build=_unbuildable, load=_unbuildable, device_present=lambda: True,
        default_target=lambda: Target.parse("fakekind"), auto_priority=1000,
    )
    '''
)


def install_entry_points(root, dist_name: str, lines: str) -> None:
    dist = root / f"{dist_name}-0.0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.0.1\n")
    (dist / "entry_points.txt").write_text(f"[tile.backends]\n{lines}\n")


@pytest.fixture
def fake_backend(tmp_path, monkeypatch) -> BackendManifest:
    """Install the fake backend for one test; discovery is refreshed before and after."""
    (tmp_path / "tile_fake_backend_mod.py").write_text(FAKE_BACKEND_MODULE)
    install_entry_points(tmp_path, "tile_fake_backend", "fake = tile_fake_backend_mod:MANIFEST")
    monkeypatch.syspath_prepend(str(tmp_path))
    manifest = available_backends(refresh=True)["fake"]
    yield manifest
    monkeypatch.undo()
    available_backends(refresh=True)
