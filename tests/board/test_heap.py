"""The C heap's thresholds set at the start (`arena.board.heap.tune`): on glibc only, and never
over the operator's own malloc settings."""

from __future__ import annotations

import platform

import pytest

from arena.board.heap import tune

GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_tune_sets_the_thresholds_on_glibc() -> None:
    assert tune({}) is True


@pytest.mark.parametrize("environ", [
    {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"},
    {"MALLOC_ARENA_MAX": "2"},
    {"MALLOC_TRIM_THRESHOLD_": "65536"},
    {"MALLOC_MMAP_THRESHOLD_": "65536"},
])
def test_tune_leaves_malloc_to_the_environment(environ: dict[str, str]) -> None:
    assert tune(environ) is False


def test_tune_is_a_no_op_elsewhere_than_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert tune({}) is False
