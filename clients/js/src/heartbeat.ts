// A connection's keepalive: a `ping` frame after `interval` ms of silence, and the connection
// declared dead after twice that without any frame read (a half-open TCP connection, a node cut
// off by the network), so that the owner reconnects instead of waiting for TCP to give up.
import type { Socket } from "./socket.js";

export class Heartbeat {
  private heard = Date.now();
  private timer: ReturnType<typeof setTimeout>;
  private ids = 0;

  constructor(private readonly socket: Socket, private readonly interval: number, private readonly dead: () => void) {
    this.timer = setTimeout(() => this.beat(), interval);
  }

  /** A frame was read. */
  heardFrom(): void {
    this.heard = Date.now();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private beat(): void {
    const silent = Date.now() - this.heard;
    if (silent >= 2 * this.interval) {
      this.dead();
      return;
    }
    if (silent >= this.interval) this.socket.send(JSON.stringify({ op: "ping", id: `heartbeat-${++this.ids}` }));
    this.timer = setTimeout(() => this.beat(), this.interval);
  }
}
