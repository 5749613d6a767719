"""Run generated programs on every installed backend and device against the interpreter.

``installed_targets()`` lists what this machine can run: the CPU, the CUDA backend under
the emulator for sm_80 and sm_90a, the ROCm backend under the emulator for gfx90a, and
a GPU when one is present (found through the backends' capabilities, never by vendor
checks of the machine). ``run_program`` compiles and runs one program on one target and
classifies the outcome:

* ``pass``: the result matches the numpy interpreter;
* ``rejected``: the backend refused the program with ``UnsupportedOnTargetError`` (it says
  which feature it lacks; counted and reported, not a wrong result);
* ``known``: a failure matching a bug listed in ``KNOWN_BUGS`` (being fixed elsewhere);
* ``fail``: a mismatch, a crash or another error on a valid program: a finding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tile.ir.env import EMU_VENDOR_COMPILE
from tile.ir.errors import UnsupportedOnTargetError

from .. import env
from ..targets import target_with_arch
from .interpret import check, data, evaluate
from .kernels import build_kernel
from .program import Program


@dataclasses.dataclass(frozen=True)
class FuzzTarget:
    """One backend/device pair the fuzzer runs on."""

    name: str
    backend: str
    target: Any
    device: str  # "" for the backend's own device, else a Capabilities.devices entry ("emu")
    dtypes: frozenset[str]
    warp_size: int
    float32_gemm_error: float


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """The variables ``values`` set (an empty value leaves one as it is), restored on exit."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update({name: value for name, value in values.items() if value})
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _device(device: str) -> contextlib.AbstractContextManager[None]:
    return _environment(**{env.TILE_DEVICE.name: device})


#: Architectures exercised under emulation, per target kind (the GPU's own arch runs natively).
EMULATED_ARCHS = {"cuda": ("sm_80", "sm_90a"), "hip": ("gfx90a",)}


def _target_on(name: str, manifest: Any, label: str, target: Any, device: str) -> FuzzTarget | None:
    """The fuzz target ``label`` when ``manifest`` has a device for it (under ``device``)."""
    from tile.conformance.reference import gemm_product_error

    with _device(device):
        caps = manifest.capabilities(manifest.default_target() if target is None else _resolve(target))
    if not caps.has_device:
        return None
    resolved = manifest.default_target() if target is None else target
    return FuzzTarget(label, name, resolved, device, frozenset(caps.dtypes), int(caps.warp_size),
                      gemm_product_error("float32", caps))


def installed_targets() -> list[FuzzTarget]:
    """Every backend/device pair installed here (see the module docstring)."""
    from tile.ir.backend import available_backends

    found: list[FuzzTarget | None] = []
    for name, manifest in sorted(available_backends().items()):
        default = manifest.default_target()
        found.append(_target_on(name, manifest, name, None, ""))  # the native device, when present
        if "emu" in tuple(getattr(manifest.capabilities(default), "devices", ())):
            for arch in EMULATED_ARCHS.get(default.kind, ()):
                spec = target_with_arch(default, arch)
                found.append(_target_on(name, manifest, f"{name}-emu-{arch}", spec, "emu"))
    return [t for t in found if t is not None]


def _resolve(spec: Any) -> Any:
    from tile.ir.backend import resolve_target

    return resolve_target(spec)[0]


KnownBug = tuple[str, Callable[[Program, FuzzTarget, BaseException], bool]]

#: Failures whose cause is known and fixed elsewhere: (name, matcher). Each entry names the
#: issue and the fix; a program matching one is counted as ``known``, not as a finding.
KNOWN_BUGS: list[KnownBug] = [
    (
        "let-and-guard: split_dynamic_tails hoists a guard out of the scope of the named values it "
        "reads (issue 17 item 1, fixed by the `fixes` branch)",
        lambda p, t, e: p.guard == "named" and "split_dynamic_tails" in str(e),
    ),
]


@dataclasses.dataclass
class Outcome:
    status: str  # pass | rejected | known | fail
    detail: str = ""
    seconds: float = 0.0


def run_program(program: Program, target: FuzzTarget, seed: int = 0, vendor_check: bool = True) -> Outcome:
    """Compile and run ``program`` on ``target``; compare with the interpreter.

    ``vendor_check=False`` leaves out, under emulation, the vendor compiler's build of the
    generated source (``TILE_EMU_VENDOR_COMPILE=0``: nvcc or hipcc, most of an emulated
    program's time), which checks that the real toolchain accepts it; the emulator's own run
    and comparison are the same."""
    import tile.lang as tilelang

    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    x, b, y0 = data(program, rng)
    vendor = "" if vendor_check else "0"
    try:
        with _environment(**{env.TILE_DEVICE.name: target.device, EMU_VENDOR_COMPILE.name: vendor}):
            kernel = tilelang.compile(build_kernel(program), target=target.target)
            y = y0.copy()
            kernel(x, b, y)
        expected = evaluate(program, x, b, y0)
        check(program, y, expected, target.float32_gemm_error if program.dtype == "float32" else 0.0)
    except UnsupportedOnTargetError as exc:
        return Outcome("rejected", f"{type(exc).__name__}: {exc.message}", time.perf_counter() - start)
    except Exception as exc:
        for name, matches in KNOWN_BUGS:
            if matches(program, target, exc):
                return Outcome("known", name, time.perf_counter() - start)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome("fail", detail, time.perf_counter() - start)
    return Outcome("pass", "", time.perf_counter() - start)


@dataclasses.dataclass
class Campaign:
    """Counts of one fuzz run per target, with the failing programs."""

    counts: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    failures: list[tuple[str, Program, str]] = dataclasses.field(default_factory=list)
    rejections: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    known: Counter[str] = dataclasses.field(default_factory=Counter)

    def record(self, target: FuzzTarget, program: Program, outcome: Outcome) -> None:
        self.counts.setdefault(target.name, Counter())[outcome.status] += 1
        self.seconds[target.name] = self.seconds.get(target.name, 0.0) + outcome.seconds
        if outcome.status == "fail":
            self.failures.append((target.name, program, outcome.detail))
        elif outcome.status == "rejected":
            self.rejections.setdefault(target.name, Counter())[outcome.detail.splitlines()[0][:160]] += 1
        elif outcome.status == "known":
            self.known[outcome.detail] += 1

    def summary(self) -> str:
        lines = []
        for name, counts in sorted(self.counts.items()):
            total = sum(counts.values())
            parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            lines.append(f"{name}: {total} programs in {self.seconds[name]:.0f} s ({parts})")
            for reason, n in self.rejections.get(name, Counter()).most_common(5):
                lines.append(f"    rejected x{n}: {reason}")
        for name, n in self.known.items():
            lines.append(f"known bug x{n}: {name}")
        for target, program, detail in self.failures:
            lines.append(f"FAIL on {target}: {program.describe()}\n    {detail.splitlines()[0][:300]}")
        return "\n".join(lines)
