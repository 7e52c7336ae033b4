/**
 * A new UUIDv7 string: 48 bits of epoch milliseconds, version 7, 74 random bits (RFC 9562).
 * Unique (the random part) and time-ordered, which keeps the journal's key index append-mostly.
 * Uses the Web Crypto API (browsers, Node.js >= 19).
 */
export function newIdempotencyKey(now: number = Date.now()): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  let ms = Math.floor(now);
  for (let i = 5; i >= 0; i -= 1) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
