// The operator's console: boards, live standings, member search, the last ten minutes, admin.
// Talks only to the server that served it (HTTP JSON routes and /v1/live).

import { drawLines } from "/console/charts.js";
import { $, el, keepLabelled, num, options, replace, row, say, when } from "/console/dom.js";
import { LiveView } from "/console/live.js";
import { SettlementPanel } from "/console/settlements.js";
import { api, code, hasToken, path, problem, TOKEN_KEY } from "/console/api.js";

const OVERVIEW_EVERY_MS = 5000;
const STATS_EVERY_MS = 1000;

const boards = new Map();   // name -> the board of GET /v1/boards
const listed = new Map();   // "board/period" -> GET .../periods answer's periods (newest first)
let owners = {};            // board -> GET /v1/cluster's {owner, epoch, standbys}; empty off a cluster

const NODE = new URLSearchParams(location.search).get("node"); // /console?node=ID: one node's charts

// ---- boards overview -------------------------------------------------------------------------

async function refreshBoards() {
  const [answer, cluster] = await Promise.all([api("/v1/boards"), api("/v1/cluster")]);
  if (!answer.ok) return;
  owners = cluster.ok ? cluster.body.boards : {};
  boards.clear();
  for (const board of answer.body.boards) boards.set(board.board, board);
  await Promise.all([...boards.values()].filter((b) => b.state === "ready").flatMap((b) =>
    b.periods.map(async (table) => {
      const periods = await api(`/v1/boards/${path(b.board, table.period)}/periods`);
      if (periods.ok) listed.set(`${b.board}/${table.period}`, periods.body.periods);
    })));
  renderBoards();
  fillBoardSelects();
  fillPeriodIds();
  if (fillSettledTables()) settlement.choose();
  else settlement.refresh();
  if (live.view === null) watchStandings(); // the first time a board has tables
}

function renderBoards() {
  const rows = [];
  for (const board of boards.values()) {
    const tables = board.periods.length ? board.periods : [null];
    tables.forEach((table, index) => {
      const cells = [];
      if (index === 0) {
        const span = { rowspan: tables.length };
        const owner = owners[board.board];
        cells.push(el("th", { scope: "row", ...span }, board.board,
          owner ? el("div", { class: "owner" }, `owner: ${owner.owner ?? "none (moving)"}`) : null),
          el("td", { ...span, class: `state-${board.state}` }, board.retired ? `${board.state}, retired` : board.state),
          el("td", span, `${board.aggregation}, ${board.order}, ties: ${board.tie}`));
      }
      if (table === null) {
        cells.push(el("td", { colspan: 6 }, board.state === "ready" ? "no tables" : "tables not loaded"));
      } else {
        const current = (listed.get(`${board.board}/${table.period}`) ?? []).find((t) => t.period_id === table.period_id);
        const open = el("button", { type: "button" }, "Standings");
        open.addEventListener("click", () => openStandings(board.board, table.period));
        let settled = null;
        if (prized(board, table.period)) {
          settled = el("button", { type: "button" }, "Settlement");
          settled.addEventListener("click", () => openSettlement(board.board, table.period));
        }
        cells.push(el("td", {}, table.period), el("td", {}, table.period_id), num(table.size),
          el("td", {}, current ? tableState(current) : table.closed ? "closed" : "open"), num(current ? current.disputes : null),
          el("td", { class: "actions" }, open, settled));
      }
      rows.push(el("tr", { "data-board": board.board }, cells));
    });
  }
  replace($("boards-table").tBodies[0], rows);
}

// The periods of ``board`` whose tables are settled: those with prize tiers.
const prized = (board, period) => board.prizes[period] !== undefined;

function fillBoardSelects() {
  const names = [...boards.keys()].map((name) => [name, name]);
  for (const id of ["st-board", "se-board", "ad-board", "ban-board"]) options($(id), names);
  options($("sl-board"), [...boards.values()].filter((b) => Object.keys(b.prizes).length).map((b) => [b.board, b.board]));
  for (const [boardId, periodId] of [["st-board", "st-period"], ["se-board", "se-period"]]) fillPeriods(boardId, periodId);
  fillPeriods("sl-board", "sl-period", true);
}

function fillPeriods(boardId, periodId, withPrizes = false) {
  const board = boards.get($(boardId).value);
  const tables = board ? board.periods.filter((t) => !withPrizes || prized(board, t.period)) : [];
  options($(periodId), tables.map((t) => [t.period, t.period]));
}

