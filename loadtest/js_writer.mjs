// One Node.js game server's writer (clients/js, built) against one Arena node, for
// loadtest/sdk_writers.py: `concurrency` loops each submitting `batch` events at a time through one
// ArenaClient for `seconds`; prints {"events": acked, "seconds": elapsed, "rejected": n} as JSON.
import { ArenaClient } from "../clients/js/dist/index.js";

const [url, token, board, seconds, concurrency, batch, members] = process.argv.slice(2);
const client = new ArenaClient({ urls: [url], token });
const end = performance.now() + Number(seconds) * 1000;
let acked = 0;
let rejected = 0;

async function loop() {
  while (performance.now() < end) {
    const now = Date.now();
    const events = Array.from({ length: Number(batch) }, () => ({
      board, member: `m${Math.floor(Math.random() * Number(members))}`,
      value: Math.floor(Math.random() * 1_000_000_000), occurred_at: now,
    }));
    for (const result of await client.submitMany(events)) {
      if (result.status === "rejected") rejected += 1;
      else acked += 1;
    }
  }
}

const start = performance.now();
await Promise.all(Array.from({ length: Number(concurrency) }, loop));
const elapsed = (performance.now() - start) / 1000;
await client.close();
console.log(JSON.stringify({ events: acked, seconds: elapsed, rejected }));
