// Building the page's nodes. Every string from the server (member names above all: players
// choose them) becomes a text node, never markup: nothing here parses HTML.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export function row(cells, attributes = {}) {
  return el("tr", attributes, cells.map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : el("td", {}, cell))));
}

export function num(value) {
  return el("td", { class: "num" }, value === null || value === undefined ? "—" : String(value));
}

export function options(select, values, keep = true) {
  const previous = select.value;
  replace(select, values.map(([value, label]) => el("option", { value }, label)));
  if (keep && values.some(([value]) => value === previous)) select.value = previous;
}

export function say(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("error", isError);
}

export function when(iso) {
  return iso === null || iso === undefined ? "—" : iso.replace("T", " ").replace(".000Z", "Z");
}

// Names each body cell of a `table.cards` after its column (data-label), for the phone layout. A
// row's cells are its last columns (a cell spanning rows above stands for the first ones); a
// column whose header is for screen readers only (a button's) gets no label.
export function labelCells(table) {
  const headers = [...table.tHead.rows[0].cells].map((th) => (th.querySelector(".sr-only") ? "" : th.textContent));
  for (const tr of table.tBodies[0].rows) {
    const offset = headers.length - tr.cells.length;
    [...tr.cells].forEach((cell, i) => {
      if (cell.tagName === "TD" && headers[offset + i]) cell.dataset.label = headers[offset + i];
    });
  }
}

// Keeps `labelCells` up to date whatever renders the table's rows.
export function keepLabelled(table) {
  labelCells(table);
  new MutationObserver(() => labelCells(table)).observe(table.tBodies[0], { childList: true });
}

export const $ = (id) => document.getElementById(id);
