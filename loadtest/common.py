"""Settings of one load-test run, shared by every sub-command and both peers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from loadtest.workload import WorkloadSpec


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Sizes and knobs. Defaults are the issue's: 4 connections, frames of 100
    events, 8 frames in flight, 1M members, 5% retries, 16 query connections."""

    members: int = 1_000_000
    seconds: float = 30.0             # measured ingest time
    query_seconds: float = 10.0       # measured time of each query phase
    warmup: float = 2.0               # not measured, before each phase
    windows: int = 3                  # the measured time is split in this many windows (min/median/max)
    connections: int = 4              # ingest WebSocket / Redis connections
    batch: int = 100                  # events per streaming frame
    inflight: int = 8                 # frames in flight per connection
    max_batch: int = 1000             # events per prefill frame (the server's max_batch)
    retry_share: float = 0.05
    zipf: float = 1.0
    seed: int = 20261202
    query_connections: int = 16
    query_rate: float | None = None   # req/s over all query connections; None = flat out
    ingest_rate: float | None = None  # events/s; None = flat out
    lag_probes: int = 200
    lag_rate_share: float = 0.5       # background ingest during the lag probe, share of max
    progress_every: float = 2.0
    period: str = "alltime"
    run_id: str = field(default_factory=lambda: f"lt{int(time.time())}")
    min_value: int = 0
    max_value: int = 1_000_000_000

    def workload_spec(self) -> WorkloadSpec:
        return WorkloadSpec(members=self.members, seed=self.seed, zipf=self.zipf,
                            min_value=self.min_value, max_value=self.max_value,
                            retry_share=self.retry_share, run_id=self.run_id)

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
