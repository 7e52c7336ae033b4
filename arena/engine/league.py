"""A league board's divisions (DESIGN.md, "Partitioned tables: regions and leagues"). Pure: the
engine (`arena.engine.board`) feeds it, in journal order, each member's accepted events of the
season's windows and the season's close markers, and keeps the division tables.

A member's tier is carried from the last window it played in: ``tiers`` holds, for each member
that finished a window, its tier for the next window it plays, moved at that window's close
(`LeagueSpec.moved`). A member joins a division of its tier of a window at its first accepted
event there, or, when the window before had no close marker yet at that event (its grace), at
that marker, once the window before's moves are known. Divisions of a tier fill in the order
members join: the j-th member (from 0) of tier t joins ``<t>-<j // size + 1>``.

A league's ``size``, ``promote`` and ``relegate`` may change (its tiers may not); a window takes
the parameters in force when its divisions begin, at the window before's close marker (the
season's first window, or one after a gap: at its first event), and keeps them to its close:
its divisions fill with that size and its moves use that promote and relegate. Which parameters
held at a seq is the board's journal's definition records' to say (`League.define`), so a
replay pins the same ones.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

import orjson

from arena.engine.periods import Window

TableKey = tuple[str, str]
"""A window's key, (period name, period_id), as `arena.engine.routing` has it (which imports
the spec, which holds a `LeagueSpec`)."""

LEAGUE_RECORD = "league"
"""The `BoardRecord` kind that journals a closed window's moves (`moves_text`)."""

_T = TypeVar("_T")

PIECE = 4096
"""Members a piece of a league's image (`League.image`) turns into JSON between two pauses."""


@dataclass(frozen=True, slots=True)
class LeagueSpec:
    """``league = {size, tiers, promote, relegate}``: tiers lowest first."""

    size: int
    tiers: tuple[str, ...]
    promote: int
    relegate: int

    def document(self) -> dict[str, object]:
        return {"size": self.size, "tiers": list(self.tiers), "promote": self.promote, "relegate": self.relegate}

    def moved(self, tier: int, rank: int, members: int) -> int:
        """The next tier of a member of tier ``tier`` that finished at rank position ``rank``
        (from 0) of a division of ``members``: up one in the top `promote`, down one in the
        bottom `relegate`, only in a division of more than ``promote + relegate``; clamped."""
        if members <= self.promote + self.relegate:
            return tier
        if rank < self.promote:
            tier += 1
        elif rank >= members - self.relegate:
            tier -= 1
        return min(max(tier, 0), len(self.tiers) - 1)

    def tier_index(self, division: str) -> int:
        """The tier of a division's name (``<tier>-<k>``)."""
        return self.tiers.index(division.rsplit("-", 1)[0])


