// Queries against a real server: top, rank (entry null for a member not in the table), around, members, errors.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ArenaClient, ArenaError } from "../dist/index.js";
import { freePort, startServer, TOKEN } from "./support/server.mjs";

let server;
let client;

before(async () => {
  server = await startServer();
  client = new ArenaClient({ urls: [server.url], token: TOKEN });
  const results = await client.submitMany(["ann", "bob", "cid", "dee", "eve"].map((member, i) => (
    { board: "score", member: `q-${member}`, value: 100 + 10 * i, idempotency_key: `q-${member}` })));
  assert.deepEqual(results.map((r) => r.status), Array(5).fill("accepted"));
});

after(async () => {
  await client?.close();
  await server?.kill();
});

test("top answers the table's fields and entries in rank order", async () => {
  const top = await client.top("score", "alltime", { limit: 3 });
  assert.equal(top.board, "score");
  assert.equal(top.period, "alltime");
  assert.equal(top.period_id, "alltime");
  assert.ok(top.seq >= 5);
  assert.deepEqual(top.entries.map((e) => [e.rank, e.member, e.score]),
    [[1, "q-eve", 140], [2, "q-dee", 130], [3, "q-cid", 120]]);
});

test("rank answers a member's entry", async () => {
  const rank = await client.rank("score", "alltime", "q-bob");
  assert.deepEqual([rank.entry.rank, rank.entry.member, rank.entry.score], [4, "q-bob", 110]);
});

test("rank of a member not in the table is its answer with entry null, not an error", async () => {
  const rank = await client.rank("score", "alltime", "nobody/with a slash");
  assert.equal(rank.entry, null);
  assert.equal(rank.board, "score");
  assert.equal(rank.period_id, "alltime");
  assert.ok(rank.size >= 5 && rank.seq >= 5);
});

test("around a member and around a rank", async () => {
  const byMember = await client.around("score", "alltime", "q-cid", { radius: 1 });
  assert.deepEqual(byMember.entries.map((e) => e.member), ["q-dee", "q-cid", "q-bob"]);
  const byRank = await client.around("score", "alltime", null, { rank: 1, radius: 1 });
  assert.deepEqual(byRank.entries.map((e) => e.member), ["q-eve", "q-dee"]);
});

test("members answers friends in rank order and the missing", async () => {
  const friends = await client.members("score", "alltime", ["q-ann", "ghost", "q-eve"]);
  assert.deepEqual(friends.entries.map((e) => [e.rank, e.member]), [[1, "q-eve"], [5, "q-ann"]]);
  assert.deepEqual(friends.missing, ["ghost"]);
});

test("a refused query rejects with the contract's code", async () => {
  await assert.rejects(client.top("nope", "alltime"), (error) => error instanceof ArenaError && error.code === "unknown_board" && error.status === 404);
  await assert.rejects(client.top("score", "alltime", { limit: 0 }), (error) => error.code === "invalid_request");
});

test("a rejected event resolves with its reason; submitting without a token is refused", async () => {
  const result = await client.submit({ board: "score", member: "q-x", value: 1.5 });
  assert.equal(result.status, "rejected");
  assert.equal(result.reason, "invalid_event");
  const reader = new ArenaClient({ urls: [server.url] });
  assert.throws(() => reader.submit({ board: "score", member: "m", value: 1 }), (error) => error.code === "unauthorized");
  await reader.close();
});

test("a node that cannot be reached is skipped; with none, the query fails after queryTimeout", async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const skipping = new ArenaClient({ urls: [dead, server.url] });
  assert.equal((await skipping.top("score", "alltime", { limit: 1 })).entries[0].member, "q-eve");
  const nowhere = new ArenaClient({ urls: [dead], queryTimeout: 500 });
  await assert.rejects(nowhere.top("score", "alltime"), (error) => error.code === "connection_failed");
});
