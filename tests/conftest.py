"""Fixtures shared by every test directory."""

pytest_plugins = ["support.postgres", "support.journals", "support.cluster", "support.serving", "support.netns"]
