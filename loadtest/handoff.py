"""The hand-off phase of ``python -m loadtest cluster``: a rolling restart under ingest.

One writer per board sends frames of ``batch`` events, one at a time, to the board's owner (as
`/v1/cluster` names it); a frame that fails (its connection lost, no ack within 10 s, an event
neither `accepted` nor `duplicate`) is sent again with the same keys to whoever owns the board
then, as a game server does. Meanwhile each node in turn is stopped with SIGTERM (it hands its
boards off, then exits), started again on its port, and every board waits to be back on its
placement's node before the next. Reported: per board and round, the longest an ack waited (from
a frame's first send to its ack: the wait a writer sees while its board is handed off), the
nodes' SIGTERM-to-exit and restart-to-placed seconds, and whether every acked event is in the
journal.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from websockets.exceptions import WebSocketException

from loadtest.arena_client import ArenaTarget, ArenaWs
from loadtest.ingest import AckError
from loadtest.nodes import cluster_view, node_ids, placed, running_nodes
from loadtest.process import ArenaServe, ServerFailed, wait_until
from loadtest.stats import fmt_int, progress
from loadtest.workload import ACCEPTED, DUPLICATE, Event, StreamSource, Workload, WorkloadSpec

ACKED = frozenset((ACCEPTED, DUPLICATE))
FRAME_TIMEOUT = 10.0  # seconds for one send's ack before it is sent again
DELIVER_TIMEOUT = 120.0  # seconds for a frame to be acked at all: past it the phase fails


class BoardWriter:
    """One board's writer (see the module's docstring). ``waits``: (first send, seconds to the ack)
    per frame; ``acked``: every acked idempotency key."""

    def __init__(self, servers: list[ArenaServe], token: str, board: str, source: StreamSource) -> None:
        self.by_node = dict(zip(node_ids(len(servers)), servers, strict=True))
        self.token = token
        self.board = board
        self.source = source
        self.waits: list[tuple[float, float]] = []
        self.acked: set[str] = set()
        self.resends = 0
        self._conn: ArenaWs | None = None

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                events, _ = self.source.next_batch(int(time.time() * 1000))
                sent = time.perf_counter()
                await self._deliver(events, sent + DELIVER_TIMEOUT)
                self.waits.append((sent, time.perf_counter() - sent))
                self.source.accepted(events)
                self.acked.update(e[0] for e in events)
        finally:
            await self._drop()

    async def _deliver(self, events: list[Event], deadline: float) -> None:
        while True:
            if self._conn is None:
                self._conn = await self._connect()
            if self._conn is not None:
                try:
                    statuses = await asyncio.wait_for(await self._conn.submit(events), FRAME_TIMEOUT)
                except (OSError, TimeoutError, AckError, WebSocketException):
                    statuses = []
                if statuses and all(s in ACKED for s in statuses):
                    return
                await self._drop()  # the board moved, or its node is leaving: ask who owns it now
            if time.perf_counter() > deadline:
                raise TimeoutError(f"board {self.board}: a frame was not acked within {DELIVER_TIMEOUT:g}s")
            self.resends += 1
            await asyncio.sleep(0.02)  # a game server's pause before it sends again

    async def _connect(self) -> ArenaWs | None:
        view = await asyncio.to_thread(cluster_view, list(self.by_node.values()))
        owner = None if view is None else view["boards"].get(self.board, {}).get("owner")
        server = self.by_node.get(owner) if isinstance(owner, str) else None
        if server is None or not server.alive():
            return None
        try:
            return await ArenaWs.open(ArenaTarget(server.url, self.token, board=self.board))
        except (OSError, TimeoutError, ServerFailed, WebSocketException):
            return None

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def spread(values: list[float]) -> dict[str, float] | None:
    """min/median/max of ``values``, rounded to ms (None when there are none)."""
    if not values:
        return None
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


async def rolling_restarts(servers: list[ArenaServe], token: str, boards: list[str], members: int, batch: int,
                           rounds: int, seed: int) -> dict[str, Any]:
    """``rounds`` rolling restarts of ``servers`` under one `BoardWriter` per board."""
    workload = Workload(WorkloadSpec(members=members, seed=seed, zipf=0.0, run_id=f"handoff-{time.time_ns()}"))
    writers = [BoardWriter(servers, token, b, workload.stream(i, batch, "h")) for i, b in enumerate(boards)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(w.run(stop)) for w in writers]

    async def frames_acked(count: int, what: str) -> None:
        goal = [len(w.waits) + count for w in writers]
        await asyncio.to_thread(wait_until, lambda: all(len(w.waits) >= g for w, g in zip(writers, goal, strict=True))
                                or any(t.done() for t in tasks), what, 60.0)

    restarts: list[dict[str, Any]] = []
    rounds_at: list[tuple[float, float]] = []
    try:
        await frames_acked(20, "ingest under way")
        for r in range(rounds):
            began = time.perf_counter()
            for node_id, server in zip(node_ids(len(servers)), servers, strict=True):
                progress(f"hand-off: round {r + 1}/{rounds}: SIGTERM {node_id}")
                signalled = time.perf_counter()
                code = await asyncio.to_thread(server.stop, 60.0)
                exited = time.perf_counter()
                await asyncio.to_thread(server.start, 120.0, server.port)
                await asyncio.to_thread(wait_until, lambda: placed(servers, boards),
                                        "every board back on its placement's node", 120.0, 0.1)
                restarts.append({"round": r, "node": node_id, "exit_code": code, "exit_s": round(exited - signalled, 3),
                                 "back_s": round(time.perf_counter() - exited, 3)})
            await frames_acked(20, "ingest after the round")
            rounds_at.append((began, time.perf_counter()))
    finally:
        stop.set()
        failures = [x for x in await asyncio.gather(*tasks, return_exceptions=True) if isinstance(x, BaseException)]
    longest = [max((wait for sent, wait in w.waits if began <= sent <= ended), default=0.0)
               for began, ended in rounds_at for w in writers]
    waits = sorted(wait for w in writers for _, wait in w.waits)
    return {"rounds": rounds, "boards": len(boards), "batch": batch,
            "frames": len(waits), "events_acked": sum(len(w.acked) for w in writers),
            "resends": sum(w.resends for w in writers),
            "ack_wait_p50_ms": round(statistics.median(waits) * 1000, 2) if waits else None,
            "longest_wait_s": spread(longest), "longest_wait_per_board_round_s": [round(x, 3) for x in longest],
            "exit_s": spread([x["exit_s"] for x in restarts]), "back_s": spread([x["back_s"] for x in restarts]),
            "restarts": restarts, "writer_errors": [repr(f) for f in failures],
            "acked_keys": {w.board: w.acked for w in writers}}


async def journaled_keys(url: str, schema: str) -> dict[str, set[str]]:
    """board -> the idempotency keys of its score events in ``schema``'s tables."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(f"SELECT board, idempotency_key FROM {schema}.score_event")
    finally:
        await conn.close()
    keys: dict[str, set[str]] = {}
    for board, key in rows:
        keys.setdefault(board, set()).add(bytes(key).decode())
    return keys


