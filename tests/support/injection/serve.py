"""`arena` whose serve command adds fault injection: its journals opened through `FaultyBackend`
and the /v1/_test routes served. Same command line as `arena` (`SERVE` below), for the tests'
child servers (`support.server.ChildServer`); run with tests/ on PYTHONPATH."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from arena.cli.main import cmd_serve, main
from support.injection.journal import FaultyBackend
from support.injection.routes import routes

TESTS = Path(__file__).resolve().parents[2]
"""The directory to put on PYTHONPATH, where `support` is found."""
SERVE = (sys.executable, "-m", "support.injection.serve")
"""The command line of this launcher, as `loadtest.process.ARENA` is arena's."""


def serve_injected(args: argparse.Namespace) -> int:
    logging.getLogger("arena").warning("fault injection routes are enabled (tests only)")
    return cmd_serve(args, wrap_backend=FaultyBackend, extra_routes=routes)


if __name__ == "__main__":
    sys.exit(main(serve=serve_injected))
