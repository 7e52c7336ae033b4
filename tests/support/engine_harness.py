"""The actor's steps without I/O, for engine tests: shape checks, key lookups in a dict,
decide, "journal" into a list, commit. The clock is whatever the caller passes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arena.engine.board import BoardEngine
from arena.engine.events import Event, Fingerprint, Result, parse_event
from arena.engine.records import BoardKind, BoardRecord, Record, ScoreRecord
from arena.engine.routing import Plan
from arena.engine.spec import BoardSpec
from arena.engine.table import RankedTable
from arena.engine.times import format_ms, format_optional_ms


def accepted(plan: Plan) -> list[ScoreRecord]:
    """The events a plan accepts (the records the actor's journal would hold for them)."""
    return [r for r in plan.records if isinstance(r, ScoreRecord)]


class EngineHarness:
    def __init__(self, boards: Mapping[str, BoardSpec], servers: Mapping[str, Sequence[str]] | None = None) -> None:
        self.specs = dict(boards)
        self.engines = {name: BoardEngine(spec) for name, spec in boards.items()}
        for engine in self.engines.values():
            engine.publish(0, engine.kinds)
        self.servers = {k: list(v) for k, v in (servers or {"gs": ["*"]}).items()}
        self.journals: dict[str, list[Record]] = {name: [] for name in boards}
        self.keys: dict[str, dict[str, Fingerprint]] = {name: {} for name in boards}

    def submit(self, server: str, events: Sequence[object], now: int) -> list[Result]:
        """One frame, received at ``now``, answered in order."""
        scope = self.servers[server]

        def may_write(board: str) -> bool:
            return "*" in scope or board in scope

        results: list[Result | None] = [None] * len(events)
        by_board: dict[str, list[tuple[int, Event]]] = {}
        for i, raw in enumerate(events):
            parsed = parse_event(raw, self.specs, may_write)
            if isinstance(parsed, Result):
                results[i] = parsed
                if isinstance(raw, dict) and raw.get("board") in self.engines:  # its deadlines pass all the same
                    by_board.setdefault(raw["board"], [])
            else:
                by_board.setdefault(parsed.board, []).append((i, parsed))
        for board, items in by_board.items():
            answers = self.process(board, [e for _, e in items], now, server)
            for (i, _), answer in zip(items, answers, strict=True):
                results[i] = answer
        return [r for r in results if r is not None]

    def process(self, board: str, events: Sequence[Event], now: int, source: str = "gs") -> list[Result]:
        engine = self.engines[board]
        known = self.keys[board]
        plan = engine.decide([(events, now, source)], known, now)
        self.journals[board].extend(plan.records)
        engine.commit(plan)
        self._league_records(engine, board)
        for record in accepted(plan):
            known[record.event.idempotency_key] = record.event.fingerprint
        return plan.results[0]

    def tick(self, board: str, now: int) -> None:
        """What the actor does when a deadline passes with an empty mailbox."""
        engine = self.engines[board]
        plan = engine.decide([], self.keys[board], now)
        self.journals[board].extend(plan.records)
        engine.commit(plan)
        self._league_records(engine, board)
        engine.rotate(now)

    def redefine(self, board: str, spec: BoardSpec, now: int) -> None:
        """What the actor does for a change of a board's definition received at ``now`` (after
        the deadlines due then): journal a definition record, then serve the new spec."""
        self.tick(board, now)
        engine = self.engines[board]
        record = BoardRecord(engine.last_seq + 1, BoardKind.DEFINITION, spec.document_text())
        self.journals[board].append(record)
        engine.last_seq = record.seq
        if engine.league is not None and spec.league is not None:
            engine.league.define(record.seq, spec.league)
        engine.redefine(spec)
        engine.rotate(now)
        self.specs[board] = spec

    def _league_records(self, engine: BoardEngine, board: str) -> None:
        """What the actor journals after a commit on a league board: its closed windows' moves."""
        if engine.unrecorded:
            records = engine.league_records()
            self.journals[board].extend(records)
            engine.league_recorded(records)

    def score_records(self, board: str) -> list[ScoreRecord]:
        return [r for r in self.journals[board] if isinstance(r, ScoreRecord)]

    def standings(self) -> list[dict[str, Any]]:
        """Every table with an entry, as the conformance files write them."""
        out = []
        for board, engine in self.engines.items():
            for table in engine.tables.values():
                if len(table):
                    out.append(standing(board, table))
        return sorted(out, key=lambda s: (s["board"], s["period"], s["period_id"]))


def standing(board: str, table: RankedTable) -> dict[str, Any]:
    w = table.window
    return {
        "board": board,
        "period": str(w.kind),
        "period_id": w.period_id,
        "start": format_optional_ms(w.start_ms),
        "end": format_optional_ms(w.end_ms),
        "entries": [
            {"rank": e.rank, "member": e.member, "score": e.score, "reached_at": format_ms(e.reached_at)}
            for e in table.entries()
        ],
    }


def wire_results(results: Sequence[Result]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        d: dict[str, Any] = {"idempotency_key": r.idempotency_key, "status": r.status.value}
        if r.reason is not None:
            d["reason"] = r.reason.value
            d["message"] = r.message
        out.append(d)
    return out
