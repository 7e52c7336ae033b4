"""Measurement helpers: latency recorders, rates over windows, CPU meters, progress lines.

Method (see loadtest/README.md): every phase has a warm-up that is not counted,
then a measured interval split into ``windows`` equal windows. Rates are given
as min/median/max over the windows; latency percentiles are nearest-rank over
every sample of the measured interval.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

now = time.perf_counter


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list; NaN when empty. O(1)."""
    if not sorted_values:
        return math.nan
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[k]


def latency_summary(latencies_s: list[float]) -> dict[str, float]:
    """p50/p90/p99/max in milliseconds. Sorts a copy: O(n log n)."""
    values = sorted(latencies_s)
    return {
        "p50_ms": percentile(values, 50) * 1e3,
        "p90_ms": percentile(values, 90) * 1e3,
        "p99_ms": percentile(values, 99) * 1e3,
        "max_ms": (values[-1] * 1e3) if values else math.nan,
        "samples": float(len(values)),
    }


def window_rates(times: list[float], weights: list[int] | None, start: float, end: float,
                 windows: int) -> list[float]:
    """Rate (weight per second) in each of ``windows`` equal slices of [start, end)."""
    windows = max(1, windows)
    width = (end - start) / windows
    if width <= 0:
        return [0.0] * windows
    sums = [0.0] * windows
    for i, t in enumerate(times):
        if start <= t < end:
            k = min(windows - 1, int((t - start) / width))
            sums[k] += weights[i] if weights is not None else 1
    return [s / width for s in sums]


def rate_summary(rates: list[float]) -> dict[str, float]:
    return {
        "min": min(rates) if rates else math.nan,
        "median": statistics.median(rates) if rates else math.nan,
        "max": max(rates) if rates else math.nan,
    }


@dataclass
class Recorder:
    """Completions of one phase: when each started and finished, its weight
    (events for an ack, 1 for a query) and errors by kind. Appends are O(1).

    Rates count completions whose finish lies in the measured interval;
    latencies are those of requests that started in it."""

    measure_from: float = 0.0
    started: list[float] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)
    weight: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    total: int = 0  # every completion's weight, warm-up included (for progress lines)

    def add(self, started: float, finished: float, weight: int = 1) -> None:
        self.total += weight
        self.started.append(started)
        self.done_at.append(finished)
        self.weight.append(weight)

    def error(self, kind: str, detail: str = "") -> None:
        self.errors[kind] += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(f"{kind}: {detail}"[:300])

    def completed(self, start: float, end: float) -> int:
        """Total weight of completions finished in [start, end)."""
        return sum(w for t, w in zip(self.done_at, self.weight, strict=True) if start <= t < end)

    def latencies(self, start: float, end: float) -> list[float]:
        """Latencies of the requests that started in [start, end)."""
        return [d - s for s, d in zip(self.started, self.done_at, strict=True) if start <= s < end]

    def summary(self, start: float, end: float, windows: int) -> dict[str, Any]:
        rates = window_rates(self.done_at, self.weight, start, end, windows)
        return {
            "completed": self.completed(start, end),
            "per_s": self.completed(start, end) / max(1e-9, end - start),
            "rate": rate_summary(rates),
            "window_rates": rates,
            "latency": latency_summary(self.latencies(start, end)),
            "errors": dict(self.errors),
            "error_samples": list(self.error_samples),
        }


def _proc_cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # after "comm)": state is fields[0]; utime, stime are stat fields 14, 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle(pid: int, *, quiet_seconds: float = 3.0, deadline_seconds: float = 120.0) -> bool:
    """Wait until the process used under 2 % of a core for ``quiet_seconds`` (e.g. the snapshot
    a prefill triggered is written: long enough for its file's write and fsync, which take little
    CPU while its pieces are still held); False when it was not idle within ``deadline_seconds``."""
    deadline = time.monotonic() + deadline_seconds
    used = _proc_cpu_seconds(pid)
    while used is not None and time.monotonic() < deadline:
        await asyncio.sleep(quiet_seconds)
        now_used = _proc_cpu_seconds(pid)
        if now_used is None or now_used - used < 0.02 * quiet_seconds:
            return now_used is not None
        used = now_used
    return False