function fillPeriodIds() {
  const tables = listed.get(`${$("st-board").value}/${$("st-period").value}`) ?? [];
  options($("st-period-id"), [["", "current"], ...tables.map((t) => [t.period_id,
    `${t.period_id} (${t.closed ? "closed" : "open"}, ${t.size}${t.disputes ? `, ${t.disputes} disputes` : ""})`])]);
}

// The partition picker: the global table, then the partitions of the chosen table (a board's
// regions, a league's divisions), as GET .../partitions lists them (its first 1000).
async function fillPartitions() {
  const select = $("st-partition"), board = $("st-board").value, period = $("st-period").value;
  const periodId = $("st-period-id").value;
  const query = periodId ? `?period_id=${encodeURIComponent(periodId)}` : "";
  const answer = board && period ? await api(`/v1/boards/${path(board, period)}/partitions${query}`) : null;
  const listed = answer && answer.ok ? answer.body.partitions : [];
  options(select, [["", "global"], ...listed.map((p) => [p.partition, `${p.partition} (${p.size})`])]);
  select.disabled = !listed.length;
}

async function partitioned() {
  await fillPartitions();
  offset = 0;
  watchStandings();
}

const tableState = (t) => (t.revision !== null ? `settled, revision ${t.revision}` : t.closed ? "closed" : "open");

// The settlement's table picker: the listed tables, first the newest settled one with members,
// else the open one. True when the pick changed.
function fillSettledTables() {
  const select = $("sl-period-id"), previous = select.value;
  const tables = listed.get(`${$("sl-board").value}/${$("sl-period").value}`) ?? [];
  options(select, tables.map((t) => [t.period_id, `${t.period_id} (${tableState(t)}, ${t.size} members)`]));
  const first = tables.find((t) => t.revision !== null && t.size > 0) ?? tables.find((t) => !t.closed);
  if (select.value !== previous && first) select.value = first.period_id;
  return select.value !== previous;
}

function openSettlement(board, period) {
  $("sl-board").value = board;
  fillPeriods("sl-board", "sl-period", true);
  $("sl-period").value = period;
  fillSettledTables();
  settlement.choose();
  location.hash = "#settlements";
  $("settlements").focus();
}

const settlement = new SettlementPanel({ memberCell,
  tableOf: (board, period, periodId) => (listed.get(`${board}/${period}`) ?? []).find((t) => t.period_id === periodId) });

// ---- live standings --------------------------------------------------------------------------

let offset = 0;

const live = new LiveView({
  onUpdate: renderStandings,
  onError: (frame) => say($("st-caption"), `${frame.code}: ${frame.message}`, true),
  onState: (state) => {
    const pill = $("live-state");
    pill.textContent = { live: "live", connecting: "connecting…", down: "disconnected, retrying" }[state];
    pill.className = `pill ${state}`;
  },
});

function watchStandings() {
  const board = $("st-board").value, period = $("st-period").value;
  if (!board || !period) return;
  const view = { op: "top", board, period, limit: Number($("st-limit").value), offset };
  if ($("st-period-id").value) view.period_id = $("st-period-id").value;
  if ($("st-partition").value) view.partition = $("st-partition").value;
  say($("st-caption"), "waiting for the table…");
  live.watch(view);
}

function renderStandings(update) {
  const first = offset + 1, last = offset + update.entries.length;
  const where = update.partition ? ` / ${update.partition}` : "";
  say($("st-caption"), `${update.board} / ${update.period} / ${update.period_id}${where}: ${update.closed ? "closed" : "open"}, ` +
    `${update.size} members, seq ${update.seq}` + (update.entries.length ? `, ranks ${first}–${last}` : ""));
  replace($("st-table").tBodies[0], update.entries.length
    ? update.entries.map((e) => row([num(e.rank), memberCell(update.board, e.member), num(e.score), when(e.reached_at)]))
    : [row([el("td", { colspan: 4 }, offset ? "no entries on this page" : "no entries yet")])]);
  const limit = Number($("st-limit").value);
  $("st-prev").disabled = offset === 0;
  $("st-next").disabled = offset + limit >= update.size;
  $("st-page").textContent = `page ${Math.floor(offset / limit) + 1} of ${Math.max(1, Math.ceil(update.size / limit))}`;
}

function openStandings(board, period) {
  $("st-board").value = board;
  fillPeriods("st-board", "st-period");
  $("st-period").value = period;
  fillPeriodIds();
  partitioned();
  location.hash = "#standings";
  $("standings").focus();
}

