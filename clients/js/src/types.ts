// The wire's shapes, named: aliases of the types generated from the server's OpenAPI document.
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type Entry = Schemas["Entry"];
/** The fields every table answer carries (board, period, period_id, start, end, closed, size, seq). */
export type Table = Schemas["Table"];
/** `top`, `around`: a table and some of its entries. */
export type TableEntries = Schemas["TableEntries"];
/** `rank`: a member's entry, `null` when the member is not (yet) in the table. */
export type Rank = Omit<Schemas["TableEntry"], "entry"> & { entry: Entry | null };
/** `members` (friends): those in the table in rank order, and the missing ones. */
export type Members = Schemas["TableMembers"];
export type ScoreEvent = Schemas["ScoreEvent"];
export type SubmitResult = Schemas["SubmitResult"];
export type View = Schemas["View"];
/** A live view's whole answer (the query's body) with its `seq`. */
export type Update = Schemas["Update"];
export type ClientFrame = Schemas["ClientFrame"];
export type ServerFrame = Schemas["ServerFrame"];
export type PeriodKind = Schemas["TopView"]["period"];

/** The options of every table query: a past table (`period_id`) and, where the server has them, a partition. */
export interface TableOptions {
  period_id?: string;
  partition?: string;
}

/** An event as a game server gives it: `occurred_at` defaults to now, `idempotency_key` to a new UUIDv7. */
export interface NewEvent {
  board: string;
  member: string;
  value: number;
  occurred_at?: number | string | Date;
  idempotency_key?: string;
  meta?: Record<string, unknown> | null;
  region?: string;
}
