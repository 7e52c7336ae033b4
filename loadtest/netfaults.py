"""The network faults of tests/faults/test_network_faults.py, run several rounds, longer and with
more load than in CI, and their figures per fault: `python -m loadtest.netfaults [--rounds N]
[--lease S] [--flap S] [--load K]` (as root, like the tests: each round makes its own network
namespaces). Prints one markdown table: per fault, the rounds that passed every check, the
answers checked and the 503s among them, the acks read during the fault, the window over which
503s were answered, and the time from the heal until every board answered through every node.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/faults/test_network_faults.py"
REPORT = re.compile(r"^(\d+) answers \((\d+) checked, 503: (\{.*?\}), (\d+) queries unanswered\), (\d+) events acked: (.*)$")


@dataclass
class Fault:
    rounds: int = 0
    passed: int = 0
    answers: int = 0
    refused: int = 0
    acks: list[int] = field(default_factory=list)
    windows: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def one_round(env: dict[str, str], faults: dict[str, Fault], failed: list[str]) -> None:
    """Run the test module once; add what its output says to ``faults``, and each test that
    failed to ``failed``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    name = ""
    for line in done.stdout.splitlines():
        if line.startswith("figures\t"):
            _, name, acks, window, served = line.split("\t")
            fault = faults.setdefault(name, Fault())
            fault.rounds += 1
            fault.acks.append(int(acks))
            fault.windows.append(float(window))
            fault.served.append(float(served))
        elif (found := REPORT.match(line)) and name:
            fault = faults[name]
            fault.answers += int(found[2])
            fault.refused += sum(int(n) for n in re.findall(r": (\d+)", found[3]))
            if found[6] != "no violation":
                fault.violations.append(found[6][:200])
        elif line.startswith("passed\t"):
            faults[line.split("\t")[1]].passed += 1
        elif line.startswith("FAILED"):
            failed.append(line[:300])
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def table(faults: dict[str, Fault], failed: list[str]) -> str:
    rows = ["| fault | rounds passed | answers checked (503s) | acks during the fault, median | 503s answered over, "
            "median / longest | served again after the heal, median / slowest |", "|---|---|---|---|---|---|"]
    for name, f in faults.items():
        rows.append(f"| {name} | {f.passed} of {f.rounds} | {f.answers:,} ({f.refused:,}) | {statistics.median(f.acks):.0f} | "
                    f"{statistics.median(f.windows):.1f} s / {max(f.windows):.1f} s | "
                    f"{statistics.median(f.served):.1f} s / {max(f.served):.1f} s |")
    found = [f"- {name}: {v}" for name, f in faults.items() for v in f.violations] + [f"- {line}" for line in failed]
    return "\n".join(rows + ([""] + found if found else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.netfaults", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lease", type=float, default=3.0, help="lease_seconds of the nodes (default 3, the default)")
    parser.add_argument("--flap", type=float, default=20.0, help="seconds the flapping link flaps")
    parser.add_argument("--load", type=int, default=2, help="times the recorder's default writers and readers")
    args = parser.parse_args(argv)
    env = {**os.environ, "ARENA_NETFAULTS_LEASE": str(args.lease), "ARENA_NETFAULTS_FLAP_SECONDS": str(args.flap),
           "ARENA_NETFAULTS_LOAD": str(args.load), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    faults: dict[str, Fault] = {}
    failed: list[str] = []
    for n in range(args.rounds):
        one_round(env, faults, failed)
        print(f"round {n + 1} of {args.rounds} done", file=sys.stderr)
    print(table(faults, failed))
    return 1 if failed or any(f.violations for f in faults.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
