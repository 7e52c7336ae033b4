"""`GET /v1/stats` in a cluster: the whole cluster's last ten minutes (every live node's figures,
`arena.metrics.stats.merged`), or one node's (``?node=ID``). The other nodes are asked at once
over the peer connections, each within `STATS_SECONDS`; a node that does not answer in time is
left out of the sums and named in ``unanswered`` (logged at debug: the console asks every
second). On a single node the route answers its own
figures, as they are."""

from __future__ import annotations

import asyncio
import logging

import orjson

from arena.api.forward import Forwarding
from arena.api.wire import Body
from arena.errors import QueryError, invalid_request
from arena.metrics.stats import merged

log = logging.getLogger("arena.api")

PATH = "/v1/stats"
STATS_SECONDS = 2.0
"""The longest the route waits for the other nodes' figures."""


async def cluster_stats(forwarding: Forwarding, here: Body, node: str | None) -> Body:
    """The cluster's body from this node's figures ``here``: every live node's merged, or only
    ``node``'s. Raises QueryError invalid_request for a node that is not a live one of the
    cluster, unavailable (503) when that node does not answer."""
    directory = forwarding.directory
    me = directory.node_id
    assert me is not None  # a cluster node
    others = {n: url for n, url in directory.nodes.items() if n != me}
    if node == me:
        return {**here, "nodes": [me], "unanswered": []}
    if node is not None:
        if node not in others:
            raise invalid_request(f"node must be a live node of the cluster ({', '.join(sorted([me, *others]))}), got {node!r}")
        answers = await _figures(forwarding, {node: others[node]})
        if node not in answers:
            raise QueryError("unavailable", f"node {node!r} did not answer within {STATS_SECONDS:g}s; try again", 503)
        return {**answers[node], "nodes": [node], "unanswered": []}
    answers = await _figures(forwarding, others)
    return {**merged([here, *answers.values()]), "nodes": sorted([me, *answers]), "unanswered": sorted(set(others) - set(answers))}


async def _figures(forwarding: Forwarding, nodes: dict[str, str]) -> dict[str, Body]:
    """The stats bodies of those of ``nodes`` (id -> URL) that answer within `STATS_SECONDS`."""
    async def ask(node: str, url: str) -> Body:
        answer = await forwarding.ask_node(node, url, PATH, f"node={node}")
        if answer.status != 200:
            raise QueryError("unavailable", f"answered {answer.status}", 503)
        body: Body = orjson.loads(answer.body)
        return body

    found: dict[str, Body] = {}
    asked = [asyncio.ensure_future(ask(node, url)) for node, url in nodes.items()]
    if not asked:
        return found
    _done, late = await asyncio.wait(asked, timeout=STATS_SECONDS)
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    for node, task in zip(nodes, asked, strict=True):
        if task in late:
            log.debug("GET /v1/stats: node %s did not answer within %gs: left out", node, STATS_SECONDS)
        elif task.exception() is not None:
            log.debug("GET /v1/stats: node %s left out: %s", node, task.exception())
        else:
            found[node] = task.result()
    return found
