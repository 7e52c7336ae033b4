// Live views over the public WebSocket `/v1/live`: one connection for every subscription of a
// client, reconnected with backoff and jitter (moving to the next node URL), every view subscribed
// again, and an update delivered only when its seq is not older than the last one delivered.
import { Backoff } from "./backoff.js";
import { ArenaError } from "./errors.js";
import { Heartbeat } from "./heartbeat.js";
import { OPEN, openSocket, parse, wsUrl, type Socket } from "./socket.js";
import type { ServerFrame, Update, View } from "./types.js";

export interface LiveOptions {
  /** ms of the first reconnect's ceiling, and of the longest (default 100, 5000). */
  reconnectBase?: number;
  reconnectMax?: number;
  /** ms between the client's pings on a quiet connection; no pong within as long drops it (default 15000). */
  pingInterval?: number;
}

export interface Subscription {
  /** Unsubscribe; no update is delivered after it. */
  close(): void;
}

interface Follower {
  view: View;
  onUpdate: (update: Update) => void;
  onError: ((error: ArenaError) => void) | undefined;
  sub: string | undefined; // its id on the current connection
  seq: number; // of the last update delivered
}

export class LiveConnection {
  private socket: Socket | undefined;
  private connecting = false;
  private closed = false;
  private node = 0;
  private ids = 0;
  private readonly followers = new Set<Follower>();
  private readonly bySub = new Map<string, Follower>();
  private readonly byId = new Map<number, Follower>();
  private readonly reconnect: Backoff;
  private readonly pingInterval: number;
  private timer: ReturnType<typeof setTimeout> | undefined; // the next reconnect
  private heartbeat: Heartbeat | undefined;

  constructor(private readonly urls: readonly string[], options: LiveOptions = {}) {
    this.reconnect = new Backoff(options.reconnectBase ?? 100, options.reconnectMax ?? 5000);
    this.pingInterval = options.pingInterval ?? 15000;
  }

  subscribe(view: View, onUpdate: (update: Update) => void, onError?: (error: ArenaError) => void): Subscription {
    if (this.closed) throw new ArenaError("client_closed", "the client is closed");
    const follower: Follower = { view, onUpdate, onError, sub: undefined, seq: -1 };
    this.followers.add(follower);
    if (this.socket?.readyState === OPEN) this.send(follower);
    else this.connect();
    return { close: () => this.unsubscribe(follower) };
  }

  close(): void {
    this.closed = true;
    this.followers.clear();
    clearTimeout(this.timer);
    this.heartbeat?.stop();
    this.socket?.close(1000);
    this.socket = undefined;
  }

  private unsubscribe(follower: Follower): void {
    if (!this.followers.delete(follower)) return;
    if (follower.sub !== undefined) {
      this.bySub.delete(follower.sub);
      if (this.socket?.readyState === OPEN) this.socket.send(JSON.stringify({ op: "unsubscribe", sub: follower.sub }));
    }
    if (this.followers.size === 0) {
      clearTimeout(this.timer);
      this.heartbeat?.stop();
      this.socket?.close(1000);
      this.socket = undefined;
    }
  }

  private send(follower: Follower): void {
    const id = ++this.ids;
    this.byId.set(id, follower);
    this.socket!.send(JSON.stringify({ op: "subscribe", id, view: follower.view }));
  }

  private connect(): void {
    if (this.connecting || this.closed || this.socket) return;
    this.connecting = true;
    const url = wsUrl(this.urls[this.node]!, "/v1/live");
    openSocket(url).then((socket) => this.attach(socket), (error: Error) => this.failed(error));
  }

  /** No WebSocket can be made here (Node.js 20 without the `ws` package): every view ends. */
  private failed(error: Error): void {
    this.connecting = false;
    const followers = [...this.followers];
    this.followers.clear();
    for (const follower of followers) this.end(follower, new ArenaError("client_failed", error.message));
  }

  private end(follower: Follower, error: ArenaError): void {
    if (follower.onError) follower.onError(error);
    else console.error(`arena-client: a live view ended: ${error.message}`);
  }

  private attach(socket: Socket): void {
    this.connecting = false;
    if (this.closed || this.followers.size === 0) {
      socket.close(1000);
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      this.bySub.clear();
      this.byId.clear();
      for (const follower of this.followers) {
        follower.sub = undefined;
        this.send(follower);
      }
      this.heartbeat = new Heartbeat(socket, this.pingInterval, () => {
        socket.close(4000, "no answer to ping");
        this.dropped(socket); // at once: a half-open connection's close event may come late
      });
    };
    socket.onmessage = (event) => {
      this.heartbeat?.heardFrom();
      const frame = parse(event.data);
      if (frame !== undefined) this.read(frame);
    };
    socket.onerror = () => {}; // a close event follows
    socket.onclose = () => this.dropped(socket);
  }

  private dropped(socket: Socket): void {
    this.connecting = false;
    if (socket !== this.socket) return;
    this.socket = undefined;
    this.heartbeat?.stop();
    this.heartbeat = undefined;
    if (this.closed || this.followers.size === 0) return;
    this.node = (this.node + 1) % this.urls.length;
    this.timer = setTimeout(() => this.connect(), this.reconnect.next());
  }

  private read(frame: ServerFrame): void {
    if (frame.op === "subscribed") {
      const follower = typeof frame.id === "number" ? this.byId.get(frame.id) : undefined;
      if (follower === undefined) return;
      this.byId.delete(frame.id as number);
      if (!this.followers.has(follower)) {
        this.socket?.send(JSON.stringify({ op: "unsubscribe", sub: frame.sub })); // closed while subscribing
        return;
      }
      follower.sub = frame.sub;
      this.bySub.set(frame.sub, follower);
    } else if (frame.op === "update") {
      const follower = this.bySub.get(frame.sub);
      if (follower === undefined || frame.seq < follower.seq) return; // never older than the last delivered
      follower.seq = frame.seq;
      this.reconnect.reset(); // the connection works: the next drop starts the backoff over
      const { op: _op, sub: _sub, ...update } = frame;
      follower.onUpdate(update as Update);
    } else if (frame.op === "error") {
      const follower = frame.sub !== undefined ? this.bySub.get(frame.sub)
        : typeof frame.id === "number" ? this.byId.get(frame.id) : undefined;
      if (follower === undefined) return;
      // A refused view, or one whose table left retention: the subscription ends.
      if (frame.code === "not_ready" || frame.code === "unavailable") return;
      this.followers.delete(follower);
      if (follower.sub !== undefined) this.bySub.delete(follower.sub);
      this.end(follower, new ArenaError(frame.code, frame.message));
    }
  }
}
