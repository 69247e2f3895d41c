// fedraft console: hand-written SVG charts. Ready vs desired per cluster (bars) and replicas per
// cluster over time (steps, from placement history). Every chart has a text alternative.

const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f6fb2", "#b2591f", "#2e8540", "#7a3fb2", "#b21f4a", "#5c6b00", "#00707a", "#6b4a00"];

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

export function readyChart(rows) {
  const W = 420, bar = 18, gap = 10, left = 90;
  const H = Math.max(40, rows.length * (bar + gap) + 20);
  const max = Math.max(1, ...rows.map((r) => Math.max(r.want, r.have)));
  const x = (n) => left + (n / max) * (W - left - 40);
  const desc = rows.map((r) => `${r.label}: ${r.have} ready of ${r.want}`).join("; ") || "no clusters";
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `ready vs desired: ${desc}`, class: "chart", id: "chart-ready" });
  rows.forEach((r, i) => {
    const y = 10 + i * (bar + gap);
    svg.appendChild(s("text", { x: left - 6, y: y + bar - 5, "text-anchor": "end", class: "axis" }, r.label));
    svg.appendChild(s("rect", { x: left, y, width: Math.max(1, x(r.want) - left), height: bar, class: "want" }));
    svg.appendChild(s("rect", { x: left, y: y + 4, width: Math.max(0, x(r.have) - left), height: bar - 8, class: r.have < r.want ? "have short" : "have" }));
    svg.appendChild(s("text", { x: x(Math.max(r.want, r.have)) + 4, y: y + bar - 5, class: "axis" }, `${r.have}/${r.want}`));
  });
  return svg;
}

// `changes`: the placement history (`/v1/audit/explain`), each with `index`, `after`.
export function historyChart(changes) {
  const W = 420, H = 180, left = 36, right = 90, top = 10, bottom = 24;
  if (!changes.length) {
    const p = document.createElement("p");
    p.textContent = "No placement changes recorded.";
    return p;
  }
  const clusters = [...new Set(changes.flatMap((c) => [...Object.keys(c.after || {}), ...Object.keys(c.before || {})]))].sort();
  const first = changes[0].index, last = changes[changes.length - 1].index;
  const span = Math.max(1, last - first);
  const max = Math.max(1, ...changes.flatMap((c) => Object.values(c.after || {})));
  const x = (i) => left + ((i - first) / span) * (W - left - right);
  const y = (n) => top + (1 - n / max) * (H - top - bottom);
  const desc = changes.map((c) => `index ${c.index}: ${Object.entries(c.after || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}`).join("; ");
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `replicas per cluster over time: ${desc}`, class: "chart", id: "chart-history" });
  svg.appendChild(s("line", { x1: left, y1: y(0), x2: W - right, y2: y(0), class: "axisline" }));
  svg.appendChild(s("text", { x: left - 4, y: y(max) + 4, "text-anchor": "end", class: "axis" }, String(max)));
  svg.appendChild(s("text", { x: left - 4, y: y(0) + 4, "text-anchor": "end", class: "axis" }, "0"));
  svg.appendChild(s("text", { x: left, y: H - 6, class: "axis" }, `#${first}`));
  svg.appendChild(s("text", { x: W - right, y: H - 6, "text-anchor": "end", class: "axis" }, `#${last}`));
  clusters.forEach((c, k) => {
    let d = "";
    let prev = null;
    for (const ch of changes) {
      const n = (ch.after || {})[c] || 0;
      d += prev === null ? `M${x(ch.index)},${y(n)}` : `H${x(ch.index)}V${y(n)}`;
      prev = n;
    }
    d += `H${W - right}`;
    const color = COLORS[k % COLORS.length];
    svg.appendChild(s("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
    svg.appendChild(s("text", { x: W - right + 6, y: y(prev) + 4 + (k % 3) * 0, fill: color, class: "axis" }, `${c} ${prev}`));
  });
  return svg;
}

// Step lines over a shared x axis: `series` is [{ label, points: [[x, y], ...] }], each held
// until its next point. `xLabel` renders an x value for the axis ends; `id` and `title` name the
// chart for tests and screen readers (the text alternative lists every series' last value).
export function linesChart({ id, title, series, xLabel = String, yUnit = "" }) {
  const W = 420, H = 160, left = 44, right = 100, top = 10, bottom = 24;
  const all = series.flatMap((se) => se.points);
  if (!all.length) {
    const p = document.createElement("p");
    p.textContent = `${title}: nothing recorded yet.`;
    return p;
  }
  const xs = all.map((p) => p[0]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), span = Math.max(1e-9, x1 - x0);
  const max = Math.max(1, ...all.map((p) => p[1]));
  const x = (v) => left + ((v - x0) / span) * (W - left - right);
  const y = (v) => top + (1 - v / max) * (H - top - bottom);
  const fmt = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)) + yUnit;
  const desc = series.map((se) => `${se.label} ${se.points.length ? fmt(se.points[se.points.length - 1][1]) : "none"}`).join(", ");
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `${title}: now ${desc}`, class: "chart", id });
  svg.appendChild(s("line", { x1: left, y1: y(0), x2: W - right, y2: y(0), class: "axisline" }));
  svg.appendChild(s("text", { x: left - 4, y: y(max) + 4, "text-anchor": "end", class: "axis" }, fmt(max)));
  svg.appendChild(s("text", { x: left - 4, y: y(0) + 4, "text-anchor": "end", class: "axis" }, fmt(0)));
  svg.appendChild(s("text", { x: left, y: H - 6, class: "axis" }, xLabel(x0)));
  svg.appendChild(s("text", { x: W - right, y: H - 6, "text-anchor": "end", class: "axis" }, xLabel(x1)));
  series.forEach((se, k) => {
    if (!se.points.length) return;
    const color = COLORS[k % COLORS.length];
    let d = "";
    se.points.forEach(([px, py], i) => { d += i === 0 ? `M${x(px)},${y(py)}` : `H${x(px)}V${y(py)}`; });
    d += `H${W - right}`;
    const last = se.points[se.points.length - 1][1];
    svg.appendChild(s("path", { d, fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": k % 2 ? "5 3" : "" }));
    svg.appendChild(s("text", { x: W - right + 6, y: top + 12 + k * 14, fill: color, class: "axis" }, `${se.label} ${fmt(last)}`));
  });
  return svg;
}
