"""The history checker itself (`support.history.check`), on fabricated histories: a correct one
passes, and a stale answer, a wrong body, a lost ack, a rejected event journaled, a seq going
back on a connection, a subscription ended by an error, an answer without seq and an event
journaled that nobody sent are each flagged; and so are a tournament's settlement answers, its
journaled revisions and the settlement feed when they are not the oracle's."""

from __future__ import annotations

from typing import Any

from arena.engine.times import format_ms
from support.history import Ack, Answer, Cup, History, Journaled, Query, check
from support.oracle import OBoard, OEvent
from support.prize_oracle import sha256

BOARDS = {"b": OBoard(aggregation="sum")}
T0 = 1_796_216_400_000
EVENTS = [OEvent("ann", 5, T0, "k1"), OEvent("bob", 7, T0 + 1, "k2"), OEvent("ann", 4, T0 + 2, "k3"), OEvent("cid", 1, T0 + 3, "k4")]
JOURNAL = [Journaled(seq, e) for seq, e in enumerate(EVENTS, 1)]


def entry(rank: int, member: str, score: int, reached: int) -> dict[str, Any]:
    return {"rank": rank, "member": member, "score": score, "reached_at": format_ms(reached)}


TOP = {  # the top of the table after each seq, by hand
    2: [entry(1, "bob", 7, T0 + 1), entry(2, "ann", 5, T0)],
    3: [entry(1, "ann", 9, T0 + 2), entry(2, "bob", 7, T0 + 1)],
    4: [entry(1, "ann", 9, T0 + 2), entry(2, "bob", 7, T0 + 1), entry(3, "cid", 1, T0 + 3)],
}


def top(seq: int, *, sent: float | None, received: float, connection: int | None = None, entries: Any = None) -> Answer:
    entries = TOP[seq] if entries is None else entries
    body = {"board": "b", "size": len(entries), "entries": entries, "seq": seq}
    return Answer("ws" if connection else "http", connection, Query("top", "b", {"limit": 10, "offset": 0}), sent, received, body)


def history(*answers: Answer, acked: tuple[str, ...] = ("k1", "k2", "k3", "k4")) -> History:
    """Event ``k<i>`` sent at time i - 0.5 and acked at time i."""
    h = History(started=0.0)
    h.sent = {e.key: ("b", e.fingerprint) for e in EVENTS}
    h.acks = [Ack("b", key, "accepted", i - 0.5, float(i)) for i, key in enumerate(acked, 1)]
    h.answers = list(answers)
    return h


def violations(h: History, journal: list[Journaled] = JOURNAL) -> list[str]:
    report = check(h, {"b": journal}, BOARDS)
    return report.violations


def test_a_correct_history_passes() -> None:
    h = history(
        top(2, sent=2.5, received=2.6, connection=1),
        top(3, sent=2.7, received=3.5, connection=1),  # k3 acked at 3, after the query was sent: seq 3 or 2 is fine
        top(4, sent=4.1, received=4.2),
        Answer("http", None, Query("digest", "b"), 1.5, 1.6, {"error": {"code": "not_ready"}}, "not_ready"),
    )
    report = check(h, {"b": JOURNAL}, BOARDS)
    assert report.ok, report
    assert (report.checked, report.unavailable["not_ready"], report.acked) == (3, 1, 4)


def test_a_stale_answer_is_flagged() -> None:
    [v] = violations(history(top(3, sent=4.1, received=4.2)))
    assert "stale, seq 3 but event k4 (seq 4) was acked before the query was sent" in v


def test_a_body_that_is_not_the_oracles_at_its_seq_is_flagged() -> None:
    [v] = violations(history(top(4, sent=4.1, received=4.2, entries=TOP[3])))  # seq 4 over the table of seq 3
    assert "seq 4: entries: got" in v and "oracle says" in v and "size: got 2, oracle says 3" in v


def test_a_lost_ack_is_flagged() -> None:
    [v] = violations(history(top(3, sent=3.1, received=3.2)), JOURNAL[:3])  # k4 acked, not journaled
    assert "event k4 was acked accepted" in v and "(lost)" in v


def test_a_rejected_event_in_the_journal_is_flagged() -> None:
    h = history(top(3, sent=3.1, received=3.2))
    h.acks[3] = Ack("b", "k4", "rejected:unavailable", 3.5, 4.0)  # answered unavailable, yet journaled
    [v] = violations(h)
    assert "event k4 was answered rejected:unavailable" in v and "journaled at seq 4" in v


def test_a_seq_going_back_on_a_connection_is_flagged() -> None:
    [v] = violations(history(top(3, sent=2.1, received=2.2, connection=7), top(2, sent=2.3, received=2.4, connection=7)))
    assert "seq 2 went back from 3 on the same connection" in v
    assert violations(history(top(3, sent=2.1, received=2.2, connection=7), top(2, sent=2.3, received=2.4, connection=8))) == []


def test_an_answer_without_seq_is_flagged() -> None:
    answer = top(4, sent=4.1, received=4.2)
    [v] = violations(history(Answer(answer.via, None, answer.query, answer.sent, answer.received,
                                    {k: x for k, x in answer.body.items() if k != "seq"})))
    assert "no seq in the answer" in v and "a seq of at least 4 was due" in v


def test_an_event_journaled_twice_or_never_sent_is_flagged() -> None:
    stranger = Journaled(5, OEvent("eve", 1, T0, "k9"))
    again = Journaled(6, EVENTS[0])
    found = violations(history(top(4, sent=4.1, received=4.2)), [*JOURNAL, stranger, again])
    assert any("event k1 is journaled 2 times" in v for v in found)
    assert any("journaled event k9" in v and "was sent as None" in v for v in found)


