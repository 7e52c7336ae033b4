"""Sorted lists that share their sublists with their copies: a copy of a table (a snapshot's
repeat of another at a start) costs a reference to each sublist of its lists, and each sublist is
copied by whichever list changes it first. Copying every sublist at once touched each entry and
name (a cache miss each): 0.3-0.5 s a table of 10**6 members; copying them on the first event
would stall the event loop as long, while a sublist's copy is a thousand references."""

from __future__ import annotations

from bisect import bisect_right
from sys import getrefcount
from typing import Any

from sortedcontainers import SortedList


class SharedSortedList(SortedList):  # type: ignore[misc]  # sortedcontainers has no types
    """A SortedList some of whose sublists another list may hold too (``_shared``: by id, each
    held so that its id is not reused while listed). It copies such a sublist before changing it
    (a split or a merge included) and turns back into a plain SortedList once it holds none.
    Covers `add` and the removals through ``SortedList._delete`` (remove, discard, pop).

    Its methods name SortedList's explicitly (no ``super()``): a bound method taken before the
    list turned back (`RankedTable.apply_updates` takes ``add`` once a batch) still works after."""

    _shared: dict[int, list[Any]]

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
                self._shared.pop(id(lists[1]), None)  # read into this one and let go
        SortedList._delete(self, pos, idx)
        _settle(self)


def _own(sorted_list: SharedSortedList, pos: int) -> None:
    """Make the sublist at ``pos`` the list's own: a copy, unless the lists that shared it have
    all let it go (then the last one keeps it: each sublist is copied once less than it has
    holders, as many times as copying every list at once did)."""
    sublist = sorted_list._lists[pos]
    if sorted_list._shared.pop(id(sublist), None) is not None and getrefcount(sublist) > _HELD_HERE_ONLY:
        sorted_list._lists[pos] = sublist.copy()


_HELD_HERE_ONLY = 3
"""`getrefcount` of a sublist that only the list at hand holds, in `_own`: its own list of
sublists, the local name, the argument."""


def _settle(sorted_list: SharedSortedList) -> None:
    if not sorted_list._shared:
        sorted_list.__class__ = SortedList  # shares nothing: no check a change


def share(original: SortedList) -> SortedList:
    """A copy of ``original`` holding the same sublists, each copied by whichever of the two
    lists changes it first (``original`` becomes a `SharedSortedList` for that).
    O(sublists): about 1,000 at 10**6 values."""
    sublists = original._lists
    copy = SharedSortedList()
    copy._load = original._load
    copy._lists = list(sublists)
    copy._maxes = list(original._maxes)
    copy._len = original._len
    copy._shared = {id(sublist): sublist for sublist in sublists}
    original.__class__ = SharedSortedList
    original._shared = dict(copy._shared)
    _settle(original)  # an empty list shares nothing
    _settle(copy)
    return copy
