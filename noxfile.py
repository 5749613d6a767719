"""Developer sessions for the tile monorepo.

Each session installs only what it tests, from the local package folders, so a
missing dependency declaration fails here rather than on a user's machine.

    nox -l                                   # list sessions
    nox -s tests                             # every package's tests, one venv each
    nox -s "tests(package='tile-layout')"    # one package
    nox -s lint typecheck
    nox -s conformance                       # the suite on every backend, one environment
    nox -s "conformance_backend(backend='cpu')"   # one: cpu, cuda-emu, rocm-emu, cuda-emu-sm_75, example
    nox -s mutation                          # known compiler faults the suite must catch (all backends)
    nox -s bench
    nox -s gpu                               # on a GPU: its tests + launch/FA figures (< 8 min)
    nox -s ray                               # the autotuner on a local Ray cluster (about 1 min)

torch is pinned to the CPU build (2.13.0) because an unpinned torch pulls a
multi-GB CUDA build; a GPU build stays the user's choice.
"""

from __future__ import annotations

import os
import tempfile

import nox

# virtualenv (a dependency of nox) makes a session's environment in about 1 s; the standard
# library's venv took 7 s (ensurepip), eleven times per CI run.
nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True

TORCH = "torch==2.13.0"
# tile-testsupport: the hypothesis profiles (a pytest plugin), capability markers and the ISA oracle.
# pytest-xdist: the tests run in one process per core (compiling is CPU-bound and serial).
TEST_TOOLS = ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.100", "./conformance/testsupport"]
# Test processes: TILE_TEST_WORKERS=0 runs in-process (for pdb); the default is one per core.
# Whole files go to one worker (--dist loadfile) so module-scoped compiles happen once.
WORKERS = os.environ.get("TILE_TEST_WORKERS", "auto")

# NVRTC from PyPI and the device headers it compiles against (tile-backends-cuda's [nvrtc] extra).
NVRTC_WHEELS = ["cuda-bindings>=12.6", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-crt",
                "nvidia-cuda-cccl"]
# Distribution -> (folder, internal distributions it needs, extra requirements for its tests).
PACKAGES: dict[str, tuple[str, list[str], list[str]]] = {
    "tile-layout": ("packages/tile-layout", [], ["matplotlib>=3.8"]),
    "tile-ir": ("packages/tile-ir", ["tile-layout"], []),
    # Its tests compile tile.lang programs and tile.ops kernels (the backend itself needs neither),
    # and run the GPU emulator on CUDA sources through tile-backends-cuda's emulated device.
    "tile-backends-cpu": ("packages/tile-backends-cpu",
                          ["tile-layout", "tile-ir", "tile-lang", "tile-ops", "tile-backends-cuda"], [TORCH]),
    # Its tests compile tile.lang programs and tile.ops kernels for CUDA (nvcc optional) and
    # read their SASS (cuobjdump, nvdisasm from PyPI: CUDA toolkits without them exist);
    # the NVRTC wheels (compiler, bindings, device headers) let the NVRTC path be tested too;
    # nvidia-cutlass (its [cute] extra) gives the CuTe headers of T.gemm(impl="cute").
    "tile-backends-cuda": ("packages/tile-backends-cuda",
                           ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-lang", "tile-ops"],
                           [TORCH, "nvidia-cuda-nvdisasm; sys_platform == 'linux'",
                            "nvidia-cuda-cuobjdump; sys_platform == 'linux'",
                            *[f"{w}; sys_platform == 'linux'" for w in NVRTC_WHEELS],
                            "nvidia-cutlass>=3.5"]),
    "tile-backends-rocm": ("packages/tile-backends-rocm",
                           ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-lang", "tile-ops"],
                           [TORCH]),
    # Its tests run TileLang's CUDA expert-tier names (barriers, shuffles, cp.async) and checked
    # CUDA and HIP kernels under the emulator, so those backends are test requirements
    # (tile-lang itself needs none).
    "tile-lang": (
        "packages/tile-lang",
        ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-backends-cuda", "tile-backends-rocm"],
        [TORCH],
    ),
    # torch: its tests check torch.ops.tile (opcheck, gradcheck, torch.compile); tile.ops itself
    # runs on numpy without it (the [torch] extra). The GPU backends are test requirements, as
    # for tile-lang: the fp8 matmul runs on the CUDA emulator (sm_89, sm_90a) against the exact
    # product, and the typed errors name GPU targets (tile.ops needs neither backend).
    "tile-ops": (
        "packages/tile-ops",
        ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-backends-cuda", "tile-backends-rocm",
         "tile-lang"],
        [TORCH],
    ),
    "tile-conformance": (
        "conformance",
        ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-lang", "tile-testsupport"],
        [],
    ),
    "tile-testsupport": ("conformance/testsupport", [], []),
}
# The out-of-tree backend that proves the plug-in story (conformance runs it as "example").
EXAMPLE_BACKEND = "conformance/examples/tile-backend-example"
EXAMPLE_DISTRIBUTION = "tile-backend-example"
STRICT = {"tile-layout", "tile-ir"}
ALL = ["tile-layout", "tile-ir", "tile-backends-cpu", "tile-backends-cuda",
       "tile-backends-rocm", "tile-lang", "tile-ops", "tile-testsupport", "tile-conformance"]


