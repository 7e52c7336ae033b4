"""Fault injection for tests, kept out of the `arena` package: journals that fail on demand
(`journal.FaultyBackend`), the /v1/_test routes that drive them and pin the clock (`routes`),
and `arena serve` with both, for child processes (`python -m support.injection.serve`)."""
