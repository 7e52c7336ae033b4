"""A schedule of waits between attempts, shared by the client (reconnects, resending an event
answered ``unavailable`` or a query answered ``not_ready``) and the server's connections to its
peer nodes (reconnects), which import it from here: it imports nothing but the standard library."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Exponential backoff with equal jitter: attempt n waits in [d/2, d], d = min(cap, base * 2**n).

    Call `next` before each new attempt and `reset` once attempts succeed again. The jitter keeps
    clients that lost the same server from coming back in step; pass a seeded ``rng`` for a
    reproducible schedule. ``attempt`` may start above 0 to continue a schedule (the client does
    this for each retried event or query, which counts its own tries). O(1) per call.
    """

    base: float  # seconds, the first attempt's ceiling
    cap: float  # seconds, the longest ceiling
    attempt: int = 0  # attempts made so far
    rng: random.Random = field(default_factory=random.Random)

    def next(self) -> float:
        """The seconds to wait before the next attempt; counts that attempt."""
        delay = min(self.cap, self.base * (1 << min(self.attempt, 30)))
        self.attempt += 1
        jitter: float = self.rng.random()
        return delay / 2 + jitter * delay / 2

    def reset(self) -> None:
        """Start over from ``base`` (after a connection that lasted, or after giving up)."""
        self.attempt = 0
