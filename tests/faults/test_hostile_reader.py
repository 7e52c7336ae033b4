"""A hostile public reader against a real `arena serve` (issue 31, DoS 5): what one `/v1/live`
connection's subscriptions make the server hold is bounded by the connection's budgets, and it
is given back when the connection closes. RSS is read from /proc; the bounds are generous
(allocator noise), the numbers printed for docs/performance.md."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import websockets

from support.faults import memory_kib, write_config
from support.server import ChildServer, Client, event, token_for, until

BOARDS = {"b": {"aggregation": "best", "periods": ["alltime"]}}
MIB = 1024


def _name(i: int) -> str:
    return f"{i:06d}" + "m" * 122  # 128 code points: the longest member there is


async def test_a_hundred_subscriptions_at_the_limits_hold_little_and_give_it_back_on_close(tmp_path: Path) -> None:
    server = ChildServer(write_config(tmp_path, BOARDS))
    await asyncio.to_thread(server.start)
    try:
        writer = await Client.connect(server.ws_url, token_for("gs"))
        now = time.time_ns() // 1_000_000
        for start in range(0, 9000, 1000):  # every member a view names is in the table: the largest answers
            await writer.submit([event("b", _name(i), i, now, f"k{i}") for i in range(start, start + 1000)])
        await writer.close()
        before = memory_kib(server.pid)["VmRSS"]

        public = Client(await websockets.connect(server.url.replace("http", "ws") + "/v1/live", max_size=2**24))
        for i in range(100):  # DoS 5 as reported: each refused, nothing held
            junk = {"op": "top", "board": "b", "period": "alltime", "limit": 1000, "junk": f"{i}" + "x" * 600_000}
            answer = await public.request({"op": "subscribe", "view": junk})
            assert answer["code"] == "invalid_request", answer
        refused = memory_kib(server.pid)["VmRSS"]

        # 100 subscriptions at the limits: 9 views of 1,000 friends and 91 member views, each
        # member 128 code points: 9,091 entries and members of 10,000 (the 101st is refused)
        views: list[dict[str, Any]] = [
            {"op": "members", "board": "b", "period": "alltime", "members": [_name(i) for i in range(k * 1000, (k + 1) * 1000)]}
            for k in range(9)]
        views += [{"op": "percentile", "board": "b", "period": "alltime", "member": _name(9000 + k)} for k in range(91)]
        for view in views:
            assert (await public.request({"op": "subscribe", "view": view}))["op"] == "subscribed"
        more = await public.request({"op": "subscribe", "view": views[0]})
        assert more["code"] == "too_many_subscriptions", more
        await until(lambda: sum(f.get("op") == "update" for f in public.unmatched) == 100, "every first update")
        held = memory_kib(server.pid)["VmRSS"]
        await public.close()

        async def given_back() -> bool:
            return memory_kib(server.pid)["VmRSS"] - before < 16 * MIB

        await until(given_back, "the subscriptions' memory to be given back after the close", 20)
        after = memory_kib(server.pid)["VmRSS"]
        print(f"\nhostile reader RSS (MiB): before {before / MIB:.1f}, after 100 refused 600 KB views"
              f" {refused / MIB:.1f}, with 100 subscriptions at the limits {held / MIB:.1f}, after close {after / MIB:.1f}")
        assert refused - before < 16 * MIB
        assert held - before < 48 * MIB
    finally:
        server.kill()
