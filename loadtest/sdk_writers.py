"""One game server's writer through each SDK against the same Arena node in the same run: the
Python client (`arena.client`) and the Node.js client (clients/js, built: `npm ci && npm run
build` there), taking turns for ``--rounds`` rounds of ``--seconds`` each, so that both see the
same server, journal size and machine load. Each keeps ``--concurrency`` calls of
``submit_many`` of ``--batch`` events in flight (new UUIDv7 keys, random members and values).

    python -m loadtest.sdk_writers --seconds 5 --rounds 3

Prints events/s per round and min/median/max per client, and the ratio of the medians (Node.js
over Python; the goal of issue 37 is 0.8..1.2). Exit code 0 when the ratio is in that range and
nothing was rejected, 1 otherwise, 2 when Node.js or the build is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from arena.client import ArenaClient, EventFields
from loadtest.arena_client import ArenaServer, ArenaTarget
from loadtest.stats import fmt_int, progress

ROOT = Path(__file__).resolve().parents[1]
JS_WRITER = ROOT / "loadtest" / "js_writer.mjs"
JS_BUILD = ROOT / "clients" / "js" / "dist" / "index.js"


async def python_round(target: ArenaTarget, seconds: float, concurrency: int, batch: int, members: int) -> tuple[float, int]:
    """Events/s acked and events rejected by one Python client in ``seconds``."""
    acked = rejected = 0
    async with ArenaClient(target.base_url, target.token) as client:
        start = time.perf_counter()
        end = start + seconds

        async def loop() -> None:
            nonlocal acked, rejected
            while time.perf_counter() < end:
                now = time.time_ns() // 1_000_000
                events: list[EventFields] = [{"board": target.board, "member": f"m{random.randrange(members)}",
                           "value": random.randrange(1_000_000_000), "occurred_at": now} for _ in range(batch)]
                for result in await client.submit_many(events):
                    if result.status.value == "rejected":
                        rejected += 1
                    else:
                        acked += 1

        await asyncio.gather(*(loop() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return acked / elapsed, rejected


def node_round(target: ArenaTarget, seconds: float, concurrency: int, batch: int, members: int) -> tuple[float, int]:
    """Events/s acked and events rejected by one Node.js client (a child process) in ``seconds``."""
    run = subprocess.run(["node", str(JS_WRITER), target.base_url, target.token, target.board, str(seconds),
                          str(concurrency), str(batch), str(members)],
                         capture_output=True, text=True, timeout=seconds + 120, check=True)
    result = json.loads(run.stdout)
    return result["events"] / result["seconds"], int(result["rejected"])


def summary(rates: list[float]) -> str:
    return f"{fmt_int(min(rates))}/{fmt_int(statistics.median(rates))}/{fmt_int(max(rates))}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.sdk_writers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per client per round (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each client once per round (default 3)")
    parser.add_argument("--concurrency", type=int, default=8, help="submit_many calls in flight (default 8)")
    parser.add_argument("--batch", type=int, default=500, help="events per submit_many call (default 500)")
    parser.add_argument("--members", type=int, default=100_000, help="distinct members (default 100000)")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    a = parser.parse_args(argv)
    if shutil.which("node") is None or not JS_BUILD.exists():
        print("error: needs Node.js and the built client: cd clients/js && npm ci && npm run build", file=sys.stderr)
        return 2
    rates: dict[str, list[float]] = {"python": [], "node": []}
    rejected = 0
    server = ArenaServer()
    try:
        target = server.start()
        progress(f"arena serving on {target.base_url} (pid {target.pid})")
        for round_no in range(1, a.rounds + 1):
            rate, bad = asyncio.run(python_round(target, a.seconds, a.concurrency, a.batch, a.members))
            rates["python"].append(rate)
            rejected += bad
            rate, bad = node_round(target, a.seconds, a.concurrency, a.batch, a.members)
            rates["node"].append(rate)
            rejected += bad
            progress(f"round {round_no}: python {fmt_int(rates['python'][-1])} ev/s, node {fmt_int(rates['node'][-1])} ev/s")
    finally:
        server.stop()
        server.cleanup()
    ratio = statistics.median(rates["node"]) / statistics.median(rates["python"])
    print(f"{'client':<8} {'events/s min/median/max':>26}")
    for name, values in rates.items():
        print(f"{name:<8} {summary(values):>26}")
    print(f"node/python (medians): {ratio:.2f}  rejected: {rejected}")
    if a.json is not None:
        a.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "rates": rates, "ratio": ratio,
                                      "rejected": rejected}, indent=2))
    return 0 if 0.8 <= ratio <= 1.2 and rejected == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
