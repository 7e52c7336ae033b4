"""`arena_query_seconds` counted in plain lists (`Latencies`) exports exactly what a prometheus
`Histogram` of the same name, label and buckets exports for the same observations."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from arena.metrics import _QUERY_BUCKETS, Latencies, Metrics

ROUTES = ("member", "top")
seconds = st.one_of(st.sampled_from(_QUERY_BUCKETS), st.floats(0, 2, allow_nan=False), st.just(0.0))


def _created_values_dropped(text: bytes) -> str:
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text.decode())


@given(st.lists(st.tuples(st.sampled_from(ROUTES), seconds), max_size=60))
def test_the_samples_are_a_histograms(observations: list[tuple[str, float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    latencies = Latencies("arena_query_seconds", "Query latency inside the server", "route", _QUERY_BUCKETS)
    ours.register(latencies)
    histogram = Histogram("arena_query_seconds", "Query latency inside the server", ["route"], buckets=_QUERY_BUCKETS,
                          registry=theirs)
    metrics = Metrics()
    observe = {route: metrics.query_latency_of(route) for route in ROUTES}
    for route in ROUTES:
        latencies.series(route)
        histogram.labels(route)
    for route, value in observations:
        series = latencies.series(route)
        series.counts[[b >= value for b in latencies.bounds].index(True)] += 1
        series.sum += value
        histogram.labels(route).observe(value)
        observe[route](value)
    expected = _created_values_dropped(generate_latest(theirs))
    assert _created_values_dropped(generate_latest(ours)) == expected
    exported = _created_values_dropped(metrics.render())
    assert all(line in exported for line in expected.splitlines())  # through Metrics, among its other series
