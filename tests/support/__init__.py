"""Test helpers shared by engine and server tests (on sys.path via pyproject's pythonpath)."""
