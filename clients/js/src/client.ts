import { LiveConnection, type LiveOptions, type Subscription } from "./live.js";
import { ArenaError } from "./errors.js";
import { Queries } from "./queries.js";
import type { Members, NewEvent, Rank, SubmitResult, TableEntries, TableOptions, Update, View } from "./types.js";
import { Writer, type WriterOptions } from "./writer.js";

export interface ArenaClientOptions extends LiveOptions, WriterOptions {
  /** Base URLs of the nodes (`http://host:port`); the client uses one and moves on when it fails. */
  urls: readonly string[];
  /** A game server's token: enables `submit` (Node.js; browsers cannot send it on a WebSocket). */
  token?: string;
  /** ms one HTTP query may take (default 10000). */
  queryTimeout?: number;
}

/**
 * Arena's client: queries over HTTP, live views over `/v1/live`, and, with a token, a game
 * server's writer over `/v1/ws`. Connections open on first use.
 */
export class ArenaClient {
  private readonly queries: Queries;
  private readonly live: LiveConnection;
  private readonly writer: Writer | undefined;

  constructor(options: ArenaClientOptions) {
    if (options.urls.length === 0) throw new TypeError("give at least one URL");
    const urls = [...options.urls];
    this.queries = new Queries(urls, options.queryTimeout ?? 10000);
    this.live = new LiveConnection(urls, options);
    this.writer = options.token === undefined ? undefined : new Writer(urls, options.token, options);
  }

  /** Ranks offset+1 .. offset+limit (limit 1..1000, default 10). */
  top(board: string, period: string, opts?: TableOptions & { limit?: number; offset?: number }): Promise<TableEntries> {
    return this.queries.top(board, period, opts);
  }

  /** A member's entry, `entry: null` when the member is not in the table (never an error). */
  rank(board: string, period: string, member: string, opts?: TableOptions): Promise<Rank> {
    return this.queries.rank(board, period, member, opts);
  }

  /** The entries within `radius` (default 5) ranks of `member`, or of `opts.rank` when member is null. */
  around(board: string, period: string, member: string | null, opts?: TableOptions & { radius?: number; rank?: number }): Promise<TableEntries> {
    return this.queries.around(board, period, member, opts);
  }

  /** Friends' standings: those of `members` in the table, in rank order, and the missing. */
  members(board: string, period: string, members: readonly string[], opts?: TableOptions): Promise<Members> {
    return this.queries.members(board, period, members, opts);
  }

  /**
   * Follow a live view (`{op: "top", board, period, limit: 10}`, `{op: "rank", ..., member}`...):
   * `onUpdate` gets the view's whole answer at once and after each change, never one older than
   * the last (`seq`), across reconnects. `onError` hears why a view ended (refused, or its table
   * left retention).
   */
  subscribe(view: View, onUpdate: (update: Update) => void, onError?: (error: ArenaError) => void): Subscription {
    return this.live.subscribe(view, onUpdate, onError);
  }

  /** Submit one event; resolves once it is journaled (`accepted` or `duplicate`) or with its rejection. */
  submit(event: NewEvent): Promise<SubmitResult> {
    return this.need().submit([event])[0]!;
  }

  /** Submit events; their results in order. */
  submitMany(events: readonly NewEvent[]): Promise<SubmitResult[]> {
    return Promise.all(this.need().submit(events));
  }

  /** Wait for every submitted event's answer, then close every connection. */
  async close(): Promise<void> {
    this.live.close();
    await this.writer?.close();
  }

  /** The writer's counters: frames and events sent, events resent, connections made. */
  get stats(): Writer["stats"] | undefined {
    return this.writer?.stats;
  }

  private need(): Writer {
    if (this.writer === undefined) throw new ArenaError("unauthorized", "submitting needs a game server's token");
    return this.writer;
  }
}
