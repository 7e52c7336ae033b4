"""The real-server fixtures every test directory shares, configured by the test's closest
`server` mark (on the test, its class or the module's ``pytestmark``):

    pytestmark = pytest.mark.server(BOARDS, SERVERS, now_ms=NOW, push_interval_ms=200)

- `server`: an `InProcessServer` for one test, its data in ``tmp_path / "data"``;
- `child_server`: an `arena serve` child process for the whole module (killed at its end).

The mark takes the boards, the game servers' scopes (default: ``gs`` on every board) and any
`ServerSettings` field, as `make_config` does; besides: ``fault_injection`` (the test routes, on
by default), ``now_ms`` (a pinned clock, in-process only), ``log_level`` and ``serve_args`` (for
the child process)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.faults import write_config
from support.server import ChildServer, InProcessServer, make_config


@dataclass(frozen=True)
class Serving:
    """What a `server` mark asks for."""

    boards: Mapping[str, Mapping[str, Any]]
    servers: Mapping[str, Sequence[str]] | None = None
    fault_injection: bool = True
    now_ms: int | None = None
    log_level: str | None = None
    serve_args: Sequence[str] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)


def serving(node: pytest.Item | pytest.Module | pytest.Collector) -> Serving:
    mark = node.get_closest_marker("server")
    assert mark is not None, f"{node.nodeid} uses a server fixture without a `server` mark to configure it"
    return _serving(*mark.args, **mark.kwargs)


def _serving(
    boards: Mapping[str, Mapping[str, Any]],
    servers: Mapping[str, Sequence[str]] | None = None,
    *,
    fault_injection: bool = True,
    now_ms: int | None = None,
    log_level: str | None = None,
    serve_args: Sequence[str] = (),
    **settings: Any,
) -> Serving:
    return Serving(boards, servers, fault_injection, now_ms, log_level, serve_args, settings)


@pytest.fixture
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[InProcessServer]:
    """A real server in this event loop, as the test's `server` mark configures it."""
    wanted = serving(request.node)
    config = make_config(tmp_path / "data", wanted.boards, wanted.servers, **wanted.settings)
    async with InProcessServer(config, fault_injection=wanted.fault_injection) as running:
        if wanted.now_ms is not None:
            async with httpx.AsyncClient(base_url=running.url) as http:
                assert (await http.post("/v1/_test/clock", json={"now_ms": wanted.now_ms})).status_code == 200
        yield running


@pytest.fixture
async def http(server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of `server`."""
    async with httpx.AsyncClient(base_url=server.url) as client:
        yield client


@pytest.fixture(scope="module")
def child_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildServer]:
    """`arena serve` as a child process for the whole module, as its `server` mark configures it."""
    wanted = serving(request.node)
    assert wanted.now_ms is None, "pin a child server's clock through its test route (/v1/_test/clock)"
    root = tmp_path_factory.mktemp(request.node.name.removesuffix(".py"))
    config_path = write_config(root, wanted.boards, wanted.servers, **wanted.settings)
    child = ChildServer(config_path, fault_injection=wanted.fault_injection, log_level=wanted.log_level, serve_args=wanted.serve_args)
    child.start()
    try:
        yield child
    finally:
        child.kill()
