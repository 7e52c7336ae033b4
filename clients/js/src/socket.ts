// The WebSocket of the platform: the global one in browsers (and Node.js >= 22), the `ws` package
// under Node.js 20 or when headers (a token) must go with the handshake, which browsers cannot send.
import type { ServerFrame } from "./types.js";

/** What the client uses of a WebSocket: the browser API, which `ws` implements too. */
export interface Socket {
  readonly readyState: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: { message?: string; error?: unknown }) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export const OPEN = 1;

/** A server frame, or undefined (logged) for a text that is not a JSON object. */
export function parse(data: unknown): ServerFrame | undefined {
  try {
    const frame: unknown = JSON.parse(String(data));
    if (frame !== null && typeof frame === "object") return frame as ServerFrame;
  } catch {
    // reported below
  }
  console.warn("arena-client: the server sent a frame that is not a JSON object");
  return undefined;
}

type SocketConstructor = new (url: string, options?: unknown) => Socket;

let wsPackage: Promise<SocketConstructor> | undefined;

async function nodeWebSocket(): Promise<SocketConstructor> {
  const name = "ws"; // a variable: bundlers for the browser leave it alone
  wsPackage ??= import(/* @vite-ignore */ /* webpackIgnore: true */ name).then(
    (module: { WebSocket?: SocketConstructor; default?: SocketConstructor }) => {
      const constructor = module.WebSocket ?? module.default;
      if (!constructor) throw new Error("the ws package has no WebSocket export");
      return constructor;
    },
    () => {
      wsPackage = undefined;
      throw new Error("arena-client needs the `ws` package under Node.js 20 or to send a token: npm install ws");
    },
  );
  return wsPackage;
}

/** A new socket to `url`; with `headers` (a token), the `ws` package. */
export async function openSocket(url: string, headers?: Record<string, string>): Promise<Socket> {
  const native = (globalThis as { WebSocket?: SocketConstructor }).WebSocket;
  if (native && !headers) return new native(url);
  const Ws = await nodeWebSocket();
  return new Ws(url, { headers, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
}

/** `http://host:port` (or ws://) and a path to the WebSocket URL `ws://host:port/path`. */
export function wsUrl(base: string, path: string): string {
  const url = new URL(path, base);
  url.protocol = url.protocol === "https:" || url.protocol === "wss:" ? "wss:" : "ws:";
  return url.toString();
}
