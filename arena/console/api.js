// Asking the server that served the page: its HTTP JSON routes, with the admin token when asked.

export const TOKEN_KEY = "arena.adminToken"; // sessionStorage only: gone with the tab, never in a URL

export const path = (...parts) => parts.map(encodeURIComponent).join("/");

export const hasToken = () => sessionStorage.getItem(TOKEN_KEY) !== null;

export async function api(url, { method = "GET", body, admin = false, ifMatch = null } = {}) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (ifMatch !== null) headers["If-Match"] = String(ifMatch);
  if (admin) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token === null) return { ok: false, status: 401, body: { error: { code: "unauthorized", message: "type an admin token first" } } };
    headers["Authorization"] = `Bearer ${token}`;
  }
  let answer;
  try {
    answer = await fetch(url, { method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    return { ok: false, status: 0, body: { error: { code: "unreachable", message: "the server did not answer" } } };
  }
  const json = await answer.json().catch(() => null);
  return { ok: answer.ok, status: answer.status, body: json };
}

export const code = (answer) => (answer.body && answer.body.error ? answer.body.error.code : null);

export function problem(answer) {
  const error = answer.body && answer.body.error;
  return error ? `${error.code}: ${error.message}` : `HTTP ${answer.status}`;
}
