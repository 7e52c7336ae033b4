"""A table's settlement: a revision of its awards under the tiers in force at its close, and the
body the settlement routes answer and the webhooks carry (DESIGN.md "Seasons: settlement and
prizes"). Pure: the board that journals a settlement, a rebuild that reads it back and a preview
of an open table all shape it here.

Revision 0 is made at the close (`first`); a void that changes any award's (rank, member, score,
reward) makes the next one under revision 0's tiers, with the members whose reward changed
(`revise`); a void that changes no award makes none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

import orjson

from arena.engine.periods import Window, period_name
from arena.engine.prizes import Award, Awarding, PrizeTier, award_text, awards, changes, sha256_of
from arena.engine.routing import PartitionKey, TableKey, table_key
from arena.engine.scoring import Order
from arena.engine.table import Entry


@dataclass(frozen=True, slots=True)
class Settlement:
    revision: int
    tiers: tuple[PrizeTier, ...]
    awards: tuple[Award, ...]
    sha256: str
    changes: tuple[dict[str, str | None], ...] = ()
    """For a revision after the first: the members whose reward differs from the one before."""


class Settling:
    """Revision 0 of a table's settlement under ``tiers``, made a run of entries at a time, so an
    event loop can let others run between runs: ``while not settling.run(256): await ...``.
    ``entries`` (rank order) must not change meanwhile: a copy, or a closed table's."""

    def __init__(self, tiers: Sequence[PrizeTier], entries: Iterable[Entry], size: int, order: Order) -> None:
        self.tiers = tuple(tiers)
        self._awarding = Awarding(self.tiers, size, order)
        self._entries = iter(entries)
        self._awards: list[Award] = []
        self._hash = hashlib.sha256()

    def run(self, count: int) -> bool:
        """Read up to ``count`` more entries; True once every award is made. O(count × tiers)."""
        read = list(islice(self._entries, count))
        made, over = self._awarding.awards(read)
        self._awards.extend(made)
        self._hash.update(award_text(made))
        return over or len(read) < count

    def settlement(self) -> Settlement:
        """The settlement, once `run` has said it is done."""
        return Settlement(0, self.tiers, tuple(self._awards), self._hash.hexdigest())


def first(tiers: Sequence[PrizeTier], entries: Iterable[Entry], size: int, order: Order) -> Settlement:
    """Revision 0 of a closed table's settlement, in one go: its awards under ``tiers``."""
    won = awards(entries, size, order, tiers)
    return Settlement(0, tuple(tiers), tuple(won), sha256_of(won))


def revise(before: Settlement, awards: Sequence[Award]) -> Settlement | None:
    """The revision after ``before`` once a void made the table's awards (under ``before``'s
    tiers) ``awards``; None when no award changed in rank, member, score or reward."""
    if tuple(awards) == before.awards:
        return None
    return Settlement(before.revision + 1, before.tiers, tuple(awards), sha256_of(awards),
                      tuple(changes(before.awards, awards)))


@dataclass(frozen=True, slots=True)
class SettlementRecord:
    """A revision as journaled (a `BoardRecord` of kind "settlement" at ``seq``): the table it
    settles (``window``; ``partition`` None: the global table), the table's ``size`` then, and
    the settlement. Its text is what the journal keeps, read back by every load and copied by
    `arena migrate`, so a rebuild serves the revision exactly as it was made."""

    seq: int
    window: Window
    size: int
    settlement: Settlement
    partition: str | None = None

    @property
    def key(self) -> TableKey | PartitionKey:
        """The settled table's key (`table_key`)."""
        return table_key(self.window, self.partition)

    def text(self) -> str:
        return "".join(self.text_pieces(max(1, len(self.settlement.awards))))

    def text_pieces(self, step: int) -> Iterator[str]:
        """`text` in pieces, the awards ``step`` at a time: their concatenation is `text` (one
        JSON document), so a caller may encode 100,000 awards (about 0.4 s on a busy core)
        letting others run between pieces. O(awards)."""
        s, w = self.settlement, self.window
        head: dict[str, object] = {
            "period": str(w.kind), "period_id": w.period_id, "start": w.start_ms, "end": w.end_ms,
            "partition": self.partition, "size": self.size, "revision": s.revision, "sha256": s.sha256,
            "tiers": [tier.as_json() for tier in s.tiers],
        }
        yield orjson.dumps(head).decode()[:-1] + ',"awards":['
        for start in range(0, len(s.awards), step):
            awards = orjson.dumps([a._asdict() for a in s.awards[start:start + step]]).decode()[1:-1]
            yield awards if start == 0 else "," + awards
        yield "]" + (',"changes":' + orjson.dumps(list(s.changes)).decode() if s.revision > 0 else "") + "}"

    @classmethod
    def parse(cls, seq: int, text: str) -> SettlementRecord:
        d = orjson.loads(text)
        window = Window(period_name(d["period"]), d["period_id"], d["start"], d["end"])
        won = tuple(Award(a["rank"], a["member"], a["score"], a["reward"]) for a in d["awards"])
        tiers = tuple(PrizeTier.from_json(t) for t in d["tiers"])
        settlement = Settlement(d["revision"], tiers, won, d["sha256"], tuple(d.get("changes", ())))
        return cls(seq, window, d["size"], settlement, d["partition"])


@dataclass(frozen=True, slots=True)
class LogItem:
    """A revision in the settlement log (DESIGN.md "The settlement feed"): its ``cursor`` (the
    log position; 0 before the log gave it one) and its header, not its awards (``awards`` is
    their number). A revision is one item whatever its appends: `key` is its identity."""

    cursor: int
    board: str
    period: str
    period_id: str
    partition: str | None
    revision: int
    seq: int
    sha256: str
    awards: int

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        """(board, period, period_id, partition or '*', revision): what makes an append idempotent."""
        return (self.board, self.period, self.period_id, self.partition or "*", self.revision)

    def as_json(self) -> dict[str, object]:
        """The item as the feed answers it."""
        return {"cursor": self.cursor, "board": self.board, "period": self.period, "period_id": self.period_id,
                "partition": self.partition, "revision": self.revision, "seq": self.seq, "sha256": self.sha256,
                "awards": self.awards}


def log_item(board: str, record: SettlementRecord) -> LogItem:
    """``record`` of ``board`` as an item to append to the settlement log (no cursor yet)."""
    s, w = record.settlement, record.window
    return LogItem(0, board, str(w.kind), w.period_id, record.partition, s.revision, record.seq, s.sha256, len(s.awards))


def body(fields: Mapping[str, object], settlement: Settlement, limit: int, offset: int, *, preview: bool = False) -> dict[str, object]:
    """The answer: the table's ``fields`` (with its ``seq``), the revision, its ``sha256`` over
    every award, the tiers, ``awards_total`` and the awards at ``offset`` .. ``offset+limit``
    (an offset past the end: none); ``changes`` after revision 0; ``preview`` on an open
    table's would-be revision 0."""
    answer: dict[str, object] = {**fields}
    if preview:
        answer["preview"] = True
    answer.update({
        "revision": settlement.revision,
        "sha256": settlement.sha256,
        "tiers": [tier.as_json() for tier in settlement.tiers],
        "awards_total": len(settlement.awards),
        "awards": [award._asdict() for award in settlement.awards[offset:offset + limit]],
    })
    if settlement.revision > 0:
        answer["changes"] = list(settlement.changes)
    return answer
