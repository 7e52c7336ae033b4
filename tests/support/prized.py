"""What the settlement tests share: the days of 2027-W01 and two boards with prizes, hs (best,
weekly prizes by rank, top percent and score) and low (sum, ascending, daily prizes)."""

from __future__ import annotations

from typing import Any

import httpx

from support.server import until

MIN = 60_000
DAY = 24 * 60 * MIN
W1 = 1_799_020_800_000  # 2027-01-04T00:00:00Z, a Monday: 2027-W01 (after the wall clock: the test clock leads)
HS_TIERS: list[dict[str, Any]] = [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "top_percent": 12.5},
                                  {"reward": "tin", "score": 900}]
LOW_TIERS: list[dict[str, Any]] = [{"reward": "frugal", "score": 30}, {"reward": "thrifty", "ranks": [1, 6]}]
BOARDS = {
    "hs": {"aggregation": "best", "periods": ["alltime", "weekly", "daily"], "prizes": {"weekly": HS_TIERS}},
    "low": {"aggregation": "sum", "order": "asc", "tie": "latest", "periods": ["daily"], "prizes": {"daily": LOW_TIERS}},
}
SETTLEMENT = "/v1/boards/{board}/{period}/settlement"


async def journaled_settlement(http: httpx.AsyncClient, path: str, period_id: str, revision: int = 0,
                               **params: Any) -> dict[str, Any]:
    """The settlement at ``path`` (a table's settlement route) once its revision ``revision`` is
    journaled (the close marker comes with the clock; the settlement right after it)."""
    async def ready() -> bool:
        answer = await http.get(path, params={"period_id": period_id})
        return answer.status_code == 200 and answer.json()["revision"] >= revision

    await until(ready, f"{path} {period_id} to settle (revision {revision})")
    answer = await http.get(path, params={"period_id": period_id, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body
