"""Run TileLang's own examples and kernel tests under tile, imports rewritten, and tally them.

    python tools/compat/run_tilelang.py /path/to/tilelang-checkout --out results.json \
        [--folders examples testing/python/kernel ...] [--timeout 60] [--cuda-as-cpu]

Each folder is copied to a temporary directory (TileLang's files are never written into
this repository), every ``import tilelang...`` / ``from tilelang... import`` line is
rewritten to ``tile.lang``, and each program runs in its own process with a timeout:
``example_*.py`` scripts with ``python``, ``test_*.py`` files with ``pytest``. A program
passes when it exits 0 (a test file: when at least one test passed and none failed).
Failures are grouped by their final exception line. ``--cuda-as-cpu`` loads
``cuda_as_cpu/sitecustomize.py``, which maps torch's CUDA device to the CPU so the
programs' ``device="cuda"`` tensors exist on a machine without a GPU.

``report.py`` turns the JSON into the tables of docs/compat.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

HERE = pathlib.Path(__file__).resolve().parent

_IMPORT = re.compile(r"^(\s*)import tilelang((?:\.\w+)*)(\s+as\s+\w+)?\s*(#.*)?$")
_FROM = re.compile(r"^(\s*)from tilelang((?:\.\w+)*) import ")


def rewrite_imports(source: str) -> str:
    """``tilelang`` imports become ``tile.lang`` ones; nothing else changes."""
    out = []
    for line in source.splitlines():
        match = _IMPORT.match(line)
        if match:
            indent, sub, alias = match.group(1), match.group(2), match.group(3)
            if alias:
                line = f"{indent}import tile.lang{sub}{alias}"
            elif sub:
                line = f"{indent}import tile.lang as tilelang; import tile.lang{sub}"
            else:
                line = f"{indent}import tile.lang as tilelang"
        else:
            line = _FROM.sub(lambda m: f"{m.group(1)}from tile.lang{m.group(2)} import ", line)
        out.append(line)
    return "\n".join(out) + "\n"


@dataclasses.dataclass
class Outcome:
    path: str
    kind: str  # "script" or "tests"
    status: str  # "pass", "fail", "skip", "timeout"
    reason: str
    seconds: float
    passed: int = 0
    failed: int = 0
    skipped: int = 0


_EXC = re.compile(r"^(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|AssertionError)\b:?(.*)$")


def failure_reason(text: str) -> str:
    """The last exception line of a run's output, with paths and numbers blurred."""
    reason = ""
    for line in text.splitlines():
        match = _EXC.match(line.strip())
        if match:
            reason = f"{match.group(1)}:{match.group(2)}".strip()
    reason = re.sub(r"/[\w./+-]+\.py(:\d+)?", "<file>", reason)
    return reason[:160] or (text.strip().splitlines() or ["no output"])[-1][:160]


def _counts(text: str) -> tuple[int, int, int]:
    def grab(word: str) -> int:
        found = re.findall(rf"(\d+) {word}", text)
        return int(found[-1]) if found else 0

    return grab("passed"), grab("failed") + grab("error"), grab("skipped")


def run_one(
    path: pathlib.Path,
    root: pathlib.Path,
    timeout: int,
    env: dict[str, str],
    script_args: Sequence[str] = (),
    call: str = "",
) -> Outcome:
    is_test = path.name.startswith("test_")
    cmd = (
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path.name]
        if is_test
        else [sys.executable, path.name, *script_args]
    )
    if call and not is_test:  # import the program and call one of its functions instead of running it
        cmd = [sys.executable, "-c", f"import {path.stem} as program; program.{call}"]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=path.parent, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(
            str(path.relative_to(root)),
            "tests" if is_test else "script",
            "timeout",
            f"timeout after {timeout} s",
            time.monotonic() - start,
        )
    seconds = time.monotonic() - start
    text = done.stdout + "\n" + done.stderr
    rel = str(path.relative_to(root))
    if is_test:
        passed, failed, skipped = _counts(done.stdout)
        if done.returncode == 0 and passed:
            status = "pass"
        elif done.returncode in (0, 5) and not failed and not passed:
            status = "skip"
        else:
            status = "fail"
        reason = (
            "" if status == "pass" else ("all tests skipped" if status == "skip" else failure_reason(text))
        )
        return Outcome(rel, "tests", status, reason, seconds, passed, failed, skipped)
    status = "pass" if done.returncode == 0 else "fail"
    return Outcome(rel, "script", status, "" if status == "pass" else failure_reason(text), seconds)


def programs(folder: pathlib.Path) -> list[pathlib.Path]:
    found = [p for p in sorted(folder.rglob("*.py")) if p.name.startswith(("example_", "test_"))]
    return [p for p in found if "__pycache__" not in p.parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tilelang", type=pathlib.Path, help="a TileLang checkout (holds examples/, testing/)")
    parser.add_argument("--folders", nargs="+", default=["examples", "testing/python"])
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--cuda-as-cpu", action="store_true")
    parser.add_argument(
        "--pretend-gpu",
        action="store_true",
        help="with --cuda-as-cpu: torch reports one GPU of TILE_DEFAULT_TARGET's arch (CUDA emulator runs)",
    )
    parser.add_argument("--match", default="", help="only programs whose path contains this")
    parser.add_argument(
        "--only",
        choices=("all", "scripts", "tests"),
        default="all",
        help="run only example_*.py scripts or only test_*.py files",
    )
    parser.add_argument(
        "--args",
        default="",
        help="command-line arguments for each example_*.py script (e.g. smaller sizes: '--m 256')",
    )
    parser.add_argument(
        "--call",
        default="",
        help="import each script and evaluate program.CALL instead of running it "
        "(e.g. 'main(batch=1, heads=2, seq_len=128)')",
    )
    args = parser.parse_args(argv)

    env = dict(os.environ)
    if args.cuda_as_cpu:
        env["TILE_COMPAT_CUDA_AS_CPU"] = "1"
        if args.pretend_gpu:
            env["TILE_COMPAT_PRETEND_GPU"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(HERE / "cuda_as_cpu"), env.get("PYTHONPATH", "")])
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="tile-compat-") as tmp:
        root = pathlib.Path(tmp)
        # tests import helpers from TileLang's examples package (``from examples.x import y``)
        needed = "examples" not in args.folders and (args.tilelang / "examples").is_dir()
        support = ["examples"] if needed else []
        for folder in [*args.folders, *support]:
            shutil.copytree(args.tilelang / folder, root / folder, dirs_exist_ok=True)
        env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), str(root)])
        for path in root.rglob("*.py"):
            path.write_text(
                rewrite_imports(path.read_text(encoding="utf-8", errors="replace")), encoding="utf-8"
            )
        for folder in args.folders:
            for path in programs(root / folder):
                if args.match and args.match not in str(path):
                    continue
                if args.only != "all" and (args.only == "tests") != path.name.startswith("test_"):
                    continue
                outcome = run_one(path, root, args.timeout, env, shlex.split(args.args), args.call)
                results.append(outcome)
                print(
                    f"{outcome.status:7s} {outcome.seconds:6.1f}s {outcome.path}  {outcome.reason}",
                    flush=True,
                )
                args.out.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