function page(step) {
  const limit = Number($("st-limit").value);
  offset = Math.max(0, offset + step * limit);
  watchStandings();
}

// ---- search ------------------------------------------------------------------------------------

async function search(event) {
  event.preventDefault();
  await Promise.all([listMatches(), showMember($("se-member").value)]);
}

async function showMember(member) {
  const board = $("se-board").value, period = $("se-period").value;
  const out = $("se-result");
  const found = await api(`/v1/boards/${path(board, period)}/members`, { method: "POST", body: { members: [member] } });
  if (!found.ok) return replace(out, el("p", { class: "error" }, problem(found)));
  const entry = found.body.entries[0];
  const parts = [];
  if (!entry) {
    parts.push(el("p", {}, "Not in ", `${board} / ${period} / ${found.body.period_id}`, ": ", el("strong", {}, member)));
  } else {
    // a rank r of n is better than (n - r) of the n members: what "percentile" means to a person
    const better = (100 * (found.body.size - entry.rank)) / found.body.size;
    const around = await api(`/v1/boards/${path(board, period)}/around/${path(member)}?radius=5`);
    parts.push(el("dl", { class: "facts", id: "se-facts" },
      el("dt", {}, "Member"), el("dd", {}, memberLink(board, member)),
      el("dt", {}, "Rank"), el("dd", { id: "se-rank" }, `${entry.rank} of ${found.body.size}`),
      ...divisionFacts(found.body.divisions, member),
      el("dt", {}, "Score"), el("dd", {}, String(entry.score)),
      el("dt", {}, "Percentile"), el("dd", { id: "se-better" },
        `better than ${better.toFixed(1)} % of the ${found.body.size} members`)));
    if (around.ok) {
      parts.push(el("h3", {}, "Neighbours"), el("div", { class: "scroll" }, el("table", { id: "se-around" },
        el("thead", {}, el("tr", {}, el("th", {}, "Rank"), el("th", {}, "Member"), el("th", {}, "Score"))),
        el("tbody", {}, around.body.entries.map((e) =>
          row([num(e.rank), memberCell(board, e.member), num(e.score)], { class: e.member === member ? "me" : null }))))));
    }
  }
  parts.push(el("h3", {}, "In every table of ", board), await everyTable(board, member));
  replace(out, parts);
}

// A league board's global table answers each listed member's division (null: none yet).
function divisionText(divisions, member) {
  return divisions[member] ?? "no division yet";
}

function divisionFacts(divisions, member) {
  return divisions ? [el("dt", {}, "Division"), el("dd", { id: "se-division" }, divisionText(divisions, member))] : [];
}

async function everyTable(board, member) {
  const kinds = (boards.get(board) ?? { periods: [] }).periods.map((t) => t.period);
  const tables = kinds.flatMap((period) => (listed.get(`${board}/${period}`) ?? []).map((t) => [period, t]));
  const answers = await Promise.all(tables.map(([period, t]) =>
    api(`/v1/boards/${path(board, period)}/members?period_id=${encodeURIComponent(t.period_id)}`,
      { method: "POST", body: { members: [member] } })));
  const settles = (period) => prized(boards.get(board), period);
  const won = await Promise.all(tables.map(([period, t], i) => {
    const inIt = answers[i].ok && answers[i].body.entries.length > 0;
    return t.revision !== null && inIt ? api(`/v1/boards/${path(board, period)}/settlement/members/${path(member)}` +
      `?period_id=${encodeURIComponent(t.period_id)}`) : null;
  }));
  return el("div", { class: "scroll" }, el("table", { id: "se-tables" },
    el("thead", {}, el("tr", {}, ...["Period", "Table", "Rank", "Score", "Won"].map((h) => el("th", {}, h)))),
    el("tbody", {}, tables.map(([period, t], i) => {
      const e = answers[i].ok ? answers[i].body.entries[0] : undefined;
      return row([period, `${t.period_id}${t.closed ? " (closed)" : ""}`,
        num(e ? `${e.rank} of ${answers[i].body.size}` : "not in table"), num(e ? e.score : null),
        settles(period) ? wonText(won[i], t, e) : "no prizes"]);
    }))));
}

// "What did it win" in a table: the reward of its latest settlement revision.
function wonText(answer, table, entry) {
  if (answer === null) return !entry ? "—" : table.closed ? "not settled yet" : "open: nothing yet";
  if (!answer.ok) return problem(answer);
  const { award, revision } = answer.body;
  return `${award === null ? "nothing" : award.reward}${revision > 0 ? ` (revision ${revision})` : ""}`;
}

