// A settled table's webhook deliveries, with the admin token: each webhook's deliveries of the
// table (the deliveries route filtered by board, period, period_id and partition), by state
// (pending, delivered, failed with its last error), and a retry of a failed one.

import { api, code, hasToken, path, problem } from "/console/api.js";
import { $, el, num, replace, row, say, when } from "/console/dom.js";

const STATES = ["pending", "failed", "delivered"];
const LIMIT = 1000;

// A moment of the outbox: milliseconds since the epoch (null: none).
const moment = (ms) => (ms === null ? "—" : when(new Date(ms).toISOString()));

// Every delivery of table t to a webhook: a revision's pages, for each revision (a few pages of LIMIT at most).
async function deliveriesOf(webhook, t) {
  const found = [];
  if (STATES.every((state) => webhook.deliveries[state] === 0)) return { found }; // GET /v1/webhooks counts them
  let after = null;
  do {
    const query = new URLSearchParams({ board: t.board, period: t.period, period_id: t.periodId, partition: "*", limit: String(LIMIT) });
    if (after !== null) query.set("after", after);
    const answer = await api(`/v1/webhooks/${path(webhook.id)}/deliveries?${query}`, { admin: true });
    if (!answer.ok) return { error: answer };
    found.push(...answer.body.deliveries);
    after = answer.body.next;
  } while (after !== null);
  return { found };
}

export class Deliveries {
  constructor() {
    this.asked = 0;
    this.shown = null;
    this.target = null;
  }

  clear() {
    this.asked++;
    this.shown = null;
    $("sl-deliveries").hidden = true;
  }

  async show(t, quiet = false) {
    const asked = ++this.asked;
    this.target = t;
    $("sl-deliveries").hidden = false;
    if (!hasToken()) return this.say("Type an admin token (Admin section) to see this table's webhook deliveries.");
    const listed = await api("/v1/webhooks", { admin: true });
    if (asked !== this.asked) return;
    if (!listed.ok) return this.say(code(listed) === "not_found" ? "This server delivers no webhooks." : problem(listed), true);
    const webhooks = listed.body.webhooks;
    if (webhooks.length === 0) return this.say("No webhook is configured: the settlement feed is the only way out.");
    const answers = await Promise.all(webhooks.map((w) => deliveriesOf(w, t)));
    if (asked !== this.asked) return;
    const failed = answers.find((a) => a.error);
    if (failed) return this.say(problem(failed.error), true);
    const rows = answers.flatMap((a, i) => a.found.map((d) => ({ webhook: webhooks[i].id, ...d })))
      .sort((a, b) => a.revision - b.revision || (a.delivery < b.delivery ? -1 : a.delivery > b.delivery ? 1 : 0) ||
        (a.webhook < b.webhook ? -1 : 1));
    const seen = JSON.stringify(rows);
    if (quiet && seen === this.shown) return;
    this.shown = seen;
    const counts = STATES.map((state) => `${rows.filter((d) => d.state === state).length} ${state}`).join(", ");
    this.say(`${rows.length} deliveries of this table to ${webhooks.length} webhook${webhooks.length === 1 ? "" : "s"}: ${counts}.`);
    replace($("sl-deliveries-table").tBodies[0], rows.map((d) => this.line(d)));
    $("sl-deliveries-table").hidden = rows.length === 0;
  }

  say(text, isError = false) {
    this.shown = null;
    say($("sl-deliveries-caption"), text, isError);
    $("sl-deliveries-table").hidden = true;
  }

  line(d) {
    const retry = el("button", { type: "button", hidden: d.state !== "failed" }, "Retry");
    retry.addEventListener("click", () => this.retry(d.webhook, d.delivery));
    return row([d.webhook, el("td", { class: "member" }, d.delivery), el("td", { class: `delivery-${d.state}` }, d.state),
      num(d.attempts), d.state === "pending" ? moment(d.next_at) : "—", moment(d.delivered_at), el("td", { class: d.last_error ? "error" : null }, d.last_error ?? "—"),
      el("td", {}, retry)], { "data-delivery": d.delivery, "data-webhook": d.webhook });
  }

  async retry(webhook, delivery) {
    const answer = await api(`/v1/webhooks/${path(webhook)}/deliveries/${path(delivery)}/retry`, { method: "POST", admin: true });
    say($("sl-message"), answer.ok ? `Retrying ${delivery} to ${webhook}.` : problem(answer), !answer.ok);
    if (this.target !== null) await this.show(this.target);
  }
}
