"""pytest plugin of the conformance suite: choose a backend and device, skip by capabilities.

Run the suite against any installed backend, found through the ``tile.backends``
entry points (nothing here names a vendor)::

    pytest conformance --tile-backend=cpu
    pytest conformance --tile-backend=cuda --tile-device=emu

Tests take the ``tile_backend`` fixture (a ``BackendUnderTest``) and declare what they
need with ``@pytest.mark.requires(dtypes={"float16"}, thread_binding=True, ...)``;
a backend whose ``Capabilities`` lack it skips the test with the reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from . import env

DEVICES = ("native", "emu", "gpu")

# ci: deterministic and bounded, for every CI run; nightly: wider exploration.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=25,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("nightly", deadline=None, max_examples=400, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=10)
settings.load_profile(env.HYPOTHESIS_PROFILE.get())


@dataclasses.dataclass(frozen=True)
class BackendUnderTest:
    """The backend and device one conformance run checks."""

    name: str
    device: str
    target: Any
    manifest: Any
    capabilities: Any

    def compile(self, func: Any, out_idx: Any = None) -> Any:
        """Compile ``func`` for this backend's target."""
        import tile.lang as tilelang

        return tilelang.compile(func, out_idx=out_idx, target=self.target)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tile", "tile conformance suite")
    group.addoption("--tile-backend", default="cpu",
                    help="installed backend to check (a name in the tile.backends entry-point group)")
    group.addoption("--tile-device", default="native", choices=DEVICES,
                    help="where kernels run: native (the backend's own device), emu, gpu")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(**caps): skip unless the backend's Capabilities satisfy every named field "
        "(sets must be subsets, booleans must hold, numbers must be at least the value)",
    )


def _unmet(caps: Any, required: dict[str, Any]) -> list[str]:
    unmet = []
    for field, want in required.items():
        have = getattr(caps, field, None)
        if isinstance(want, (set, frozenset)):
            ok = have is not None and set(want) <= set(have)
        elif isinstance(want, bool):
            ok = bool(have) == want
        elif isinstance(want, (int, float)):
            ok = have is not None and have >= want
        else:
            ok = have == want
        if not ok:
            unmet.append(f"{field}={want!r} (backend has {have!r})")
    return unmet


def _selected_manifest(config: pytest.Config) -> Any:
    from tile.ir.backend import available_backends

    name = config.getoption("--tile-backend")
    backends = available_backends()
    if name not in backends:
        raise pytest.UsageError(
            f"--tile-backend={name!r} is not installed; installed backends: {sorted(backends)}"
        )
    return backends[name]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Fail once, before anything runs, when the suite is asked for a backend that is absent.
    if any("tile_backend" in getattr(item, "fixturenames", ()) for item in items):
        _selected_manifest(config)


@pytest.fixture(scope="session")
def tile_backend(pytestconfig: pytest.Config) -> BackendUnderTest:
    """The backend selected with --tile-backend, resolved through the entry points."""
    name = pytestconfig.getoption("--tile-backend")
    device = pytestconfig.getoption("--tile-device")
    manifest = _selected_manifest(pytestconfig)
    target = manifest.default_target()
    caps = manifest.capabilities(target)
    if device == "native" and not caps.has_device:
        pytest.skip(f"backend {name!r} has no device here; pick --tile-device=emu or run on its hardware")
    if device != "native" and device not in getattr(caps, "devices", ()):
        pytest.skip(f"backend {name!r} does not declare device {device!r}")
    return BackendUnderTest(name, device, target, manifest, caps)


@pytest.fixture(autouse=True)
def _skip_by_capabilities(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("requires")
    if marker is None:
        return
    backend: BackendUnderTest = request.getfixturevalue("tile_backend")
    unmet = _unmet(backend.capabilities, marker.kwargs)
    if unmet:
        pytest.skip(f"backend {backend.name!r} lacks: {'; '.join(unmet)}")
