// Line charts drawn as SVG by hand: a few dozen lines instead of a vendored library, nothing
// to keep up to date, and the page's Content-Security-Policy stays "self only".

const NS = "http://www.w3.org/2000/svg";
const W = 600, H = 170, LEFT = 44, RIGHT = 8, TOP = 10, BOTTOM = 20;

function svg(tag, attributes, text) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function tick(value) {
  if (value >= 100) return Math.round(value).toString();
  return Number(value.toPrecision(2)).toString();
}

// A "nice" top for the y axis: 1, 2 or 5 times a power of ten, at least `peak`.
function ceiling(peak) {
  if (!(peak > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(peak));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= peak);
}

// series: [{name, values: (number|null)[], total: string}], one value per second, oldest first.
// A null is a second without samples: the line breaks there.
export function drawLines(chart, legend, series, seconds) {
  const peak = Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
  const top = ceiling(peak);
  const x = (i) => LEFT + (i * (W - LEFT - RIGHT)) / Math.max(seconds - 1, 1);
  const y = (v) => TOP + (H - TOP - BOTTOM) * (1 - v / top);
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const nodes = [];
  for (const v of [0, top / 2, top]) {
    nodes.push(svg("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }));
    nodes.push(svg("text", { x: LEFT - 4, y: y(v) + 4, "text-anchor": "end" }, tick(v)));
  }
  nodes.push(svg("text", { x: LEFT, y: H - 4 }, `−${Math.round(seconds / 60)} min`));
  nodes.push(svg("text", { x: W - RIGHT, y: H - 4, "text-anchor": "end" }, "now"));
  series.forEach((s, index) => {
    let path = "", pen = false;
    s.values.forEach((v, i) => {
      if (v === null) { pen = false; return; }
      // "h0" after a move: a second alone between gaps still shows, as a dot (round caps)
      path += `${pen ? "L" : "M"}${x(i).toFixed(1)} ${y(v).toFixed(1)}${pen ? "" : "h0"}`;
      pen = true;
    });
    if (path) nodes.push(svg("path", { class: `line s${index % 7}`, d: path, "data-series": s.name }));
  });
  chart.replaceChildren(...nodes);
  legend.replaceChildren(...series.map((s, index) => {
    const item = document.createElement("li");
    item.className = `s${index % 7}`;
    item.dataset.series = s.name;
    item.textContent = `${s.name}: ${s.total}`;
    return item;
  }));
}
