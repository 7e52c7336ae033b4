"""The game-server simulator's driver, shared by Arena (WebSocket) and the Redis peer.

A *submitter* is one connection that can take many frames in flight: ``submit``
sends a frame and returns a future of its per-event statuses
(``"accepted"``, ``"duplicate"``, ``"rejected:<reason>"``), after the
transport checked that the ack belongs to the frame and echoes every
idempotency key in order. The driver keeps ``inflight`` frames outstanding per
connection, optionally paced to a total event rate, and checks every status
against what the workload expects: new events ``accepted``, retries
``duplicate``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from loadtest.common import RunConfig
from loadtest.stats import Recorder, fmt_int, now, progress
from loadtest.workload import ACCEPTED, DUPLICATE, Event


class AckError(Exception):
    """An ack that does not match its frame (wrong op, id, count or keys)."""


class Submitter(Protocol):
    async def submit(self, events: list[Event]) -> asyncio.Future[list[str]]: ...


class Source(Protocol):
    def next_batch(self, now_ms: int) -> tuple[list[Event], list[str]] | None: ...

    def accepted(self, events: list[Event]) -> None: ...


@dataclass
class IngestCounts:
    """What was sent and what came back. ``ok`` is the verdict of the run."""

    frames_sent: int = 0
    frames_acked: int = 0
    events_sent: int = 0
    new_sent: int = 0
    retries_sent: int = 0
    results_checked: int = 0
    accepted: int = 0
    duplicate: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    unexpected: Counter[str] = field(default_factory=Counter)
    ack_errors: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return (
            self.results_checked == self.events_sent
            and self.frames_acked == self.frames_sent
            and self.accepted == self.new_sent
            and self.duplicate == self.retries_sent
            and not self.rejected
            and not self.unexpected
            and not self.ack_errors
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "frames_sent": self.frames_sent,
            "frames_acked": self.frames_acked,
            "events_sent": self.events_sent,
            "new_sent": self.new_sent,
            "retries_sent": self.retries_sent,
            "results_checked": self.results_checked,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": dict(self.rejected),
            "unexpected": dict(self.unexpected),
            "ack_errors": dict(self.ack_errors),
            "ok": self.ok,
        }

    def merge(self, other: IngestCounts) -> None:
        for name in ("frames_sent", "frames_acked", "events_sent", "new_sent", "retries_sent",
                     "results_checked", "accepted", "duplicate"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rejected.update(other.rejected)
        self.unexpected.update(other.unexpected)
        self.ack_errors.update(other.ack_errors)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Driver:
    """Runs sources through submitters until a deadline, a budget or exhaustion.

    ``deadline`` is a ``perf_counter`` time after which no frame is sent;
    ``rate`` (events/s, all connections together) paces sending, None = flat
    out; ``max_new`` stops once that many new events were sent (rebuild).
    """

    def __init__(self, counts: IngestCounts, recorder: Recorder, *, inflight: int,
                 deadline: float | None = None, rate: float | None = None,
                 max_new: int | None = None, drain_timeout: float = 60.0,
                 stop_event: asyncio.Event | None = None) -> None:
        self.stop_event = stop_event
        self.counts = counts
        self.recorder = recorder
        self.inflight = inflight
        self.deadline = deadline
        self.rate = rate
        self.max_new = max_new
        self.drain_timeout = drain_timeout
        self._outstanding: set[asyncio.Future[list[str]]] = set()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    async def run(self, pairs: list[tuple[Submitter, Source]]) -> None:
        if self.rate is not None and self.rate <= 0:
            return  # a zero rate sends nothing (the lag probe with --lag-share 0)
        per_conn_rate = self.rate / len(pairs) if self.rate is not None else None
        await asyncio.gather(*(self._connection(s, src, per_conn_rate) for s, src in pairs))
        if self._outstanding:
            _done, pending = await asyncio.wait(set(self._outstanding), timeout=self.drain_timeout)
            if pending:
                self.counts.ack_errors["no_ack_before_timeout"] += len(pending)
                self.recorder.error("no_ack", f"{len(pending)} frames unacked after {self.drain_timeout}s")
                for fut in pending:
                    fut.cancel()

    def _more(self) -> bool:
        if self.stopped or (self.stop_event is not None and self.stop_event.is_set()):
            return False
        if self.deadline is not None and now() >= self.deadline:
            return False
        return not (self.max_new is not None and self.counts.new_sent >= self.max_new)

    async def _connection(self, sub: Submitter, source: Source, rate: float | None) -> None:
        sem = asyncio.Semaphore(self.inflight)
        counts = self.counts
        next_slot = now()
        while self._more():
            await sem.acquire()
            if rate is not None:
                delay = next_slot - now()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not self._more():
                    sem.release()
                    break
            batch = source.next_batch(_now_ms())
            if batch is None:
                sem.release()
                break
            events, expected = batch
            n_new = expected.count(ACCEPTED)
            if rate is not None:
                next_slot = max(next_slot + len(events) / rate, now() - 1.0)
            t0 = now()
            try:
                fut = await sub.submit(events)
            except Exception as exc:  # noqa: BLE001 - connection gone: count it, stop this connection
                sem.release()
                counts.ack_errors[f"send:{type(exc).__name__}"] += 1
                self.recorder.error("send", repr(exc))
                break
            counts.frames_sent += 1
            counts.events_sent += len(events)
            counts.new_sent += n_new
            counts.retries_sent += len(events) - n_new
            self._outstanding.add(fut)
            fut.add_done_callback(partial(self._acked, events, expected, n_new, t0, sem, source))

    def _acked(self, events: list[Event], expected: list[str], n_new: int, t0: float,
               sem: asyncio.Semaphore, source: Source, fut: asyncio.Future[list[str]]) -> None:
        sem.release()
        self._outstanding.discard(fut)
        counts = self.counts
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            counts.ack_errors[type(exc).__name__] += 1
            self.recorder.error(type(exc).__name__, str(exc))
            return
        statuses = fut.result()
        t1 = now()
        counts.frames_acked += 1
        counts.results_checked += len(statuses)
        self.recorder.add(t0, t1, len(events))
        if statuses == expected:  # the common case: one C-level list comparison
            counts.accepted += n_new
            counts.duplicate += len(events) - n_new
            if n_new == len(events):
                source.accepted(events)
            elif n_new:
                source.accepted([e for e, x in zip(events, expected, strict=True) if x is ACCEPTED])
            return
        keep: list[Event] = []
        for event, want, got in zip(events, expected, statuses, strict=True):
            if got == ACCEPTED:
                counts.accepted += 1
                if want == ACCEPTED:
                    keep.append(event)
            elif got == DUPLICATE:
                counts.duplicate += 1
            else:
                counts.rejected[got.partition(":")[2] or got] += 1
            if got != want:
                counts.unexpected[f"{want}->{got}"] += 1
                if sum(counts.unexpected.values()) <= 5:
                    self.recorder.error("unexpected_status", f"{event} expected {want}, got {got}")
        if keep:
            source.accepted(keep)


async def report_progress(label: str, recorder: Recorder, counts: IngestCounts, start: float,
                          every: float, unit: str = "ev/s", total: int | None = None) -> None:
    """Print a progress line every ``every`` seconds until cancelled."""
    last_t, last_n = now(), recorder.total
    while True:
        await asyncio.sleep(every)
        t, n = now(), recorder.total
        rate = (n - last_n) / max(1e-9, t - last_t)
        last_t, last_n = t, n
        of = f"/{fmt_int(total)}" if total else ""
        rej = sum(counts.rejected.values())
        bad = sum(counts.unexpected.values()) + sum(counts.ack_errors.values())
        progress(f"{label} {t - start:5.1f}s {fmt_int(rate)} {unit} acked={fmt_int(counts.results_checked)}{of}"
                 f" dup={fmt_int(counts.duplicate)} rej={fmt_int(rej)} bad={bad}"
                 f" inflight_frames={counts.frames_sent - counts.frames_acked}")


async def run_ingest(label: str, pairs: list[tuple[Submitter, Source]], *, inflight: int,
                     seconds: float | None, warmup: float = 0.0, rate: float | None = None,
                     windows: int = 1, progress_every: float = 2.0, max_new: int | None = None,
                     total: int | None = None, stop_event: asyncio.Event | None = None
                     ) -> dict[str, Any]:
    """One ingest phase; returns counts, rate (events/s over windows), ack latency.

    ``seconds=None`` runs until the sources are exhausted (prefill); setting
    ``stop_event`` ends the phase early, still waiting for every ack."""
    counts = IngestCounts()
    start = now()
    recorder = Recorder(measure_from=start + warmup if seconds is not None else start)
    deadline = None if seconds is None else start + warmup + seconds
    driver = Driver(counts, recorder, inflight=inflight, deadline=deadline, rate=rate, max_new=max_new,
                    stop_event=stop_event)
    reporter = asyncio.create_task(report_progress(label, recorder, counts, start, progress_every, total=total))
    try:
        await driver.run(pairs)
    finally:
        reporter.cancel()
    end = now()
    m_start = recorder.measure_from
    m_end = min(deadline, end) if deadline is not None else end
    summary = recorder.summary(m_start, m_end, windows)
    return {
        "counts": counts.as_dict(),
        "seconds": round(end - start, 3),
        "measured_seconds": round(m_end - m_start, 3),
        # events acked per second in the measured interval (acks that land
        # during the warm-up, or after the deadline while draining, are not counted)
        "events_per_s": summary["per_s"],
        "rate": summary["rate"],
        "window_rates": summary["window_rates"],
        "ack_latency": summary["latency"],
        "errors": summary["errors"],
        "error_samples": summary["error_samples"],
        "ok": counts.ok,
    }


def background_rate(cfg: RunConfig, max_rate: float | None) -> float:
    """Events/s of a background stream: ``lag_rate_share`` of the measured max."""
    return (max_rate or 10_000.0) * cfg.lag_rate_share


@asynccontextmanager
async def background_ingest(cfg: RunConfig, label: str, pairs: list[tuple[Submitter, Source]],
                            rate: float) -> AsyncIterator[dict[str, Any]]:
    """The pairs streaming at ``rate`` events/s (after a warm-up) for as long as the block runs;
    the dict yielded gets their counts, events/s and verdict when the block ends."""
    stop = asyncio.Event()
    streaming = asyncio.create_task(run_ingest(label, pairs, inflight=cfg.inflight, seconds=600.0, rate=rate,
                                               progress_every=cfg.progress_every, stop_event=stop))
    out: dict[str, Any] = {}
    try:
        await asyncio.sleep(max(0.5, cfg.warmup))
        yield out
    finally:
        stop.set()
        background = await streaming
        out.update({k: background[k] for k in ("counts", "events_per_s", "ok")})