// ---- prefix search and member links -----------------------------------------------------------

const MATCHES = 20;
let matching = 0; // the latest listMatches call: an older answer arriving later is dropped

async function listMatches() {
  const board = $("se-board").value, period = $("se-period").value, prefix = $("se-member").value;
  const out = $("se-matches");
  const asked = ++matching;
  if (!prefix || !board || !period) return replace(out);
  const answer = await api(`/v1/boards/${path(board, period)}/search?prefix=${encodeURIComponent(prefix)}&limit=${MATCHES}`);
  if (asked !== matching) return;
  if (!answer.ok) return replace(out, el("p", { class: "error" }, problem(answer)));
  const entries = answer.body.entries;
  const title = entries.length === 0 ? `No member of ${board} / ${period} starts with “${prefix}”.`
    : `${entries.length === MATCHES ? `The first ${MATCHES}` : entries.length} member${entries.length === 1 ? "" : "s"} starting with “${prefix}”:`;
  replace(out, el("p", { class: "caption" }, title), el("ul", { class: "matches", id: "se-match-list" }, entries.map((e) => {
    const pick = el("button", { type: "button", "data-member": e.member }, e.member);
    pick.addEventListener("click", () => { $("se-member").value = e.member; showMember(e.member); });
    const division = answer.body.divisions ? [el("span", { class: "caption division" }, divisionText(answer.body.divisions, e.member))] : [];
    return el("li", {}, pick, el("span", { class: "caption" }, `#${e.rank}`), ...division, memberLink(board, e.member, "audit"));
  })));
}

let typing = null;

function typed() {
  clearTimeout(typing);
  typing = setTimeout(listMatches, 200);
}

// A member's name (or ``text``) as a link to their audit trail in the admin section.
function memberLink(board, member, text = member) {
  const link = el("a", { href: "#admin", class: "member-link", title: `audit trail of ${member} on ${board}` }, text);
  link.addEventListener("click", (event) => {
    event.preventDefault();
    openAudit(board, member);
  });
  return link;
}

function memberCell(board, member) {
  return el("td", { class: "member" }, memberLink(board, member));
}

async function openAudit(board, member) {
  $("ad-board").value = board;
  $("ad-member").value = member;
  location.hash = "#admin";
  $("admin").focus();
  if (!hasToken()) {
    return say($("ad-message"), `Type an admin token above to see the audit trail of ${member}.`, true);
  }
  await audit();
}

// ---- charts ------------------------------------------------------------------------------------

const sum = (values) => values.reduce((a, b) => a + (b ?? 0), 0);

function durations(series) {
  const n = sum(series.count);
  const mean = n ? sum(series.mean.map((m, i) => (m ?? 0) * series.count[i])) / n : null;
  const peak = Math.max(0, ...series.max.filter((v) => v !== null));
  return [
    { name: "mean", values: series.mean, total: mean === null ? "—" : `${mean.toFixed(2)} ms over ${n}` },
    { name: "max", values: series.max, total: n ? `${peak.toFixed(2)} ms` : "—" },
  ];
}

// Whose figures the charts are: the whole cluster's, one node's (?node=), or this server's.
function showScope(body) {
  const scope = $("charts-scope");
  if (body === null) return say(scope, `No figures: ${NODE === null ? "the server" : `node ${NODE}`} did not answer.`, true);
  if (!body.nodes) return say(scope, "This server's figures (a single node).");
  if (NODE !== null) return say(scope, `Node ${NODE} only. Open the console without ?node= for the whole cluster.`);
  const missing = body.unanswered.length ? ` Left out, did not answer: ${body.unanswered.join(", ")}.` : "";
  say(scope, `The whole cluster: ${body.nodes.length} node${body.nodes.length === 1 ? "" : "s"} (${body.nodes.join(", ")}), ` +
    `counts summed, latencies the largest of any node.${missing}`, missing !== "");
}

async function refreshStats() {
  const answer = await api(NODE === null ? "/v1/stats" : `/v1/stats?node=${encodeURIComponent(NODE)}`);
  showScope(answer.ok ? answer.body : null);
  if (!answer.ok) return;
  const { events, seconds } = answer.body;
  const lines = [
    { name: "accepted", values: events.accepted },
    { name: "duplicate", values: events.duplicate },
    ...Object.entries(events.rejected).map(([reason, values]) => ({ name: `rejected ${reason}`, values })),
  ].map((s) => ({ ...s, total: String(sum(s.values)) }));
  drawLines($("chart-events"), $("legend-events"), lines, seconds);
  drawLines($("chart-lag"), $("legend-lag"), durations(answer.body.visibility_ms), seconds);
  drawLines($("chart-query"), $("legend-query"), durations(answer.body.query_ms), seconds);
}