def _folders(names: list[str]) -> list[str]:
    # "./" makes pip read a folder, never a registry name ("conformance" is one on PyPI).
    return [f"./{PACKAGES[n][0]}" for n in names]


def _pip(session: nox.Session, *args: str) -> None:
    # --no-compile: byte-compiling torch's and apache-tvm's thousands of modules at install took
    # most of each session's install time (427 s against 164 s for the two, measured on a loaded
    # 2-core machine); Python compiles the few modules a test imports when it first imports them.
    session.install("--no-compile", *args)


# Wheels of every local distribution, built once per nox run (folder -> wheel path). Building
# a folder in pip's isolated build environment cost each session about 30 s of CI time (nine
# sessions); the wheels are built from the same folders, so every session still installs only
# what it names and a missing dependency declaration still fails its install.
_WHEELS: dict[str, str] = {}
LOCAL_DISTRIBUTIONS = {folder: name for name, (folder, _, _) in PACKAGES.items()}
LOCAL_DISTRIBUTIONS[EXAMPLE_BACKEND] = EXAMPLE_DISTRIBUTION


def _local_wheels(session: nox.Session, folders: list[str]) -> list[str]:
    """The built wheels of ``./folder`` requirements (``./folder[extra]`` keeps its extra)."""
    if not _WHEELS:
        os.makedirs(".nox", exist_ok=True)
        out = tempfile.mkdtemp(prefix="wheels-", dir=os.path.abspath(".nox"))
        # Every pyproject asks for setuptools>=69 (a 3.11 venv ships 65); from 70.1 it builds
        # wheels without the separate `wheel` distribution.
        _pip(session, "setuptools>=70.1")
        session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", out, *[f"./{f}" for f in LOCAL_DISTRIBUTIONS])
        for folder, name in LOCAL_DISTRIBUTIONS.items():
            stem = name.replace("-", "_") + "-"
            built = [w for w in os.listdir(out) if w.startswith(stem) and w.endswith(".whl")]
            assert len(built) == 1, f"pip wheel built {built} for {folder}"
            _WHEELS[folder] = os.path.join(out, built[0])
    wheels = []
    for requirement in folders:
        folder, bracket, extra = requirement.removeprefix("./").partition("[")
        wheels.append(_WHEELS[folder] + bracket + extra)
    return wheels


# Large third-party distributions, each installed once per nox run into a folder of its own
# that every session needing it links with a .pth file: unpacking torch's wheel took about
# 11 s and apache-tvm's about 7 s, in up to ten sessions of a CI run. Only the distribution
# and what it pulls in live there; each session still installs its own packages and their
# declared dependencies, and a session that does not need one does not see it.
TVM = "apache-tvm>=0.27,<0.28"  # what tile-layout (and every package above it) declares
_SHARED_FOLDERS: dict[str, str] = {}


def _link_shared(session: nox.Session, name: str, requirement: str) -> None:
    if requirement not in _SHARED_FOLDERS:
        os.makedirs(".nox", exist_ok=True)
        folder = tempfile.mkdtemp(prefix=f"{name}-", dir=os.path.abspath(".nox"))
        session.run("python", "-m", "pip", "install", "-q", "--no-compile", "--target", folder, requirement)
        _SHARED_FOLDERS[requirement] = folder
    purelib = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                          silent=True)
    assert isinstance(purelib, str), purelib
    with open(os.path.join(purelib.strip(), f"tile-nox-{name}.pth"), "w") as pth:
        pth.write(_SHARED_FOLDERS[requirement] + "\n")


