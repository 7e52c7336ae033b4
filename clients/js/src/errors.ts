/** An answer the server refused (`code` is the contract's error code: unknown_board, not_ready...). */
export class ArenaError extends Error {
  constructor(readonly code: string, message: string, readonly status?: number) {
    super(`${code}: ${message}`);
    this.name = "ArenaError";
  }
}

/** No node answered for `giveUpAfter` ms; `keys` are the idempotency keys of the events it failed (resend them). */
export class ConnectionFailed extends ArenaError {
  constructor(message: string, readonly keys: readonly string[] = []) {
    super("connection_failed", message);
    this.name = "ConnectionFailed";
  }
}

/** The server refused the token (HTTP 401/403 on the WebSocket handshake); the writer stops. */
export class AuthenticationError extends ArenaError {
  constructor(status: number) {
    super("unauthorized", `the server refused the token (HTTP ${status})`, status);
    this.name = "AuthenticationError";
  }
}

/** The client was closed (or is closing) before the call was answered. */
export class ClientClosed extends ArenaError {
  constructor(message = "the client is closed") {
    super("client_closed", message);
    this.name = "ClientClosed";
  }
}
