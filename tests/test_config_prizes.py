"""Prize tiers in a board's definition (`arena.config.parse_board`): read from config.toml and from
JSON alike, `top_percent` kept exactly as written, every mistake one line naming its key."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest

from arena.config import load_config, parse_board
from arena.engine.prizes import PrizeTier
from arena.errors import ConfigError
from loadtest.config_toml import write_config

TOML = """
[[servers]]
id = "gs"
token_sha256 = "{sha}"

[boards.hs]
periods = ["alltime", "weekly", "daily"]

[[boards.hs.prizes.weekly]]
ranks = [1, 1]
reward = "gold-crown"

[[boards.hs.prizes.weekly]]
top_percent = {percent}
reward = "silver-badge"

[[boards.hs.prizes.daily]]
score = 5000
reward = "daily-star"
"""


def config_file(tmp_path: Path, percent: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(TOML.format(sha="0" * 64, percent=percent))
    return path


@pytest.mark.parametrize("written, exact", [
    ("10", Fraction(10)),
    ("0.1", Fraction(1, 10)),
    ("12.345678901234", Fraction(12_345_678_901_234, 10**12)),
    ("7e-5", Fraction(7, 100_000)),
    ("100.000", Fraction(100)),
])
def test_config_toml_gives_prize_tiers_in_order_with_top_percent_as_written(tmp_path: Path, written: str, exact: Fraction) -> None:
    spec = load_config(config_file(tmp_path, written)).boards["hs"]
    assert spec.prize_tiers("weekly") == (PrizeTier("gold-crown", ranks=(1, 1)), PrizeTier("silver-badge", top_percent=exact))
    assert spec.prize_tiers("daily") == (PrizeTier("daily-star", score=5000),)
    assert spec.prize_tiers("alltime") == () and [name for name, _ in spec.prizes] == ["daily", "weekly"]  # the periods' order
    assert "prizes" not in spec.definition()  # prizes may change while the journal holds events


@pytest.mark.parametrize("written", ["33.333333333333333333", "10.0000000000000001"])
def test_config_toml_refuses_digits_a_double_would_lose_rather_than_round_them(tmp_path: Path, written: str) -> None:
    # a double reads 10.0000000000000001 as 10.0: config.toml's text shows the digits, so it is refused
    with pytest.raises(ConfigError, match=r"boards\.hs\.prizes\.weekly\[1\]\.top_percent: must be written with at most 15 "
                                          rf"significant digits \(got {written}\)$"):
        load_config(config_file(tmp_path, written))


def test_json_numbers_read_as_doubles_are_taken_as_their_shortest_repr() -> None:
    tiers = orjson.loads(b'{"weekly": [{"top_percent": 0.1, "reward": "a"}, {"top_percent": 12.5, "reward": "b"},'
                         b' {"top_percent": 99.999999999999, "reward": "c"}]}')
    spec = parse_board("hs", {"periods": ["weekly"], "prizes": tiers})
    assert [t.top_percent for t in spec.prize_tiers("weekly")] == [Fraction(1, 10), Fraction(25, 2), Fraction(99_999_999_999_999, 10**12)]
    with pytest.raises(ConfigError, match="at most 15 significant digits"):  # 100/3 as a double: 17 digits
        parse_board("hs", {"periods": ["weekly"], "prizes": {"weekly": [{"top_percent": 100 / 3, "reward": "a"}]}})


def test_the_config_writer_writes_prizes_that_read_back_the_same(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, "0.001"))
    again = load_config(write_config(config, tmp_path / "again.toml"))
    assert again.boards == config.boards


WEEKLY = {"periods": ["alltime", "weekly"]}


def tiers(*tier: dict[str, Any]) -> dict[str, Any]:
    return {**WEEKLY, "prizes": {"weekly": list(tier)}}


@pytest.mark.parametrize("board, message", [
    ({**WEEKLY, "prizes": []}, "boards.b.prizes: must be a table"),
    ({**WEEKLY, "prizes": {"alltime": [{"ranks": [1, 1], "reward": "x"}]}},
     "boards.b.prizes.alltime: alltime never closes, so it has no prizes"),
    ({**WEEKLY, "prizes": {"daily": [{"ranks": [1, 1], "reward": "x"}]}},
     "boards.b.prizes.daily: not a period of this board (alltime, weekly)"),
    ({**WEEKLY, "prizes": {"weekly": []}}, "boards.b.prizes.weekly: must be 1..100 tiers ([[boards.b.prizes.weekly]] tables)"),
    ({**WEEKLY, "prizes": {"weekly": {"ranks": [1, 1]}}},
     "boards.b.prizes.weekly: must be 1..100 tiers ([[boards.b.prizes.weekly]] tables)"),
    (tiers(*[{"ranks": [1, 1], "reward": "x"}] * 101), "boards.b.prizes.weekly: must be 1..100 tiers ([[boards.b.prizes.weekly]] tables)"),
    (tiers({"ranks": [1, 1]}), "boards.b.prizes.weekly[0].reward: missing"),
    (tiers({"ranks": [1, 1], "reward": ""}), "boards.b.prizes.weekly[0].reward: must be a non-empty string (got '')"),
    (tiers({"ranks": [1, 1], "reward": "x" * 65}), "boards.b.prizes.weekly[0].reward: must be 1..64 characters without control characters"),
    (tiers({"ranks": [1, 1], "reward": "a\nb"}), "boards.b.prizes.weekly[0].reward: must be 1..64 characters without control characters"),
    (tiers({"reward": "x"}), "boards.b.prizes.weekly[0]: needs exactly one of ranks, top_percent or score"),
    (tiers({"reward": "x", "ranks": [1, 2], "score": 5}),
     "boards.b.prizes.weekly[0]: needs exactly one of ranks, top_percent or score (got ranks, score)"),
    (tiers({"reward": "x", "ranks": [0, 2]}), "boards.b.prizes.weekly[0].ranks: must be [A, B] with integers 1 <= A <= B"),
    (tiers({"reward": "x", "ranks": [3, 2]}), "boards.b.prizes.weekly[0].ranks: must be [A, B] with integers 1 <= A <= B"),
    (tiers({"reward": "x", "ranks": [1]}), "boards.b.prizes.weekly[0].ranks: must be [A, B] with integers 1 <= A <= B"),
    (tiers({"reward": "x", "ranks": [1, 2.0]}), "boards.b.prizes.weekly[0].ranks: must be [A, B] with integers 1 <= A <= B"),
    (tiers({"reward": "x", "top_percent": 0}), "boards.b.prizes.weekly[0].top_percent: must be > 0 and <= 100 (got 0)"),
    (tiers({"reward": "x", "top_percent": 100.5}), "boards.b.prizes.weekly[0].top_percent: must be > 0 and <= 100"),
    (tiers({"reward": "x", "top_percent": "10"}), "boards.b.prizes.weekly[0].top_percent: must be a number"),
    (tiers({"reward": "x", "top_percent": True}), "boards.b.prizes.weekly[0].top_percent: must be a number"),
    (tiers({"reward": "x", "top_percent": float("nan")}), "boards.b.prizes.weekly[0].top_percent: must be > 0 and <= 100"),
    (tiers({"reward": "x", "top_percent": 1e-21}), "boards.b.prizes.weekly[0].top_percent: must be at least 1E-20"),
    (tiers({"reward": "x", "score": 1.5}), "boards.b.prizes.weekly[0].score: must be an integer"),
    (tiers({"reward": "x", "score": 2**53}), "boards.b.prizes.weekly[0].score: must be between"),
    (tiers({"reward": "x", "score": 5, "tier": "gold"}),
     "boards.b.prizes.weekly[0].tier: names a league tier, and this board has no league (got 'gold')"),
    (tiers({"reward": "x", "score": 5, "region": "eu"}), "boards.b.prizes.weekly[0].region: unknown key"),
])
def test_a_bad_prize_is_one_line_naming_its_key(board: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_board("b", board)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
