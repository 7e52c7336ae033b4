"""The registry of live views (`arena.live.views`) alone, with a scripted `Source`: a board that
answers nothing for a while (not_ready, unavailable) is a state of its subscriptions, never their
end; only a table that left retention ends them."""

from __future__ import annotations

from collections.abc import Hashable

import orjson

from arena.live.outbox import Bounds, Outbox
from arena.live.views import LiveViews, ViewSpec
from support.server import until

TOP = ViewSpec({"op": "top", "board": "b", "period": "alltime", "period_id": None, "limit": 10, "offset": 0})


class Scripted:
    """A `Source` whose answer the test sets: (seq, body), an ending code, or None (no answer now)."""

    def __init__(self) -> None:
        self.seq = 1
        self.answer: tuple[int, bytes] | str | None = (1, b'{"entries":[]}')

    def version(self, view: ViewSpec) -> Hashable | None:
        return ("engine", self.seq)

    def evaluate(self, view: ViewSpec) -> tuple[int, bytes] | str | None:
        return self.answer

    def released(self, view: ViewSpec) -> None:
        pass


async def test_a_board_that_answers_nothing_for_a_while_keeps_its_subscriptions_and_updates_after() -> None:
    sent: list[dict[str, object]] = []

    async def send(frame: bytes) -> None:
        sent.append(orjson.loads(frame))

    source = Scripted()
    views = LiveViews(source, interval=0.01)
    outbox = Outbox(send, Bounds(frames=64, bytes=1 << 20, stall_seconds=30))
    subscription = views.subscribe("s", outbox, TOP)
    await until(lambda: len(sent) == 1, "the first update")
    source.seq, source.answer = 2, None  # the board hid its tables (a crash, a reload) after `version` moved
    await until(lambda: views.evaluations >= 2, "an evaluation of the hidden board")
    source.seq, source.answer = 3, (3, b'{"entries":[]}')  # the same answer as before, at a later seq
    await until(lambda: len(sent) == 2, "an update once the board answers again")
    assert [frame["op"] for frame in sent] == ["update", "update"]  # never an error frame
    assert sent[1]["seq"] == 3  # sent though unchanged: after a reload one update always goes
    assert subscription.active
    source.seq, source.answer = 4, "period_not_retained"
    await until(lambda: len(sent) == 3, "the end of the subscription")
    assert sent[2]["op"] == "error" and sent[2]["code"] == "period_not_retained"
    assert not subscription.active
    outbox.close()
