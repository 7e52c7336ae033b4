// Table queries over HTTP (fetch): public routes, readable from a browser through CORS. Each
// query goes to the node in use; a node that cannot be reached, or answers 503, sends it to the next.
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

  private async request<T>(path: string, init: RequestInit): Promise<T> {
    let failure: unknown;
    for (let tried = 0; tried < this.urls.length; tried += 1) {
      const base = this.urls[this.node]!;
      let answer: Response;
      try {
        answer = await fetch(new URL(path, base), { ...init, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (error) {
        failure = error;
        this.node = (this.node + 1) % this.urls.length;
        continue;
      }
      const body = (await answer.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
      if (answer.ok) return body as T;
      const refused = new ArenaError(body?.error?.code ?? `http_${answer.status}`, body?.error?.message ?? answer.statusText, answer.status);
      if (answer.status !== 503 || this.urls.length === 1) throw refused;
      failure = refused;
      this.node = (this.node + 1) % this.urls.length;
    }
    if (failure instanceof ArenaError) throw failure;
    throw new ArenaError("connection_failed", `no node answered: ${String(failure)}`);
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
