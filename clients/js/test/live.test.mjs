// Live views over /v1/live against a real server that is SIGKILLed and restarted: the view is
// subscribed again by itself, and no update goes back in seq.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { ArenaClient } from "../dist/index.js";
import { startServer, TOKEN, until } from "./support/server.mjs";

// One server at a time on the config's data dir: each test's servers are killed after it.
const servers = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.kill();
});

test("a live top 10 and a rank view follow the table across a server's SIGKILL and restart", async () => {
  let server = await startServer();
  servers.push(server);
  const writer = new ArenaClient({ urls: [server.url], token: TOKEN, reconnectBase: 20, reconnectMax: 200 });
  const reader = new ArenaClient({ urls: [server.url], reconnectBase: 20, reconnectMax: 200 });
  const tops = [];
  const ranks = [];
  const top = reader.subscribe({ op: "top", board: "points", period: "alltime", limit: 10 }, (u) => tops.push(u));
  const rank = reader.subscribe({ op: "rank", board: "points", period: "alltime", member: "l-me" }, (u) => ranks.push(u));
  try {
    await until(() => ranks.length > 0, "the rank view's first update");
    assert.equal(ranks[0].entry, null, "a member not in the table is a state: entry null");

    await writer.submitMany([{ board: "points", member: "l-me", value: 5 }, { board: "points", member: "l-you", value: 7 }]);
    await until(() => ranks.at(-1).entry?.score === 5, "my rank after my first event");
    await until(() => tops.at(-1).entries.some((e) => e.member === "l-you" && e.score === 7), "the top after the events");

    await server.kill();
    server = await startServer(server.port);
    servers.push(server);
    await writer.submit({ board: "points", member: "l-me", value: 10 });
    await until(() => ranks.at(-1).entry?.score === 15, "my rank after the restart", 60000);
    await until(() => tops.at(-1).entries.find((e) => e.member === "l-me")?.score === 15, "the top after the restart", 60000);

    for (const updates of [tops, ranks]) {
      const seqs = updates.map((u) => u.seq);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "an update never goes back in seq");
      for (const u of updates) assert.ok(!("op" in u) && !("sub" in u));
    }
  } finally {
    top.close();
    rank.close();
    await reader.close();
    await writer.close();
  }
});

test("a closed subscription gets no more updates", async () => {
  const server = await startServer();
  servers.push(server);
  const client = new ArenaClient({ urls: [server.url], token: TOKEN });
  const seen = [];
  const sub = client.subscribe({ op: "rank", board: "points", period: "alltime", member: "c-me" }, (u) => seen.push(u));
  await until(() => seen.length > 0, "the first update");
  sub.close();
  const count = seen.length;
  await client.submit({ board: "points", member: "c-me", value: 1 });
  // A second view on another client sees the change: by then the closed one would have had it too.
  const other = new ArenaClient({ urls: [server.url] });
  const witnessed = [];
  const witness = other.subscribe({ op: "rank", board: "points", period: "alltime", member: "c-me" }, (u) => witnessed.push(u));
  await until(() => witnessed.at(-1)?.entry?.score === 1, "the witness's update");
  assert.equal(seen.length, count);
  witness.close();
  await other.close();
  await client.close();
});

test("a view the server refuses ends with its error", async () => {
  const server = await startServer();
  servers.push(server);
  const client = new ArenaClient({ urls: [server.url] });
  const errors = [];
  client.subscribe({ op: "top", board: "nope", period: "alltime" }, () => {}, (error) => errors.push(error));
  await until(() => errors.length > 0, "the refusal");
  assert.equal(errors[0].code, "unknown_board");
  await client.close();
});
