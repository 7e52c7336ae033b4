"""The import graph of `arena` runs one way (docs/architecture.md): no cycle, each layer imports
only its own layer or the ones below it, the shared modules import only the engine and each
other, the client SDK stands apart (clients/python's own checks say it imports nothing of the
server), and the engine does no I/O.

Read from the source with `ast`, so an import inside a function or under ``TYPE_CHECKING``
counts as much as one at the top of a module. Each failure lists every offending edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "arena"

LAYERS = {
    "arena.engine": 0,
    "arena.journal": 1,
    "arena.board": 2,
    "arena.cluster": 3,
    "arena.live": 4,
    "arena.delivery": 4,
    "arena.api": 5,
    "arena.console": 5,
    "arena.cli": 5,
    "arena.__main__": 5,
}
"""engine ← journal ← board ← cluster ← live/delivery ← api/cli: a module imports only from its
own layer or lower ones."""

SHARED = ("arena.config", "arena.errors", "arena.auth", "arena.metrics")
"""Importable from anywhere; they import only the engine and each other."""

LEAVES = ("arena.jsontext",)
"""Modules that import nothing of arena, so that any layer may use them."""

CLIENT = "arena.client"
"""The game-server SDK under its old name: a re-export of `arena_client` (the `arena-client`
distribution in clients/python); it imports nothing of the server, and nothing of the server imports it."""

CLIENT_LEAVES = ("arena_client.backoff", "arena_client.signature")
"""The modules of the client the server imports, one copy for both: the reconnect schedule, and
the webhooks' signature (the server signs, a receiver verifies)."""

IO_MODULES = frozenset(
    {
        "aiosqlite", "asyncio", "asyncpg", "concurrent", "http", "httpx", "multiprocessing", "os", "pathlib", "select",
        "selectors", "shutil", "socket", "sqlite3", "ssl", "starlette", "subprocess", "tempfile", "threading", "time",
        "urllib", "uvicorn", "websockets",
    }
)
"""What the pure engine never imports: event loops, clocks and sleeps, files, databases, the network."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported(name: str, path: Path) -> Iterator[str]:
    """Every module that the module ``name`` (at ``path``) imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in MODULES else base


def arena_module(target: str) -> str | None:
    """The arena module an import names (the package when it names a name in one), else None."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


GRAPH = {name: sorted({m for t in imported(name, path) if (m := arena_module(t)) and m != name}) for name, path in MODULES.items()}
EXTERNAL = {name: sorted({t.split(".")[0] for t in imported(name, path) if not t.startswith("arena")}) for name, path in MODULES.items()}


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer(name: str) -> int | None:
    return next((level for prefix, level in LAYERS.items() if _in(name, prefix)), None)


def shared(name: str) -> bool:
    return any(_in(name, prefix) for prefix in SHARED + LEAVES)


def edges() -> Iterator[tuple[str, str]]:
    for name, targets in GRAPH.items():
        for target in targets:
            yield name, target


def cycles() -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    return [cycle_through(component) for component in components]


def cycle_through(component: list[str]) -> list[str]:
    """A path from the component's first module back to itself, inside the component."""
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in GRAPH[node]:
                if target == start:
                    return paths[node] + [start]
                if target in component and target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def listed(offences: list[str]) -> str:
    return "\n  " + "\n  ".join(offences)


def test_the_graph_is_read() -> None:
    assert "arena.engine.table" in GRAPH["arena.engine.board"]
    assert "arena.api.service" in GRAPH["arena.cli.main"]


def test_every_module_has_a_place() -> None:
    unplaced = [name for name in MODULES if name != "arena" and layer(name) is None and not shared(name) and not _in(name, CLIENT)]
    assert not unplaced, "modules in no layer (add their package to LAYERS or SHARED):" + listed(unplaced)


def test_no_import_cycle() -> None:
    found = [" → ".join(cycle) for cycle in cycles()]
    assert not found, "import cycles:" + listed(found)


def test_layers_import_only_their_own_or_lower() -> None:
    offences = []
    for name, target in edges():
        source_layer, target_layer = layer(name), layer(target)
        if source_layer is not None and target_layer is not None and target_layer > source_layer:
            offences.append(f"{name} (layer {source_layer}) → {target} (layer {target_layer})")
    assert not offences, "imports against the direction engine ← journal ← board ← cluster ← live/delivery ← api/cli:" + listed(offences)


def test_shared_modules_import_only_the_engine_and_each_other() -> None:
    offences = [
        f"{name} → {target}"
        for name, target in edges()
        if shared(name) and not (shared(target) or _in(target, "arena.engine"))
    ]
    assert not offences, "shared modules (config, errors, auth, metrics) importing the server:" + listed(offences)


def test_the_client_sdk_stands_apart() -> None:
    offences = [f"{name} → {target}" for name, target in edges() if _in(name, CLIENT) != _in(target, CLIENT)]
    offences += [
        f"{name} → {target}"
        for name, path in MODULES.items()
        if not _in(name, CLIENT)
        for target in imported(name, path)
        if _in(target, "arena_client") and target not in CLIENT_LEAVES
    ]
    assert not offences, f"edges across the client SDK's border (arena.client, arena_client but {CLIENT_LEAVES}):" + listed(offences)


def test_the_leaves_import_nothing_of_arena() -> None:
    offences = [f"{name} → {target}" for name, target in edges() if name in LEAVES]
    assert not offences, "leaf modules importing arena:" + listed(offences)


def test_nothing_imports_the_root_package() -> None:
    offences = [f"{name} → arena" for name, target in edges() if target == "arena"]
    assert not offences, "imports of the bare `arena` package:" + listed(offences)


def test_the_engine_does_no_io() -> None:
    offences = [
        f"{name} → {module}"
        for name, modules in EXTERNAL.items()
        if _in(name, "arena.engine")
        for module in modules
        if module in IO_MODULES
    ]
    assert not offences, "I/O modules imported by the pure engine (arena.engine):" + listed(offences)
