/**
 * Exponential backoff with equal jitter, as the server's and the Python client's (arena/backoff.py):
 * attempt n waits in [d/2, d] ms, d = min(cap, base * 2**n). The jitter keeps clients that lost
 * the same server from coming back in step.
 */
export class Backoff {
  constructor(readonly base: number, readonly cap: number, public attempt = 0, private readonly random = Math.random) {}

  /** The ms to wait before the next attempt; counts that attempt. */
  next(): number {
    const delay = Math.min(this.cap, this.base * 2 ** Math.min(this.attempt, 30));
    this.attempt += 1;
    return delay / 2 + (this.random() * delay) / 2;
  }

  reset(): void {
    this.attempt = 0;
  }
}
