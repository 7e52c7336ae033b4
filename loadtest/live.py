"""`python -m loadtest live`: live views under ingest (issue 22, DESIGN.md "Live views").

N subscribers, WebSocket (`/v1/live`) and server-sent events mixed, half on one shared top-10
view, half spread over 100 member views (`rank` of the 100 most active members). Measured:

- (a) ingest flat out without the subscribers, then with them, in the same run: the ratio;
- (b) at half the rate without subscribers, markers (each a new top score, so it must change the
  shared view): from the marker's ack to the first update that contains it, on every subscriber of
  the shared view, p50/p99;
- (c) updates delivered per second, and the server's CPU per update beyond what the same events
  cost without subscribers (the marginal cost of delivery);
- (d) with ``--idle N``: the server's RSS per idle subscriber (one quiet view each).

With ``--hostile SHAPE`` it measures instead what one public reader can take from ingest (issue
31, DoS 4): ingest flat out without the reader, with one `/v1/live` connection holding as many
distinct views as the server grants (up to 100: ``top`` asks top-1000 tables at offsets 0..99,
the issue's attack; ``members`` asks 1,000 of the most active members per view, which reaches
both `max_view_entries` and `max_view_members`), then without it again: the ratio of the middle
rate to the mean of the other two, the updates the reader got, the CPU split and load average.

The subscribers are raw asyncio protocols (a WebSocket frame parser and an event-stream splitter
that count updates and look for the marker's name), so that the load generator stays cheap.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import statistics
import time
from typing import Any, cast
from urllib.parse import urlsplit

import orjson
from websockets.frames import Frame, Opcode

from loadtest.arena_client import ArenaTarget, ArenaWs
from loadtest.arena_run import arena_background, arena_ingest, arena_prefill
from loadtest.common import RunConfig
from loadtest.query import arena_http_path
from loadtest.stats import CpuMeter, fmt_int, fmt_ms, latency_summary, now, progress, rss_bytes
from loadtest.workload import Workload

MEMBER_VIEWS = 100
PUSH_INTERVAL_MS = 100  # the server's default push_interval_ms (bench_config keeps it)
MARKER_HEADROOM = 1_000_000  # the workload's values stay this far below max_value: markers top them


class Markers:
    """The marker in flight: which shared-view subscribers still wait for it, when each saw it."""

    def __init__(self) -> None:
        self.name: bytes | None = None
        self.waiting: set[Subscriber] = set()
        self.seen_at: list[float] = []

    def start(self, name: str, subscribers: list[Subscriber]) -> None:
        self.name, self.seen_at = name.encode(), []
        self.waiting = set(subscribers)

    def check(self, subscriber: Subscriber, payload: bytes) -> None:
        if self.name is not None and subscriber in self.waiting and self.name in payload:
            self.waiting.discard(subscriber)
            self.seen_at.append(now())


class Subscriber(asyncio.Protocol):
    """One live connection: ``kind`` "ws" (`/v1/live`, a subscribe frame per view) or "sse" (a
    query route with `Accept: text/event-stream`, the first view). Counts updates, and the
    subscriptions granted and refused (`too_many_subscriptions`); answers pings."""

    def __init__(self, kind: str, host: str, views: list[dict[str, Any]], markers: Markers | None) -> None:
        self.kind = kind
        self.markers = markers
        self.updates = 0
        self.subscribed = 0
        self.refused = 0
        self.errors: list[str] = []
        self.opened = False
        self.first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        if kind == "ws":
            key = base64.b64encode(os.urandom(16)).decode()
            self._request = (f"GET /v1/live HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
            self._subscribe = b"".join(
                Frame(Opcode.TEXT, orjson.dumps({"op": "subscribe", "id": i, "view": view})).serialize(mask=True)
                for i, view in enumerate(views, 1))
        else:
            view = views[0]
            path = arena_http_path(view["board"], view["period"], view["op"], view.get("member", ""))
            self._request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode()
            self._subscribe = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self._transport.write(self._request)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection lost: {exc!r}")

    def _fail(self, error: str) -> None:
        if len(self.errors) < 3:
            self.errors.append(error)
        if not self.first.done():
            self.first.set_exception(ConnectionError(error))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if not self.opened:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buffer[:12])
            if status not in (b"HTTP/1.1 101", b"HTTP/1.1 200"):
                self._fail(f"refused: {bytes(buffer[:200])!r}")
                return
            del buffer[:end + 4]
            self.opened = True
            if self._subscribe and self._transport is not None:
                self._transport.write(self._subscribe)
        if self.kind == "ws":
            self._frames()
        else:
            self._events()

    def _update(self, payload: bytes) -> None:
        self.updates += 1
        if not self.first.done():
            self.first.set_result(None)
        if self.markers is not None:
            self.markers.check(self, payload)

    def _frames(self) -> None:
        buffer = self._buffer
        while len(buffer) >= 2:
            opcode, length, header = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
            if length == 126:
                if len(buffer) < 4:
                    return
                length, header = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                if len(buffer) < 10:
                    return
                length, header = int.from_bytes(buffer[2:10], "big"), 10
            if len(buffer) < header + length:
                return
            payload = bytes(buffer[header:header + length])
            del buffer[:header + length]
            if opcode == Opcode.PING and self._transport is not None:
                self._transport.write(Frame(Opcode.PONG, payload).serialize(mask=True))
            elif opcode == Opcode.TEXT and payload.startswith(b'{"op":"update"'):
                self._update(payload)
            elif opcode == Opcode.TEXT and payload.startswith(b'{"op":"subscribed"'):
                self.subscribed += 1
            elif opcode == Opcode.TEXT and payload.startswith(b'{"op":"error"') and b"too_many_subscriptions" in payload:
                self.refused += 1
            elif opcode == Opcode.TEXT and payload.startswith(b'{"op":"error"'):
                self._fail(payload[:200].decode(errors="replace"))

    def _events(self) -> None:
        buffer = self._buffer
        while (end := buffer.find(b"\n\n")) >= 0:
            event = bytes(buffer[:end])
            del buffer[:end + 2]
            if b"event: update" in event:
                self._update(event)
            elif b"event: error" in event:
                self._fail(event[:200].decode(errors="replace"))

    def describe(self) -> str:
        return f"{self.kind} {self._request[:80]!r} opened={self.opened} received {bytes(self._buffer[:200])!r}"

    def close(self) -> None:
        if self._transport is not None:
            self._transport.abort()


def _views(workload: Workload, board: str, period: str) -> list[dict[str, Any]]:
    """The shared top-10 view, then the member views of the most active members."""
    top = {"op": "top", "board": board, "period": period, "limit": 10}
    members = [{"op": "rank", "board": board, "period": period, "member": workload.names[workload.hot[k]]}
               for k in range(min(MEMBER_VIEWS, len(workload.hot)))]
    return [top, *members]


async def _open(target: ArenaTarget, kind: str, views: list[dict[str, Any]], markers: Markers | None) -> Subscriber:
    parts = urlsplit(target.base_url)
    loop = asyncio.get_running_loop()
    assert parts.hostname is not None and parts.port is not None
    _, subscriber = await loop.create_connection(lambda: Subscriber(kind, parts.netloc, views, markers),
                                                 parts.hostname, parts.port)
    return subscriber


async def open_subscribers(target: ArenaTarget, views: list[dict[str, Any]], count: int,
                           markers: Markers | None, timeout: float = 120.0) -> list[Subscriber]:
    """``count`` subscribers: even ones on ``views[0]`` (the shared view), odd ones over the
    others; WebSocket and event stream alternate in pairs. Returns when each has its first update."""
    subscribers: list[Subscriber] = []
    for i in range(count):
        view = views[0] if i % 2 == 0 or len(views) == 1 else views[1 + (i // 2) % (len(views) - 1)]
        kind = "ws" if i % 4 < 2 else "sse"
        subscribers.append(await _open(target, kind, [view], markers if view is views[0] else None))
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(s.first for s in subscribers))
    except TimeoutError:
        stuck = [s.describe() for s in subscribers if not s.first.done()]
        raise RuntimeError(f"{len(stuck)} subscribers got no first update in {timeout:g}s: {stuck[:3]}") from None
    return subscribers


def _delivered(subscribers: list[Subscriber]) -> int:
    return sum(s.updates for s in subscribers)


async def marker_latencies(cfg: RunConfig, target: ArenaTarget, shared: list[Subscriber], markers: Markers,
                           seconds: float) -> dict[str, Any]:
    """Submit markers one after another for ``seconds``: each a new top score of a new member.
    A marker's latency on a subscriber: from its ack to the first update there that names it."""
    conn = await ArenaWs.open(target)
    latencies: list[float] = []
    missed = 0
    sent = 0
    top_value = cfg.max_value
    ends = now() + seconds
    try:
        while now() < ends:
            name = f"marker/{cfg.run_id}/{sent}"
            markers.start(name, shared)
            future = await conn.submit([(f"{cfg.run_id}-marker{sent}", name, top_value + sent,
                                         time.time_ns() // 1_000_000)])
            statuses = await asyncio.wait_for(future, 30)
            acked = now()
            if statuses != ["accepted"]:
                raise RuntimeError(f"marker {sent} was not accepted: {statuses}")
            deadline = acked + 10 * PUSH_INTERVAL_MS / 1000
            while markers.waiting and now() < deadline:
                await asyncio.sleep(0.002)
            missed += len(markers.waiting)
            latencies += [max(0.0, seen - acked) for seen in markers.seen_at]
            sent += 1
            await asyncio.sleep(0.013 * (1 + sent % 7))  # off the push rounds' phase
    finally:
        markers.start("", [])
        await conn.close()
    return {"markers": sent, "samples": len(latencies), "missed": missed, "latency": latency_summary(latencies)}


async def idle_memory(target: ArenaTarget, board: str, period: str, count: int) -> dict[str, Any]:
    """The server's RSS per idle subscriber: ``count`` connections, each on a view that never
    changes (a member that never plays: an absent member is a state)."""
    assert target.pid is not None
    await asyncio.sleep(1.0)
    before = rss_bytes(target.pid)
    quiet = [{"op": "rank", "board": board, "period": period, "member": f"idle-{i}"} for i in range(count)]
    subscribers = await open_subscribers(target, quiet[:MEMBER_VIEWS + 1], count, None)
    await asyncio.sleep(1.0)  # let the server settle before reading RSS
    after = rss_bytes(target.pid)
    for s in subscribers:
        s.close()
    per = (after - before) / count if before is not None and after is not None else None
    return {"idle": count, "rss_before": before, "rss_after": after, "bytes_per_subscriber": per,
            "errors": [e for s in subscribers for e in s.errors if "connection lost" not in e][:10]}


async def live_benchmark(cfg: RunConfig, workload: Workload, target: ArenaTarget, subscribers: int,
                         idle: int) -> dict[str, Any]:
    """The four measures on a prefilled server; see the module docstring."""
    out: dict[str, Any] = {"subscribers": subscribers, "push_interval_ms": PUSH_INTERVAL_MS}
    out["prefill"] = await arena_prefill(cfg, workload, target)
    out["without"] = await arena_ingest(cfg, workload, target, label="ingest without subscribers", stream_label="a")
    max_rate = out["without"]["events_per_s"]
    views = _views(workload, target.board, cfg.period)
    markers = Markers()
    subs = await open_subscribers(target, views, subscribers, markers)
    shared = [s for s in subs if s.markers is not None]
    progress(f"{len(subs)} subscribers connected ({len(shared)} on the shared top-10 view)")
    try:
        before = _delivered(subs)
        out["with"] = await arena_ingest(cfg, workload, target, label="ingest with subscribers", stream_label="b")
        out["with"]["updates"] = _delivered(subs) - before
        out["with"]["updates_per_s"] = out["with"]["updates"] / out["with"]["cpu_wall_seconds"]
        rate = max_rate / 2
        async with arena_background(cfg, workload, target, rate, "markerbg") as background:
            cpu = CpuMeter(target.pid)
            before = _delivered(subs)
            out["markers"] = await marker_latencies(cfg, target, shared, markers, cfg.seconds)
            out["markers"].update(cpu.stop())
            out["markers"]["updates"] = _delivered(subs) - before
        out["markers"]["background"] = background
        out["markers"]["background_rate"] = rate
    finally:
        errors = [e for s in subs for e in s.errors][:10]
        for s in subs:
            s.close()
    out["subscriber_errors"] = errors
    out["idle"] = await idle_memory(target, target.board, cfg.period, idle) if idle > 0 else None
    out["summary"] = summarise(out)
    return out


HOSTILE_VIEWS = 100
HOSTILE_SHAPES = ("members", "top")


def hostile_views(workload: Workload, board: str, period: str, shape: str) -> list[dict[str, Any]]:
    """The views of one hostile reader, all distinct and legal: see the module docstring."""
    if shape == "top":
        return [{"op": "top", "board": board, "period": period, "limit": 1000, "offset": k} for k in range(HOSTILE_VIEWS)]
    hot = list(dict.fromkeys(workload.hot))  # the most active first, each once
    taken = set(hot)
    rest = [i for i in range(len(workload.names)) if i not in taken]
    active = [workload.names[i] for i in hot + rest[:max(0, 1000 + HOSTILE_VIEWS - len(hot))]]
    return [{"op": "members", "board": board, "period": period, "members": active[k:k + 1000]} for k in range(HOSTILE_VIEWS)]


async def _hostile_phase(cfg: RunConfig, workload: Workload, target: ArenaTarget, views: list[dict[str, Any]],
                         n: int) -> dict[str, Any]:
    """Ingest flat out while one reader holds ``views`` (those the server grants)."""
    reader = await _open(target, "ws", views, None)
    try:
        async with asyncio.timeout(60):
            while reader.subscribed + reader.refused < len(views) or reader.updates < reader.subscribed:
                if reader.errors:
                    raise RuntimeError(f"the hostile reader failed: {reader.errors}")
                await asyncio.sleep(0.05)
        before, started = reader.updates, now()
        res = await arena_ingest(cfg, workload, target, label=f"ingest with the hostile reader ({n})", stream_label=f"h{n}")
        res["reader"] = {"asked": len(views), "granted": reader.subscribed, "refused": reader.refused,
                         "updates": reader.updates - before, "updates_per_s": (reader.updates - before) / max(1e-9, now() - started),
                         "errors": [e for e in reader.errors if "connection lost" not in e]}
    finally:
        reader.close()
    return res


def _per_server_cpu(phase: dict[str, Any]) -> float | None:
    """Events acked per second of the server's CPU: what contention on a shared machine moves least."""
    cpu = phase.get("server_cpu")
    return phase["events_per_s"] / cpu if cpu else None


async def hostile_benchmark(cfg: RunConfig, workload: Workload, target: ArenaTarget, shape: str,
                            rounds: int) -> dict[str, Any]:
    """Ingest without the reader, then ``rounds`` times with it and without it again; each
    round's ratio is its rate with the reader over the mean of the phases without it on either
    side (so a drift of the shared machine's load cancels out); see the module docstring."""
    out: dict[str, Any] = {"shape": shape, "rounds": rounds}
    out["prefill"] = await arena_prefill(cfg, workload, target)
    views = hostile_views(workload, target.board, cfg.period, shape)
    alone = [await arena_ingest(cfg, workload, target, label="ingest without the reader (0)", stream_label="a0")]
    hostile: list[dict[str, Any]] = []
    for n in range(1, rounds + 1):
        hostile.append(await _hostile_phase(cfg, workload, target, views, n))
        alone.append(await arena_ingest(cfg, workload, target, label=f"ingest without the reader ({n})", stream_label=f"a{n}"))
    out["without"], out["with"] = alone, hostile
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    ratios = [w["events_per_s"] / ((a["events_per_s"] + b["events_per_s"]) / 2) for w, a, b in zip(hostile, alone, alone[1:], strict=False)]
    cpu_ratios = []
    for w, a, b in zip(hostile, alone, alone[1:], strict=False):
        per = [_per_server_cpu(x) for x in (w, a, b)]
        if None not in per:
            cpu_ratios.append(per[0] / ((per[1] + per[2]) / 2))  # type: ignore[operator]
    ratio = statistics.median(ratios)
    out["summary"] = {
        "ingest_ratio": ratio, "ingest_ratios": ratios,
        "per_server_cpu_ratio": statistics.median(cpu_ratios) if cpu_ratios else None,
        "reader": hostile[-1]["reader"],
        "ack_p99_ms": {"without": [a["ack_latency"]["p99_ms"] for a in alone], "with": [w["ack_latency"]["p99_ms"] for w in hostile]},
        "cpu": {name: [{k: x.get(k) for k in ("client_cpu", "server_cpu", "other_cpu")} for x in phases]
                for name, phases in (("without", alone), ("with", hostile))},
        "targets": {"ingest_ratio >= 0.8": ratio >= 0.8},
        "ok": all(x["ok"] for x in alone + hostile) and not any(w["reader"]["errors"] for w in hostile),
    }
    return out


def _rates(phases: list[dict[str, Any]]) -> str:
    return " / ".join(fmt_int(x["events_per_s"]) for x in phases)


def print_hostile(out: dict[str, Any]) -> None:
    s, reader = out["summary"], out["summary"]["reader"]
    print(f"one hostile /v1/live reader ({out['shape']} views: {reader['granted']} of {reader['asked']} granted,"
          f" {reader['refused']} refused too_many_subscriptions), {out['rounds']} rounds")
    print(f"ingest without the reader  {_rates(out['without'])} ev/s")
    print(f"ingest with the reader     {_rates(out['with'])} ev/s")
    per_cpu = s["per_server_cpu_ratio"]
    print(f"ratio (median of rounds)   {s['ingest_ratio']:.2f}x  (rounds: {', '.join(f'{r:.2f}' for r in s['ingest_ratios'])});"
          f" per server CPU second {'n/a' if per_cpu is None else f'{per_cpu:.2f}x'}")
    p99 = s["ack_p99_ms"]
    print(f"ack p99 without {' / '.join(fmt_ms(x) for x in p99['without'])} ms, with {' / '.join(fmt_ms(x) for x in p99['with'])} ms;"
          f" the reader got {fmt_int(reader['updates_per_s'])} updates/s in the last round")
    for name, phases in s["cpu"].items():
        for cpu in phases:
            print(f"    cpu client/server/other {name:<8} {cpu['client_cpu']}/{cpu['server_cpu']}/{cpu['other_cpu']}")
    print(f"load average {' '.join(str(x) for x in out['load_average'])}")
    print("targets: " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in s["targets"].items()))
    print(f"ok={s['ok']}")


def summarise(out: dict[str, Any]) -> dict[str, Any]:
    """The four measures and the issue's targets (at 1,000 subscribers)."""
    without, with_, marks = out["without"], out["with"], out["markers"]
    ratio = with_["events_per_s"] / without["events_per_s"] if without["events_per_s"] else None
    wall = marks["cpu_wall_seconds"]
    events = marks["background"]["counts"]["results_checked"] + marks["markers"]
    per_event = (without.get("server_cpu_seconds") or 0.0) / max(1, without["counts"]["results_checked"])
    server = marks.get("server_cpu_seconds")
    marginal = None if server is None else max(0.0, server - events * per_event)
    idle = out.get("idle")
    per_idle = idle["bytes_per_subscriber"] if idle else None
    p99 = marks["latency"]["p99_ms"]
    return {
        "ingest_ratio": ratio,
        "marker_p50_ms": marks["latency"]["p50_ms"],
        "marker_p99_ms": p99,
        "updates_per_s": marks["updates"] / wall if wall else None,
        "updates_per_s_full_speed": with_["updates_per_s"],
        "server_us_per_update": None if marginal is None else 1e6 * marginal / max(1, marks["updates"]),
        "idle_bytes_per_subscriber": per_idle,
        "cpu": {name: {k: phase.get(k) for k in ("client_cpu", "server_cpu", "other_cpu")}
                for name, phase in (("without", without), ("with", with_), ("markers", marks))},
        "targets": {
            "ingest_ratio >= 0.8": ratio is not None and ratio >= 0.8,
            f"marker p99 <= {PUSH_INTERVAL_MS + 50} ms": p99 <= PUSH_INTERVAL_MS + 50,
            "idle < 50 KB per subscriber": None if per_idle is None else per_idle < 50_000,
        },
        "ok": (without["ok"] and with_["ok"] and marks["background"]["ok"] and marks["missed"] == 0
               and not out["subscriber_errors"] and not (idle or {}).get("errors")),
    }


def print_live(out: dict[str, Any]) -> None:
    s = out["summary"]
    print(f"live views, {out['subscribers']} subscribers (WS and SSE; one shared top-10 view, {MEMBER_VIEWS} member"
          f" views), push_interval_ms={out['push_interval_ms']}")
    print(f"(a) ingest without / with subscribers  {fmt_int(out['without']['events_per_s'])} /"
          f" {fmt_int(out['with']['events_per_s'])} ev/s = {s['ingest_ratio']:.2f}x")
    print(f"(b) marker ack -> update at {fmt_int(out['markers']['background_rate'])} ev/s  p50 {fmt_ms(s['marker_p50_ms'])}"
          f" ms, p99 {fmt_ms(s['marker_p99_ms'])} ms  ({out['markers']['samples']} samples of"
          f" {out['markers']['markers']} markers, missed {out['markers']['missed']})")
    us = s["server_us_per_update"]
    print(f"(c) updates delivered  {fmt_int(s['updates_per_s'])}/s at half rate, {fmt_int(s['updates_per_s_full_speed'])}/s"
          f" at full speed; server CPU {'n/a' if us is None else f'{us:.1f}'} us per update (beyond ingest)")
    if out["idle"]:
        per = s["idle_bytes_per_subscriber"]
        print(f"(d) idle subscribers  {out['idle']['idle']}: RSS {fmt_int(out['idle']['rss_before'])} ->"
              f" {fmt_int(out['idle']['rss_after'])} B = {'n/a' if per is None else fmt_int(per)} B each")
    for name, cpu in s["cpu"].items():
        print(f"    cpu client/server/other during {name:<8} {cpu['client_cpu']}/{cpu['server_cpu']}/{cpu['other_cpu']}")
    print("targets: " + ", ".join(f"{k}: {'yes' if v else 'no' if v is not None else 'n/a'}" for k, v in s["targets"].items()))
    print(f"ok={s['ok']}" + (f" subscriber errors: {out['subscriber_errors']}" if out["subscriber_errors"] else ""))


def live_config(cfg: RunConfig) -> RunConfig:
    """The workload's values kept below the markers' (which top every other score)."""
    return dataclasses.replace(cfg, max_value=cfg.max_value - MARKER_HEADROOM)


def raise_open_files_limit() -> None:
    """Thousands of subscribers need as many sockets, here and in the child server (which
    inherits the limit): the soft limit goes up to the hard one."""
    with contextlib.suppress(ImportError):  # not on every platform
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