def run_handoff(workdir: Path, token: str, url: str, schema: str, boards: list[str], nodes: int, members: int,
                batch: int, rounds: int, tree: Path | None, seed: int = 1) -> dict[str, Any]:
    with running_nodes(workdir, token, url, schema, boards, nodes, tree=tree) as servers:
        wait_until(lambda: placed(servers, boards), "every board on its placement's node", 120.0, 0.2)
        result = asyncio.run(rolling_restarts(servers, token, boards, members, batch, rounds, seed))
    acked: dict[str, set[str]] = result.pop("acked_keys")
    journaled = asyncio.run(journaled_keys(url, schema))
    result["lost"] = sum(len(keys - journaled.get(board, set())) for board, keys in acked.items())
    result["ok"] = result["lost"] == 0 and not result["writer_errors"] and all(acked.values())
    progress(f"hand-off: {fmt_int(result['events_acked'])} events acked, {result['lost']} lost")
    return result


def print_handoff(h: dict[str, Any], nodes: int) -> None:
    def mmm(s: dict[str, float] | None) -> str:
        return "-" if s is None else f"{s['min']:.2f}/{s['median']:.2f}/{s['max']:.2f} s"

    print(f"\nhand-off: rolling restart of {nodes} nodes (SIGTERM, start again, wait until every board is on its"
          f" placement's node) x {h['rounds']} round(s), under ingest: {h['boards']} boards, one frame of"
          f" {h['batch']} in flight each, sent to the board's owner")
    print(f"  longest ack wait per board and round, min/median/max: {mmm(h['longest_wait_s'])}"
          f"   (every frame: p50 {h['ack_wait_p50_ms']} ms; {h['resends']} resends)")
    print(f"  SIGTERM to exit: {mmm(h['exit_s'])}   start to placed: {mmm(h['back_s'])}"
          f"   exit codes {sorted({r['exit_code'] for r in h['restarts']}, key=str)}")
    print(f"  {fmt_int(h['events_acked'])} events acked, {h['lost']} not in the journal"
          + (f"; writer errors: {h['writer_errors']}" if h["writer_errors"] else ""))
