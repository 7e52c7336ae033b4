"""``python -m loadtest rebuild``: time ``arena rebuild`` over a journal of N events.

Writes the journal by running a server and ingesting through the real protocol
(prefill to ``members``, then the zipf stream until ``events`` new events were
sent), stops the server, counts the journaled events with sqlite3 (read-only,
independent of Arena's code), then runs ``arena rebuild --config`` ``repeats``
times as a subprocess and reports events/s from the wall time.
"""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from loadtest.arena_client import PERIODS, ArenaServer
from loadtest.arena_run import arena_ingest, arena_prefill
from loadtest.common import RunConfig
from loadtest.process import ARENA
from loadtest.stats import fmt_int, progress
from loadtest.workload import Workload

SQLITE_MAGIC = b"SQLite format 3\x00"


def journal_files(data_dir: Path) -> list[Path]:
    out = []
    for p in sorted(data_dir.rglob("*")):
        if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal")):
            try:
                with open(p, "rb") as f:
                    if f.read(16) == SQLITE_MAGIC:
                        out.append(p)
            except OSError:
                continue
    return out


def count_journaled_events(data_dir: Path) -> dict[str, int]:
    """Rows of ``score_event`` per journal file, read-only."""
    counts: dict[str, int] = {}
    for p in journal_files(data_dir):
        try:
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                counts[p.name] = int(con.execute("SELECT count(*) FROM score_event").fetchone()[0])
            finally:
                con.close()
        except sqlite3.Error:
            continue
    return counts


def data_dir_of(config: Path) -> Path:
    import tomllib

    doc = tomllib.loads(config.read_text())
    d = Path(doc.get("server", {}).get("data_dir", "data"))
    return d if d.is_absolute() else (config.parent / d)


def parse_rebuild_output(lines: list[str]) -> list[dict[str, str]]:
    """``arena rebuild`` prints a tab-separated table with a header line
    (board, period, period_id, events, members, seconds, sha256); one dict per row."""
    rows = [ln.split("\t") for ln in lines if "\t" in ln]
    if not rows or "board" not in rows[0]:
        return []
    head = rows[0]
    return [dict(zip(head, r, strict=True)) for r in rows[1:] if len(r) == len(head)]


def live_digests(base_url: str, board: str, periods: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The running server's digest of each current table (GET .../digest)."""
    from loadtest.arena_client import http_get_json

    out: dict[str, dict[str, Any]] = {}
    for period in periods:
        status, doc = http_get_json(f"{base_url}/v1/boards/{board}/{period}/digest")
        if status == 200 and isinstance(doc, dict):
            out[period] = {"period_id": doc.get("period_id"), "sha256": doc.get("sha256"),
                           "size": doc.get("size"), "seq": doc.get("seq")}
    return out


def time_rebuild(config: Path, repeats: int, timeout: float = 3600.0) -> dict[str, Any]:
    """Run ``arena rebuild --config`` ``repeats`` times; wall time includes Python start-up."""
    cmd = [*ARENA, "rebuild", "--config", str(config)]
    walls: list[float] = []
    runs: list[dict[str, Any]] = []
    for r in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=config.parent)
        wall = time.perf_counter() - t0
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        table = parse_rebuild_output(lines)
        runs.append({"wall_s": round(wall, 3), "exit_code": proc.returncode, "lines": lines[:50],
                     "tables": table,
                     "stderr_tail": proc.stderr.splitlines()[-20:]})
        progress(f"rebuild run {r + 1}/{repeats}: {wall:.2f}s exit={proc.returncode} ({len(lines)} lines)")
        if proc.returncode != 0:
            break
        walls.append(wall)
    return {"command": " ".join(cmd), "runs": runs, "walls": walls,
            "wall_min": min(walls) if walls else None,
            "wall_median": statistics.median(walls) if walls else None,
            "wall_max": max(walls) if walls else None,
            "ok": len(walls) == repeats}


async def rebuild_benchmark(cfg: RunConfig, events: int, *, config: Path | None = None, repeats: int = 3,
                            keep: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"command": "rebuild", "events_target": events, "config": cfg.as_dict()}
    server: ArenaServer | None = None
    if config is None:
        server = ArenaServer(max_batch=cfg.max_batch, keep=keep)
        config = server.write_config()
        members = min(cfg.members, events)
        cfg_w = RunConfig(**{**cfg.as_dict(), "members": members})  # type: ignore[arg-type]
        workload = Workload(cfg_w.workload_spec())
        try:
            target = server.start()
            progress(f"arena serving on {target.base_url}, writing a journal of {events:,} events")
            out["prefill"] = await arena_prefill(cfg_w, workload, target)
            rest = events - out["prefill"]["counts"]["accepted"]
            if rest > 0:
                out["ingest"] = await arena_ingest(cfg_w, workload, target, label="journal arena",
                                                   max_new=rest, seconds=36_000.0)
            out["live_digests"] = live_digests(target.base_url, target.board, PERIODS)
        finally:
            out["server_exit_code"] = server.stop()
    data_dir = data_dir_of(config)
    journaled = count_journaled_events(data_dir)
    total = sum(journaled.values())
    out["journal"] = {"data_dir": str(data_dir), "files": journaled, "score_events": total}
    progress(f"journal: {fmt_int(total)} score events in {len(journaled)} file(s) under {data_dir}")
    res = time_rebuild(config, repeats)
    out["rebuild"] = res
    if res["walls"]:
        rates = [total / w for w in res["walls"]]
        out["events_per_s"] = {"min": min(rates), "median": statistics.median(rates), "max": max(rates)}
    # the rebuilt tables must be the live ones (same sha256 per period)
    live = out.get("live_digests") or {}
    rebuilt = {r.get("period"): r.get("sha256") for r in (res["runs"][0]["tables"] if res["runs"] else [])}
    mismatches = [p for p, d in live.items() if rebuilt.get(p) != d["sha256"]]
    out["digest_check"] = {"compared": sorted(live), "mismatches": mismatches} if live else None
    out["ok"] = res["ok"] and total > 0 and not mismatches and all(
        (p.get("ok", True) if isinstance(p, dict) else True) for p in (out.get("prefill"), out.get("ingest")))
    if server is not None:
        server.cleanup()
        out["kept"] = str(server.workdir) if keep else None
    return out


def print_rebuild(out: dict[str, Any]) -> None:
    r = out["rebuild"]
    print(f"\narena rebuild — {fmt_int(out['journal']['score_events'])} journaled events")
    print(f"command: {r['command']}")
    for i, run in enumerate(r["runs"]):
        print(f"  run {i + 1}: {run['wall_s']:.2f}s exit={run['exit_code']}")
    if r["runs"]:
        print("  output of run 1:")
        for ln in r["runs"][0]["lines"][:20]:
            print(f"    {ln}")
        if r["runs"][0]["exit_code"] != 0:
            for ln in r["runs"][0]["stderr_tail"]:
                print(f"    stderr: {ln}")
    if out.get("digest_check"):
        d = out["digest_check"]
        print(f"rebuilt digests vs live server: {'match' if not d['mismatches'] else 'MISMATCH ' + str(d['mismatches'])}"
              f" ({', '.join(d['compared'])})")
    if "events_per_s" in out:
        e = out["events_per_s"]
        print(f"wall min/median/max: {r['wall_min']:.2f}/{r['wall_median']:.2f}/{r['wall_max']:.2f} s;"
              f" events/s min/median/max: {fmt_int(e['min'])}/{fmt_int(e['median'])}/{fmt_int(e['max'])}")
    print(f"ok: {out['ok']}")
