"""A differential program fuzzer: random valid tile programs, every installed backend and
device, checked against an independent numpy interpreter of the program description.

    pytest conformance/tests/test_fuzz_programs.py              # the CI budget
    pytest conformance/tests/test_fuzz_programs.py --tile-fuzz=2000   # nightly size, per target
    nox -s fuzz -- --tile-fuzz=2000

``Program`` describes one program, ``programs(...)`` draws them, ``build_kernel`` makes
the kernel through ``@T.prim_func``, ``evaluate`` is the interpreter, and
``run_program`` runs one program on one ``FuzzTarget``.
"""

from .interpret import check as check
from .interpret import evaluate as evaluate
from .kernels import build_kernel as build_kernel
from .program import Program as Program
from .runner import KNOWN_BUGS as KNOWN_BUGS
from .runner import Campaign as Campaign
from .runner import FuzzTarget as FuzzTarget
from .runner import installed_targets as installed_targets
from .runner import run_program as run_program
from .strategy import programs as programs
