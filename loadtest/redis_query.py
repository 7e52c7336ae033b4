"""The Redis peer's query workers, Arena's rank/top/around on one ZSET: rank = ``ZREVRANK`` +
``ZSCORE`` (one round trip, pipelined), top = ``ZREVRANGE 0 9 WITHSCORES``, around =
``ZREVRANK`` then ``ZREVRANGE r-5 r+5 WITHSCORES``. Run by `loadtest.query.run_phase`."""

from __future__ import annotations

from loadtest.query import TARGETS_PER_WORKER, RequestFn, pick_members
from loadtest.resp import RespConnection

REDIS_QUERY_OPS = ("rank", "top", "around")


def redis_query_workers(conns: list[RespConnection], key: bytes, names: list[str], op: str,
                        seed: int) -> list[RequestFn]:
    """One request function per connection for ``op`` (one of `REDIS_QUERY_OPS`) on the ZSET
    ``key``; members as the Arena query phases pick them."""
    fns: list[RequestFn] = []
    for w, conn in enumerate(conns):
        members = [m.encode() for m in pick_members(names, TARGETS_PER_WORKER, f"{seed}:query:{op}:{w}")]

        def make(conn: RespConnection, members: list[bytes]) -> RequestFn:
            n = len(members)

            async def rank(i: int) -> str | None:
                m = members[i % n]
                f_rank, f_score = conn.pipeline([(b"ZREVRANK", key, m), (b"ZSCORE", key, m)])
                r = await f_rank
                s = await f_score
                if not isinstance(r, int) or s is None:
                    return f"member_not_found: {m!r}"
                return None

            async def top(i: int) -> str | None:
                reply = await conn.command(b"ZREVRANGE", key, b"0", b"9", b"WITHSCORES")
                if not isinstance(reply, list) or not reply:
                    return f"empty_top: {reply!r:.100}"
                return None

            async def around(i: int) -> str | None:
                m = members[i % n]
                r = await conn.command(b"ZREVRANK", key, m)
                if not isinstance(r, int):
                    return f"member_not_found: {m!r}"
                reply = await conn.command(b"ZREVRANGE", key, max(0, r - 5), r + 5, b"WITHSCORES")
                if not isinstance(reply, list) or m not in reply[::2]:
                    return f"wrong_around: {m!r}"
                return None

            return {"rank": rank, "top": top, "around": around}[op]
        fns.append(make(conn, members))
    return fns
