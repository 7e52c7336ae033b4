"""The history checker's oracle of settlements (`support.history`): a workload's boards each hold
a short tournament, the custom period `CUP`, with prizes; it closes while the writers run, is
settled, and an admin voids some of its events after the close. This module says what each
settlement answer and the settlement feed must be, from the journal and the contract alone:

- the cup table at a seq is `support.oracle.rank` over the events in its window journaled before
  its close marker, less those voided up to that seq; its awards are `support.prize_oracle`'s;
- each journaled revision of the cup (a `board_record` of kind settlement) must be the next
  revision number, hold the oracle's awards and size at its seq, their sha256, and (after
  revision 0) differ from the revision before by exactly its ``changes``; and nothing changes
  silently: just before each void (and at the journal's end), the latest revision holds the
  oracle's awards then;
- an answer at seq s gives the latest revision journaled up to s (`settlement`, `award`; with
  `preview` too), or, on a table still open at s, the oracle's awards at s as a preview; a 404
  ``not_settled`` (which carries no seq) is wrong once an event acked before the query was sent
  comes after revision 0 in the journal;
- the feed (`GET /v1/settlements?after=`) gives every journaled revision exactly once, in cursor
  order, each table's in revision order, each as journaled.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from support.oracle import OBoard, OEvent, rank
from support.prize_oracle import awards, sha256

CUP = "cup"
"""The name of the workload's tournament period."""
KINDS = ("settlement", "preview", "award")
"""The kinds of query about the cup's settlement: `…/settlement`, `…/settlement?preview=true`,
`…/settlement/members/{member}`."""
FIELDS = ("revision", "sha256", "awards_total", "awards", "changes", "preview", "award")
"""The fields of a settlement answer that the checker compares."""


@dataclass(frozen=True)
class Revision:
    """A journaled settlement revision of the cup: its record's seq and body (parsed JSON)."""

    seq: int
    body: Mapping[str, Any]


class CupOracle:
    """One board's cup table and settlements, as the journal and the contract say.

    ``events``: (seq, event) of every score event journaled; ``voids``: (seq, target seq) of
    every void; ``marker``: the seq of the cup's close marker (None: never closed);
    ``revisions``: the cup's settlement records in seq order."""

    def __init__(self, board: OBoard, window: tuple[int, int], tiers: Sequence[Mapping[str, Any]],
                 events: Sequence[tuple[int, OEvent]], voids: Sequence[tuple[int, int]], marker: int | None,
                 revisions: Sequence[Revision]) -> None:
        self.board = board
        self.tiers = tiers
        start, end = window
        self.marker = marker
        self._in_cup = {seq: e for seq, e in events
                        if start <= e.occurred_at < end and (marker is None or seq < marker)}
        self._voids = sorted((seq, target) for seq, target in voids if target in self._in_cup)
        self.void_seqs = [seq for seq, _ in voids]
        self.revisions = list(revisions)
        self._revision_seqs = [r.seq for r in self.revisions]
        self._cache: dict[int, tuple[int, list[dict[str, Any]]]] = {}

    def table(self, seq: int) -> tuple[int, list[dict[str, Any]]]:
        """(size, awards) of the cup table after the records up to ``seq``."""
        if seq not in self._cache:
            gone = {target for at, target in self._voids if at <= seq}
            rows = rank(self.board, [e for s, e in self._in_cup.items() if s <= seq and s not in gone])
            self._cache[seq] = (len(rows), awards([(m, score) for _, m, score, _ in rows], self.board.order, self.tiers))
        return self._cache[seq]

    def latest(self, seq: int) -> Revision | None:
        """The latest revision journaled up to ``seq``."""
        i = bisect.bisect_right(self._revision_seqs, seq)
        return self.revisions[i - 1] if i else None

    def judge_revisions(self, last_seq: int) -> list[str]:
        """What is wrong with the journaled revisions (`module docstring`), one line each."""
        wrong = []
        before: list[dict[str, Any]] | None = None
        for number, revision in enumerate(self.revisions):
            body, where = revision.body, f"revision at seq {revision.seq}"
            size, won = self.table(revision.seq)
            if self.marker is None or revision.seq < self.marker:
                wrong.append(f"{where}: before the close marker ({self.marker})")
            if body.get("revision") != number:
                wrong.append(f"{where}: revision {body.get('revision')}, expected {number}")
            if body.get("awards") != won or body.get("sha256") != sha256(won) or body.get("size") != size:
                wrong.append(f"{where}: size {body.get('size')}, awards {body.get('awards')} (sha256 {body.get('sha256')}); "
                             f"oracle: size {size}, awards {won} (sha256 {sha256(won)})")
            if before is not None:
                if won == before:
                    wrong.append(f"{where}: a revision that changes no award")
                got = sorted(body.get("changes", []), key=lambda c: str(c.get("member")))
                if got != _changes(before, won):
                    wrong.append(f"{where}: changes {got}, oracle: {_changes(before, won)}")
            before = won
        if self.revisions:
            checkpoints = [seq - 1 for seq in self.void_seqs if seq > self.revisions[0].seq] + [last_seq]
            for at in checkpoints:
                latest = self.latest(at)
                assert latest is not None
                if latest.body.get("awards") != self.table(at)[1]:
                    wrong.append(f"at seq {at}: the awards changed to {self.table(at)[1]} without a revision "
                                 f"(the latest is revision {latest.body.get('revision')} at seq {latest.seq})")
        elif self.marker is not None:
            wrong.append(f"closed at seq {self.marker} and never settled")
        return wrong

    def expected(self, kind: str, args: Mapping[str, Any], seq: int) -> dict[str, Any]:
        """What an answer to a query of ``kind`` (`KINDS`) at ``seq`` says (`FIELDS`), or its error."""
        latest = self.latest(seq)
        if latest is None:
            if kind != "preview" or (self.marker is not None and self.marker <= seq):
                return {"error": "not_settled"}
            size, won = self.table(seq)
            return _page({"revision": 0, "sha256": sha256(won), "preview": True}, won, args)
        body = latest.body
        found: dict[str, Any] = {"revision": body["revision"], "sha256": body["sha256"]}
        if kind == "award":
            found["award"] = next((a for a in body["awards"] if a["member"] == args["member"]), None)
            return found
        if body["revision"] > 0:
            found["changes"] = body.get("changes")
        return _page(found, body["awards"], args)

    def settled_by(self, seq: int) -> bool:
        """Whether revision 0 is journaled up to ``seq``."""
        return bool(self.revisions) and self.revisions[0].seq <= seq


