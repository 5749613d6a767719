"""``python -m tile.conformance.fuzz``: a fuzz campaign that records instead of stopping.

Runs ``--count`` programs on each installed target (``--targets`` to pick some), within
``--budget`` seconds per target, and prints the summary: programs run, time, outcomes,
rejections, known bugs, and every failing program as a reproducer line.

Under emulation the vendor compiler's build of each program (nvcc, hipcc: a check that the
real toolchain accepts the generated source) is most of a program's time; with
``--vendor-check-every K`` only the 1st, (K+1)th, ... program of a target gets it (0: none).

    python -m tile.conformance.fuzz --count 2000 --seed 1
"""

from __future__ import annotations

import argparse
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from .program import Program
from .runner import Campaign, FuzzTarget, installed_targets, run_program
from .strategy import programs


def vendor_check(index: int, every: int) -> bool:
    """Whether the ``index``-th program (from 1) of a target gets the vendor compile check.

        >>> [vendor_check(i, 3) for i in range(1, 8)]
        [True, False, False, True, False, False, True]
        >>> vendor_check(1, 0), vendor_check(5, 1)
        (False, True)
    """
    return every > 0 and (index - 1) % every == 0


def _run_target(
    target: FuzzTarget, campaign: Campaign, count: int, budget: float, seed: int, every: int = 1
) -> int:
    deadline = time.monotonic() + budget
    ran = 0

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(program=programs(target.dtypes, target.warp_size))
    def one(program: Program) -> None:
        nonlocal ran
        if time.monotonic() > deadline:
            return
        ran += 1
        outcome = run_program(program, target, seed=ran, vendor_check=vendor_check(ran, every))
        campaign.record(target, program, outcome)
        if outcome.status == "fail":
            print(f"FAIL on {target.name}: {program.describe()}\n  {outcome.detail[:400]}", flush=True)
        if ran % 100 == 0:
            counts = dict(campaign.counts[target.name])
            seconds = campaign.seconds[target.name]
            print(f"   {target.name}: {ran} programs, {seconds:.0f} s, {counts}", flush=True)

    one()
    return ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tile.conformance.fuzz")
    parser.add_argument("--count", type=int, default=200, help="programs per target")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds per target at most")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (a run is repeatable)")
    parser.add_argument("--targets", default="", help="comma-separated target names (default: all)")
    parser.add_argument("--vendor-check-every", type=int, default=1, metavar="K",
                        help="under emulation, compile every K-th program with the vendor compiler too "
                        "(nvcc/hipcc: the check that it accepts the source); 1: all (default), 0: none")
    args = parser.parse_args(argv)
    wanted = [t for t in args.targets.split(",") if t]
    installed = {t.name: t for t in installed_targets()}
    unknown = [name for name in wanted if name not in installed]
    if unknown:
        parser.error(f"no installed target {', '.join(unknown)} (installed: {', '.join(installed)})")
    campaign = Campaign()
    try:
        for name in wanted or installed:  # in the order asked
            count = _run_target(installed[name], campaign, args.count, args.budget, args.seed,
                                args.vendor_check_every)
            print(f"-- {name}: {count} programs", flush=True)
    except KeyboardInterrupt:  # a stopped campaign still reports what it ran
        print("-- interrupted: the counts below are partial", flush=True)
    print(campaign.summary())
    return 1 if campaign.failures else 0


if __name__ == "__main__":
    sys.exit(main())
