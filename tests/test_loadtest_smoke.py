"""Smoke test of the load-test tool (loadtest/): tiny sizes, end to end, no timing assertions.

One ``python -m loadtest compare`` run as a subprocess (Arena on a temp config, the
ceiling app, and Redis when redis-server is installed) and a few in-process checks of
the ack checker, which is what makes the benchmark's counts trustworthy.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from arena.config import load_config
from loadtest.arena_client import bench_config
from loadtest.compare import PG_INSTALL_HINT, measured_phases, print_compare
from loadtest.config_toml import write_config
from loadtest.ingest import IngestCounts, run_ingest
from loadtest.redis_server import redis_binary
from loadtest.report import format_phase_details
from loadtest.stats import percentile
from loadtest.workload import DUPLICATE, Event, Workload, WorkloadSpec
from loadtest.wrk import INSTALL_HINT as WRK_INSTALL_HINT
from loadtest.wrk import wrk_binary
from support.postgres import run_sql
from support.server import make_config

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = 200
TOP_KEYS = {"command", "config", "machine", "arena", "ceiling", "postgresql", "redis", "table", "checks", "ok",
            "started_at", "finished_at", "wall_seconds"}
HAVE_REDIS = redis_binary() is not None
HAVE_WRK = wrk_binary() is not None


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("loadtest") / "compare.json"
    cmd = [sys.executable, "-m", "loadtest", "compare", "--members", str(MEMBERS), "--seconds", "2",
           "--connections", "2", "--query-connections", "2", "--query-seconds", "0.5", "--warmup", "0.2",
           "--windows", "2", "--lag-probes", "10", "--progress-every", "1", "--json", str(out)]
    if not HAVE_REDIS:
        cmd.append("--no-redis")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, f"compare failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "arena/peer" in proc.stdout  # the table was printed
    assert "ingest arena" in proc.stderr  # progress lines were printed
    doc: dict[str, Any] = json.loads(out.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def _assert_exact_ingest(phase: dict[str, Any]) -> None:
    c = phase["counts"]
    assert c["ok"] is True
    assert c["frames_acked"] == c["frames_sent"] > 0
    assert c["results_checked"] == c["events_sent"]  # every ack checked, one result per event
    assert c["accepted"] == c["new_sent"]
    assert c["duplicate"] == c["retries_sent"]
    assert c["accepted"] + c["duplicate"] == c["events_sent"]
    assert c["rejected"] == {} and c["unexpected"] == {} and c["ack_errors"] == {}


def test_compare_json_has_the_expected_keys(compare_run: dict[str, Any]) -> None:
    assert TOP_KEYS <= set(compare_run)
    assert compare_run["command"] == "compare"
    assert compare_run["ok"] is True, compare_run["checks"]
    metrics = {row["metric"] for row in compare_run["table"]}
    assert {"prefill", "ingest", "rank HTTP", "rank WS", "top HTTP", "around HTTP", "rank HTTP vs ceiling",
            "rank HTTP p99 under 50% ingest", "lag p99", "memory"} <= metrics
    assert compare_run["checks"]["arena.rank_under_ingest"] is True
    for row in compare_run["table"]:
        assert set(row) == {"metric", "unit", "arena", "peer", "peer_value", "ratio"}


def test_rank_queries_run_while_ingest_streams_at_half_speed(compare_run: dict[str, Any]) -> None:
    under = compare_run["arena"]["rank_under_ingest"]
    assert under["requests"] > 0 and not under["errors"]
    assert under["background"]["ok"] is True and under["background"]["counts"]["events_sent"] > 0
    assert under["background_rate"] == compare_run["arena"]["ingest"]["events_per_s"] * 0.5


@pytest.mark.parametrize("phase", ["ceiling", "rank under ingest", "ingest"])
def test_the_table_warns_when_other_load_disturbed_any_phase(
    compare_run: dict[str, Any], phase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    results = copy.deepcopy(compare_run)
    phases = measured_phases(results)
    for measured in phases:
        measured["other_cpu"] = 0.0
    print_compare(results, None)
    assert "WARNING" not in capsys.readouterr().out
    disturbed = {"ceiling": results["ceiling"], "rank under ingest": results["arena"]["rank_under_ingest"],
                 "ingest": results["arena"]["ingest"]}[phase]
    assert any(d is disturbed for d in phases)
    disturbed["other_cpu"] = 0.42
    print_compare(results, None)
    assert "other processes used up to 0.42 cores" in capsys.readouterr().out


def test_arena_prefill_gives_every_member_one_event(compare_run: dict[str, Any]) -> None:
    prefill = compare_run["arena"]["prefill"]
    _assert_exact_ingest(prefill)
    assert prefill["counts"]["accepted"] == MEMBERS
    assert prefill["counts"]["duplicate"] == 0
    assert prefill["bytes_per_member_per_table"] is not None


def test_arena_ingest_counts_are_exact_and_retries_are_duplicates(compare_run: dict[str, Any]) -> None:
    ingest = compare_run["arena"]["ingest"]
    _assert_exact_ingest(ingest)
    assert ingest["counts"]["retries_sent"] > 0
    lag = compare_run["arena"]["lag"]
    assert lag["ok"] is True and lag["visible_after_ack_violations"] == 0
    assert lag["lag"]["samples"] == 10
    _assert_exact_ingest(lag["background"])


def test_arena_and_ceiling_queries_answered_without_errors(compare_run: dict[str, Any]) -> None:
    queries = compare_run["arena"]["query"]
    assert set(queries) == {"http-rank", "http-top", "http-around", "ws-rank", "ws-top", "ws-around"}
    for name, q in queries.items():
        assert q["errors"] == {}, (name, q["error_samples"])
        assert q["requests"] > 0
        assert {"p50_ms", "p90_ms", "p99_ms", "max_ms"} <= set(q["latency"])
    assert compare_run["ceiling"]["errors"] == {} and compare_run["ceiling"]["requests"] > 0


def _required_under_ci(message: str) -> None:
    """A benchmark tool is missing: fail under CI (.ci/run installs it), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"required under CI: {message}", pytrace=False)
    pytest.skip(message)


