// The game server's writer against a real server killed (SIGKILL) under load and restarted on
// another port: every event is answered, nothing is lost, nothing is counted twice.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { ArenaClient, AuthenticationError, newIdempotencyKey } from "../dist/index.js";
import { freePort, startServer, TOKEN, until } from "./support/server.mjs";

// One server at a time on the config's data dir: each test's servers are killed after it.
const servers = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.kill();
});

test("UUIDv7 keys: version 7, variant 10, time-ordered", () => {
  const a = newIdempotencyKey(1_700_000_000_000);
  const b = newIdempotencyKey(1_700_000_000_001);
  assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(parseInt(a.replace(/-/g, "").slice(0, 12), 16), 1_700_000_000_000);
  assert.ok(a < b);
});

test("a resend with the same keys is duplicate and never counted twice", async () => {
  const server = await startServer();
  servers.push(server);
  const at = Date.now(); // a resend is the same event: same key, member, value and instant
  const events = Array.from({ length: 50 }, (_, i) => ({ board: "points", member: "d-me", value: 1, occurred_at: at, idempotency_key: `d-${i}` }));
  const first = new ArenaClient({ urls: [server.url], token: TOKEN });
  assert.deepEqual(new Set((await first.submitMany(events)).map((r) => r.status)), new Set(["accepted"]));
  await first.close();
  const again = new ArenaClient({ urls: [server.url], token: TOKEN });
  const results = await again.submitMany(events);
  assert.deepEqual(new Set(results.map((r) => r.status)), new Set(["duplicate"]));
  assert.deepEqual(results.map((r) => r.idempotency_key), events.map((e) => e.idempotency_key));
  assert.equal((await again.rank("points", "alltime", "d-me")).entry.score, 50);
  await again.close();
});

test("one frame per board: events of two boards never share a frame", async () => {
  const server = await startServer();
  servers.push(server);
  const client = new ArenaClient({ urls: [server.url], token: TOKEN, linger: 50 });
  const results = await client.submitMany([
    { board: "points", member: "f-a", value: 1 }, { board: "score", member: "f-a", value: 1 },
    { board: "points", member: "f-b", value: 1 }, { board: "score", member: "f-b", value: 1 },
  ]);
  assert.deepEqual(results.map((r) => r.status), ["accepted", "accepted", "accepted", "accepted"]);
  assert.equal(client.stats.frames, 2);
  await client.close();
});

test("SIGKILL under load, restart on another node URL: nothing lost, nothing doubled", async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`; // a node that is down: skipped
  const secondPort = await freePort();
  let server = await startServer();
  servers.push(server);
  const client = new ArenaClient({
    urls: [dead, server.url, `http://127.0.0.1:${secondPort}`], token: TOKEN,
    reconnectBase: 20, reconnectMax: 200, maxBatch: 50, maxInFlight: 8,
  });
  const members = ["k-a", "k-b", "k-c", "k-d"];
  const pending = [];
  let expected = 0;
  const submitRound = (round) => {
    for (let i = 0; i < 100; i += 1) {
      const value = 1 + ((round + i) % 7);
      expected += value;
      pending.push(client.submit({ board: "points", member: members[i % members.length], value }));
    }
  };
  for (let round = 0; round < 20; round += 1) submitRound(round);
  await until(() => client.stats.frames > 4, "the first frames to go out");
  await server.kill(); // frames in flight: some journaled and unacked, some not read
  for (let round = 20; round < 40; round += 1) submitRound(round); // while the node is down
  server = await startServer(secondPort);
  servers.push(server);

  const results = await Promise.all(pending);
  const statuses = new Map(); // "duplicate" for the events journaled before the kill but not acked
  for (const r of results) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  t.diagnostic(`statuses ${JSON.stringify([...statuses])}; writer ${JSON.stringify(client.stats)}`);
  assert.deepEqual([...statuses.keys()].filter((s) => s !== "accepted" && s !== "duplicate"), [], JSON.stringify([...statuses]));
  assert.equal(new Set(results.map((r) => r.idempotency_key)).size, 4000, "every event answered under its own key");

  const friends = await client.members("points", "alltime", members);
  const total = friends.entries.reduce((sum, e) => sum + e.score, 0);
  assert.equal(total, expected, "the sum of every value once: nothing lost, nothing doubled");
  assert.ok(client.stats.connections >= 2);
  await client.close();
});

test("a refused token rejects the calls with AuthenticationError", async () => {
  const server = await startServer();
  servers.push(server);
  const client = new ArenaClient({ urls: [server.url], token: "not-a-token" });
  await assert.rejects(client.submit({ board: "points", member: "x", value: 1 }),
    (error) => error instanceof AuthenticationError && error.status === 403);
  assert.throws(() => client.submit({ board: "points", member: "x", value: 1 }), AuthenticationError);
  await client.close();
});
