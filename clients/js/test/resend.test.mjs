// The writer's resend rules against a scripted /v1/ws (a `ws` server playing the server's part):
// frames not acked when the connection drops go out again byte for byte on the next one, and an
// event answered `unavailable` is resent with the same key until it is answered otherwise.
import assert from "node:assert/strict";
import { test } from "node:test";
import { WebSocketServer } from "ws";
import { ArenaClient } from "../dist/index.js";
import { until } from "./support/wait.mjs";

const ack = (frame, status = () => "accepted") => JSON.stringify({
  op: "ack", id: frame.id,
  results: frame.events.map((e) => ({ idempotency_key: e.idempotency_key, status: status(e), ...(status(e) === "rejected" ? { reason: "unavailable", message: "later" } : {}) })),
});

async function scripted(onFrame) {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((resolve) => server.once("listening", resolve));
  const connections = [];
  server.on("connection", (socket, request) => {
    assert.equal(request.headers.authorization, "Bearer t");
    connections.push(socket);
    const index = connections.length - 1;
    socket.on("message", (data) => onFrame(socket, index, String(data)));
  });
  return { url: `http://127.0.0.1:${server.address().port}`, connections, close: () => new Promise((r) => server.close(r)) };
}

test("frames unanswered at a drop are resent byte for byte, one board per frame", async () => {
  const received = [[], []];
  const server = await scripted((socket, index, text) => {
    const frame = JSON.parse(text);
    if (frame.op !== "submit") return;
    received[index].push(frame);
    if (index > 0) socket.send(ack(frame)); // the first connection answers nothing
  });
  const client = new ArenaClient({ urls: [server.url], token: "t", reconnectBase: 10, reconnectMax: 50, linger: 20 });
  try {
    const results = client.submitMany([
      { board: "a", member: "m1", value: 1 }, { board: "b", member: "m1", value: 2 }, { board: "a", member: "m2", value: 3 },
    ]);
    await until(() => received[0].length === 2, "the first connection's two frames");
    assert.deepEqual(received[0].map((f) => new Set(f.events.map((e) => e.board)).size), [1, 1], "one board per frame");
    server.connections[0].terminate();
    const answered = await results;
    assert.deepEqual(answered.map((r) => r.status), ["accepted", "accepted", "accepted"]);
    const events = (frames) => frames.flatMap((f) => f.events.map((e) => JSON.stringify(e))).sort();
    assert.deepEqual(events(received[1]), events(received[0]), "the same events, byte for byte");
    assert.deepEqual(answered.map((r) => r.idempotency_key).sort(), received[0].flatMap((f) => f.events.map((e) => e.idempotency_key)).sort());
  } finally {
    await client.close();
    await server.close();
  }
});

test("an event answered unavailable is resent with the same key until it is taken", async () => {
  const seen = [];
  const server = await scripted((socket, _index, text) => {
    const frame = JSON.parse(text);
    if (frame.op !== "submit") return;
    seen.push(...frame.events.map((e) => e.idempotency_key));
    socket.send(ack(frame, () => (seen.length < 3 ? "rejected" : "accepted")));
  });
  const client = new ArenaClient({ urls: [server.url], token: "t", reconnectBase: 10, reconnectMax: 50 });
  try {
    const result = await client.submit({ board: "a", member: "m", value: 1 });
    assert.equal(result.status, "accepted");
    assert.equal(seen.length, 3);
    assert.equal(new Set(seen).size, 1, "one key for every resend");
  } finally {
    await client.close();
    await server.close();
  }
});
