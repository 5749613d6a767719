"""Mutation check: known compiler faults the conformance suite must catch.

Each mutant is a ``(file, exact original snippet, replacement)`` patch. The script
copies the git-tracked files of ``packages/`` and ``conformance/`` to a temporary
directory, installs the copy (editable, ``--no-deps``) into the *current*
interpreter's environment -- so run it in a throw-away venv: ``nox -s mutation``
does -- then, for each mutant, patches the copy, runs ``pytest conformance/tests -x
-q --tile-backend=cpu`` (HYPOTHESIS_PROFILE=ci, kernel cache off so no kernel
compiled by the unpatched compiler is reused) and restores the file. The working
tree is never modified.

Every mutant must make the suite FAIL. A table is printed; the exit status is 1 if
any mutant survives (or the unpatched copy does not pass, or a snippet no longer
matches the source: the patch table must then be updated).

About the faults: "wrong swizzle XOR" and "wrong fragment thread map" do not change
CPU results (the CPU path ignores hardware layouts); they are caught by the
backend-independent contract tests in ``test_conf_layout_contract.py``, which check
the tables a GPU backend would use against the PTX ISA formulas. The brief's
"dropped barrier" has no counterpart yet: no pass emits a barrier on any path (the
CPU path has no threads to synchronize, and no GPU lowering exists). It is replaced
by "WAR dependence ignored in plan_pipeline", the fault that lets the pipeline
planner reorder a shared-buffer refill above its last reader -- the hazard a
dropped barrier would cause on a GPU -- caught by the plan tests in the same file.

    python conformance/mutation/run_mutations.py --yes-install-into-this-env [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
IR = "packages/tile-ir/src/tile/ir"
LAYOUT = "packages/tile-layout/src/tile/layout"
DISTRIBUTIONS = [
    "packages/tile-layout", "packages/tile-ir", "packages/tile-backends-cpu",
    "packages/tile-lang", "conformance",
]


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    original: str
    replacement: str


MUTANTS = [
    Mutant("off-by-one in copy bounds predicate", f"{IR}/ops/loops.py",
           "        if not analyzer.can_prove(index < size):\n            conds.append(index < size)",
           "        if not analyzer.can_prove(index < size):\n            conds.append(index <= size)"),
    Mutant("wrong reduction init", f"{IR}/ops/reduce.py",
           'if kind in ("sum", "abssum", "absmax"):\n        return tirx.const(0, dtype)',
           'if kind in ("sum", "abssum", "absmax"):\n        return tirx.const(1, dtype)'),
    Mutant("swapped transpose flag", f"{IR}/ops/gemm.py",
           "_at(op.b, j, kk) if op.transpose_b else _at(op.b, kk, j)",
           "_at(op.b, kk, j) if op.transpose_b else _at(op.b, j, kk)"),
    Mutant("wrong tail split", f"{IR}/transform/split_dynamic_tails.py",
           # off by one: a tile whose last index equals the extent takes the unguarded path
           "            parts.append(at_last(cond))",
           "            parts.append(tirx.LE(at_last(cond.a), cond.b))"),
    Mutant("cast dropped", f"{IR}/ops/loops.py",
           "    if str(value.ty) == dtype:\n        return value\n    return tirx.Cast(dtype, value)",
           "    if str(value.ty) == dtype:\n        return value\n    return value"),
    Mutant("wrong swizzle XOR", f"{LAYOUT}/swizzle.py",
           "return _tvm.floormod(_tvm.floordiv(phys_row, rows_per_xor), phases)",
           "return _tvm.floormod(phys_row, phases)"),
    Mutant("wrong fragment thread map", f"{LAYOUT}/hardware/_base.py",
           "forward_fn=lambda r, c: (r * LANES_PER_ROW + c // k, c % k))",
           "forward_fn=lambda r, c: (r + 8 * (c // k), c % k))"),
    Mutant("WAR dependence ignored (for: dropped barrier)", f"{IR}/transform/plan_pipeline.py",
           "shared = (a.writes & (b.reads | b.writes)) | (a.reads & b.writes)",
           "shared = a.writes & (b.reads | b.writes)"),
]


def _copy_tree(dest: pathlib.Path) -> None:
    """Copy the git-tracked files of packages/ and conformance/ (working-tree contents).

    Untracked files (someone's half-written test) stay out, so the baseline is the
    suite as committed plus local edits to tracked files.
    """
    listed = subprocess.run(["git", "ls-files", "-z", "packages", "conformance"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    # Report a failing example without shrinking it: the verdict is all we need, and
    # shrinking a failure through many kernel compilations takes minutes.
    (dest / "conftest.py").write_text(
        "from hypothesis import Phase, settings\n"
        "settings.register_profile('mutation', parent=settings.get_profile('ci'),\n"
        "                          phases=[Phase.explicit, Phase.reuse, Phase.generate])\n"
        "settings.load_profile('mutation')\n"
    )


def _install(copy: pathlib.Path) -> None:
    args = [arg for d in DISTRIBUTIONS for arg in ("-e", str(copy / d))]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *args], check=True)


def _suite(copy: pathlib.Path, cache: pathlib.Path) -> tuple[bool, float, str]:
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci", TILE_CACHE="0", TILE_CACHE_DIR=str(cache))
    start = time.monotonic()
    proc = subprocess.run(
        # The fast backend-independent contracts first, then the whole suite (pytest
        # collects the file once); -x stops at the first failure.
        [sys.executable, "-m", "pytest", "conformance/tests/test_conf_layout_contract.py",
         "conformance/tests", "-x", "-q", "-p", "no:cacheprovider",
         "--tile-backend=cpu"],
        cwd=copy, env=env, capture_output=True, text=True,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    failed = next((ln for ln in lines if ln.startswith(("FAILED", "ERROR"))), "")
    if not failed and proc.returncode != 0:
        failed = next((ln for ln in reversed(lines) if "failed" in ln or "error" in ln), "")
    if not failed and proc.returncode != 0:  # e.g. a segfault on an out-of-bounds access
        failed = f"pytest exited with status {proc.returncode} and no summary"
    return proc.returncode == 0, time.monotonic() - start, failed or (lines[-1] if lines else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--yes-install-into-this-env", action="store_true",
                        help="required: the copy replaces the tile packages installed in this environment")
    parser.add_argument("--only", action="append", default=[],
                        help="run only mutants whose name contains this")
    args = parser.parse_args(argv)
    if not args.yes_install_into_this_env:
        parser.error("this installs a copy of the packages into the running environment; "
                     "run it in a throw-away venv (nox -s mutation) with --yes-install-into-this-env")
    mutants = [m for m in MUTANTS if not args.only or any(s in m.name for s in args.only)]
    with tempfile.TemporaryDirectory(prefix="tile-mutation-") as tmp:
        copy, cache = pathlib.Path(tmp) / "repo", pathlib.Path(tmp) / "cache"
        _copy_tree(copy)
        _install(copy)
        for m in mutants:
            if (copy / m.path).read_text().count(m.original) != 1:
                print(f"patch for {m.name!r} does not match {m.path} exactly once; update MUTANTS")
                return 1
        ok, secs, last = _suite(copy, cache)
        print(f"baseline (no mutation): {'passed' if ok else 'FAILED'} in {secs:.0f} s")
        if not ok:
            print(f"  the unpatched suite must pass first: {last}")
            return 1
        rows = []
        for m in mutants:
            target = copy / m.path
            source = target.read_text()
            target.write_text(source.replace(m.original, m.replacement))
            try:
                ok, secs, last = _suite(copy, cache)
            finally:
                target.write_text(source)
            rows.append((m.name, m.path, "survived" if ok else "FAILED", secs, last))
            print(f"  {m.name}: {'SURVIVED' if ok else 'caught'} ({secs:.0f} s)", flush=True)
    width = max(len(r[0]) for r in rows)
    pwidth = max(len(r[1]) for r in rows)
    print(f"\n{'fault':<{width}}  {'file':<{pwidth}}  suite     time  first failure")
    for name, path, result, secs, last in rows:
        print(f"{name:<{width}}  {path:<{pwidth}}  {result:<8} {secs:4.0f}s  {last[:90]}")
    survivors = [r[0] for r in rows if r[2] != "FAILED"]
    if survivors:
        print(f"\n{len(survivors)} mutant(s) survived: {', '.join(survivors)}")
        return 1
    print(f"\nall {len(rows)} mutants caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
