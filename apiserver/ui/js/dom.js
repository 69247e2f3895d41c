// fedraft console: DOM helpers. Every text reaches the page through textContent or an attribute,
// never as HTML, so names and messages from the API cannot inject markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function fmtTime(ms) {
  if (ms === undefined || ms === null) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// Core's sentences carry log times as raw milliseconds ("NotReady since 1796228631861 ms"): the
// archive's readers compare them as text, so they stay so there and are made readable here.
export function readable(text) {
  return String(text ?? "").replace(/\b(since|at) (\d{12,}) ms\b/g, (_, w, ms) => `${w} ${fmtTime(Number(ms))}`);
}

export function ago(ms, nowMs) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((nowMs - ms) / 1000));
  if (s < 90) return `${s}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function bytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

// A table of at most `pageSize` rows out of `rows`, with a pager: the DOM stays bounded however
// many clusters or objects there are.
export function pagedTable({ columns, rows, page, pageSize, onPage, rowAttrs, caption }) {
  const pages = Math.max(1, Math.ceil(rows.length / pageSize));
  const p = Math.min(Math.max(0, page), pages - 1);
  const shown = rows.slice(p * pageSize, (p + 1) * pageSize);
  const table = h("table", { class: "grid" },
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.title)))),
    h("tbody", {}, shown.map((r) => h("tr", rowAttrs ? rowAttrs(r) : {},
      columns.map((c) => h("td", {}, c.cell(r)))))));
  const pager = h("div", { class: "pager" },
    h("button", { type: "button", "aria-label": "previous page", disabled: p === 0, onclick: () => onPage(p - 1) }, "‹ prev"),
    h("span", {}, `page ${p + 1} of ${pages} (${rows.length} rows)`),
    h("button", { type: "button", "aria-label": "next page", disabled: p >= pages - 1, onclick: () => onPage(p + 1) }, "next ›"));
  return h("div", {}, table, pages > 1 ? pager : h("p", { class: "muted" }, `${rows.length} rows`));
}

// One page of a list the server filters and pages (`?q=`, `?limit=`, `?continue=`): the browser
// fetches and renders one page however long the list is. `tokens[i]` starts page i (the first
// page needs none); a newer load supersedes one still in flight.
export class ServerPager {
  constructor(fetchJson, path, pageSize, from) {
    this.fetchJson = fetchJson;
    this.path = path;
    this.pageSize = pageSize;
    this.tokens = from ? ["", from] : [""];
    this.page = from ? 1 : 0;
    this.items = null;
    this.remaining = 0;
    this.seq = 0;
  }

  reset() { this.tokens = [""]; this.page = 0; }
  token() { return this.tokens[this.page] || ""; }
  hasPrev() { return this.page > 0; }
  hasNext() { return !!this.tokens[this.page + 1]; }
  next() { if (this.hasNext()) this.page++; }
  prev() { if (this.page > 0) this.page--; }

  // Resolves true when this load's answer is the one now shown.
  async load(params) {
    const seq = ++this.seq;
    const q = new URLSearchParams({ stale: "true", limit: String(this.pageSize) });
    for (const [k, v] of Object.entries(params || {})) if (v) q.set(k, v);
    if (this.token()) q.set("continue", this.token());
    const doc = await this.fetchJson(`${this.path}?${q}`);
    if (seq !== this.seq) return false;
    const m = doc.metadata || {};
    this.items = doc.items || [];
    this.remaining = m.remainingItemCount || 0;
    this.tokens.length = this.page + 1;
    if (m.continue) this.tokens.push(m.continue);
    return true;
  }

  // The page as a table with a pager; `onMove` reloads after prev/next.
  table({ columns, rowAttrs, caption, onMove }) {
    const first = this.page * this.pageSize;
    const total = first + this.items.length + this.remaining;
    const table = h("table", { class: "grid" },
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.title)))),
      h("tbody", {}, this.items.map((r) => h("tr", rowAttrs ? rowAttrs(r) : {},
        columns.map((c) => h("td", {}, c.cell(r)))))));
    const span = this.items.length ? `rows ${first + 1}–${first + this.items.length} of ${total}` : "no rows";
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", "aria-label": "previous page", disabled: !this.hasPrev(), onclick: () => { this.prev(); onMove(); } }, "‹ prev"),
      h("span", { "data-total": total }, span),
      h("button", { type: "button", "aria-label": "next page", disabled: !this.hasNext(), onclick: () => { this.next(); onMove(); } }, "next ›"));
    return h("div", {}, table, pager);
  }
}

// A modal confirmation; resolves true when confirmed.
export function confirmDialog(title, text, action) {
  return new Promise((resolve) => {
    const dlg = h("dialog", { "aria-labelledby": "dlg-title", id: "confirm" },
      h("h2", { id: "dlg-title" }, title),
      h("p", {}, text),
      h("div", { class: "row" },
        h("button", { type: "button", id: "confirm-cancel", onclick: () => { dlg.close(); resolve(false); } }, "Cancel"),
        h("button", { type: "button", id: "confirm-ok", class: "danger", onclick: () => { dlg.close(); resolve(true); } }, action)));
    dlg.addEventListener("close", () => { dlg.remove(); resolve(false); });
    document.body.appendChild(dlg);
    dlg.showModal();
  });
}

export function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// Runs `render` and gives focus back to the control that had it (matched by id or aria-label),
// so live re-renders do not throw a keyboard user back to the top of the page.
export function keepFocus(render) {
  const a = document.activeElement;
  const id = a && a.id;
  const lbl = a && a.getAttribute && a.getAttribute("aria-label");
  render();
  if (!a || a === document.body || document.contains(a)) return;
  const again = id ? document.getElementById(id) : lbl ? document.querySelector(`[aria-label="${CSS.escape(lbl)}"]`) : null;
  if (again) again.focus();
}