def _install(session: nox.Session, names: list[str], extra: list[str]) -> None:
    # torch and apache-tvm first: with them in place, the requirements they satisfy install
    # nothing more.
    if TORCH in extra:
        _link_shared(session, "torch", TORCH)
    if "tile-layout" in names:  # every package but tile-testsupport needs it, through tile-layout
        _link_shared(session, "tvm", TVM)
    local = [*_folders(names), *[e for e in extra if e.startswith("./")]]
    remote = [e for e in extra if e != TORCH and not e.startswith("./")]
    _pip(session, *_local_wheels(session, local), *remote)


# Test files that run in one process, after the rest of their package: tile-lang's autotuner and
# profiler tests time candidates against each other, and a second worker compiling beside them
# skewed a CI run's choice (2 of 19 failed). The rest of tile-lang runs on every core (it ran
# whole in one process until stop 32: 320 s, against about 200 s split).
SERIAL_FILES = {"packages/tile-lang": ["test_lang_autotune.py", "test_lang_autotune_eager.py",
                                       "test_lang_profiler.py", "test_lang_compat_jit2.py",
                                       "test_lang_compat_modules.py"]}


# Under the GPU emulator, nvcc's / hipcc's compile of each generated source is a check that it is
# real CUDA or HIP, and 80% of a small emulated kernel's build (1.3 s of 1.6 s with nvcc, 1.7 s of
# 2.0 s with hipcc). CI keeps it in one test in 4 (tile-testsupport's plugin picks them by a hash
# of the node id; tests marked vendor_compile always keep it) and, in the conformance suite's
# emulated runs, in one build in 4. `nox -s tests -- --tile-vendor-compile-every=1` checks all.
CI_VENDOR_COMPILE = "--tile-vendor-compile-every=4"


def _pytest(session: nox.Session, *args: str, profile: str | None = None, serial: bool = False) -> None:
    # Exit code 5 means "no tests collected": that is a failure for us.
    profile = profile or os.environ.get("HYPOTHESIS_PROFILE", "ci")
    parallel = [] if WORKERS == "0" or serial else ["-n", WORKERS, "--dist", "loadfile"]
    # --durations: CI must stay well under its time limit; the slowest tests are where to look.
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15", *parallel, *args,
                *session.posargs, env={"HYPOTHESIS_PROFILE": profile})


@nox.session
@nox.parametrize("package", [p for p in PACKAGES if p not in ("tile-conformance", "tile-testsupport")])
def tests(session: nox.Session, package: str) -> None:
    """Install one distribution (and only what it declares) and run its tests.

    tile-conformance is left out: its tests are the suite, run by ``conformance``.
    """
    folder, needs, extra = PACKAGES[package]
    _install(session, [*needs, package], [*extra, *TEST_TOOLS])
    if package == "tile-layout":
        # The layout tier must not pull in torch or any other tier.
        session.run("python", "-c",
                    "import importlib.util as u, sys; import tile.layout; "
                    "bad=[m for m in ('torch','tile.ir','tile.lang') if u.find_spec(m)]; "
                    "sys.exit(f'tile-layout pulled in {bad}' if bad else 0)")
    # Test-file basenames are unique across the repo, so pytest's default import mode is
    # safe; `tile.*` always resolves to the installed distribution (no src/ on sys.path).
    serial = [f"{folder}/tests/{name}" for name in SERIAL_FILES.get(folder, [])]
    _pytest(session, "--rootdir", folder, CI_VENDOR_COMPILE, f"{folder}/tests",
            *[f"--ignore={path}" for path in serial])
    if serial:
        _pytest(session, "--rootdir", folder, CI_VENDOR_COMPILE, *serial, serial=True)


