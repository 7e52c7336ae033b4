"""``python -m loadtest cluster --compare BEFORE``: the cluster benchmark on two `arena` source
trees in one run, interleaved (before, after, before, after…) on one PostgreSQL so that both
see the same machine at nearly the same moments, and each figure's ratio after/before (of the
medians over the runs).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from loadtest.cluster import Sizes, cluster_benchmark, print_cluster
from loadtest.postgres import postgres_url
from loadtest.stats import progress

OWN_TREE = Path(__file__).resolve().parents[1]
"""The source tree of this loadtest (the default after)."""


def figures(run: dict[str, Any]) -> dict[str, float | None]:
    """The figures of one run that a before/after comparison puts side by side."""
    out: dict[str, float | None] = {
        "ingest 1 node, events/s": run["one_node"]["events_per_s"],
        f"ingest {run['nodes']} nodes, events/s": run["cluster"]["events_per_s"],
        "ingest 1 node, ack p99 ms": run["one_node"]["ack_latency"].get("p99_ms"),
        f"ingest {run['nodes']} nodes, ack p99 ms": run["cluster"]["ack_latency"].get("p99_ms"),
    }
    for t in run["takeover"]:
        where = f"takeover {t['events_per_board']:,} ev/board, standbys {t['standbys']}"
        out[f"{where}, median s"] = t["median_s"]
        out[f"{where}, slowest s"] = t["max_s"]
        metric = t["metric"]  # from the lease's expiry: without the lease's own 2-3 s and their noise
        out[f"{where}, after the lease s"] = metric["sum"] / metric["count"] if metric["count"] else None
    h = run.get("handoff")
    if h is not None:
        for name, key in (("longest ack wait per board", "longest_wait_s"), ("SIGTERM to exit", "exit_s"),
                          ("start to placed", "back_s")):
            spread = h[key] or {}
            out[f"hand-off {name}, median s"] = spread.get("median")
            out[f"hand-off {name}, max s"] = spread.get("max")
    return out


def compare_trees(before: Path, after: Path, runs: int, sizes: Sizes, pg: str | None) -> dict[str, Any]:
    """``runs`` runs of each tree, before then after, on one PostgreSQL."""
    out: dict[str, Any] = {"command": "cluster --compare", "before": str(before), "after": str(after),
                           "load_average_start": [round(x, 2) for x in os.getloadavg()], "runs": []}
    with postgres_url(pg) as url:
        for i in range(runs):
            for label, tree in (("before", before), ("after", after)):
                progress(f"compare: run {i + 1}/{runs}, {label} ({tree})")
                out["runs"].append({"label": label, **cluster_benchmark(sizes, url, tree)})
    out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    out["ok"] = all(r["ok"] for r in out["runs"])
    out["figures"] = _side_by_side(out["runs"])
    return out


def _side_by_side(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    values: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for name, value in figures(run).items():
            if value is not None:
                values.setdefault(name, {"before": [], "after": []})[run["label"]].append(value)
    rows = []
    for name, both in values.items():
        before, after = both["before"], both["after"]
        ratio = (statistics.median(after) / statistics.median(before)
                 if before and after and statistics.median(before) else None)
        rows.append({"figure": name, "before": before, "after": after,
                     "ratio": None if ratio is None else round(ratio, 3)})
    return rows


def print_comparison(out: dict[str, Any]) -> None:
    for run in out["runs"]:
        print(f"\n=== {run['label']} ===", end="")
        print_cluster(run)
    print(f"\nbefore = {out['before']}, after = {out['after']}; load average at the start"
          f" {out['load_average_start']}, at the end {out['load_average_end']}")
    def each(values: list[float]) -> str:
        return " / ".join(f"{v:,.0f}" if v >= 1000 else f"{v:.2f}" for v in values)

    width = max([len("before (each run)"), *(len(each(r[k])) for r in out["figures"] for k in ("before", "after"))]) + 2
    print(f"{'figure':<62}{'before (each run)':>{width}}{'after (each run)':>{width}}{'after/before':>14}")
    for row in out["figures"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"{row['figure']:<62}{each(row['before']):>{width}}{each(row['after']):>{width}}{ratio:>14}")
    print("ratios are of the medians over the runs; for events/s below 1 is worse, for seconds and ms above 1 is")
    print(f"worse. ok: {out['ok']}")
