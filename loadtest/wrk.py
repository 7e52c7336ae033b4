"""HTTP query load from wrk, a native load generator.

The Python load client spends about as much CPU per request as the server does, so on two shared
cores it slows both sides of the "Arena vs bare uvicorn" ratio (measured: 0.38 with it, 0.64 with
``wrk -t2 -c16``). wrk costs a fraction of that. It sees only statuses, not bodies: the Python
phases of the same run check the answers.
"""

from __future__ import annotations

import asyncio
import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson

from loadtest.stats import CpuMeter, cpu_per_unit, fmt_int, fmt_ms, progress

INSTALL_HINT = "install wrk for the native HTTP load generator: sudo apt-get install wrk"
MARKER = "WRK_JSON "

# The paths are requested in turn; the done hook prints the summary as one JSON line.
SCRIPT = """
local paths = {%s}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '%s{"requests":%%d,"duration_us":%%d,"connect":%%d,"read":%%d,"write":%%d,"status":%%d,"timeout":%%d,'
    .. '"p50_us":%%d,"p90_us":%%d,"p99_us":%%d,"max_us":%%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50.0), latency:percentile(90.0), latency:percentile(99.0), latency.max))
end
"""


def wrk_binary() -> str | None:
    return shutil.which("wrk")


def lua_script(paths: list[str]) -> str:
    """The wrk script that requests ``paths`` in turn (percent-encoded ASCII paths)."""
    if not paths:
        raise ValueError("wrk needs at least one path")
    return SCRIPT % (", ".join(orjson.dumps(p).decode() for p in paths), MARKER)


def parse_summary(stdout: str) -> dict[str, Any]:
    """The numbers the script's ``done`` hook printed."""
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            doc: dict[str, Any] = orjson.loads(line[len(MARKER):])
            return doc
    raise RuntimeError(f"wrk printed no summary:\n{stdout[-2000:]}")


def _children_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def _run_wrk(binary: str, script: Path, base_url: str, *, threads: int, connections: int,
                   seconds: float) -> tuple[dict[str, Any], float]:
    """One wrk run; its summary and the CPU seconds wrk used."""
    before = _children_cpu_seconds()
    proc = await asyncio.create_subprocess_exec(
        binary, f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "5s",
        "-s", str(script), base_url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"wrk exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return parse_summary(out.decode(errors="replace")), _children_cpu_seconds() - before


async def wrk_phase(label: str, base_url: str, paths: list[str], *, threads: int = 2, connections: int = 16,
                    seconds: float, warmup: float, server_pid: int | None) -> dict[str, Any]:
    """``paths`` requested flat out by wrk for ``warmup`` (not measured), then ``seconds``.

    Same result keys as the Python query phases, so the report treats both alike; wrk's CPU is
    the client's share (the machine's other load is what is left)."""
    binary = wrk_binary()
    if binary is None:
        raise RuntimeError(INSTALL_HINT)
    with tempfile.TemporaryDirectory(prefix="arena-wrk-") as tmp:
        script = Path(tmp) / "paths.lua"
        script.write_text(lua_script(paths))
        if warmup > 0:
            await _run_wrk(binary, script, base_url, threads=threads, connections=connections, seconds=warmup)
        cpu = CpuMeter(server_pid)
        summary, wrk_cpu = await _run_wrk(binary, script, base_url, threads=threads, connections=connections,
                                          seconds=seconds)
        shares = cpu.stop()
    wall = float(shares["cpu_wall_seconds"] or 1e-9)
    client = round(float(shares["client_cpu"] or 0.0) + wrk_cpu / wall, 3)
    other = shares["other_cpu"]
    shares.update(client_cpu=client, client_cpu_seconds=round(client * wall, 4),
                  other_cpu=None if other is None else round(max(0.0, other - wrk_cpu / wall), 3))
    requests = int(summary["requests"])
    duration = max(1e-9, summary["duration_us"] / 1e6)
    errors = {k: int(summary[k]) for k in ("connect", "read", "write", "status", "timeout") if summary[k]}
    result: dict[str, Any] = {
        "label": label, "client": "wrk", "threads": threads, "connections": connections,
        "requests": requests, "req_per_s": requests / duration,
        # wrk reports the whole run, not windows: one window
        "rate": {"min": requests / duration, "median": requests / duration, "max": requests / duration},
        "latency": {name: summary[f"{name[:-3]}_us"] / 1000 for name in ("p50_ms", "p90_ms", "p99_ms", "max_ms")},
        "errors": errors, **shares,
    }
    result.update(cpu_per_unit(result, requests))
    lat = result["latency"]
    progress(f"query {label} done: {fmt_int(result['req_per_s'])} req/s p50={fmt_ms(lat['p50_ms'])}ms"
             f" p99={fmt_ms(lat['p99_ms'])}ms errors={sum(errors.values())}"
             f" cpu wrk/server/other {result['client_cpu']}/{result['server_cpu']}/{result['other_cpu']}")
    return result