def test_an_error_the_oracle_does_not_expect_is_flagged() -> None:
    query = Query("member", "b", {"member": "ann"})
    answer = Answer("http", None, query, 4.1, 4.2, {"error": {"code": "member_not_found"}, "seq": 4}, "member_not_found")
    [v] = violations(history(answer))
    assert "error: got 'member_not_found', oracle says None" in v


def test_a_subscription_ended_by_an_error_is_flagged() -> None:
    ended = {"op": "error", "id": None, "sub": "1", "code": "not_ready", "message": "the subscription ended"}
    answer = Answer("update", 3, Query("top", "b", {"limit": 10, "offset": 0}), None, 2.0, ended, "not_ready")
    [v] = violations(history(answer))
    assert v.startswith("update#3 top(b,limit=10,offset=0), answered at +2.000s: {'op': 'error'")


# -- a tournament's settlement (`support.settlement_history`) ---------------------------------------

CUP = Cup(T0, T0 + 3, [{"reward": "gold", "ranks": [1, 1]}, {"reward": "silver", "ranks": [2, 2]}])
GOLD_ANN = {"rank": 1, "member": "ann", "score": 9, "reward": "gold"}
SILVER_BOB = {"rank": 2, "member": "bob", "score": 7, "reward": "silver"}
R0 = {"period": "cup", "period_id": "x", "partition": None, "revision": 0, "size": 2, "awards": [GOLD_ANN, SILVER_BOB],
      "sha256": sha256([GOLD_ANN, SILVER_BOB])}
R1 = {**R0, "revision": 1, "size": 1, "awards": [GOLD_ANN], "sha256": sha256([GOLD_ANN]),
      "changes": [{"member": "bob", "before": "silver", "after": None}]}
CUP_JOURNAL = [*JOURNAL[:3], Journaled(4, closes=("cup", "x")), Journaled(5, settlement=R0), Journaled(6, EVENTS[3]),
               Journaled(7, target=2), Journaled(8, settlement=R1)]
"""k1..k3 in the cup (k4 after it), closed at seq 4 and settled at 5; bob's k2 voided at 7, revised at 8."""


def settlement_answer(kind: str, seq: int, sent: float, body: dict[str, Any], **args: Any) -> Answer:
    return Answer("http", None, Query(kind, "b", args), sent, sent + 0.1, {"seq": seq, **body})


def cup_history(*answers: Answer, feed: tuple[dict[str, Any], ...] = (R0, R1)) -> History:
    h = history(*answers)
    h.acks[3] = Ack("b", "k4", "accepted", 5.5, 6.0)
    h.voids = [("b", "k2", 7.0)]
    h.feed = [{"cursor": i, "board": "b", "seq": 5 if r["revision"] == 0 else 8, "awards": len(r["awards"]),
               **{k: r[k] for k in ("period", "period_id", "partition", "revision", "sha256")}} for i, r in enumerate(feed, 1)]
    return h


def cup_violations(h: History, journal: list[Journaled] = CUP_JOURNAL) -> list[str]:
    return check(h, {"b": journal}, BOARDS, CUP).violations


def test_a_correct_settlement_history_passes() -> None:
    page = {"limit": 10, "offset": 0}
    h = cup_history(
        settlement_answer("preview", 2, 2.5, {"revision": 0, "preview": True, "awards_total": 2, "sha256": sha256(
            [{**GOLD_ANN, "member": "bob", "score": 7}, {**SILVER_BOB, "member": "ann", "score": 5}]),
            "awards": [{**GOLD_ANN, "member": "bob", "score": 7}, {**SILVER_BOB, "member": "ann", "score": 5}]}, **page),
        Answer("http", None, Query("settlement", "b", page), 3.5, 3.6, {"error": {"code": "not_settled"}}, "not_settled"),
        settlement_answer("settlement", 6, 6.5, {"revision": 0, "awards_total": 2, "awards": [GOLD_ANN], "sha256": R0["sha256"]},
                          limit=1, offset=0),
        settlement_answer("award", 8, 7.5, {"revision": 1, "sha256": R1["sha256"], "award": None}, member="bob"),
    )
    report = check(h, {"b": CUP_JOURNAL}, BOARDS, CUP)
    assert report.ok, report


def test_a_settlement_answer_that_is_not_the_oracles_is_flagged() -> None:
    stale = settlement_answer("settlement", 8, 7.5, {"revision": 0, "awards_total": 2, "awards": [GOLD_ANN, SILVER_BOB],
                                                     "sha256": R0["sha256"]}, limit=10, offset=0)
    [v] = cup_violations(cup_history(stale))
    assert "seq 8: awards: got" in v and "revision: got 0, oracle says 1" in v


def test_not_settled_after_an_ack_past_revision_0_is_flagged() -> None:
    late = Answer("http", None, Query("award", "b", {"member": "ann"}), 6.5, 6.6, {"error": {"code": "not_settled"}}, "not_settled")
    [v] = cup_violations(cup_history(late))
    assert "not_settled, but k4 (seq 6) was acked before the query was sent" in v


def test_a_wrong_revision_a_silent_change_and_a_feed_not_exactly_once_are_flagged() -> None:
    wrong = [*CUP_JOURNAL[:4], Journaled(5, settlement={**R0, "awards": [GOLD_ANN]}), *CUP_JOURNAL[5:7]]
    found = cup_violations(cup_history(feed=(R0, R1, R0)), wrong)
    assert any("revision at seq 5: size 2, awards" in v for v in found), found
    assert any("without a revision" in v for v in found), found
    assert any("given twice" in v for v in found) and any("after revision 1 of its table" in v for v in found), found
    assert any("('b', 'cup', 'x', '*', 1) is not journaled" in v for v in found), found