class LeagueWindow:
    """The divisions of one window of the season: who played (first accepted seq), who joined
    which division, how many joined each tier, and the parameters they were made with."""

    __slots__ = ("window", "previous", "firsts", "played", "divisions", "joined", "spec")

    def __init__(self, window: Window, previous: TableKey | None, tiers: int) -> None:
        self.window = window
        self.previous = previous
        """The key of the window before (whose close marker ends the grace); None: none."""
        self.firsts: dict[str, int] = {}
        """Each member that played: the seq of its first accepted event (voided or not)."""
        self.played: list[str] = []
        """The members of ``firsts`` in its order: a list only grows, so an image (`League.image`)
        reads the members as of its start a piece at a time while more play."""
        self.divisions: dict[str, str] = {}
        """Each member that joined: its division; a member of ``firsts`` not here waits."""
        self.joined = [0] * tiers
        self.spec: LeagueSpec | None = None
        """The parameters in force when its divisions began (at its first join); None before."""

    def has(self, division: str) -> bool:
        """Whether ``division`` is one of `names`, without listing them. O(tiers)."""
        spec = self.spec
        tier, _, k = division.rpartition("-")
        if spec is None or tier not in spec.tiers or not k.isdigit() or k != str(int(k)):
            return False
        return 1 <= int(k) <= (self.joined[spec.tiers.index(tier)] + spec.size - 1) // spec.size

    def names(self) -> tuple[str, ...]:
        """The divisions in the order they list: by tier, then k."""
        spec = self.spec
        if spec is None:
            return ()
        return tuple(f"{tier}-{k}" for t, tier in enumerate(spec.tiers)
                     for k in range(1, (self.joined[t] + spec.size - 1) // spec.size + 1))


class League:
    """The tiers and divisions of a league board (see the module)."""

    def __init__(self, spec: LeagueSpec) -> None:
        self.spec = spec
        """The parameters in force now (its tiers never change)."""
        self.defined: list[tuple[int, LeagueSpec]] = [(0, spec)]
        """The parameters in force from each seq on, in seq order (`define`)."""
        self.tiers: dict[str, int] = {}
        """Each member's tier for the next window it plays, once it finished one. Replaced at a
        close, never changed, so that an image (`League.image`) reads it while the league goes on."""
        self.windows: dict[TableKey, LeagueWindow] = {}
        self.moved: set[TableKey] = set()
        """The windows whose moves are in ``tiers``."""

    def define(self, seq: int, spec: LeagueSpec) -> None:
        """``spec``'s parameters are in force from ``seq`` on (its definition record's seq)."""
        if self.defined[-1][1] != spec:
            self.defined.append((seq, spec))
        self.spec = spec

    def defined_by(self, definitions: Sequence[tuple[int, LeagueSpec]]) -> None:
        """Take the parameters in force at each seq from a journal's definition records, in seq
        order; the first holds before its seq too (a journal older than definition records).
        None: the current ones held always."""
        if definitions:
            self.defined = [(0, definitions[0][1])]
            for seq, spec in definitions[1:]:
                self.define(seq, spec)
            self.spec = self.defined[-1][1]

    def spec_at(self, seq: int) -> LeagueSpec:
        """The parameters in force at ``seq``. O(log changes)."""
        return self.defined[max(bisect_right([s for s, _ in self.defined], seq) - 1, 0)][1]

    def window(self, window: Window, previous: Window | None) -> LeagueWindow:
        key = (window.kind, window.period_id)
        found = self.windows.get(key)
        if found is None:
            before = None if previous is None else (previous.kind, previous.period_id)
            found = self.windows[key] = LeagueWindow(window, before, len(self.spec.tiers))
        return found

    def played(self, at: LeagueWindow, member: str, seq: int, previous_marker: int | None) -> str | None:
        """A member's accepted event at ``seq`` in a window: the division it joins now (at its
        first event, when the window before has none or closed before ``seq``); None when it
        joined before or waits for that close. ``previous_marker``: the seq of the window
        before's close marker, None while it has none."""
        if member in at.firsts:
            return None
        at.firsts[member] = seq
        at.played.append(member)
        if at.previous is None:
            return self._join(at, member, seq)
        if previous_marker is not None and previous_marker < seq:
            return self._join(at, member, previous_marker)
        return None

    def _join(self, at: LeagueWindow, member: str, begun: int) -> str:
        """``member`` joins a division of ``at``, whose divisions begin (if they have not) with
        the parameters in force at seq ``begun``."""
        spec = at.spec
        if spec is None:
            spec = at.spec = self.spec_at(begun)
        tier = self.tiers.get(member, 0)
        k = at.joined[tier] // spec.size + 1
        at.joined[tier] += 1
        division = at.divisions[member] = f"{spec.tiers[tier]}-{k}"
        return division

    def moves(self, at: LeagueWindow | None, divisions: Iterable[tuple[str, Sequence[str]]]) -> dict[str, int]:
        """Each ranked member's next tier, judged by a closed window's divisions (each one's
        name and its members in rank order) with the parameters the window began with."""
        moves: dict[str, int] = {}
        spec = None if at is None else at.spec
        if spec is None:
            return moves
        for division, ranked in divisions:
            tier = spec.tier_index(division)
            for rank, member in enumerate(ranked):
                moves[member] = spec.moved(tier, rank, len(ranked))
        return moves

    def closed(self, key: TableKey, moves: Mapping[str, int], seq: int) -> list[tuple[LeagueWindow, str, str]]:
        """Apply a window's ``moves`` (once; its close marker is at ``seq``), then let the
        members of the windows after it that wait for its close join, in the order of their
        first events: (window, member, division) each."""
        if key in self.moved:
            return []
        self.moved.add(key)
        self.tiers = {**self.tiers, **moves}
        joined = []
        for at in self.windows.values():
            if at.previous == key:
                for member in sorted((m for m in at.firsts if m not in at.divisions), key=at.firsts.__getitem__):
                    joined.append((at, member, self._join(at, member, seq)))
        return joined

    def image(self, piece: int = PIECE) -> Generator[None, None, list[bytes]]:
        """The league's state now as the JSON text of an object (a snapshot's header holds it),
        in pieces: each window's members, first seqs and divisions as parallel lists. What it
        reads is taken now, in O(windows); the text is made ``piece`` members at a time, pausing
        (yielding) between pieces while the league goes on: a window's members and their first
        seqs only grow (their count now is the cut), ``tiers`` is replaced at a close, never
        changed, and a member waiting now joins at a close after it (its division is left out).
        O(members) in all."""
        tiers, moved = self.tiers, sorted([list(key) for key in self.moved])
        cuts = [(at, len(at.played), list(at.joined), at.spec, _joined_now(at)) for at in self.windows.values()]
        return self._image(tiers, moved, cuts, piece)

    @staticmethod
    def _image(tiers: dict[str, int], moved: list[list[str]],
               cuts: list[tuple[LeagueWindow, int, list[int], LeagueSpec | None, list[str | None] | None]],
               piece: int) -> Generator[None, None, list[bytes]]:
        items = iter(tiers.items())
        text = [b'{"tiers":', *(yield from _json(iter(lambda: dict(islice(items, piece)), {}), b"{}")),
                b',"moved":', orjson.dumps(moved), b',"windows":[']
        for n, (at, count, joined, spec, waiting) in enumerate(cuts):
            text.append(orjson.dumps({
                "kind": at.window.kind, "period_id": at.window.period_id,
                "previous": None if at.previous is None else list(at.previous), "joined": joined,
                "league": None if spec is None else spec.document()})[:-1])
            text.append(b',"members":')
            text += yield from _json(_slices(at.played, count, piece), b"[]")
            text.append(b',"firsts":')
            text += yield from _json((list(map(at.firsts.__getitem__, part)) for part in _slices(at.played, count, piece)), b"[]")
            text.append(b',"divisions":')
            if waiting is None:  # every member had joined: those who join later are past the cut
                text += yield from _json((list(map(at.divisions.get, part)) for part in _slices(at.played, count, piece)), b"[]")
            else:
                text += yield from _json(_slices(waiting, count, piece), b"[]")
            text.append(b"}," if n < len(cuts) - 1 else b"}")
        text.append(b"]}")
        return text

    def load(self, image: Mapping[str, object], window_of: Callable[[str, str], Window]) -> None:
        """Take the state of `image` back; ``window_of`` gives a window by its kind and period
        id. Raises KeyError, ValueError or TypeError (or what ``window_of`` raises) for an
        image that is not one."""
        tiers = image["tiers"]
        moved, windows = image["moved"], image["windows"]
        if not isinstance(tiers, dict) or not isinstance(moved, list) or not isinstance(windows, list):
            raise TypeError("not a league image")
        self.tiers = {str(m): int(t) for m, t in tiers.items()}
        self.moved = {(str(k), str(p)) for k, p in moved}
        self.windows = {}
        for w in windows:
            key = (str(w["kind"]), str(w["period_id"]))
            at = LeagueWindow(window_of(*key), None if w["previous"] is None else tuple(w["previous"]), len(self.spec.tiers))
            at.joined = [int(n) for n in w["joined"]]
            begun = w["league"]
            if begun is not None:
                at.spec = LeagueSpec(int(begun["size"]), self.spec.tiers, int(begun["promote"]), int(begun["relegate"]))
            members, firsts, divisions = w["members"], w["firsts"], w["divisions"]
            if not len(members) == len(firsts) == len(divisions):
                raise ValueError("a league window's lists differ in length")
            at.firsts = dict(zip(members, firsts, strict=True))
            at.played = list(at.firsts)
            at.divisions = {m: d for m, d in zip(members, divisions, strict=True) if d is not None}
            self.windows[key] = at


def _joined_now(at: LeagueWindow) -> list[str | None] | None:
    """A window's divisions now (None for a member waiting), if some of its members wait to join:
    they join all at once, at the close before, which may come while an image is made. None when
    every member has joined. A window waits whole or not at all, and only through a grace."""
    if len(at.divisions) == len(at.firsts):
        return None
    return list(map(at.divisions.get, at.played))


def _slices(items: Sequence[_T], count: int, piece: int) -> Iterator[Sequence[_T]]:
    """The first ``count`` of ``items`` (which may grow meanwhile), ``piece`` at a time."""
    for begin in range(0, count, piece):
        yield items[begin:min(begin + piece, count)]


def _json(pieces: Iterable[Sized], empty: bytes) -> Generator[None, None, list[bytes]]:
    """The JSON text of one array or object (``empty`` says which) of the items of ``pieces``,
    a piece of text for each, made between two pauses (yields)."""
    text = [empty[:1]]
    for made in pieces:
        if made:
            text += [b",", orjson.dumps(made)[1:-1]] if len(text) > 1 else [orjson.dumps(made)[1:-1]]
        yield
    text.append(empty[1:])
    return text


def moves_text(window: Window, moves: Mapping[str, int], spec: LeagueSpec) -> str:
    """A league record's body: the closed window and each ranked member's next tier by name."""
    return orjson.dumps({"kind": window.kind, "period_id": window.period_id,
                         "tiers": {m: spec.tiers[t] for m, t in moves.items()}}).decode()


def parse_moves(body: str, spec: LeagueSpec) -> tuple[TableKey, dict[str, int]]:
    """A league record's window key and moves (`moves_text`)."""
    data = orjson.loads(body)
    return (data["kind"], data["period_id"]), {m: spec.tiers.index(t) for m, t in data["tiers"].items()}
