"""The event journal, the source of truth of a board: the interface (`arena.journal.interface`)
and its backends (`arena.journal.sqlite`)."""

from arena.journal.interface import Journal, ScoreRow, check_definition

__all__ = ["Journal", "ScoreRow", "check_definition"]
