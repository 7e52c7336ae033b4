export { ArenaClient, type ArenaClientOptions } from "./client.js";
export { ArenaError, AuthenticationError, ClientClosed, ConnectionFailed } from "./errors.js";
export { eventStreamUrl, subscribeEvents, type EventStreamView } from "./events.js";
export type { LiveOptions, Subscription } from "./live.js";
export type { WriterOptions } from "./writer.js";
export { newIdempotencyKey } from "./uuid7.js";
export type * from "./types.js";
export type { components } from "./openapi.js";