def rss_bytes(pid: int) -> int | None:
    """VmRSS of a process from /proc/<pid>/status, in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _machine_busy_seconds() -> float | None:
    """CPU seconds all cores spent busy since boot (/proc/stat, not idle/iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and of each of its children (PostgreSQL's postmaster forks one
    process per connection and its background workers), by pid."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        if pid == root or int(fields[1]) == root:  # fields[1]: the parent's pid
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


class CpuMeter:
    """CPU used between start() and stop(), in cores (1.0 = one core busy the
    whole time): this load generator, the server under test, its store (the
    PostgreSQL server's processes, given ``store_pid``, its postmaster), and
    everything else on the machine (``other_cpu``: other people's processes on a
    shared box — when it is high, the numbers of that phase are not trustworthy)."""

    def __init__(self, server_pid: int | None, store_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.store_pid = store_pid
        self._t0 = now()
        self._c0 = time.process_time()
        self._s0 = _proc_cpu_seconds(server_pid) if server_pid else None
        self._store0 = _tree_cpu_seconds(store_pid) if store_pid else {}
        self._m0 = _machine_busy_seconds()

    def stop(self) -> dict[str, float | None]:
        """Shares of a core over the time since construction."""
        wall = max(1e-9, now() - self._t0)
        client = (time.process_time() - self._c0) / wall
        server: float | None = None
        if self.server_pid and self._s0 is not None:
            s1 = _proc_cpu_seconds(self.server_pid)
            if s1 is not None:
                server = (s1 - self._s0) / wall
        store: float | None = None
        if self.store_pid:
            # a process that started during the phase counts from 0; one that ended is missed
            store = sum(cpu - self._store0.get(pid, 0.0) for pid, cpu in _tree_cpu_seconds(self.store_pid).items()) / wall
        m1 = _machine_busy_seconds()
        machine = (m1 - self._m0) / wall if m1 is not None and self._m0 is not None else None
        other = None if machine is None else max(0.0, machine - client - (server or 0.0) - (store or 0.0))
        out: dict[str, float | None] = {
            "client_cpu": round(client, 3), "server_cpu": None if server is None else round(server, 3),
            "machine_cpu": None if machine is None else round(machine, 3),
            "other_cpu": None if other is None else round(other, 3),
            "client_cpu_seconds": round(client * wall, 4),
            "server_cpu_seconds": None if server is None else round(server * wall, 4),
            "cpu_wall_seconds": round(wall, 4)}
        if store is not None:
            out["store_cpu"] = round(store, 3)
            out["store_cpu_seconds"] = round(store * wall, 4)
        return out


def cpu_per_unit(cpu: dict[str, float | None], units: int) -> dict[str, float | None]:
    """Client and server CPU microseconds per event or request. Unlike rates, these
    hold up when other processes compete for the cores (they are work, not speed)."""
    c, s = cpu.get("client_cpu_seconds"), cpu.get("server_cpu_seconds")
    n = max(1, units)
    return {"client_us_per_unit": None if c is None else round(1e6 * c / n, 2),
            "server_us_per_unit": None if s is None else round(1e6 * s / n, 2)}


def progress(line: str) -> None:
    """One progress line on stderr (stdout keeps the tables)."""
    print(line, file=sys.stderr, flush=True)


def fmt_int(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.0f}"


def fmt_ms(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def fmt_unit(x: float | None, unit: str) -> str:
    """A figure in its unit: times (``s``, ``ms``, ``µs/...``) as `fmt_ms` does, counts, rates
    and sizes as whole numbers."""
    if unit in ("s", "ms", "cores") or unit.startswith("µs"):
        return fmt_ms(x)
    return fmt_int(x)
