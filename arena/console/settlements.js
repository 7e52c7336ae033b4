// One table's settlement: its awards (paged), its revisions and, after revision 0, what each
// revision grants and revokes; an open table's preview ("if it closed now", asked for by a click:
// the server computes it over the whole table); beside it, the table's webhook deliveries.

import { api, code, path, problem } from "/console/api.js";
import { Deliveries } from "/console/deliveries.js";
import { $, el, num, options, replace, row, say } from "/console/dom.js";

function tierText(tier) {
  const rule = tier.ranks !== undefined ? `ranks ${tier.ranks[0]}–${tier.ranks[1]}`
    : tier.top_percent !== undefined ? `top ${tier.top_percent} %` : `score ${tier.score} or better`;
  return `${tier.reward}: ${rule}${tier.tier === undefined ? "" : ` (league tier ${tier.tier})`}`;
}

// A change of one member's reward from one revision to the next, as a backend acts on it.
function meaning(change) {
  if (change.before === null) return "grant";
  if (change.after === null) return "revoke";
  return "replace";
}

export class SettlementPanel {
  constructor({ memberCell, tableOf }) {
    this.memberCell = memberCell;
    this.tableOf = tableOf; // (board, period, period_id) -> the table as GET …/periods lists it
    this.offset = 0;
    this.preview = false; // showing the open table's preview (until another table is chosen)
    this.asked = 0;       // the latest show(): an older answer arriving later is dropped
    this.shown = null;    // what is on the page, to leave it (and the focus in it) alone when unchanged
    this.journaled = false; // it is a journaled revision: it has deliveries
    this.deliveries = new Deliveries();
  }

  target() {
    return { board: $("sl-board").value, period: $("sl-period").value, periodId: $("sl-period-id").value,
      revision: $("sl-revision").value, limit: Number($("sl-limit").value) };
  }

  // Another table: its latest revision, from its first award.
  choose() {
    options($("sl-revision"), [["", "latest"]], false);
    this.offset = 0;
    this.preview = false;
    this.show();
  }

  pick() {
    this.offset = 0;
    this.show();
  }

  page(step) {
    this.offset = Math.max(0, this.offset + step * Number($("sl-limit").value));
    this.show();
  }

  askPreview() {
    this.preview = true;
    this.offset = 0;
    this.show();
  }

  // The periodic refresh: a new revision or delivery state shows up; a preview is not recomputed.
  refresh() {
    if (!this.preview) this.show(true);
  }

  async show(quiet = false) {
    const t = this.target();
    const asked = ++this.asked;
    if (!t.board || !t.period || !t.periodId) return this.clear("No board has prizes: nothing is settled.");
    const table = `${t.board} / ${t.period} / ${t.periodId}`;
    const listed = this.tableOf(t.board, t.period, t.periodId);
    // asked only once settled (the periods' revision), but a preview: no 404 for the browser to log
    if (!this.preview && listed !== undefined && listed.revision === null) {
      this.shown = null;
      this.journaled = false;
      if (listed.closed) return this.clear(`${table}: closed, not settled (a table is settled a few seconds after its close).`);
      this.clear(`${table}: open. It settles at its close; the preview computes what it would award now.`);
      $("sl-preview").hidden = false;
      return;
    }
    const query = new URLSearchParams({ period_id: t.periodId, limit: String(t.limit), offset: String(this.offset) });
    if (this.preview) query.set("preview", "true");
    else if (t.revision !== "") query.set("revision", t.revision);
    const answer = await api(`/v1/boards/${path(t.board, t.period)}/settlement?${query}`);
    if (asked !== this.asked) return;
    const seen = JSON.stringify([t, this.offset, answer.status, answer.body]);
    if (quiet && seen === this.shown) return this.journaled ? this.deliveries.show(t, true) : undefined;
    this.shown = seen;
    this.journaled = answer.ok && !answer.body.preview;
    if (answer.ok) return this.render(t, table, answer.body);
    const unsettled = code(answer) === "not_settled";
    this.clear(unsettled ? `${table}: ${answer.body.error.message}` : problem(answer), !unsettled);
  }

  clear(text, isError = false) {
    say($("sl-caption"), text, isError);
    $("sl-preview").hidden = true;
    $("sl-result").hidden = true;
    this.deliveries.clear();
  }

  render(t, table, body) {
    say($("sl-caption"), body.preview
      ? `${table}: open. If it closed now (a preview at seq ${body.seq}: not journaled, not delivered).`
      : `${table}: settled, revision ${body.revision}${body.revision > 0 ? " after disputes" : " at the close"}.`);
    $("sl-preview").hidden = true;
    $("sl-result").hidden = false;
    if (!body.preview && t.revision === "") {
      const revisions = [...Array(body.revision + 1).keys()].reverse();
      options($("sl-revision"), [["", `latest (${body.revision})`], ...revisions.map((r) => [String(r), `revision ${r}`])]);
    }
    replace($("sl-facts"),
      el("dt", {}, "Revision"), el("dd", { id: "sl-rev" }, body.preview ? "preview" : String(body.revision)),
      el("dt", {}, "Seq"), el("dd", {}, String(body.seq)),
      el("dt", {}, "Members"), el("dd", {}, String(body.size)),
      el("dt", {}, "Awards"), el("dd", { id: "sl-total" }, String(body.awards_total)),
      el("dt", {}, "sha256"), el("dd", { id: "sl-sha" }, body.sha256),
      el("dt", {}, "Tiers"), el("dd", {}, body.tiers.length ? body.tiers.map(tierText).join("; ") : "none"));
    replace($("sl-awards").tBodies[0], body.awards.length
      ? body.awards.map((a) => row([num(a.rank), this.memberCell(t.board, a.member), num(a.score), a.reward]))
      : [row([el("td", { colspan: 4 }, body.awards_total ? "no awards on this page" : "no awards: nobody matched a tier")])]);
    $("sl-prev").disabled = this.offset === 0;
    $("sl-next").disabled = this.offset + t.limit >= body.awards_total;
    $("sl-page").textContent = `page ${Math.floor(this.offset / t.limit) + 1} of ${Math.max(1, Math.ceil(body.awards_total / t.limit))}`;
    const changes = body.changes ?? [];
    $("sl-changes").hidden = body.revision === 0 || body.preview === true;
    say($("sl-changes-h"), `What revision ${body.revision} changed: ${changes.length} member${changes.length === 1 ? "" : "s"}`);
    replace($("sl-changes-table").tBodies[0], changes.map((c) => row([this.memberCell(t.board, c.member),
      c.before ?? "—", c.after ?? "—", meaning(c)], { class: `change-${meaning(c)}` })));
    if (this.journaled) this.deliveries.show(t);
    else this.deliveries.clear();
  }
}
