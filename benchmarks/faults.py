"""The fault matrix, every case: SIGINT, SIGTERM and kill -9 at each phase (set-up, warm-up, measure,
teardown, store commit) of run, sweep, tune and ndr on the embedded lab, up/down of a libvirt guest and
measured guest trials (TCG: slow; ``--no-guests`` leaves them out), and run and sweep of the embedded
lab with an OVS-DPDK vswitch (``ovs-run``, ``ovs-sweep``; not applicable where ovs-vswitchd-dpdk is
missing). Prints one JSON document: faults injected, survived, leaks and trials lost, then one row per
case (tests/faults/harness.py says what each check is), and ``labctl fleet sweep`` over a local
inventory: ``fleet`` (the controller signalled) and ``fleet-host`` (the host's labctl sweep signalled),
not applicable where ansible-runner is missing.

    python benchmarks/faults.py [--no-guests] [--only COMMAND ...]   (e.g. --only fleet fleet-host)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults.harness import EMBEDDED, FLEET, LIBVIRT, OVS, all_cases, run_case, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-guests", action="store_true", help="leave out the libvirt cases (minutes each)")
    parser.add_argument("--only", nargs="*", default=None, help="commands to run (default: all)")
    args = parser.parse_args()
    commands = list(EMBEDDED) + ([] if args.no_guests else list(LIBVIRT)) + list(OVS) + list(FLEET)
    if args.only:
        commands = [c for c in commands if c in args.only]
    t0 = time.monotonic()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="labctl-faults-") as work:
        for index, case in enumerate(all_cases(tuple(commands))):
            outcome = run_case(case, Path(work), index)
            outcomes.append(outcome)
            if outcome.applicable:
                mark = "ok" if outcome.survived and not outcome.leaks and not outcome.lost else "FAIL"
                print(f"{mark:4} {case.key:28} {outcome.seconds:6.1f} s  {outcome.detail[:100]}",
                      file=sys.stderr, flush=True)
    result = table(outcomes)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
