"""Sorted lists that share their sublists with their copies: a copy of a table (a snapshot's
repeat of another at a start) costs a reference to each sublist of its lists, and each sublist is
copied by whichever list changes it first. Copying every sublist at once touched each entry and
name (a cache miss each): 0.3-0.5 s a table of 10**6 members; copying them on the first event
would stall the event loop as long, while a sublist's copy is a thousand references."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from sortedcontainers import SortedList


class SharedSortedList(SortedList):  # type: ignore[misc]  # sortedcontainers has no types
    """A SortedList some of whose sublists other lists hold too (``_shared``, by id: each such
    sublist with its `Holders`, which also keeps it alive so that its id is not reused while
    listed). It makes a sublist its own before changing it (a split or a merge included) and
    turns back into a plain SortedList once it shares none. Covers `add` and the removals through
    ``SortedList._delete`` (remove, discard, pop).

    Its methods name SortedList's explicitly (no ``super()``): a bound method taken before the
    list turned back (`RankedTable.apply_updates` takes ``add`` once a batch) still works after."""

    _shared: dict[int, tuple[list[Any], Holders]]

    def add(self, value: Any) -> None:
        maxes = self._maxes
        if maxes:
            pos = bisect_right(maxes, value)
            _own(self, pos - 1 if pos == len(maxes) else pos)  # where SortedList.add puts it
        SortedList.add(self, value)
        _settle(self)

    def _delete(self, pos: int, idx: int) -> None:
        lists = self._lists
        _own(self, pos)
        if len(lists[pos]) - 1 <= self._load >> 1 and len(lists) > 1:  # SortedList._delete merges it into a neighbour
            if pos:
                _own(self, pos - 1)  # extended by this one
            else:
                _let_go(self, lists[1])  # read into this one and dropped
        SortedList._delete(self, pos, idx)
        _settle(self)


class Holders:
    """How many lists hold one shared sublist (and have it in their ``_shared``)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 1


def _own(sorted_list: SharedSortedList, pos: int) -> None:
    """Make the sublist at ``pos`` the list's own: a copy, unless every other list that held it
    has let it go (then the last keeps it: a sublist is copied once less than it had holders, as
    many times as copying whole lists did)."""
    sublist = sorted_list._lists[pos]
    if _let_go(sorted_list, sublist):
        sorted_list._lists[pos] = sublist.copy()


def _let_go(sorted_list: SharedSortedList, sublist: list[Any]) -> bool:
    """Stop sharing ``sublist`` (the list is about to change or drop it): whether another list
    still holds it."""
    found = sorted_list._shared.pop(id(sublist), None)
    if found is None:
        return False
    found[1].count -= 1
    return found[1].count > 0


def _settle(sorted_list: SharedSortedList) -> None:
    if not sorted_list._shared:
        sorted_list.__class__ = SortedList  # shares nothing: no check a change


def share(original: SortedList) -> SortedList:
    """A copy of ``original`` holding the same sublists, each made its own by whichever list
    changes it first (``original`` becomes a `SharedSortedList` for that). O(sublists): about
    1,000 at 10**6 values."""
    before: dict[int, tuple[list[Any], Holders]] = getattr(original, "_shared", {})
    shared = {}
    for sublist in original._lists:
        holders = before[id(sublist)][1] if id(sublist) in before else Holders()
        holders.count += 1
        shared[id(sublist)] = (sublist, holders)
    copy = SharedSortedList()
    copy._load = original._load
    copy._lists = list(original._lists)
    copy._maxes = list(original._maxes)
    copy._len = original._len
    copy._shared = shared
    original.__class__ = SharedSortedList
    original._shared = dict(shared)
    _settle(original)  # an empty list shares nothing
    _settle(copy)
    return copy