@nox.session
def ray(session: nox.Session) -> None:
    """The autotuner's Ray executor against a local Ray cluster the test starts. Its own session
    because only it installs Ray (``tests`` skips the file); about a minute with the install."""
    folder, needs, extra = PACKAGES["tile-lang"]
    _install(session, needs, [*extra, *TEST_TOOLS])
    _pip(session, *_local_wheels(session, [f"./{folder}[ray]"]))
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", folder,
                f"{folder}/tests/test_lang_autotune_ray.py", *session.posargs, env={"TILE_TEST_RAY": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    _pip(session, "ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy: strict for tile-layout and tile-ir, standard for the rest."""
    _install(session, ALL, [TORCH, "mypy>=1.10", *TEST_TOOLS])
    # One run per distribution: several src/ roots of one namespace in a single run
    # would map the same files to two module names.
    for name in ALL:
        strict = ["--strict"] if name in STRICT else []
        src = f"{PACKAGES[name][0]}/src"
        session.run("mypy", *strict, "--explicit-package-bases", src, env={"MYPYPATH": src})


# Backend name -> folders of out-of-tree distributions that provide it (installed on
# their own, found only through their tile.backends entry point).
BACKEND_EXTRAS: dict[str, list[str]] = {
    "cpu": [],
    "example": [f"./{EXAMPLE_BACKEND}"],
}


# The GPU backends run the whole suite on the CPU emulator (TILE_DEVICE=emu: the generated
# CUDA / HIP source itself, compiled for the host), with fewer examples per test (the "emu"
# profile: derandomized like "ci", so a run is repeatable); the plugin, report and
# reference-helper tests need no backend and run once, in the cpu session.
EMULATED_FAMILIES = ["elementwise", "casts", "parallel_broadcast", "dynamic_shapes", "layout_contract",
                     "atomic", "reduce", "cumsum", "layouts", "pipelined", "paper_kernels", "gemm_epilogue",
                     "beginner", "ops"]  # ops: the attention family's fixed cases (the rest is nightly)
EMULATED = {"cuda-emu": "cuda", "rocm-emu": "rocm"}
# Targets of an emulated backend that differ from its default in a few lowerings only: the
# families those touch, run at the arch. sm_75 has no cp.async (T.Pipelined copies in place),
# issues m16n8k16 as two m16n8k8, keeps bfloat16 below sm_80 and runs bf16/f32 GEMMs on FMA.
EMULATED_ARCHS = {
    "cuda-emu-sm_75": ("cuda", "sm_75", ["casts", "atomic", "pipelined", "gemm_epilogue", "paper_kernels"]),
}
# CI's cut for an out-of-tree backend built on the CPU pipeline (see _conformance_run): the
# families that exercise capabilities (dtypes, shared-memory size) and a target kind's GEMM rule.
EXAMPLE_CI_FAMILIES = ["elementwise", "casts", "dynamic_shapes", "layout_contract", "atomic", "reduce",
                       "pipelined", "gemm_epilogue"]


def _family_files() -> list[str]:
    files = [f"conformance/tests/test_conf_{family}.py" for family in EMULATED_FAMILIES]
    files.append("conformance/tests/test_fuzz_programs.py")  # a few random programs per arch
    return files


def _conformance_run(session: nox.Session, backend: str, *, quick: bool = False) -> None:
    """One backend's conformance run; ``quick``: CI's cut (see the comments below)."""
    # nvcc's / hipcc's compile of each generated source was 60% of an emulated run's time:
    # one build in 4 gets it in CI (every build does in `conformance_backend`)
    every = CI_VENDOR_COMPILE if quick else "--tile-vendor-compile-every=1"
    if backend in EMULATED:
        _pytest(session, *_family_files(), f"--tile-backend={EMULATED[backend]}", "--tile-device=emu",
                every, profile="emu")
        return
    if backend in EMULATED_ARCHS:
        name, arch, families = EMULATED_ARCHS[backend]
        files = [f"conformance/tests/test_conf_{family}.py" for family in families]
        _pytest(session, *files, f"--tile-backend={name}", "--tile-device=emu", f"--tile-arch={arch}", every,
                profile="emu")
        return
    if BACKEND_EXTRAS[backend]:
        # A separate pip install, after the core: the vendor package brings nothing else.
        _pip(session, *_local_wheels(session, BACKEND_EXTRAS[backend]))
    if backend == "cpu" or not quick:
        # the CPU run also holds the fuzzer's regression programs for the emulated GPU targets
        _pytest(session, "conformance/tests", f"--tile-backend={backend}", every)
    else:
        # CI's run of an out-of-tree backend that reuses the CPU backend's pipeline (the example):
        # found through its entry point, the families its own code changes (its dtype and
        # shared-memory capabilities, the GEMM rule it registers for its target kind) at the emu
        # profile's example count. The CPU run just checked the rest of the same pipeline at the
        # ci count; ``conformance_backend(backend='example')`` runs every family.
        files = [f"conformance/tests/test_conf_{family}.py" for family in EXAMPLE_CI_FAMILIES]
        _pytest(session, *files, f"--tile-backend={backend}", profile="emu")


# The out-of-tree example backend is installed into the environment, so it runs last.
CONFORMANCE_ORDER = ["cpu", *EMULATED, *EMULATED_ARCHS, *[b for b in BACKEND_EXTRAS if b != "cpu"]]


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite against every backend, one after another in one environment.

    One install serves all runs (each install of the whole tree and torch costs about a
    minute on CI's 2 cores); ``conformance_backend(backend=...)`` runs one of them alone.
    """
    _install(session, ALL, [TORCH, *TEST_TOOLS])
    for backend in CONFORMANCE_ORDER:
        session.log(f"conformance: backend {backend}")
        _conformance_run(session, backend, quick=True)
    # The mutation check's CI subset (a few quick faults per backend, two at a time): fails if
    # a mutant survives or a fault's snippet no longer matches the source (``nox -s mutation``
    # runs every fault).
    session.log("conformance: mutation check, CI subset")
    session.run("python", "conformance/mutation/run_mutations.py", "--ci")


@nox.session
@nox.parametrize("backend", CONFORMANCE_ORDER)
def conformance_backend(session: nox.Session, backend: str) -> None:
    """The conformance suite against one installed backend (GPU backends: under emulation)."""
    _install(session, ALL, [TORCH, *TEST_TOOLS])
    _conformance_run(session, backend)


@nox.session
def fuzz(session: nox.Session) -> None:
    """The differential program fuzzer at nightly size on every installed backend and device.

    TILE_FUZZ_PROGRAMS programs per target (default 2000), at most TILE_FUZZ_BUDGET seconds
    each (default 21600); records every failure instead of
    stopping at the first and prints a summary (``python -m tile.conformance.fuzz --help``).
    Not part of CI, which runs the small budget of conformance/tests/test_fuzz_programs.py.
    """
    _install(session, ALL, [TORCH, *TEST_TOOLS])
    count = os.environ.get("TILE_FUZZ_PROGRAMS", "2000")
    # The count is the nightly promise: the default one-hour cap per target cut an emulated
    # target at 1354 programs on a loaded 2-core machine, so the cap here is six hours.
    budget = os.environ.get("TILE_FUZZ_BUDGET", "21600")
    session.run("python", "-m", "tile.conformance.fuzz", "--count", count, "--budget", budget,
                *session.posargs, env={"TILE_CACHE": "0"})


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: tile kernels against references timed in the same run."""
    _install(session, ALL, [TORCH])
    session.run("python", "bench/run.py", *session.posargs)
    # nvcc only: the CUDA cold-compile figure; the timed GPU cases need bench_gpu.
    session.run("python", "bench/gpu.py", "--quick")
    # no GPU: the host cost of a GPU kernel call, the driver replaced (issue 20: <= 3 us)
    session.run("python", "bench/gpu.py", "--host-overhead")


@nox.session(venv_params=["--system-site-packages"])
def bench_gpu(session: nox.Session) -> None:
    """GPU benchmarks with the machine's own CUDA build of torch (the user's choice, never installed here)."""
    _pip(session, "--no-deps", *_folders(ALL))
    session.run("python", "bench/gpu.py", *session.posargs)


@nox.session(venv_params=["--system-site-packages"])
def gpu(session: nox.Session) -> None:
    """The one-command GPU check (< 8 min on an H100): the tests marked gpu, the launch-overhead
    and FA0-FA4 figures, with the machine's CUDA build of torch; writes check.json/check.md."""
    _pip(session, "--no-deps", *_folders(ALL))
    _pip(session, *TEST_TOOLS)  # pytest, hypothesis, the markers: none of them pulls torch
    session.run("python", "bench/gpu.py", "--check", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """Known compiler faults, one at a time on every backend they apply to (the GPU backends under
    the emulator), each of which its conformance tests must catch.

    Patches a temporary copy of packages/ and conformance/ (never the working tree) that
    shadows the installed packages; CI runs a subset (``--ci``, end of ``conformance``).
    See conformance/mutation/run_mutations.py.
    """
    _install(session, ALL, [TORCH, *TEST_TOOLS])
    session.run("python", "conformance/mutation/run_mutations.py", *session.posargs)
