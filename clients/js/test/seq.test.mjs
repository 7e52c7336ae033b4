// The live view's rules against a scripted /v1/live (a `ws` server playing the server's part, so
// that it can do what a real one must never do on one connection: send an older seq), and a
// reconnect to a node that is behind: an update older than the last delivered is dropped.
import assert from "node:assert/strict";
import { test } from "node:test";
import { WebSocketServer } from "ws";
import { ArenaClient } from "../dist/index.js";
import { until } from "./support/wait.mjs";

const table = { board: "b", period: "alltime", period_id: "alltime", start: null, end: null, closed: false, size: 1 };
const update = (sub, seq, score) => JSON.stringify({ op: "update", sub, seq, ...table, entries: [{ rank: 1, member: "m", score, reached_at: "2026-12-02T13:00:00.000Z" }] });

test("updates older than the last delivered are dropped, on one connection and after a reconnect", async () => {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((resolve) => server.once("listening", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  const connections = [];
  const subscribes = [];
  server.on("connection", (socket, request) => {
    assert.equal(request.url, "/v1/live");
    connections.push(socket);
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data));
      if (frame.op !== "subscribe") return;
      subscribes.push(frame);
      const sub = `s${connections.length}`;
      socket.send(JSON.stringify({ op: "subscribed", id: frame.id, sub }));
      if (connections.length === 1) for (const [seq, score] of [[5, 50], [3, 30], [7, 70]]) socket.send(update(sub, seq, score));
      else for (const [seq, score] of [[4, 40], [7, 71], [8, 80]]) socket.send(update(sub, seq, score));
    });
  });
  const client = new ArenaClient({ urls: [url], reconnectBase: 10, reconnectMax: 50 });
  const seen = [];
  const view = client.subscribe({ op: "top", board: "b", period: "alltime", limit: 1 }, (u) => seen.push([u.seq, u.entries[0].score]));
  try {
    await until(() => seen.length === 2, "the first connection's updates");
    assert.deepEqual(seen, [[5, 50], [7, 70]]);
    connections[0].terminate(); // the node goes away; the next one is behind at first
    await until(() => seen.length === 4, "the updates after the reconnect");
    assert.deepEqual(seen, [[5, 50], [7, 70], [7, 71], [8, 80]]);
    assert.equal(subscribes.length, 2, "subscribed again by itself");
    assert.deepEqual(subscribes[1].view, subscribes[0].view);
  } finally {
    view.close();
    await client.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
