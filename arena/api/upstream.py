"""Live views of boards served by other nodes: each distinct view is watched at its board's
owner once, whatever the number of its subscribers here, and this node's registry of live views
(`arena.live.views`) fans the answers out as it does a local board's.

A watch follows the owner: when the directory names another one, or the connection to it
drops, the view is watched at the next owner, whose first answer is sent to every subscriber
even if unchanged (as after a board reload). In between nothing is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable

from arena.api import wire
from arena.api.forward import RETRY_SECONDS, Forwarding
from arena.cluster.peer.client import NotHere, PeerGone, TooLarge
from arena.cluster.peer.protocol import Ended, Update, Watch
from arena.live.views import ViewSpec

log = logging.getLogger("arena.cluster")

_LONG_WAIT = 3600.0


class Upstream:
    """One view of a board served elsewhere, watched at its owner until `close`."""

    def __init__(self, forwarding: Forwarding, spec: ViewSpec) -> None:
        self.forwarding = forwarding
        self.fields = spec.fields
        self.board: str = spec.fields["board"]
        self.answer: tuple[int, bytes] | str | None = None
        """The owner's last answer (seq, body), the code that ended the view, or None (none yet,
        or the owner is gone)."""
        self._watches = 0  # grows with each watch's first answer: a new owner, or the same one again
        self._answers = 0
        self._task = asyncio.create_task(self._follow(), name=f"upstream {self.board}")

    def version(self) -> Hashable | None:
        """For `arena.live.views.Source.version`: its first part changes with each new watch."""
        if self.answer is None:
            return None
        return ((id(self), self._watches), self._answers)

    def close(self) -> None:
        self._task.cancel()

    async def _follow(self) -> None:
        directory = self.forwarding.directory
        failed: str | None = None  # a node that just could not be watched
        while True:
            owner = await directory.owner_within(self.board, _LONG_WAIT if failed is None else RETRY_SECONDS,
                                                 not_node=failed or directory.node_id)
            failed = None
            if owner is None:
                continue
            stream = _Stream(self)
            peer = self.forwarding.peer(owner)
            try:
                watch = await peer.watch(Watch(self.board, self.fields), stream.deliver)
            except (NotHere, PeerGone, TooLarge) as exc:
                log.info("live view of %r not watched at %s: %s", self.board, owner.node_id, exc)
                self.answer = None
                failed = owner.node_id
                continue
            self.forwarding.count("subscriptions")
            ends = [asyncio.create_task(stream.gone.wait()), asyncio.create_task(self._moved_from(owner.node_id))]
            try:
                await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in ends:
                    task.cancel()
                await peer.unwatch(watch)
            if stream.gone.is_set():
                failed = owner.node_id


    def received(self, message: Update | Ended | None, first: bool) -> None:
        """A message of the current watch (``first``: its first), or None: its connection is gone."""
        if message is None:
            self.answer = None
            return
        if isinstance(message, Ended):
            self.answer = message.code
        else:
            if first:
                self._watches += 1
            self.answer = (message.seq, wire.dumps(message.body))
        self._answers += 1

    async def _moved_from(self, node: str) -> None:
        """Return once the directory names an owner other than ``node``."""
        while await self.forwarding.directory.owner_within(self.board, _LONG_WAIT, not_node=node) is None:
            pass


class _Stream:
    """One watch of an upstream view, at one owner."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.gone = asyncio.Event()
        self._first = True

    def deliver(self, message: Update | Ended | None) -> None:
        if message is None:
            self.gone.set()
        self.upstream.received(message, self._first)
        self._first = False


class Upstreams:
    """The upstream views of one node, by view."""

    def __init__(self, forwarding: Forwarding) -> None:
        self.forwarding = forwarding
        self._views: dict[bytes, Upstream] = {}

    def __len__(self) -> int:
        return len(self._views)

    def of(self, spec: ViewSpec) -> Upstream:
        """The view's upstream, watched from now on if it was not. O(1)."""
        upstream = self._views.get(spec.key)
        if upstream is None:
            upstream = self._views[spec.key] = Upstream(self.forwarding, spec)
        return upstream

    def get(self, spec: ViewSpec) -> Upstream | None:
        return self._views.get(spec.key) if self._views else None

    def release(self, spec: ViewSpec) -> None:
        """The view has no subscriber any more here, or its board is served here now."""
        if self._views:
            upstream = self._views.pop(spec.key, None)
            if upstream is not None:
                upstream.close()

    def close(self) -> None:
        for upstream in self._views.values():
            upstream.close()
        self._views.clear()
