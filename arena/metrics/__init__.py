"""Prometheus metrics of one Arena process (own registry, so tests can run several)."""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter

import prometheus_client.metrics
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from arena.engine.events import Result
from arena.metrics.stats import Stats

_outcome = itemgetter(1, 2)  # a Result's (status, reason)
_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_QUERY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)


class Metrics:
    """Prometheus series, and the per-second `Stats` of the last minutes fed by the same calls."""

    def __init__(self) -> None:
        self.stats = Stats()
        self.registry = CollectorRegistry()
        r = self.registry
        self.boards = _PerBoard()
        r.register(self.boards)
        self.visibility = Histogram(
            "arena_event_visibility_seconds",
            "From reading the frame to the events being applied (queryable)",
            ["board"],
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.queries = Latencies("arena_query_seconds", "Query latency inside the server", "route", _QUERY_BUCKETS)
        r.register(self.queries)
        self.rebuild = Gauge("arena_rebuild_seconds", "Duration of the last replay of a board", ["board"], registry=r)
        self.replayed = Gauge("arena_rebuild_events", "Events applied by the last replay of a board", ["board"], registry=r)
        self.snapshot_start = Gauge(
            "arena_start_snapshot_seq", "Seq of the snapshot the board's last start loaded; 0: it replayed in full",
            ["board"], registry=r,
        )
        self.restarts = Counter("arena_actor_restarts", "Board actor restarts after a crash", ["board"], registry=r)
        self.disputes = Counter("arena_disputes", "Admin voids by table", ["board", "period"], registry=r)
        self.settlements = Counter("arena_settlements", "Settlement revisions journaled (revision 0 at a close, "
                                   "then one per void that changes an award)", registry=r)
        self.webhook_deliveries = Counter(
            "arena_webhook_deliveries", "Webhook delivery attempts by outcome: delivered (2xx), error (tried again), "
            "failed (given up past the webhook's max age)", ["webhook", "outcome"], registry=r)
        self.webhook_pending = Gauge("arena_webhook_pending", "Webhook deliveries not delivered or failed yet",
                                     ["webhook"], registry=r)
        self.webhook_oldest_pending = Gauge(
            "arena_webhook_oldest_pending_seconds", "Age of the oldest pending webhook delivery (0: none)", ["webhook"],
            registry=r)
        self.settlement_log_failures = Counter(
            "arena_settlement_log_failures", "Appends to the settlement log that failed (tried again: the feed lags meanwhile)",
            registry=r,
        )
        self.feed_items = Counter("arena_settlement_feed_items", "Items answered by GET /v1/settlements", registry=r)
        self.journal_failures = Counter(
            "arena_journal_write_failures", "Batches rejected because the journal write failed", ["board"], registry=r
        )
        self.active_boards = Gauge(
            "arena_active_boards", "Boards loaded (or being activated) on this node when boards are activated on demand",
            registry=r,
        )
        self.activations = Counter(
            "arena_board_activations", "Boards activated on demand (an event, query or subscription woke them)", registry=r
        )
        self.unloads = Counter(
            "arena_board_unloads", "Boards unloaded: idle (idle_unload_seconds) or lru (past max_active_boards)",
            ["reason"], registry=r,
        )
        self.connections = Gauge("arena_connections", "Open game-server WebSocket connections", registry=r)
        self.forwarded = Counter(
            "arena_forwarded", "Sent on to the board's owner (a cluster): frames, queries, subscriptions, admin",
            ["kind"], registry=r,
        )

    def count_results(self, board: str, results: Iterable[Result]) -> None:
        """Count a batch's results with one increment per outcome (cheap on the hot path)."""
        tally = Tally(map(_outcome, results))  # Status and Reason are str enums: str hashes, in C
        outcomes: dict[tuple[str, str], int] = {}
        events = self.boards.events
        for (status, reason), n in tally.items():
            key = status.value, reason.value if reason else ""
            outcomes[key] = n
            events[board, *key] = events.get((board, *key), 0) + n
        self.stats.count(outcomes)

    def visibility_of(self, board: str) -> Callable[[float], None]:
        """What a board calls when a batch becomes queryable, with the seconds since its frame was read."""
        return _observer(self.visibility.labels(board), self.stats.visible)

    def query_latency_of(self, route: str) -> Callable[[float], None]:
        """What a query route calls with the seconds it took (`arena_query_seconds` and the
        per-second stats)."""
        series = self.queries.series(route)
        counts, bounds, record = series.counts, self.queries.bounds, self.stats.query

        def observe(seconds: float) -> None:
            counts[bisect_left(bounds, seconds)] += 1
            series.sum += seconds
            record(seconds)

        return observe

    def unloaded(self, board: str) -> None:
        """Drop the series of a board's last load and commits (the gauges of its replay, its
        visibility histogram) when it is unloaded: an idle board keeps no label children but its
        counters. They come back at its next activation."""
        for series in (self.visibility, self.rebuild, self.replayed, self.snapshot_start):
            try:
                series.remove(board)
            except KeyError:
                pass

    def watch_activations(self, active: Callable[[], float]) -> None:
        self.active_boards.set_function(active)

    def watch_boards(self, boards: Callable[[], Iterable[tuple[str, float, float]]]) -> None:
        """Read each board's ``(name, readiness, mailbox depth)`` from ``boards`` at each scrape."""
        self.boards.gauges = boards

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _PerBoard(Collector):
    """The series every board has, read at each scrape rather than kept as label children (a
    child costs about 1 KB; a node may hold 10,000 idle boards): `arena_events_total` from a
    plain tally, `arena_board_ready` and `arena_mailbox_events` from the live boards."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str, str], int] = {}
        """Events answered, by (board, status, reason)."""
        self.gauges: Callable[[], Iterable[tuple[str, float, float]]] = tuple

    @staticmethod
    def _families() -> tuple[CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            CounterMetricFamily("arena_events", "Submitted events by outcome", labels=["board", "status", "reason"]),
            GaugeMetricFamily("arena_board_ready", "1 when the board answers here, 0 while loading or served by "
                              "another node, -1 when failed", labels=["board"]),
            GaugeMetricFamily("arena_mailbox_events", "Events waiting in a board's mailbox", labels=["board"]),
        )

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        events, ready, mailbox = self._families()
        for labels, n in list(self.events.items()):
            events.add_metric(labels, n)
        for board, readiness, depth in self.gauges():
            ready.add_metric([board], readiness)
            mailbox.add_metric([board], depth)
        yield from (events, ready, mailbox)


class Latencies(Collector):
    """A histogram with one label, counted in plain lists and exported at each scrape with
    exactly the samples of a prometheus `Histogram` of the same name, label and buckets (buckets,
    count, sum, created). Its observation is an index and two additions: a `Histogram` child
    takes a lock per counter and searches its buckets one by one, about ten times the cost, on
    every query answered (docs/performance.md). Observed and scraped in the event loop's thread."""

    def __init__(self, name: str, documentation: str, label: str, buckets: Iterable[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.label = label
        self.bounds = (*buckets, math.inf)
        """Upper bounds, +Inf last: an observation counts in the first bound at or above it."""
        self._les = [floatToGoString(bound) for bound in self.bounds]  # type: ignore[no-untyped-call]
        self._series: dict[str, LatencySeries] = {}

    def series(self, value: str) -> LatencySeries:
        """The series of label ``value``, created on first use (as `Histogram.labels`)."""
        series = self._series.get(value)
        if series is None:
            series = self._series[value] = LatencySeries(len(self.bounds))
        return series

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "histogram")
        created = prometheus_client.metrics._use_created
        for value, series in self._series.items():
            total = 0
            for le, count in zip(self._les, series.counts, strict=True):
                total += count
                family.add_sample(self.name + "_bucket", {self.label: value, "le": le}, float(total))
            family.add_sample(self.name + "_count", {self.label: value}, float(total))
            family.add_sample(self.name + "_sum", {self.label: value}, series.sum)
            if created:
                family.add_sample(self.name + "_created", {self.label: value}, series.created)
        yield family


class LatencySeries:
    """One label value's counts by bucket (not cumulative), sum of observations and creation time."""

    __slots__ = ("counts", "sum", "created")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.sum = 0.0
        self.created = time.time()


def _observer(histogram: Histogram, record: Callable[[float], None]) -> Callable[[float], None]:
    """One call that feeds a duration to Prometheus and to the per-second stats."""

    def observe(seconds: float) -> None:
        histogram.observe(seconds)
        record(seconds)

    return observe
