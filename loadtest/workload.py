"""The seeded event stream that both Arena and the Redis peer receive.

Pure: no I/O, no event loop. Everything random comes from ``random.Random``
seeded with ``f"{seed}:{stream}"``, so two runs with the same seed send the same
members and values in the same order (``occurred_at`` follows the wall clock,
and which acked event is retried depends on ack timing).

An event on the wire side of this module is a tuple
``(idempotency_key, member, value, occurred_at_ms)``; each transport serialises
it its own way (a JSON object for Arena, a JSON array inside one Lua argument
for Redis).
"""

from __future__ import annotations

import gc
import math
import random
from dataclasses import dataclass

Event = tuple[str, str, int, int]
"""(idempotency_key, member, value, occurred_at epoch milliseconds)."""

ACCEPTED = "accepted"
DUPLICATE = "duplicate"

#: Size of the precomputed table of zipf-distributed member indices.
HOT_POOL_SIZE = 1 << 18
#: How many acked events each stream remembers as retry candidates.
RETRY_POOL_SIZE = 1 << 16
#: occurred_at lies in [now - OCCURRED_MAX_AGE_MS, now - OCCURRED_MIN_AGE_MS].
OCCURRED_MIN_AGE_MS = 500
OCCURRED_MAX_AGE_MS = 4_000


