"""pytest plugin of the conformance suite: choose a backend and device, skip by capabilities.

Run the suite against any installed backend, found through the ``tile.backends``
entry points (nothing here names a vendor)::

    pytest conformance --tile-backend=cpu
    pytest conformance --tile-backend=cuda --tile-device=emu

Tests take the ``tile_backend`` fixture (a ``BackendUnderTest``) and declare what they
need with ``@pytest.mark.requires(dtypes={"float16"}, thread_binding=True, ...)``;
a backend whose ``Capabilities`` lack it skips the test with the reason.

Kernels are built with ``tile_backend.build(factory, *args, out_idx=...)``: the compiled
kernel is cached per (factory, arguments) for the run, and when a test fails the report
carries a reproducer, the factory call with its drawn arguments and the kernel's
TVMScript. The session ends with the number of examples each hypothesis test executed
and the total per family (``test_conf_<family>.py``); under the ``ci`` profile a family
below ``--tile-min-examples`` (default 50) fails the run.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import tile.testsupport.plugin  # noqa: F401  (registers the shared profiles first)
from tile.ir.env import EMU_VENDOR_COMPILE

from . import env
from .targets import target_with_arch

DEVICES = ("native", "emu", "gpu")

# ci, narrowed for the suite: deterministic and bounded, for every CI run (the shared
# profiles come from tile-testsupport's plugin, imported above so this registration wins).
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("nightly", deadline=None, max_examples=400, print_blob=True)
# emu: the GPU backends under the CPU emulator in CI, deterministic like ci, fewer examples
settings.register_profile("emu", derandomize=True, database=None, deadline=None, max_examples=10,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(env.HYPOTHESIS_PROFILE.get())


@dataclasses.dataclass(frozen=True)
class BackendUnderTest:
    """The backend and device one conformance run checks."""

    name: str
    device: str
    target: Any
    manifest: Any
    capabilities: Any
    vendor_compile_every: int = 1
    _compiles: Iterator[int] = dataclasses.field(default_factory=itertools.count, repr=False, compare=False)

    def compile(self, func: Any, out_idx: Any = None) -> Any:
        """Compile ``func`` for this backend's target.

        Under the emulator a GPU backend also compiles the generated source with its vendor's
        compiler (nvcc, hipcc), a check that it is real CUDA or HIP that costs most of an
        emulated build; with ``--tile-vendor-compile-every=N`` one build in N does (the first,
        then every Nth), the others run on the emulator only.
        """
        import tile.lang as tilelang

        if self.device != "emu" or self.vendor_compile_every <= 1:
            return tilelang.compile(func, out_idx=out_idx, target=self.target)
        check = next(self._compiles) % self.vendor_compile_every == 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(EMU_VENDOR_COMPILE.name, "1" if check else "0")
            return tilelang.compile(func, out_idx=out_idx, target=self.target)

    def build(self, factory: Callable[..., Any], *args: Any, out_idx: Any = None, **kwargs: Any) -> Any:
        """``factory(*args, **kwargs)`` compiled for this backend, cached for the run.

        The call is remembered, so a failing test reports it with the kernel's source.
        """
        key = (factory, args, tuple(sorted(kwargs.items())), _hashable(out_idx), self.target_key)
        _LAST_BUILD.call = _format_call(factory, args, kwargs, out_idx)
        _LAST_BUILD.source = None
        kernel, source = _build_cached(self, key)
        _LAST_BUILD.source = source
        return kernel

    @property
    def target_key(self) -> str:
        return str(self.target)


class _LastBuild(threading.local):
    call: str | None = None
    source: str | None = None


_LAST_BUILD = _LastBuild()


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _format_call(
    factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out_idx: Any
) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    name = f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', factory)}"
    return f"tilelang.compile({name}({', '.join(parts)}), out_idx={out_idx!r})"


_KERNELS: dict[Any, tuple[Any, str | None]] = {}


def _build_cached(backend: BackendUnderTest, key: Any) -> tuple[Any, str | None]:
    """Build and compile once per key; compile errors are not cached (they re-raise)."""
    if key in _KERNELS:
        return _KERNELS[key]
    factory, args, kwargs, out_idx, _target = key
    func = factory(*args, **dict(kwargs))
    source: str | None = None
    script = getattr(func, "script", None)
    if callable(script):
        try:
            source = str(script())
        except Exception:  # the reproducer is best effort; the compile below reports errors
            source = None
    _LAST_BUILD.source = source
    out = list(out_idx) if isinstance(out_idx, tuple) else out_idx
    _KERNELS[key] = (backend.compile(func, out_idx=out), source)
    return _KERNELS[key]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tile", "tile conformance suite")
    group.addoption("--tile-backend", default="cpu",
                    help="installed backend to check (a name in the tile.backends entry-point group)")
    group.addoption("--tile-min-examples", type=int, default=None,
                    help="fail when a test family executed fewer hypothesis examples "
                         "(default: 50 under the ci profile, else no minimum)")
    group.addoption("--tile-device", default="native", choices=DEVICES,
                    help="where kernels run: native (the backend's own device), emu, gpu")
    group.addoption("--tile-arch", default="",
                    help="architecture of the backend's target (cuda: sm_80, sm_90a; hip: gfx90a); default: "
                         "the backend's default target (its device's, or its oldest supported)")
    # --tile-vendor-compile-every N is tile-testsupport's option (its plugin registers it): here
    # it picks one emulated build in N (BackendUnderTest.compile), there one test in N.
    group.addoption("--tile-fuzz", type=int, default=None, metavar="N",
                    help="program fuzzer, nightly size: N random programs on every installed backend "
                         "and device (default: the CI budget, a fixed set on the selected backend)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(**caps): skip unless the backend's Capabilities satisfy every named field "
        "(sets must be subsets, booleans must hold, numbers must be at least the value)",
    )
    config.addinivalue_line(
        "markers",
        "every_emulator_profile: an op-library test that runs under the emulator in every "
        "hypothesis profile, not only nightly",
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
def tile_backend(pytestconfig: pytest.Config) -> Iterator[BackendUnderTest]:
    """The backend selected with --tile-backend, resolved through the entry points.

    A device other than ``native`` must be one the backend declares in
    ``Capabilities.devices``; it is selected for the session by setting ``TILE_DEVICE``
    (restored afterwards), and the capabilities are read again under it.
    """
    name = pytestconfig.getoption("--tile-backend")
    device = pytestconfig.getoption("--tile-device")
    manifest = _selected_manifest(pytestconfig)
    target = manifest.default_target()
    arch = pytestconfig.getoption("--tile-arch")
    if arch:
        from tile.ir.backend import resolve_target

        target = resolve_target(target_with_arch(target, arch))[0]
    caps = manifest.capabilities(target)
    if device == "native" and not caps.has_device:
        pytest.skip(f"backend {name!r} has no device here; pick --tile-device=emu or run on its hardware")
    if device != "native" and device not in getattr(caps, "devices", ()):
        pytest.skip(
            f"backend {name!r} does not declare device {device!r} "
            f"(Capabilities.devices = {tuple(getattr(caps, 'devices', ()))})"
        )
    with pytest.MonkeyPatch.context() as patch:
        if device != "native":
            patch.setenv(env.TILE_DEVICE.name, device)
            caps = manifest.capabilities(target)
            if not caps.has_device:
                pytest.skip(f"backend {name!r} declares device {device!r} but has no device under it")
        every = pytestconfig.getoption("--tile-vendor-compile-every")
        yield BackendUnderTest(name, device, target, manifest, caps, vendor_compile_every=every)


@pytest.fixture(autouse=True)
def _skip_by_capabilities(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("requires")
    if marker is None:
        return
    backend: BackendUnderTest = request.getfixturevalue("tile_backend")
    unmet = _unmet(backend.capabilities, marker.kwargs)
    if unmet:
        pytest.skip(f"backend {backend.name!r} lacks: {'; '.join(unmet)}")


# -- per-test example counts ---------------------------------------------------------

# Kept per session (in-process pytester runs have their own).
_EXAMPLES = pytest.StashKey[dict[str, int]]()
_BELOW = pytest.StashKey[list[str]]()


def _examples(config: pytest.Config) -> dict[str, int]:
    return config.stash.setdefault(_EXAMPLES, {})


def _family(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return module.removeprefix("test_conf_")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    # only conformance tests (those taking the backend fixture) are counted
    if handle is None or inner is None or "tile_backend" not in getattr(item, "fixturenames", ()):
        yield
        return
    nodeid = item.nodeid
    counts = _examples(item.config)
    counts.setdefault(nodeid, 0)

    @functools.wraps(inner)
    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[nodeid] += 1
        return inner(*args, **kwargs)

    handle.inner_test = counted
    try:
        yield
    finally:
        handle.inner_test = inner


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" and report.failed and _LAST_BUILD.call is not None:
        text = "# the last kernel the test built (for the minimal failing example)\n"
        text += f"kernel = {_LAST_BUILD.call}\n"
        if _LAST_BUILD.source:
            text += "\n" + _LAST_BUILD.source
        report.sections.append(("tile reproducer", text))
    if call.when == "teardown":
        _LAST_BUILD.call = _LAST_BUILD.source = None


def _family_totals(config: pytest.Config) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for nodeid, count in _examples(config).items():
        totals[_family(nodeid)] += count
    return dict(totals)


def _minimum(config: pytest.Config) -> int:
    wanted = config.getoption("--tile-min-examples")
    if wanted is not None:
        return int(wanted)
    return 50 if env.HYPOTHESIS_PROFILE.get() == "ci" else 0


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    minimum = _minimum(session.config)
    below = session.config.stash[_BELOW] = []
    for family, total in sorted(_family_totals(session.config).items()):
        if 0 < total < minimum:
            below.append(f"{family}: {total} < {minimum}")
    if below and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    counts = _examples(config)
    if not counts:
        return
    tr = terminalreporter
    tr.section(f"tile conformance: examples executed (profile {env.HYPOTHESIS_PROFILE.get()})")
    width = max(len(n) for n in counts)
    for nodeid, count in sorted(counts.items()):
        tr.write_line(f"{nodeid:<{width}}  {count:>6}")
    minimum = _minimum(config)
    tr.write_line("")
    tr.write_line(f"per family (minimum {minimum}):")
    for family, total in sorted(_family_totals(config).items()):
        flag = "" if total >= minimum else "   BELOW MINIMUM"
        tr.write_line(f"  {family:<24} {total:>6}{flag}")
    below = config.stash.get(_BELOW, [])
    if below:
        tr.write_line("families below the example minimum: " + "; ".join(below), red=True)
