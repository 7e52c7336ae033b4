"""`npm pack` makes what a studio installs: a Node.js game server that installs the tarball (and
`ws`) submits, queries and reads a live view through the package's own entry point, and a
TypeScript project type-checks against its declarations (strict)."""

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

TYPED = """
import { ArenaClient, ArenaError, type Rank, type Update, type SubmitResult } from "arena-client";
const arena = new ArenaClient({ urls: ["http://127.0.0.1:8080"], token: "t" });
const rank: Rank = await arena.rank("high_score", "daily", "me");
const place: number | undefined = rank.entry?.rank;
const sub = arena.subscribe({ op: "top", board: "high_score", period: "daily", limit: 10 }, (u: Update) => u.entries?.length);
const result: SubmitResult = await arena.submit({ board: "high_score", member: "me", value: 1, occurred_at: new Date() });
const reason: string | undefined = result.reason;
// @ts-expect-error: a view op that does not exist
arena.subscribe({ op: "nope", board: "b", period: "daily" }, () => {});
// @ts-expect-error: a period is a string
arena.top("b", 7);
sub.close();
export { place, reason, ArenaError };
"""


def unpack(tmp_path: Path) -> Path:
    """``npm pack``, the tarball checked and unpacked as node_modules/arena-client of a new
    project (with `ws` beside it, as `npm install ws` would put it, without the network)."""
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
    (modules / "ws").symlink_to(PACKAGE / "node_modules" / "ws")
    (game / "package.json").write_text(json.dumps({"name": "game", "type": "module", "private": True}))
    return game


def test_a_typescript_project_type_checks_against_the_declarations(tmp_path: Path) -> None:
    game = unpack(tmp_path)
    (game / "check.ts").write_text(TYPED)
    (game / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "noEmit": True, "target": "ES2022", "module": "ES2022", "moduleResolution": "Bundler",
        "lib": ["ES2022", "DOM"], "types": [],
    }, "files": ["check.ts"]}))
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    run = in_package("node", str(tsc), "-p", str(game / "tsconfig.json"))
    assert run.returncode == 0, run.stdout + run.stderr


async def test_a_node_game_server_uses_the_packed_package(tmp_path: Path) -> None:
    game = unpack(tmp_path)
    (game / "server.mjs").write_text(GAME_SERVER)
    async with InProcessServer(make_config(tmp_path / "data", BOARDS)) as server:
        # in a thread: the server answers from this event loop
        run = await asyncio.to_thread(in_package, "node", str(game / "server.mjs"), server.url, token_for("gs"), timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout) == {"statuses": ["accepted"] * 3, "rank": 3, "live": 3}
