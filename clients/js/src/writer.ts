// A game server's writer over `/v1/ws` (Node.js, with a token): events wait in one queue per
// board and leave in frames of one board each (a board whose owner is away never holds up another
// board's acks), several frames in flight at once (pipelining); every event carries an idempotency
// key (UUIDv7 by default) and is serialised once, so a resend after a drop, through the same node
// or another, is byte-identical and the server answers it `duplicate` if it was journaled.
import { Backoff } from "./backoff.js";
import { ArenaError, AuthenticationError, ClientClosed, ConnectionFailed } from "./errors.js";
import { Heartbeat } from "./heartbeat.js";
import { OPEN, openSocket, parse, wsUrl, type Socket } from "./socket.js";
import type { NewEvent, ServerFrame, SubmitResult } from "./types.js";
import { newIdempotencyKey } from "./uuid7.js";

export interface WriterOptions {
  /** ms an event may wait for others to share its frame (default 2). */
  linger?: number;
  /** Events per frame (default 500; halved when the server answers batch_too_large). */
  maxBatch?: number;
  /** Bytes per frame (default 1 MiB, the server's default limit). */
  maxFrameBytes?: number;
  /** Frames sent and not yet answered (default 16). */
  maxInFlight?: number;
  /** ms: the reconnect backoff's first and longest ceilings (default 50, 2000). */
  reconnectBase?: number;
  reconnectMax?: number;
  /** ms without a connection after which waiting calls fail with ConnectionFailed (default 30000; 0: never). */
  giveUpAfter?: number;
  /** ms an event answered `unavailable` is resent, with backoff, before that result is returned (default 30000). */
  retryUnavailableFor?: number;
  /** ms of silence before a ping; twice that without an answer drops the connection and resends (default 15000). */
  pingInterval?: number;
}

interface Pending {
  board: string;
  key: string;
  json: string;
  bytes: number;
  resolve: (result: SubmitResult) => void;
  reject: (error: Error) => void;
  unavailableSince?: number;
  unavailableAnswers: number;
}

const FRAME_OVERHEAD = 64; // {"op":"submit","id":N,"events":[...]}
const UTF8 = new TextEncoder();

export class Writer {
  private readonly queues = new Map<string, Pending[]>(); // per board, oldest first
  private readonly inFlight = new Map<number, Pending[]>();
  private delayed = 0; // events waiting out an `unavailable` backoff
  private socket: Socket | undefined;
  private connecting = false;
  private node = 0;
  private ids = 0;
  private lingerTimer: ReturnType<typeof setTimeout> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private downSince: number | undefined;
  private fatal: ArenaError | undefined;
  private closing = false;
  private drained: (() => void)[] = [];
  private readonly reconnect: Backoff;
  private readonly linger: number;
  private maxBatch: number;
  private readonly maxFrameBytes: number;
  private readonly maxInFlight: number;
  private readonly giveUpAfter: number;
  private readonly retryUnavailableFor: number;
  private readonly pingInterval: number;
  private heartbeat: Heartbeat | undefined;
  /** Counters, for tests and dashboards. */
  readonly stats = { frames: 0, events: 0, resent: 0, connections: 0 };

  constructor(private readonly urls: readonly string[], private readonly token: string, options: WriterOptions = {}) {
    this.linger = options.linger ?? 2;
    this.maxBatch = options.maxBatch ?? 500;
    this.maxFrameBytes = options.maxFrameBytes ?? 1_048_576;
    this.maxInFlight = options.maxInFlight ?? 16;
    this.giveUpAfter = options.giveUpAfter ?? 30000;
    this.retryUnavailableFor = options.retryUnavailableFor ?? 30000;
    this.pingInterval = options.pingInterval ?? 15000;
    this.reconnect = new Backoff(options.reconnectBase ?? 50, options.reconnectMax ?? 2000);
  }

  /** Queue events (each serialised first, so a bad one queues none); their results, in order. */
  submit(events: readonly NewEvent[]): Promise<SubmitResult>[] {
    if (this.fatal) throw this.fatal;
    if (this.closing) throw new ClientClosed();
    const prepared = events.map((event) => this.prepare(event));
    const results = prepared.map((event) => new Promise<SubmitResult>((resolve, reject) => {
      let queue = this.queues.get(event.board);
      if (queue === undefined) this.queues.set(event.board, (queue = []));
      queue.push({ ...event, resolve, reject, unavailableAnswers: 0 });
    }));
    this.schedule();
    return results;
  }

