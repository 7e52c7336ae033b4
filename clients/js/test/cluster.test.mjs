// Against a cluster of two nodes on one PostgreSQL (tests/client_js/test_node.py starts them and
// sets $ARENA_NODES, $ARENA_NODE_PIDS, $ARENA_TOKEN): the first node is SIGKILLed while a writer
// streams events to two boards through it and a reader follows a live view on it. The writer
// moves on to the survivor, which takes the dead node's boards over: nothing is lost or doubled,
// and the live view resumes there without going back in seq.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ArenaClient } from "../dist/index.js";
import { until } from "./support/wait.mjs";

const nodes = process.env.ARENA_NODES?.split(",") ?? [];
const pids = process.env.ARENA_NODE_PIDS?.split(",").map(Number) ?? [];
const skip = nodes.length < 2 ? "a cluster test: run by tests/client_js/test_node.py (needs $ARENA_NODES)" : false;

test("a node's death under load loses and doubles nothing, and live views resume on the survivor", { skip }, async (t) => {
  const token = process.env.ARENA_TOKEN;
  const writer = new ArenaClient({ urls: nodes, token, reconnectBase: 20, reconnectMax: 300, maxBatch: 50, maxInFlight: 8 });
  const reader = new ArenaClient({ urls: nodes, reconnectBase: 20, reconnectMax: 300 });
  const updates = [];
  const view = reader.subscribe({ op: "top", board: "points", period: "alltime", limit: 10 }, (u) => updates.push(u));
  const expected = { points: 0, score: 0 };
  const pending = [];
  const send = (rounds) => {
    for (let i = 0; i < rounds * 100; i += 1) {
      const board = i % 2 === 0 ? "points" : "score";
      const value = 1 + (i % 5);
      if (board === "points") expected.points += value;
      pending.push(writer.submit({ board, member: `n-${i % 8}`, value }));
    }
  };
  try {
    await until(() => updates.length > 0, "the live view's first update", 60000);
    send(10);
    await until(() => writer.stats.frames > 4, "frames under way");
    process.kill(pids[0], "SIGKILL");
    send(10);
    const results = await Promise.all(pending);
    const bad = results.filter((r) => r.status !== "accepted" && r.status !== "duplicate");
    assert.deepEqual(bad, [], "every event accepted (or a duplicate of one journaled before the kill)");
    t.diagnostic(`duplicates ${results.filter((r) => r.status === "duplicate").length}; writer ${JSON.stringify(writer.stats)}`);

    const friends = await writer.members("points", "alltime", Array.from({ length: 8 }, (_, i) => `n-${i}`));
    assert.equal(friends.entries.reduce((sum, e) => sum + e.score, 0), expected.points, "nothing lost, nothing doubled");
    await until(() => updates.at(-1).entries.reduce((sum, e) => sum + e.score, 0) === expected.points,
      "the live view's final answer on the survivor", 60000);
    const seqs = updates.map((u) => u.seq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "an update never goes back in seq");
  } finally {
    view.close();
    await reader.close();
    await writer.close();
  }
});