def _page(found: dict[str, Any], won: list[dict[str, Any]], args: Mapping[str, Any]) -> dict[str, Any]:
    offset, limit = args["offset"], args["limit"]
    return {**found, "awards_total": len(won), "awards": won[offset:offset + limit]}


def _changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contract's ``changes``: each member whose reward differs (None: no reward), by member."""
    old = {a["member"]: a["reward"] for a in before}
    new = {a["member"]: a["reward"] for a in after}
    return [{"member": m, "before": old.get(m), "after": new.get(m)}
            for m in sorted(old.keys() | new.keys()) if old.get(m) != new.get(m)]


def observed(kind: str, body: Mapping[str, Any], error: str | None) -> dict[str, Any]:
    """The `FIELDS` of an answer, in `CupOracle.expected`'s shape."""
    if error is not None:
        return {"error": error}
    wanted = ("revision", "sha256", "award") if kind == "award" else (
        "revision", "sha256", "awards_total", "awards", *(("changes",) if body.get("revision") else ()),
        *(("preview",) if "preview" in body else ()))
    found = {name: body.get(name) for name in wanted}
    if "changes" in found and isinstance(found["changes"], list):
        found["changes"] = sorted(found["changes"], key=lambda c: str(c.get("member")))
    return found


def judge_feed(items: Sequence[Mapping[str, Any]], revisions: Mapping[str, Sequence[Revision]]) -> list[str]:
    """What is wrong with the feed's ``items`` (in the order read) against every board's journaled
    settlement ``revisions``: each exactly once, cursors increasing, each table's in revision
    order, each as journaled."""
    wrong = []
    journaled = {(board, r.body["period"], r.body["period_id"], r.body["partition"] or "*", r.body["revision"]): (board, r)
                 for board, rs in revisions.items() for r in rs}
    seen: set[tuple[Any, ...]] = set()
    last_cursor = 0
    last_revision: dict[tuple[Any, ...], int] = {}
    for item in items:
        key = (item["board"], item["period"], item["period_id"], item["partition"] or "*", item["revision"])
        if item["cursor"] <= last_cursor:
            wrong.append(f"feed: {key} at cursor {item['cursor']} after cursor {last_cursor}")
        last_cursor = max(last_cursor, item["cursor"])
        if key in seen:
            wrong.append(f"feed: {key} given twice")
        seen.add(key)
        table = key[:4]
        if item["revision"] <= last_revision.get(table, -1):
            wrong.append(f"feed: {key} after revision {last_revision[table]} of its table")
        last_revision[table] = max(item["revision"], last_revision.get(table, -1))
        if key not in journaled:
            wrong.append(f"feed: {key} is not journaled")
            continue
        _, r = journaled[key]
        want = {"seq": r.seq, "sha256": r.body["sha256"], "awards": len(r.body["awards"])}
        got = {name: item.get(name) for name in want}
        if got != want:
            wrong.append(f"feed: {key} is {got}, journaled as {want}")
    wrong += [f"feed: {key} journaled at seq {r.seq} and never given" for key, (_, r) in journaled.items() if key not in seen]
    return wrong
