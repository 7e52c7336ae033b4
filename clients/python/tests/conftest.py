"""The client's tests run from the repository's root (`python -m pytest` there collects them),
against real Arena servers: they share the server's test fixtures (tests/support), as the
server's own tests do."""

pytest_plugins = ["support.postgres", "support.journals", "support.cluster", "support.serving", "support.netns"]
