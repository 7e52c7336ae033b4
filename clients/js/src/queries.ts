// Table queries over HTTP (fetch): public routes, readable from a browser through CORS. Each
// query goes to the node in use; a node that cannot be reached, or answers 503, sends it to the next.
import { Backoff } from "./backoff.js";
import { ArenaError } from "./errors.js";
import type { Members, Rank, TableEntries, TableOptions } from "./types.js";

type Params = Record<string, string | number | undefined>;

export class Queries {
  private node = 0;

  constructor(private readonly urls: readonly string[], private readonly timeoutMs: number) {}

  top(board: string, period: string, opts: TableOptions & { limit?: number; offset?: number } = {}): Promise<TableEntries> {
    return this.get(board, period, "top", { limit: opts.limit, offset: opts.offset, ...table(opts) });
  }

  /** A member's entry; `entry: null` (and the table's fields) for a member not in the table. Asked
   * as a set of one (POST members), which names the absent instead of answering 404: a new
   * player's "my rank" is never an error, in a browser's console either. */
  async rank(board: string, period: string, member: string, opts: TableOptions = {}): Promise<Rank> {
    const { entries, missing: _missing, ...fields } = await this.members(board, period, [member], opts);
    return { ...fields, entry: entries[0] ?? null };
  }

  /** The entries within `radius` ranks of a member (or of `rank`), clipped at both ends. */
  around(board: string, period: string, member: string | null,
    opts: TableOptions & { radius?: number; rank?: number } = {}): Promise<TableEntries> {
    if ((member === null) === (opts.rank === undefined)) throw new TypeError("give exactly one of member or opts.rank");
    const path = member === null ? "around" : `around/${encodeURIComponent(member)}`;
    return this.get(board, period, path, { radius: opts.radius, rank: opts.rank, ...table(opts) });
  }

  /** Friends: those of `members` in the table in rank order (global ranks), and the missing. */
  members(board: string, period: string, members: readonly string[], opts: TableOptions = {}): Promise<Members> {
    return this.request(tablePath(board, period, "members", table(opts)), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ members }),
    });
  }

  private get<T>(board: string, period: string, route: string, params: Params): Promise<T> {
    return this.request(tablePath(board, period, route, params), { method: "GET" });
  }

  /** Ask the node in use; a node that cannot be reached or answers 503 (not_ready while it loads
   * after a restart, unavailable, draining) sends the query to the next one, after a backoff
   * once every node was tried, until `timeoutMs` has passed. */
  private async request<T>(path: string, init: RequestInit): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    const backoff = new Backoff(50, 1000);
    let failure: unknown;
    for (let tried = 1; ; tried += 1) {
      const url = new URL(path, this.urls[this.node]!);
      const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
      const answer = await fetch(url, { ...init, signal }).catch((error: unknown) => error);
      if (!(answer instanceof Response)) {
        failure = answer; // unreachable, or timed out
      } else {
        const body = (await answer.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
        if (answer.ok) return body as T;
        failure = new ArenaError(body?.error?.code ?? `http_${answer.status}`, body?.error?.message ?? answer.statusText, answer.status);
        if (answer.status !== 503) throw failure;
      }
      this.node = (this.node + 1) % this.urls.length;
      const wait = tried % this.urls.length === 0 ? backoff.next() : 0;
      if (Date.now() + wait >= deadline) break;
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    if (failure instanceof ArenaError) throw failure;
    throw new ArenaError("connection_failed", `no node answered within ${this.timeoutMs} ms: ${String(failure)}`);
  }
}

function table(opts: TableOptions): Params {
  return { period_id: opts.period_id, partition: opts.partition };
}

function tablePath(board: string, period: string, route: string, params: Params): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) query.set(name, String(value));
  const search = query.size ? `?${query}` : "";
  return `/v1/boards/${encodeURIComponent(board)}/${encodeURIComponent(period)}/${route}${search}`;
}