def test_wrk_measures_arena_and_the_ceiling_alike(compare_run: dict[str, Any]) -> None:
    if not HAVE_WRK:
        _required_under_ci(WRK_INSTALL_HINT)
    for phase in (compare_run["arena"]["wrk_rank"], compare_run["ceiling"]["wrk"]):
        assert phase["client"] == "wrk" and phase["errors"] == {}
        assert phase["requests"] > 0 and phase["server_us_per_unit"] > 0
    assert compare_run["checks"]["arena.wrk_rank"] and compare_run["checks"]["ceiling.wrk"]
    assert any(row["metric"] == "rank HTTP (wrk) vs ceiling" and row["ratio"] for row in compare_run["table"])


def test_redis_peer_counts_are_exact(compare_run: dict[str, Any]) -> None:
    if not HAVE_REDIS:
        _required_under_ci("redis-server is not installed (sudo apt-get install redis-server)")
    redis = compare_run["redis"]
    _assert_exact_ingest(redis["prefill"])
    assert redis["prefill"]["counts"]["accepted"] == MEMBERS
    _assert_exact_ingest(redis["ingest"])
    assert redis["ingest"]["counts"]["retries_sent"] > 0
    assert redis["lag"]["ok"] is True
    for name, q in redis["query"].items():
        assert q["errors"] == {}, (name, q["error_samples"])
    assert redis["prefill"]["bytes_per_member_per_table"] > 0


def test_arena_on_postgresql_ingest_counts_are_exact_and_its_cpu_is_counted_apart(compare_run: dict[str, Any]) -> None:
    pg = compare_run["postgresql"]
    if "skipped" in pg:
        _required_under_ci(f"{pg['skipped']} ({PG_INSTALL_HINT})")
    _assert_exact_ingest(pg["prefill"])
    assert pg["prefill"]["counts"]["accepted"] == MEMBERS
    _assert_exact_ingest(pg["ingest"])
    assert pg["ingest"]["counts"]["retries_sent"] > 0
    assert pg["ingest"]["store_cpu"] > 0  # the embedded server's processes, found by its socket
    assert compare_run["checks"]["postgresql.ingest"] is True
    rows = {row["metric"]: row for row in compare_run["table"]}
    assert rows["ingest on PostgreSQL"]["peer"] == "sqlite" and rows["ingest on PostgreSQL"]["ratio"] > 0
    assert rows["ingest PostgreSQL CPU"]["arena"] == pg["ingest"]["store_cpu"]
    assert "arena on pg ingest" in format_phase_details(compare_run)


# --- in process: the checker itself ---------------------------------------------------------


class _FakeSubmitter:
    """Acks every frame at once; ``lie`` turns the status of one retry into accepted."""

    def __init__(self, lie: bool = False) -> None:
        self.seen: set[str] = set()
        self.lie = lie

    async def submit(self, events: list[Event]) -> asyncio.Future[list[str]]:
        out = []
        for key, *_ in events:
            if key in self.seen:
                out.append("accepted" if self.lie else DUPLICATE)
                self.lie = False
            else:
                self.seen.add(key)
                out.append("accepted")
        fut: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        fut.set_result(out)
        return fut


async def _run_fake(lie: bool) -> dict[str, Any]:
    workload = Workload(WorkloadSpec(members=50, retry_share=0.3, run_id="t"))
    pairs = [(_FakeSubmitter(lie), workload.stream(0, 10))]
    return await run_ingest("fake", pairs, inflight=2, seconds=None, progress_every=60,  # type: ignore[arg-type]
                            max_new=300)