// ---- admin -------------------------------------------------------------------------------------

function showToken(admin = null) {
  const has = hasToken();
  say($("ad-state"), has ? `Admin token${admin === null ? "" : ` of ${admin}`} set for this tab (session storage; sent as a bearer header only).`
    : "No token: audit and voids need an admin token (kept in this tab only).");
}

// A token typed in is kept only once GET /v1/admin/whoami says it is an admin's.
async function useToken(event) {
  event.preventDefault();
  const token = $("ad-token").value;
  $("ad-token").value = "";
  if (!token) return;
  let answer;
  try {
    answer = await fetch("/v1/admin/whoami", { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  } catch {
    return say($("ad-state"), "The token could not be checked: the server did not answer. Not kept; type it again.", true);
  }
  if (answer.status === 401) {
    return say($("ad-state"), "That is not an admin token (the server refused it). Not kept; check it and type it again.", true);
  }
  const body = await answer.json().catch(() => null);
  if (!answer.ok || body === null) return say($("ad-state"), `The token could not be checked (HTTP ${answer.status}). Not kept.`, true);
  sessionStorage.setItem(TOKEN_KEY, token);
  showToken(body.admin);
  settlement.refresh(); // its deliveries need the token
}

async function audit(event) {
  if (event) event.preventDefault();
  const board = $("ad-board").value, member = $("ad-member").value;
  const answer = await api(`/v1/boards/${path(board)}/events?member=${encodeURIComponent(member)}&limit=100`, { admin: true });
  const table = $("audit-table");
  if (!answer.ok) {
    table.hidden = true;
    return say($("ad-message"), problem(answer), true);
  }
  say($("ad-message"), `${answer.body.events.length} events of ${member} on ${board}`);
  $("ban-board").value = board;
  $("ban-member").value = member;
  replace(table.tBodies[0], answer.body.events.map((e) => {
    const voiding = el("button", { type: "button", disabled: e.voided !== null }, "Void…");
    voiding.addEventListener("click", () => askVoid(board, e.idempotency_key));
    return row([num(e.seq), num(e.value), when(e.occurred_at), when(e.received_at), e.source, el("td", { class: "member" }, e.idempotency_key),
      e.meta === null ? "" : JSON.stringify(e.meta), voidedCell(e.voided), el("td", {}, voiding)],
    { class: e.voided !== null ? "voided" : null, "data-key": e.idempotency_key });
  }));
  table.hidden = false;
}

// The void of an audited event: why, who and when (its void record).
function voidedCell(voided) {
  if (voided === null) return el("td", {}, "");
  return el("td", { class: "void-detail" }, "voided",
    el("span", { class: "voided-by" }, `by ${voided.admin} at ${when(voided.at)} (seq ${voided.seq}): ${voided.reason}`));
}

let voidTarget = null;

function askVoid(board, key) {
  voidTarget = { board, key };
  say($("void-what"), `Void event ${key} on ${board}? Its tables are recomputed without it.`);
  $("void-form").hidden = false;
  $("void-reason").focus();
}

async function confirmVoid(event) {
  event.preventDefault();
  const { board, key } = voidTarget;
  const answer = await api(`/v1/boards/${path(board)}/void`, { method: "POST", admin: true,
    body: { idempotency_key: key, reason: $("void-reason").value } });
  if (!answer.ok) return say($("ad-message"), problem(answer), true);
  $("void-form").hidden = true;
  $("void-reason").value = "";
  await audit();
  say($("ad-message"), answer.body.already_voided ? `${key} was already voided: nothing changed.` : `Voided ${key}.`);
  refreshBoards();
}

async function ban(event) {
  event.preventDefault();
  const board = $("ban-board").value, member = $("ban-member").value;
  if ($("ban-confirm").value !== member) {
    return say($("ad-message"), "The confirmation must be the member's name exactly.", true);
  }
  const answer = await api(`/v1/boards/${path(board)}/members/${path(member)}/void`, { method: "POST", admin: true,
    body: { reason: $("ban-reason").value } });
  if (!answer.ok) return say($("ad-message"), problem(answer), true);
  $("ban-confirm").value = "";
  say($("ad-message"), `Banned ${member} on ${board}: ${answer.body.voided} events voided.`);
  refreshBoards();
}

// ---- board definitions (API boards) ------------------------------------------------------------

let definitionVersion = null; // the version loaded into the editor: sent as If-Match when saving

function showDefinition(answer) {
  definitionVersion = answer.version;
  $("def-json").value = JSON.stringify(answer.definition, null, 2);
  say($("def-version"), `${answer.managed_by === "config" ? "Managed by config.toml" : "API board"}, version ${answer.version}` +
    (answer.retired ? ", retired" : ""));
}

async function loadDefinition() {
  const board = $("def-board").value;
  const answer = await api(`/v1/boards/${path(board)}/definition`, { admin: true });
  if (answer.status === 404) {
    definitionVersion = null;
    return say($("def-version"), "New board");
  }
  if (!answer.ok) return say($("def-message"), problem(answer), true);
  showDefinition(answer.body);
  say($("def-message"), `Loaded ${board}.`);
}

async function saveDefinition(event) {
  event.preventDefault();
  const board = $("def-board").value;
  let definition;
  try {
    definition = JSON.parse($("def-json").value);
  } catch (error) {
    return say($("def-message"), `The definition is not JSON: ${error.message}`, true);
  }
  const answer = await api(`/v1/boards/${path(board)}`, { method: "PUT", body: definition, admin: true, ifMatch: definitionVersion });
  if (!answer.ok) return say($("def-message"), problem(answer), true);
  showDefinition(answer.body);
  say($("def-message"), answer.status === 201 ? `Created ${board}.` : `Saved ${board} (version ${answer.body.version}).`);
  refreshBoards();
}

async function retireBoard() {
  const board = $("def-board").value;
  if (!board || $("def-confirm").value !== board) return say($("def-message"), "Type the board's name to confirm.", true);
  const answer = await api(`/v1/boards/${path(board)}`, { method: "DELETE", admin: true });
  if (!answer.ok) return say($("def-message"), problem(answer), true);
  $("def-confirm").value = "";
  showDefinition(answer.body);
  say($("def-message"), `Retired ${board}: it takes no more events.`);
  refreshBoards();
}

// ---- wiring ------------------------------------------------------------------------------------

function on(id, type, handler) { $(id).addEventListener(type, handler); }

on("st-board", "change", () => { fillPeriods("st-board", "st-period"); fillPeriodIds(); partitioned(); });
on("st-period", "change", () => { fillPeriodIds(); partitioned(); });
on("st-period-id", "change", partitioned);
on("st-partition", "change", () => { offset = 0; watchStandings(); });
on("st-limit", "change", () => { offset = 0; watchStandings(); });
on("standings-form", "submit", (event) => event.preventDefault());
on("st-prev", "click", () => page(-1));
on("st-next", "click", () => page(1));
on("se-board", "change", () => { fillPeriods("se-board", "se-period"); listMatches(); });
on("search-form", "submit", search);
on("se-member", "input", typed);
on("se-period", "change", listMatches);
on("sl-board", "change", () => { fillPeriods("sl-board", "sl-period", true); fillSettledTables(); settlement.choose(); });
on("sl-period", "change", () => { fillSettledTables(); settlement.choose(); });
on("sl-period-id", "change", () => settlement.choose());
on("sl-revision", "change", () => settlement.pick());
on("sl-limit", "change", () => settlement.pick());
on("settle-form", "submit", (event) => event.preventDefault());
on("sl-preview", "click", () => settlement.askPreview());
on("sl-prev", "click", () => settlement.page(-1));
on("sl-next", "click", () => settlement.page(1));
on("token-form", "submit", useToken);
on("ad-forget", "click", () => { sessionStorage.removeItem(TOKEN_KEY); showToken(); settlement.refresh(); });
on("audit-form", "submit", audit);
on("void-form", "submit", confirmVoid);
on("void-cancel", "click", () => { $("void-form").hidden = true; });
on("ban-form", "submit", ban);
on("def-load", "click", loadDefinition);
on("def-form", "submit", saveDefinition);
on("def-retire", "click", retireBoard);

for (const table of document.querySelectorAll("table.cards")) keepLabelled(table);
showToken();
refreshBoards();
refreshStats();
setInterval(refreshBoards, OVERVIEW_EVERY_MS);
setInterval(refreshStats, STATS_EVERY_MS);
