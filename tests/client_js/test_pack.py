"""`npm pack` makes what a studio installs: a Node.js game server that installs the tarball (and
`ws`) submits, queries and reads a live view through the package's own entry point."""

from __future__ import annotations

import asyncio
import json
import tarfile
from pathlib import Path

from support.node import PACKAGE, in_package
from support.server import InProcessServer, make_config, token_for

BOARDS = {"high_score": {"periods": ["alltime"]}}

GAME_SERVER = """
import { ArenaClient } from "arena-client";
const [url, token] = process.argv.slice(2);
const arena = new ArenaClient({ urls: [url], token });
const updates = [];
const view = arena.subscribe({ op: "rank", board: "high_score", period: "alltime", member: "p1" }, (u) => updates.push(u));
const results = await arena.submitMany([1, 2, 3].map((i) => ({ board: "high_score", member: `p${i}`, value: 10 * i })));
const rank = await arena.rank("high_score", "alltime", "p1");
const deadline = Date.now() + 30000;
while (!updates.some((u) => u.entry?.rank === 3) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
view.close();
await arena.close();
console.log(JSON.stringify({ statuses: results.map((r) => r.status), rank: rank.entry.rank, live: updates.at(-1)?.entry?.rank }));
"""


async def test_a_node_game_server_uses_the_packed_package(tmp_path: Path) -> None:
    packed = in_package("npm", "pack", "--pack-destination", str(tmp_path))
    assert packed.returncode == 0, packed.stdout + packed.stderr
    [tarball] = tmp_path.glob("arena-client-*.tgz")
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        assert "package/dist/index.js" in names and "package/dist/index.d.ts" in names and "package/README.md" in names
        assert not any(n.startswith(("package/src/", "package/test/", "package/node_modules/")) for n in names)
        archive.extractall(tmp_path / "unpacked", filter="data")
    game = tmp_path / "game"
    modules = game / "node_modules"
    modules.mkdir(parents=True)
    (tmp_path / "unpacked" / "package").rename(modules / "arena-client")
    (modules / "ws").symlink_to(PACKAGE / "node_modules" / "ws")  # as `npm install ws` would, without the network
    (game / "package.json").write_text(json.dumps({"name": "game", "type": "module", "private": True}))
    (game / "server.mjs").write_text(GAME_SERVER)
    async with InProcessServer(make_config(tmp_path / "data", BOARDS)) as server:
        # in a thread: the server answers from this event loop
        run = await asyncio.to_thread(in_package, "node", str(game / "server.mjs"), server.url, token_for("gs"), timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout) == {"statuses": ["accepted"] * 3, "rank": 3, "live": 3}
