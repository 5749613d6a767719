"""The differential program fuzzer: random valid programs against the numpy interpreter.

CI (default): a deterministic budget on the backend under test (``--tile-backend``,
``--tile-device``): ``CI_PROGRAMS`` programs on its own device, ``EMU_PROGRAMS`` per
architecture under the emulator. Nightly: ``--tile-fuzz=N`` runs N random programs on
every installed backend and device (``nox -s fuzz``). A failure shrinks to a small
program and prints it as ``Program(...)``; add it to ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tile.conformance import env
from tile.conformance.fuzz import FuzzTarget, installed_targets, programs, run_program

CI_PROGRAMS = 30
EMU_PROGRAMS = 3


def _nightly(config: pytest.Config) -> int | None:
    """Programs per target of a nightly run (``--tile-fuzz=N`` or TILE_FUZZ_PROGRAMS), else None."""
    count = config.getoption("--tile-fuzz")
    if count is None and env.TILE_FUZZ_PROGRAMS.get() > 0:
        count = env.TILE_FUZZ_PROGRAMS.get()
    return count


def _selected_targets(config: pytest.Config) -> list[FuzzTarget]:
    targets = installed_targets()
    if _nightly(config) is not None:
        return targets
    backend = config.getoption("--tile-backend")
    device = config.getoption("--tile-device")
    device = "" if device == "native" else device
    return [t for t in targets if t.backend == backend and t.device == device]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fuzz_target" in metafunc.fixturenames:
        targets = _selected_targets(metafunc.config)
        metafunc.parametrize("fuzz_target", targets, ids=[t.name for t in targets])


def _budget(config: pytest.Config, target: FuzzTarget) -> settings:
    nightly = _nightly(config)
    common = dict(deadline=None, database=None, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    if nightly is not None:
        return settings(max_examples=nightly, **common)
    return settings(max_examples=EMU_PROGRAMS if target.device else CI_PROGRAMS, derandomize=True, **common)


def test_random_programs_match_the_interpreter(
    fuzz_target: FuzzTarget, request: pytest.FixtureRequest
) -> None:
    outcomes: dict[str, int] = {}

    @_budget(request.config, fuzz_target)
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        program = data.draw(programs(fuzz_target.dtypes, fuzz_target.warp_size), label="program")
        outcome = run_program(program, fuzz_target)
        outcomes[outcome.status] = outcomes.get(outcome.status, 0) + 1
        assert outcome.status in ("pass", "rejected", "known"), (
            f"{fuzz_target.name}: {program.describe()}\n{outcome.detail}"
        )

    one()
    assert outcomes.get("pass", 0) > 0, f"no program ran to completion on {fuzz_target.name}: {outcomes}"