async def test_checker_counts_an_honest_server_exactly() -> None:
    res = await _run_fake(lie=False)
    assert res["ok"] is True
    assert res["counts"]["duplicate"] == res["counts"]["retries_sent"] > 0


async def test_checker_flags_a_retry_that_was_accepted_twice() -> None:
    res = await _run_fake(lie=True)
    assert res["ok"] is False
    assert res["counts"]["unexpected"] == {"duplicate->accepted": 1}


def test_workload_is_deterministic_for_a_seed() -> None:
    spec = WorkloadSpec(members=1000, seed=7, run_id="x")
    a = Workload(spec).stream(1, 20).next_batch(0)
    b = Workload(spec).stream(1, 20).next_batch(0)
    assert a == b
    assert IngestCounts().ok  # nothing sent, nothing wrong
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_the_config_writer_writes_what_arena_reads(tmp_path: Path) -> None:
    boards = {"b": {"aggregation": "sum", "periods": ["alltime", "hourly"], "min_value": -5, "close_grace_seconds": 120,
                    "timezone": "Asia/Kolkata"}, "c": {}}
    config = make_config(tmp_path / "data", boards, {"gs": ["b"], "all": ["*"]}, ping_interval_seconds=2.5, max_batch=10)
    assert load_config(write_config(config, tmp_path / "config.toml")) == config
    bench = bench_config(tmp_path / "bench", "secret", durability="normal", max_batch=500)
    assert load_config(write_config(bench, tmp_path / "bench.toml")) == bench


