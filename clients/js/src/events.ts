// Server-sent events: a live view as an EventSource (browsers; Node.js 20 has none), for pages
// that would rather not hold a WebSocket. The browser reconnects by itself; this adds the seq rule.
import type { TableOptions, Update } from "./types.js";

export interface EventStreamView extends TableOptions {
  op: "top" | "rank" | "around" | "percentile" | "score_at_percentile";
  board: string;
  period: string;
  limit?: number;
  offset?: number;
  member?: string;
  rank?: number;
  radius?: number;
  p?: number;
}

/** The URL of a view's event stream (the query's HTTP route, asked with Accept: text/event-stream). */
export function eventStreamUrl(base: string, view: EventStreamView): string {
  const { op, board, period, member, ...params } = view;
  const route = op === "rank" ? "members" : op;
  const path = `/v1/boards/${encodeURIComponent(board)}/${encodeURIComponent(period)}/${route}`
    + (member !== undefined ? `/${encodeURIComponent(member)}` : "");
  const url = new URL(path, base);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, String(value));
  return url.toString();
}

/** Follow a view over server-sent events; never delivers an update older than the last (`seq`). */
export function subscribeEvents(base: string, view: EventStreamView, onUpdate: (update: Update) => void): { close(): void } {
  const Source = (globalThis as { EventSource?: typeof EventSource }).EventSource;
  if (Source === undefined) throw new Error("no EventSource here (Node.js): use ArenaClient.subscribe");
  const source = new Source(eventStreamUrl(base, view));
  let seq = -1;
  source.addEventListener("update", (event) => {
    const update = JSON.parse((event as MessageEvent<string>).data) as Update;
    if (update.seq < seq) return;
    seq = update.seq;
    onUpdate(update);
  });
  return { close: () => source.close() };
}