def member_name(index: int) -> str:
    """The name of member ``index``.

    Every 97th member has a name with ``/``, ``%`` and a non-ASCII letter, so
    the percent-encoding of HTTP paths is exercised on every run.
    """
    if index % 97 == 96:
        return f"clan/ü%{index:07d}"
    return f"p{index:07d}"


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What to send. ``run_id`` prefixes every idempotency key of the run."""

    members: int = 1_000_000
    seed: int = 20261202
    zipf: float = 1.0
    min_value: int = 0
    max_value: int = 1_000_000_000
    retry_share: float = 0.05
    run_id: str = "r"


def zipf_ranks(members: int, exponent: float, count: int, rng: random.Random) -> list[int]:
    """``count`` ranks in ``[0, members)`` drawn from a continuous zipf law.

    Inverse-CDF sampling of the density ``x**-exponent`` on ``[1, members + 1)``;
    ``exponent == 0`` is uniform. Cost: O(count), no table of size ``members``.
    """
    if members <= 0:
        raise ValueError("members must be positive")
    top = members + 1.0
    out: list[int] = []
    r = rng.random
    if exponent == 0:
        return [int(r() * members) for _ in range(count)]
    if abs(exponent - 1.0) < 1e-9:
        log_top = math.log(top)
        for _ in range(count):
            out.append(min(members - 1, int(math.exp(r() * log_top)) - 1))
        return out
    a = 1.0 - exponent
    span = top**a - 1.0
    inv = 1.0 / a
    for _ in range(count):
        out.append(min(members - 1, int((1.0 + r() * span) ** inv) - 1))
    return out


def _coprime_step(members: int) -> int:
    step = 2_654_435_761 % members or 1
    while math.gcd(step, members) != 1:
        step += 1
    return step


class Workload:
    """Member names and the hot-member table, shared by every stream of a run.

    Building it costs O(members) time and about 70 bytes per member.
    """

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        self.names: list[str] = [member_name(i) for i in range(spec.members)]
        rng = random.Random(f"{spec.seed}:hot")
        step = _coprime_step(spec.members)
        # Rank r of the zipf law is member (r * step) % M: the hot members are
        # spread over the id space instead of being p0000000, p0000001, ...
        self.hot: list[int] = [
            (rank * step) % spec.members
            for rank in zipf_ranks(spec.members, spec.zipf, HOT_POOL_SIZE, rng)
        ]
        # These lists live for the whole run: move them out of the collector's
        # reach so a full collection during a phase does not walk 1M items.
        gc.collect()
        gc.freeze()

    def prefill(self, stream: int, streams: int, batch: int) -> PrefillSource:
        """The prefill events of one connection out of ``streams``."""
        return PrefillSource(self, stream, streams, batch)

    def stream(self, stream: int, batch: int, label: str = "s") -> StreamSource:
        """An endless zipf-skewed stream with retries, for one connection."""
        return StreamSource(self, stream, batch, label)


class PrefillSource:
    """Gives every member exactly one event: members ``stream, stream+streams, ...``
    in frames of ``batch`` events. Finite: ``next_batch`` returns None at the end."""

    def __init__(self, workload: Workload, stream: int, streams: int, batch: int) -> None:
        spec = workload.spec
        self._names = workload.names
        self._indices = range(stream, spec.members, streams)
        self._pos = 0
        self._batch = batch
        self._rng = random.Random(f"{spec.seed}:prefill:{stream}")
        self._lo = spec.min_value
        self._span = spec.max_value - spec.min_value + 1
        self._prefix = f"{spec.run_id}-f"
        self.retry_pool: list[Event] = []  # prefill never retries

    @property
    def total(self) -> int:
        return len(self._indices)

    def next_batch(self, now_ms: int) -> tuple[list[Event], list[str]] | None:
        if self._pos >= len(self._indices):
            return None
        chunk = self._indices[self._pos : self._pos + self._batch]
        self._pos += len(chunk)
        r = self._rng.random
        lo, span, names, prefix = self._lo, self._span, self._names, self._prefix
        events = [
            (f"{prefix}{i}", names[i], lo + int(r() * span),
             now_ms - OCCURRED_MIN_AGE_MS - int(r() * (OCCURRED_MAX_AGE_MS - OCCURRED_MIN_AGE_MS)))
            for i in chunk
        ]
        return events, [ACCEPTED] * len(events)

    def accepted(self, events: list[Event]) -> None:
        """Prefill events are not kept as retry candidates (memory at 1M members)."""


class StreamSource:
    """Endless frames for one connection: a share ``retry_share`` of the slots
    resends an already-acked event (same key, member, value, occurred_at), which
    must come back ``duplicate``; the rest are new events of zipf-chosen members."""

    def __init__(self, workload: Workload, stream: int, batch: int, label: str) -> None:
        spec = workload.spec
        self._names = workload.names
        self._hot = workload.hot
        self._batch = batch
        self._rng = random.Random(f"{spec.seed}:{label}:{stream}")
        self._lo = spec.min_value
        self._span = spec.max_value - spec.min_value + 1
        self._retry = spec.retry_share
        self._prefix = f"{spec.run_id}-{label}{stream}."
        self._counter = 0
        self.retry_pool: list[Event] = []

    def next_batch(self, now_ms: int) -> tuple[list[Event], list[str]]:
        r = self._rng.random
        hot, names, pool = self._hot, self._names, self.retry_pool
        lo, span, retry, prefix = self._lo, self._span, self._retry, self._prefix
        n_hot = len(hot)
        events: list[Event] = []
        expected: list[str] = []
        counter = self._counter
        for _ in range(self._batch):
            if pool and r() < retry:
                events.append(pool[int(r() * len(pool))])
                expected.append(DUPLICATE)
                continue
            counter += 1
            events.append((
                f"{prefix}{counter}",
                names[hot[int(r() * n_hot)]],
                lo + int(r() * span),
                now_ms - OCCURRED_MIN_AGE_MS - int(r() * (OCCURRED_MAX_AGE_MS - OCCURRED_MIN_AGE_MS)),
            ))
            expected.append(ACCEPTED)
        self._counter = counter
        return events, expected

    def accepted(self, events: list[Event]) -> None:
        """Remember acked-as-accepted events as retry candidates (bounded)."""
        pool = self.retry_pool
        pool.extend(events)
        if len(pool) > 2 * RETRY_POOL_SIZE:
            del pool[: len(pool) - RETRY_POOL_SIZE]
