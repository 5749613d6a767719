"""The plugin itself: backend selection and capability-based skips (run with pytester)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.requires(warp_size=4096)
def test_needs_huge_warps(tile_backend):
    raise AssertionError("must have been skipped")

@pytest.mark.requires(dtypes={"float32"})
def test_needs_float32(tile_backend):
    assert "float32" in tile_backend.capabilities.dtypes
"""


def test_unknown_backend_is_a_usage_error_listing_installed_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(tile_backend): pass\n")
    result = pytester.runpytest("--tile-backend=no-such-backend", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*--tile-backend='no-such-backend' is not installed*"])
    assert result.ret != 0


def test_requires_marker_skips_by_capability_and_runs_otherwise(
    pytester: pytest.Pytester, tile_backend
) -> None:
    pytester.makepyfile(test_caps=SUITE)
    result = pytester.runpytest(f"--tile-backend={tile_backend.name}", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*lacks: warp_size=4096*"])


EMU_SUITE = """
import os

def test_runs_under_the_emulator(tile_backend):
    assert os.environ["TILE_DEVICE"] == "emu"
    assert tile_backend.device == "emu"
    assert tile_backend.capabilities.has_device
    assert "emu" in tile_backend.capabilities.devices
"""


def _emulating_backend() -> str | None:
    from tile.ir.backend import available_backends

    for name, manifest in sorted(available_backends().items()):
        if "emu" in getattr(manifest.capabilities(manifest.default_target()), "devices", ()):
            return name
    return None


def test_tile_device_emu_selects_the_emulator_for_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _emulating_backend()
    if name is None:
        pytest.skip("no installed backend declares the emu device")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    pytester.makepyfile(test_emu=EMU_SUITE)
    result = pytester.runpytest(
        f"--tile-backend={name}", "--tile-device=emu", "-rs", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    assert "TILE_DEVICE" not in os.environ  # restored when the session ends


def test_tile_device_emu_skips_a_backend_that_does_not_declare_it(pytester: pytest.Pytester) -> None:
    from tile.ir.backend import available_backends

    name = next(
        (n for n, m in sorted(available_backends().items())
         if "emu" not in getattr(m.capabilities(m.default_target()), "devices", ())),
        None,
    )  # fmt: skip
    if name is None:
        pytest.skip("every installed backend declares the emu device")
    pytester.makepyfile(test_emu=EMU_SUITE)
    result = pytester.runpytest(
        f"--tile-backend={name}", "--tile-device=emu", "-rs", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*backend {name!r} does not declare device 'emu'*"])


def test_the_emu_profile_loads_in_a_fresh_process_beside_the_shared_ones() -> None:
    """'emu' is registered by the suite's plugin only, after tile-testsupport's plugin has run
    its own profile loading at import: a fresh interpreter must still come up with it, and with
    the suite's ci and nightly counts (one process: each import of tile costs seconds)."""
    import subprocess
    import sys

    code = ("import tile.testsupport.plugin, tile.conformance.plugin; from hypothesis import settings; "
            "print(settings.default.max_examples, settings.get_profile('ci').max_examples, "
            "settings.get_profile('nightly').max_examples)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "HYPOTHESIS_PROFILE": "emu"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["10", "50", "400"]


def test_the_running_session_loaded_the_profile_its_environment_names() -> None:
    """This process loaded the plugins as CI and nox do: the profile HYPOTHESIS_PROFILE names
    (ci, emu or nightly in those runs) is the one in force."""
    from hypothesis import settings

    from tile.conformance import env

    name = env.HYPOTHESIS_PROFILE.get()  # as the plugin reads it: "dev" when unset
    assert settings.default.max_examples == settings.get_profile(name).max_examples
    assert settings.default.derandomize == settings.get_profile(name).derandomize


def test_vendor_compile_every_n_checks_one_emulated_build_in_n(monkeypatch: pytest.MonkeyPatch) -> None:
    import tile.lang as tilelang
    from tile.conformance.plugin import BackendUnderTest
    from tile.ir.env import EMU_VENDOR_COMPILE

    seen: list[str | None] = []
    record = lambda func, **_: seen.append(os.environ.get(EMU_VENDOR_COMPILE.name))
    monkeypatch.setattr(tilelang, "compile", record)
    monkeypatch.delenv(EMU_VENDOR_COMPILE.name, raising=False)
    emulated = BackendUnderTest("cuda", "emu", None, None, None, vendor_compile_every=3)
    for _ in range(7):
        emulated.compile(object())
    assert seen == ["1", "0", "0", "1", "0", "0", "1"]
    assert EMU_VENDOR_COMPILE.name not in os.environ  # restored after each build
    seen.clear()
    native = BackendUnderTest("cpu", "native", None, None, None, vendor_compile_every=3)
    every = BackendUnderTest("cuda", "emu", None, None, None)
    for backend in (native, native, every, every):
        backend.compile(object())
    assert seen == [None] * 4  # only an emulated run with N > 1 sets it


RECORDS_VENDOR_SETTING = """
import json, os
import pytest

def _record(request):
    with open("seen.jsonl", "a") as out:
        out.write(json.dumps([request.node.nodeid, os.environ.get("TILE_EMU_VENDOR_COMPILE")]) + "\\n")

@pytest.mark.parametrize("i", range(12))
def test_sampled(request, i):
    _record(request)

@pytest.mark.vendor_compile
@pytest.mark.parametrize("i", range(4))
def test_needs_the_cubin(request, i):
    _record(request)
"""


def _vendor_settings(pytester: pytest.Pytester, *args: str) -> dict[str, str | None]:
    import json

    pytester.makepyfile(test_v=RECORDS_VENDOR_SETTING)
    seen = pytester.path / "seen.jsonl"
    seen.unlink(missing_ok=True)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    return dict(json.loads(line) for line in seen.read_text().splitlines())


def test_vendor_compile_every_n_keeps_the_check_in_one_test_in_n(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zlib

    monkeypatch.delenv("TILE_EMU_VENDOR_COMPILE", raising=False)
    seen = _vendor_settings(pytester, "--tile-vendor-compile-every=4")
    assert len(seen) == 16
    # the unmarked tests whose node id hashes to 0 mod 4 keep the check (the variable is left
    # unset: the default, on); the others run with it off
    kept = {n for n in seen if "sampled" in n and zlib.crc32(n.encode()) % 4 == 0}
    assert 0 < len(kept) < 12  # these 12 node ids give both kinds
    for nodeid, value in seen.items():
        want = None if nodeid in kept or "needs_the_cubin" in nodeid else "0"
        assert value == want, (nodeid, value)
    assert "TILE_EMU_VENDOR_COMPILE" not in os.environ  # restored after every test
    # the same tests again: the choice is a function of the node id alone
    assert _vendor_settings(pytester, "--tile-vendor-compile-every=4") == seen
    # the default (1) and the caller's own setting leave every test alone
    assert set(_vendor_settings(pytester).values()) == {None}
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "1")
    assert set(_vendor_settings(pytester, "--tile-vendor-compile-every=4").values()) == {"1"}
