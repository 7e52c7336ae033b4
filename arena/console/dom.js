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

export function when(iso) {
  return iso === null || iso === undefined ? "—" : iso.replace("T", " ").replace(".000Z", "Z");
}

export const $ = (id) => document.getElementById(id);
