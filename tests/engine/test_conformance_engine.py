"""Every scenario of ../shared/conformance through the engine alone, clock injected."""

from __future__ import annotations

import pytest

from support import scenarios
from support.engine_harness import EngineHarness, wire_results


@pytest.mark.parametrize("name", scenarios.NAMES)
def test_scenario_acks_and_standings_match_the_contract(name: str) -> None:
    scenario = scenarios.load(name)
    harness = EngineHarness(scenarios.boards(scenario), scenario["servers"])
    for step in scenario["steps"]:
        results = harness.submit(step["server"], step["events"], step["now_ms"])
        assert scenarios.without_messages(wire_results(results)) == scenarios.expected_results(step)
    assert harness.standings() == scenario["standings"]