  /** Wait until every queued event is answered, then close the connection. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.pump();
    if (this.waiting() > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    clearTimeout(this.reconnectTimer);
    this.heartbeat?.stop();
    this.socket?.close(1000);
    this.socket = undefined;
  }

  private prepare(event: NewEvent): { board: string; key: string; json: string; bytes: number } {
    if (typeof event.board !== "string") throw new TypeError("event.board must be a string");
    const key = event.idempotency_key ?? newIdempotencyKey();
    const at = event.occurred_at ?? Date.now();
    const wire: Record<string, unknown> = {
      board: event.board, member: event.member, value: event.value,
      occurred_at: at instanceof Date ? at.getTime() : at, idempotency_key: key,
    };
    if (event.meta != null) wire.meta = event.meta;
    if (event.region !== undefined) wire.region = event.region;
    const json = JSON.stringify(wire);
    const bytes = UTF8.encode(json).length;
    if (bytes + FRAME_OVERHEAD > this.maxFrameBytes) throw new RangeError(`event ${key} is larger than one frame (${bytes} bytes)`);
    return { board: event.board, key, json, bytes };
  }

  private waiting(): number {
    let n = this.delayed;
    for (const queue of this.queues.values()) n += queue.length;
    for (const items of this.inFlight.values()) n += items.length;
    return n;
  }

  /** Send now if a batch is full or the client is closing, else after the linger. */
  private schedule(): void {
    if (this.socket?.readyState !== OPEN) {
      this.connect();
      return;
    }
    let full = this.closing;
    for (const queue of this.queues.values()) full ||= queue.length >= this.maxBatch;
    if (full || this.linger <= 0) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = undefined;
      this.pump();
    } else {
      this.lingerTimer ??= setTimeout(() => {
        this.lingerTimer = undefined;
        this.pump();
      }, this.linger);
    }
  }

  /** Send frames, one board each, taking the boards in turn, while there are in-flight slots. */
  private pump(): void {
    const socket = this.socket;
    if (socket?.readyState !== OPEN) {
      if (this.waiting() > 0) this.connect();
      else this.settleDrained();
      return;
    }
    let sent = true;
    while (sent && this.inFlight.size < this.maxInFlight) {
      sent = false;
      for (const [board, queue] of this.queues) {
        if (this.inFlight.size >= this.maxInFlight) break;
        if (queue.length === 0) {
          this.queues.delete(board);
          continue;
        }
        socket.send(this.frame(queue));
        sent = true;
      }
    }
    this.settleDrained();
  }

  private frame(queue: Pending[]): string {
    let count = 0;
    let size = FRAME_OVERHEAD;
    while (count < queue.length && count < this.maxBatch) {
      const next = queue[count]!;
      if (count > 0 && size + next.bytes + 1 > this.maxFrameBytes) break;
      size += next.bytes + 1;
      count += 1;
    }
    const items = queue.splice(0, count);
    const id = ++this.ids;
    this.inFlight.set(id, items);
    this.stats.frames += 1;
    this.stats.events += items.length;
    return `{"op":"submit","id":${id},"events":[${items.map((p) => p.json).join(",")}]}`;
  }

  private settleDrained(): void {
    if (this.waiting() === 0) for (const resolve of this.drained.splice(0)) resolve();
  }

  private connect(): void {
    if (this.connecting || this.socket !== undefined || this.fatal || this.reconnectTimer !== undefined) return;
    this.connecting = true;
    const url = wsUrl(this.urls[this.node]!, "/v1/ws");
    openSocket(url, { Authorization: `Bearer ${this.token}` }).then((socket) => this.attach(socket), (error: Error) => {
      this.connecting = false;
      this.failAll(new ArenaError("client_failed", error.message));
    });
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    let refused: number | undefined;
    socket.onopen = () => {
      this.connecting = false;
      this.downSince = undefined;
      this.stats.connections += 1;
      this.heartbeat = new Heartbeat(socket, this.pingInterval, () => {
        socket.close(4000, "no answer to ping");
        this.dropped(socket, undefined, 4000); // at once: a half-open connection's close event may come late
      });
      this.pump();
    };
    socket.onmessage = (event) => {
      this.heartbeat?.heardFrom();
      const frame = parse(event.data);
      if (frame !== undefined) this.read(frame);
    };
    socket.onerror = (event) => {
      const status = /Unexpected server response: (\d+)/.exec(event.message ?? String(event.error ?? ""));
      if (status) refused = Number(status[1]);
    };
    socket.onclose = (event) => this.dropped(socket, refused, event.code);
  }

  /** The connection ended (`refused`: the handshake's HTTP status): put back what it did not answer. */
  private dropped(socket: Socket, refused: number | undefined, code: number): void {
    this.connecting = false;
    if (socket !== this.socket) return;
    this.socket = undefined;
    this.heartbeat?.stop();
    this.heartbeat = undefined;
    this.requeueInFlight();
    if (refused === 401 || refused === 403) {
      this.failAll((this.fatal = new AuthenticationError(refused)));
    } else if (code === 1009) { // resending the same frames would loop forever
      this.failAll((this.fatal = new ArenaError("frame_too_large", `the server refused a frame over its limit (${this.maxFrameBytes} bytes)`)));
    } else {
      this.retryLater();
    }
  }

  private retryLater(): void {
    if (this.waiting() === 0) {
      this.reconnect.reset();
      this.settleDrained();
      return; // the next submit connects
    }
    const now = Date.now();
    this.downSince ??= now;
    if (this.giveUpAfter > 0 && now - this.downSince >= this.giveUpAfter) {
      this.downSince = undefined;
      this.failAll(new ConnectionFailed(`no node could be reached for ${this.giveUpAfter} ms`), true);
      return;
    }
    this.node = (this.node + 1) % this.urls.length;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connect();
    }, this.reconnect.next());
  }

  private read(frame: ServerFrame): void {
    if (frame.op !== "ack" && frame.op !== "error") return;
    const items = typeof frame.id === "number" ? this.inFlight.get(frame.id) : undefined;
    if (items === undefined) {
      if (frame.op === "error") console.warn(`arena-client: server error ${frame.code}: ${frame.message}`);
      return;
    }
    this.inFlight.delete(frame.id as number);
    this.reconnect.reset();
    if (frame.op === "ack") this.acked(items, frame.results);
    else if (frame.code === "batch_too_large" && items.length > 1) {
      this.maxBatch = Math.max(1, Math.floor(items.length / 2));
      this.requeue(items);
    } else {
      const error = new ArenaError(frame.code, frame.message);
      for (const p of items) p.reject(error);
    }
    this.pump();
  }

  private acked(items: Pending[], results: SubmitResult[]): void {
    const now = Date.now();
    const retry: Pending[] = [];
    items.forEach((p, i) => {
      const result = results[i];
      if (result === undefined) {
        p.reject(new ArenaError("bad_ack", "the ack has fewer results than events"));
        return;
      }
      if (result.status === "rejected" && result.reason === "unavailable") {
        p.unavailableSince ??= now;
        if (now - p.unavailableSince < this.retryUnavailableFor) {
          retry.push(p);
          return;
        }
      }
      p.resolve(result);
    });
    if (retry.length > 0) {
      const attempt = Math.max(...retry.map((p) => p.unavailableAnswers));
      for (const p of retry) p.unavailableAnswers += 1;
      this.delayed += retry.length;
      const delay = new Backoff(this.reconnect.base, this.reconnect.cap, attempt).next();
      setTimeout(() => {
        this.delayed -= retry.length;
        this.requeue(retry);
        this.schedule();
      }, delay);
    }
  }

  /** Events back at the head of their boards' queues, to go out first, keys and bytes unchanged. */
  private requeue(items: Pending[]): void {
    this.stats.resent += items.length;
    const byBoard = new Map<string, Pending[]>();
    for (const p of items) {
      const group = byBoard.get(p.board);
      if (group === undefined) byBoard.set(p.board, [p]);
      else group.push(p);
    }
    for (const [board, group] of byBoard) {
      const queue = this.queues.get(board);
      if (queue === undefined) this.queues.set(board, group);
      else queue.unshift(...group);
    }
  }

  /** After a drop: every unanswered frame goes back, newest first so the oldest ends up first. */
  private requeueInFlight(): void {
    const ids = [...this.inFlight.keys()].sort((a, b) => b - a);
    for (const id of ids) this.requeue(this.inFlight.get(id)!);
    this.inFlight.clear();
  }

  private failAll(error: ArenaError, withKeys = false): void {
    const all: Pending[] = [];
    for (const queue of this.queues.values()) all.push(...queue);
    for (const items of this.inFlight.values()) all.push(...items);
    this.queues.clear();
    this.inFlight.clear();
    const failure = withKeys ? new ConnectionFailed(error.message, all.map((p) => p.key)) : error;
    for (const p of all) p.reject(failure);
    this.settleDrained();
  }
}
