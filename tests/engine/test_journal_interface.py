"""The journal boundary: what every backend shares, apart from any one of them."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from arena.engine.board import BoardSpec
from arena.engine.periods import PeriodKind
from arena.errors import BoardDefinitionChanged
from arena.journal import check_definition

SPEC = BoardSpec("b", periods=(PeriodKind.ALLTIME, PeriodKind.DAILY))
STORED = check_definition(SPEC, None, False, "j")


def test_the_interface_imports_no_storage_library() -> None:
    code = "import sys, arena.journal; print(sorted(m for m in sys.modules if 'sqlite' in m))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


# -- the board definition ------------------------------------------------------------------------


def test_a_new_journal_stores_the_definition_and_an_unchanged_one_stores_nothing() -> None:
    assert STORED is not None
    assert check_definition(SPEC, STORED, True, "j") is None


def test_a_journal_without_records_takes_a_changed_definition() -> None:
    changed = replace(SPEC, timezone="Asia/Kolkata")
    assert check_definition(changed, STORED, False, "j") == check_definition(changed, None, False, "j") != STORED


def test_a_changed_definition_with_records_names_the_board_the_journal_and_the_change() -> None:
    with pytest.raises(BoardDefinitionChanged) as raised:
        check_definition(replace(SPEC, timezone="Asia/Kolkata"), STORED, True, "/data/b.journal.sqlite")
    assert str(raised.value) == (
        "board 'b': definition changed while its journal /data/b.journal.sqlite holds records"
        " (timezone: 'UTC' -> 'Asia/Kolkata'); use a new board name"
    )
