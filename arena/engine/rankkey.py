"""A table entry as one `bytes` object whose byte order is the rank order.

A table holds its entries as ``pack(sort_key, member)`` rather than ``(sort_key, member)``
tuples. At a million members the SortedList's bisects are bound by cache misses, and a tuple
comparison touches two scattered objects (the tuple, then its int) where a bytes comparison is
one memcmp over one object's inline data. Bytes are also invisible to the cyclic GC. Measured
on 1M entries: remove+add about 35 % faster, 32 B less per entry by tracemalloc (48 by RSS).

Layout: a prefix-free encoding of the integer sort key, then the member in UTF-8 (whose byte
order is code point order, i.e. Python `str` order; ``surrogatepass`` keeps that for lone
surrogates too). Sort keys of scores within ±2**62 take the 17-byte inline form; larger sums
take a length-prefixed form that still orders correctly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

_BIAS = 1 << 127
_SPAN = 1 << 128
_BELOW, _INLINE, _ABOVE = 1, 2, 3
_INLINE_BASE = _INLINE << 128  # the inline form is the 17 bytes of key + _BIAS + _INLINE_BASE
_INLINE_OFFSET = _INLINE_BASE + _BIAS
_SIZE_MAX = (1 << 32) - 1


def pack(sort_key: int, member: str) -> bytes:
    """The entry of ``member`` at ``sort_key``: bytes order == (sort_key, member) order."""
    n = sort_key + _BIAS
    if 0 <= n < _SPAN:
        head = (n + _INLINE_BASE).to_bytes(17, "big")
    elif n > 0:  # longer is larger
        size = (n.bit_length() + 7) // 8
        head = bytes((_ABOVE,)) + size.to_bytes(4, "big") + n.to_bytes(size, "big")
    else:  # longer is smaller, and the magnitude is complemented
        size = ((-n).bit_length() + 7) // 8
        head = bytes((_BELOW,)) + (_SIZE_MAX - size).to_bytes(4, "big") + ((1 << 8 * size) + n - 1).to_bytes(size, "big")
    return head + member.encode("utf-8", "surrogatepass")


def pack_all(sort_keys: Iterable[int], members: Iterable[str]) -> list[bytes]:
    """`pack` of each sort key with its member, for long runs (a table built at once): the
    common inline form costs no call."""
    low, high, offset = _INLINE_BASE, _INLINE_BASE + _SPAN, _INLINE_OFFSET
    return [
        n.to_bytes(17, "big") + member.encode("utf-8", "surrogatepass") if low <= (n := sort_key + offset) < high
        else pack(sort_key, member)
        for sort_key, member in zip(sort_keys, members, strict=True)
    ]


def _head(item: bytes) -> tuple[int, int]:
    """(sort_key, length of the key's encoding)."""
    tag = item[0]
    if tag == _INLINE:
        return int.from_bytes(item[:17], "big") - _INLINE_OFFSET, 17
    raw = int.from_bytes(item[1:5], "big")
    size = raw if tag == _ABOVE else _SIZE_MAX - raw
    end = 5 + size
    magnitude = int.from_bytes(item[5:end], "big")
    n = magnitude if tag == _ABOVE else magnitude + 1 - (1 << 8 * size)
    return n - _BIAS, end


def sort_key_of(item: bytes) -> int:
    return _head(item)[0]


def unpack(item: bytes) -> tuple[int, str]:
    """The (sort_key, member) an entry was packed from."""
    sort_key, end = _head(item)
    return sort_key, decode_member(item[end:])


def decode_member(raw: bytes) -> str:
    """The member string of the UTF-8 bytes `split_all` yields."""
    return raw.decode("utf-8", "surrogatepass")


def split_all(items: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(sort_key, member in UTF-8) of each entry, for long runs of entries (slices, digests):
    the common inline form costs no call."""
    from_bytes = int.from_bytes
    for item in items:
        if item[0] == _INLINE:
            yield from_bytes(item[:17], "big") - _INLINE_OFFSET, item[17:]
        else:
            sort_key, end = _head(item)
            yield sort_key, item[end:]