def test_the_engine_benchmark_runs_end_to_end_on_tiny_numbers() -> None:
    cmd = [sys.executable, "-m", "loadtest.bench_engine", "--members", "500", "--repeats", "1", "--queries", "200",
           "--updates", "200", "--rebuild-repeats", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "peer: bare remove + add" in proc.stdout


def test_the_memory_benchmark_runs_end_to_end_on_tiny_numbers() -> None:
    cmd = [sys.executable, "-m", "loadtest.bench_memory", "--members", "2000", "--durability", "normal", "--replay"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "packed entries (bytes)" in proc.stdout and "loaded from its journal" in proc.stdout


def test_the_rebuild_benchmark_replays_both_backends_folded_and_event_by_event_with_the_same_digests(postgres: str) -> None:
    cmd = [sys.executable, "-m", "loadtest", "rebuild", "--events", "3000", "--members", "500", "--journal-backend",
           "both", "--pg-url", postgres, "--rebuild-repeats", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("digests folded = event by event: True") == 2, proc.stdout
    assert "folded 3,000: postgresql / sqlite" in proc.stdout and "ok: True" in proc.stdout


def test_the_live_benchmark_runs_end_to_end_on_tiny_numbers(tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    cmd = [sys.executable, "-m", "loadtest", "live", "--members", "200", "--subscribers", "12", "--idle", "8",
           "--seconds", "1", "--warmup", "0.2", "--windows", "1", "--connections", "2", "--json", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, f"live failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "(a) ingest without / with subscribers" in proc.stdout
    live = json.loads(out.read_text())["live"]
    summary = live["summary"]
    assert summary["ok"] is True and live["markers"]["missed"] == 0 and live["markers"]["samples"] > 0
    assert {"ingest_ratio", "marker_p50_ms", "marker_p99_ms", "updates_per_s", "server_us_per_update",
            "idle_bytes_per_subscriber", "cpu", "targets"} <= set(summary)
    assert live["with"]["updates"] > 0 and live["idle"]["idle"] == 8


def test_the_hostile_reader_benchmark_runs_end_to_end_on_tiny_numbers(tmp_path: Path) -> None:
    out = tmp_path / "hostile.json"
    cmd = [sys.executable, "-m", "loadtest", "live", "--hostile", "members", "--hostile-rounds", "1", "--members", "2000",
           "--seconds", "1",
           "--warmup", "0.2", "--windows", "1", "--connections", "2", "--json", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, f"live --hostile failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    hostile = json.loads(out.read_text())["hostile"]
    reader = hostile["summary"]["reader"]
    assert (reader["asked"], reader["granted"], reader["refused"]) == (100, 10, 90)  # the budgets: 10 views of 1,000
    assert hostile["summary"]["ok"] is True and reader["updates"] > 0
    assert "ratio" in proc.stdout and "load average" in proc.stdout


def test_the_cluster_benchmark_runs_end_to_end(postgres: str, tmp_path: Path) -> None:
    """`loadtest cluster` at a tiny size on the tests' PostgreSQL, its nodes run from a source tree
    named by --arena-src (this one): both ingest phases exact, the killed node's boards served
    again, every node restarted in turn with nothing acked lost, its schemas dropped."""
    out = tmp_path / "cluster.json"
    cmd = [sys.executable, "-m", "loadtest", "cluster", "--boards", "4", "--members", "200", "--seconds", "1",
           "--takeover-events", "500", "--standbys", "1", "--handoff-rounds", "1", "--arena-src", str(ROOT),
           "--postgresql-url", postgres, "--json", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"cluster failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    for phase in ("one_node", "cluster"):
        _assert_exact_ingest(doc[phase])
    [takeover] = doc["takeover"]
    assert takeover["served_again"] == takeover["boards"]
    assert doc["arena"]["tree"] == str(ROOT)
    handoff = doc["handoff"]
    assert [r["node"] for r in handoff["restarts"]] == ["node-1", "node-2", "node-3"]
    assert handoff["events_acked"] > 0 and handoff["lost"] == 0 and handoff["ok"] is True
    assert "arena_bench_" not in run_sql(postgres, "SELECT string_agg(nspname, ',') FROM pg_namespace")


def _loadtest(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "loadtest", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_many_boards_benchmark_runs_end_to_end_on_tiny_numbers(tmp_path: Path) -> None:
    """`loadtest boards` at a tiny size: every figure is there (the goals are not judged at this
    size: the RSS of a few boards is noise)."""
    out = tmp_path / "boards.json"
    proc = _loadtest(["boards", "--boards", "20", "--members", "5", "--big-members", "50", "--repeats", "2",
                      "--idle", "0.5", "--json", str(out)], 300)
    assert proc.returncode in (0, 1), f"boards failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    assert set(doc["first_answer_ms"]) == {"min", "median", "p99", "max"}
    assert doc["start_s"] > 0 and doc["rss_idle_mb"] > 0 and "rss_per_idle_board_kb" in doc
    assert doc["cpu"]["server_cpu"] is not None and len(doc["load_average"]) == 3
    assert "RSS per board" in proc.stdout and "load average" in proc.stdout


def test_the_settle_benchmark_runs_end_to_end_on_tiny_numbers(tmp_path: Path) -> None:
    """`loadtest settle` at a tiny size: both runs stream across the close, the prized one is
    settled, and every figure is there (the goal is not judged at this size)."""
    out = tmp_path / "settle.json"
    proc = _loadtest(["settle", "--members", "2000", "--close-after", "8", "--window", "2", "--ingest-rate", "1000",
                      "--warmup", "0.5", "--pairs", "1", "--json", str(out)], 300)
    assert proc.returncode in (0, 1), f"settle failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    assert doc["ok"], doc
    [without], [with_prizes] = doc["without_prizes"], doc["with_prizes"]
    assert without["settle_s"] is None and with_prizes["settle_s"] > 0
    for run in (without, with_prizes):
        assert run["ingest"]["counts"]["rejected"] == {} and run["ack_p99_ms"] > 0
        assert run["ingest"]["server_cpu"] is not None
    assert isinstance(doc["goal_met"], bool) and len(doc["load_average_after"]) == 3
    assert "ack p99 (median of the runs)" in proc.stdout


def test_the_spread_benchmark_times_a_new_board_on_every_node(postgres: str, tmp_path: Path) -> None:
    """`loadtest spread` at a tiny size on the tests' PostgreSQL: each board created through one
    node is answered by all three, and the run's schema is dropped."""
    out = tmp_path / "spread.json"
    proc = _loadtest(["spread", "--nodes", "3", "--boards", "2", "--postgresql-url", postgres, "--json", str(out)], 300)
    assert proc.returncode in (0, 1), f"spread failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    assert len(doc["runs"]) == 2 and all(r["served_by_all_ms"] >= r["put_ms"] for r in doc["runs"])
    assert set(doc["cpu"]) >= {"node-1", "node-2", "node-3", "load generator"}
    assert "arena_spread_" not in run_sql(postgres, "SELECT string_agg(nspname, ',') FROM pg_namespace")


def test_a_child_whose_free_port_was_taken_meanwhile_starts_on_another(tmp_path: Path, monkeypatch: Any) -> None:
    """`free_port` then the child's bind is a race with every other process: a child that exits
    because its port is in use is started again on another free port."""
    from loadtest import process
    from loadtest.process import ArenaServe

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    free = process.free_port
    monkeypatch.setattr(process, "free_port", lambda: next(ports, None) or free())
    config = load_config(Path(__file__).resolve().parents[1] / "config.toml")
    server = ArenaServe(write_config(replace(config, server=replace(config.server, data_dir=tmp_path / "data")),
                                     tmp_path / "config.toml"))
    try:
        server.start()
        assert server.port != taken.getsockname()[1]
        assert "address already in use" in (tmp_path / f"serve-{taken.getsockname()[1]}.log").read_text()
    finally:
        server.stop()
        taken.close()
