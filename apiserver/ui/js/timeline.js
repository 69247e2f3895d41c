// fedraft console: the Timeline (incident view). The audit log as a time axis with markers for
// intents, cluster health, and automatic placement changes (failover, rebalance); filters by
// object, cluster, actor and time run on the server. A cursor over the log's indexes shows the
// fleet and placements as they were (`/v1/audit/state`), and a time jumps there too; two marked
// points give the diff; a placement change opens its explanation, whose buttons move the cursor
// to just before and after it. The URL keeps cursor, marks, filters and the records shown.

import { h, replace, fmtTime, readable, pagedTable, debounce } from "./dom.js";
import { api } from "./api.js";

const INTENTS = new Set(["RegisterCluster", "UpdateCluster", "DeregisterCluster", "Cordon", "Uncordon", "Drain",
  "PutObject", "PutObjectWithDiscovery", "DeleteObject", "RevokePlacement", "PutTenant", "DeleteTenant", "SetAdmissionPolicy"]);
const FILTERS = ["object", "cluster", "actor", "since", "until"];
const PAGE_RECORDS = 500;

// What a record is on the axis: an intent, a health change, an automatic placement change or
// routine traffic (not drawn).
export function category(r) {
  const moved = (r.decisions || []).filter((d) => (d.moved || []).length);
  if (INTENTS.has(r.command)) return "intent";
  // A move that dropped a cluster for its health is a failover; any other move a rebalance.
  const failover = moved.some((d) => (d.dropped || []).some((x) => /NotReady|Unknown|unhealthy|unreachable/i.test(x.reason)));
  if (moved.length) return failover ? "failover" : "rebalance";
  if (r.command === "ClusterUnreachable") return "health";
  if ((r.changes || []).some((c) => c.kind === "Cluster") && r.command === "Tick") return "health";
  return "";
}

export function timelineView(root, ctx) {
  const p = ctx.route.params;
  const inputs = Object.fromEntries(FILTERS.map((f) => [f, h("input", { id: `tl-${f}`, type: "text", value: p.get(f) || "",
    placeholder: { object: "namespace/name", cluster: "cluster name", actor: "principal", since: "2026-12-01T03:00:00Z", until: "RFC 3339 time" }[f] })]));
  let records = [];
  let cont = null;
  let lastIndex = 0;
  let at = p.get("at") ? Number(p.get("at")) : null;
  let marks = { a: p.get("a") || "", b: p.get("b") || "" };
  let page = 0;
  const show = h("select", { id: "tl-show" },
    h("option", { value: "" }, "every record"),
    h("option", { value: "marked" }, "marked records only"),
    h("option", { value: "placement" }, "placement changes only"));
  show.value = p.get("show") || "";
  const gotoTime = h("input", { id: "tl-goto", type: "text", placeholder: "2026-12-01T03:12:00Z" });
  const cursor = h("input", { id: "tl-cursor", type: "range", min: 1, max: 1, step: 1, value: 1, "aria-describedby": "tl-cursor-text" });
  const cursorText = h("output", { id: "tl-cursor-text", for: "tl-cursor" });
  const axis = h("div", { id: "tl-axis", class: "axis-box" });
  const list = h("div", { id: "tl-records" });
  const past = h("section", { id: "tl-state", "aria-label": "state at the cursor" });
  const diff = h("section", { id: "tl-diff", "aria-label": "diff" });
  const explain = h("section", { id: "tl-explain", "aria-label": "explanation", tabindex: "-1" });
  const msg = h("p", { role: "status", id: "tl-msg" });

  function params() {
    const o = {};
    for (const f of FILTERS) if (inputs[f].value.trim()) o[f] = inputs[f].value.trim();
    if (at !== null) o.at = at;
    if (marks.a) o.a = marks.a;
    if (marks.b) o.b = marks.b;
    if (show.value) o.show = show.value;
    return o;
  }

  async function load(more) {
    const q = new URLSearchParams({ order: "newest", limit: String(PAGE_RECORDS) });
    for (const f of FILTERS) if (inputs[f].value.trim()) q.set(f, inputs[f].value.trim());
    if (more && cont) q.set("continue", cont);
    msg.textContent = "Loading records…";
    try {
      // A page may come back partial (the server bounds its scan); follow `continue` a few times.
      let got = [];
      let next = more ? cont : null;
      for (let i = 0; i < 5; i++) {
        if (next) q.set("continue", next);
        const doc = await api(`/v1/audit?${q}`);
        got = got.concat(doc.items || []);
        next = doc.continue || null;
        if (got.length >= PAGE_RECORDS || !next) break;
      }
      records = more ? records.concat(got) : got;
      cont = next;
      // Which filters the records shown answer (tests and scripts wait for it).
      list.dataset.loaded = new URLSearchParams(FILTERS.filter((f) => q.get(f)).map((f) => [f, q.get(f)])).toString();
      msg.textContent = `${records.length} records${cont ? " (older ones: Load older)" : ""}`;
    } catch (e) {
      msg.textContent = `Audit log unavailable: ${e.message}`;
    }
    if (!more) {
      // The live watch knows the newest index; filtered records may all be older.
      lastIndex = Math.max(ctx.live.rv || 0, records.length ? records[0].index : 0);
    }
    cursor.max = String(Math.max(1, lastIndex));
    if (at === null) at = lastIndex;
    cursor.value = String(at);
    drawAxis();
    drawList();
    showState();
    showDiff();
  }

  function drawAxis() {
    const NS = "http://www.w3.org/2000/svg";
    const W = 900, H = 90;
    const lo = records.length ? records[records.length - 1].index : 1;
    const hi = Math.max(lastIndex, lo + 1);
    const x = (i) => 10 + ((i - lo) / (hi - lo)) * (W - 20);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("class", "chart timeline");
    svg.setAttribute("role", "img");
    const marked = records.filter((r) => category(r));
    svg.setAttribute("aria-label", `audit log from index ${lo} to ${hi}: ${marked.length} marked records`);
    const add = (tag, attrs, text) => {
      const el = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
      if (text) el.textContent = text;
      svg.appendChild(el);
      return el;
    };
    add("line", { x1: 10, y1: 60, x2: W - 10, y2: 60, class: "axisline" });
    add("text", { x: 10, y: 84, class: "axis" }, `#${lo}`);
    add("text", { x: W - 10, y: 84, class: "axis", "text-anchor": "end" }, `#${hi}`);
    const rows = { intent: 14, health: 28, failover: 42, rebalance: 42 };
    for (const r of marked) {
      const c = category(r);
      const m = add("rect", { x: x(r.index) - 2, y: rows[c], width: 4, height: 12, class: `mark ${c}`, "data-index": r.index });
      // A mark moves the cursor to its own index (a click beside it to the nearest index).
      m.addEventListener("click", (ev) => { ev.stopPropagation(); moveTo(r.index); });
      const t = document.createElementNS(NS, "title");
      t.textContent = `#${r.index} ${r.command} ${r.target} (${r.actor})`;
      m.appendChild(t);
    }
    for (const [k, v] of Object.entries(marks)) if (v) add("text", { x: x(Number(v)), y: 10, class: "axis", "text-anchor": "middle" }, k.toUpperCase());
    if (at !== null) add("line", { x1: x(at), y1: 4, x2: x(at), y2: 66, class: "cursor" });
    // A click on the axis moves the cursor there (the range input is the keyboard way).
    svg.addEventListener("click", (ev) => {
      const box = svg.getBoundingClientRect();
      const i = Math.round(lo + ((ev.clientX - box.left) / box.width * W - 10) / (W - 20) * (hi - lo));
      moveTo(Math.min(hi, Math.max(1, i)));
    });
    replace(axis, svg, h("div", { class: "legend" },
      h("span", { class: "key intent" }, "intent"), h("span", { class: "key health" }, "cluster health"),
      h("span", { class: "key failover" }, "failover"), h("span", { class: "key rebalance" }, "rebalance")));
  }

  function shown() {
    if (show.value === "marked") return records.filter((r) => category(r));
    if (show.value === "placement") return records.filter((r) => (r.decisions || []).length);
    return records;
  }

  function drawList() {
    replace(list, pagedTable({
      caption: "Audit records, newest first", rows: shown(), page, pageSize: 100,
      rowAttrs: (r) => ({ "data-index": r.index, "data-time": r.timeMs, class: category(r) ? `cat-${category(r)}` : "" }),
      onPage: (n) => { page = n; drawList(); },
      columns: [
        { title: "Index", cell: (r) => h("button", { type: "button", class: "link", "aria-label": `state at index ${r.index}`, onclick: () => moveTo(r.index) }, `#${r.index}`) },
        { title: "Time", cell: (r) => fmtTime(r.timeMs) },
        { title: "Actor", cell: (r) => r.actor },
        { title: "Command", cell: (r) => `${r.command} ${r.target}` },
        { title: "Outcome", cell: (r) => r.outcome.status === "Accepted" ? "accepted" : `rejected: ${r.outcome.message}` },
        { title: "Placement changes", cell: (r) => (r.decisions || []).map((d) => h("div", {},
          h("button", { type: "button", class: "link", "aria-label": `explain ${d.object} at ${r.index}`, "data-explain": d.object,
            onclick: () => openExplain(d.object, r.index) }, d.object), ` ${readable(d.summary)}`)) },
      ],
    }));
  }

  const fetchState = debounce(async () => {
    const want = at;
    try {
      const s = await api(`/v1/audit/state?at=${want}`);
      if (want !== at) return;
      past.dataset.at = String(want);
      replace(past, h("h2", {}, `As it was at index ${s.index} (${s.logTime})`),
        s.clusters.length ? h("table", { class: "grid", id: "tl-past-clusters" },
          h("thead", {}, h("tr", {}, ["Cluster", "Health", "Since", "Scheduling"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, s.clusters.slice(0, 200).map((c) => h("tr", { "data-cluster": c.name, "data-health": c.health },
            h("td", {}, c.name), h("td", {}, c.health), h("td", {}, c.healthSince),
            h("td", {}, c.drained ? "drained" : c.cordoned ? "cordoned" : "schedulable"))))) : null,
        h("table", { class: "grid", id: "tl-past-objects" },
          h("thead", {}, h("tr", {}, ["Object", "Replicas", "Placement", "Decision"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, s.objects.slice(0, 200).map((o) => {
            const pl = Object.entries(o.placement).filter(([, n]) => n > 0).map(([c, n]) => `${c}:${n}`).join(" ") || "none";
            return h("tr", { "data-object": `${o.namespace}/${o.name}`, "data-placement": pl },
              h("td", {}, `${o.namespace}/${o.name}`), h("td", {}, String(o.replicas)), h("td", {}, pl), h("td", {}, readable(o.decision)));
          }))),
        s.objects.length > 200 ? h("p", { class: "muted" }, `first 200 of ${s.objects.length} objects`) : null);
    } catch (e) {
      replace(past, h("p", { class: "error" }, `State at ${want} unavailable: ${e.message}`));
    }
  }, 200);

  function moveTo(i) {
    at = i;
    cursor.value = String(i);
    ctx.setParams(params());
    drawAxis();
    showState();
  }

  function showState() {
    cursorText.textContent = `index ${at}${lastIndex ? ` of ${lastIndex}` : ""}`;
    if (at) fetchState();
  }

  async function showDiff() {
    if (!marks.a || !marks.b) { replace(diff, h("p", { class: "muted" }, "Mark two points (A and B) to see what changed between them.")); return; }
    try {
      const [from, to] = [Number(marks.a), Number(marks.b)].sort((x, y) => x - y);
      const d = await api(`/v1/audit/diff?from=${from}&to=${to}`);
      const items = [...d.clusters.map((i) => ["cluster", i]), ...d.objects.map((i) => ["object", i]), ...d.tenants.map((i) => ["tenant", i])];
      replace(diff, h("h2", {}, `Changes from #${d.fromIndex} to #${d.toIndex}`),
        items.length ? h("ul", { id: "tl-diff-items" }, items.slice(0, 500).map(([k, i]) => h("li", {},
          h("strong", {}, `${k} ${i.key} ${i.op}`),
          h("ul", {}, i.fields.map((f) => h("li", {}, `${f.field}: ${f.before} → ${f.after}`)),
            (i.moves || []).map((m) => h("li", {}, `${m.cluster}: ${m.from} → ${m.to} replicas`)))))) : h("p", {}, "No differences."));
    } catch (e) {
      replace(diff, h("p", { class: "error" }, `Diff unavailable: ${e.message}`));
    }
  }

  async function openExplain(object, index) {
    const [ns, name] = object.split("/");
    replace(explain, h("p", {}, "Loading explanation…"));
    explain.focus();
    try {
      const doc = await api(`/v1/audit/explain/${encodeURIComponent(ns)}/${encodeURIComponent(name)}?from=${index}&to=${index}`);
      const changes = doc.changes || [];
      replace(explain, h("h2", {}, `Why ${object} moved at #${index}`),
        changes.length ? changes.map((c) => h("div", { class: "card", "data-explanation": c.index },
          h("p", {}, `#${c.index} ${fmtTime(c.timeMs)} ${c.command} by ${c.actor}`),
          h("p", {}, `before: ${JSON.stringify(c.before)} → after: ${JSON.stringify(c.after)}`),
          h("p", { class: "cause" }, c.cause),
          h("pre", { class: "explanation" }, c.explanation),
          h("div", { class: "row" },
            h("button", { type: "button", "data-goto": c.index - 1, onclick: () => moveTo(c.index - 1) }, `State just before (#${c.index - 1})`),
            h("button", { type: "button", "data-goto": c.index, onclick: () => moveTo(c.index) }, `State after (#${c.index})`)))) : h("p", {}, "No placement change of this object at that index."));
    } catch (e) {
      replace(explain, h("p", { class: "error" }, `Explanation unavailable: ${e.message}`));
    }
  }

  cursor.addEventListener("input", () => moveTo(Number(cursor.value)));
  show.addEventListener("change", () => { page = 0; ctx.setParams(params()); drawList(); });
  // A time resolves to the last index at or before it (the server's reading of `at`).
  async function jumpToTime(ev) {
    ev.preventDefault();
    const t = gotoTime.value.trim();
    if (!t) return;
    try {
      const s = await api(`/v1/audit/state?at=${encodeURIComponent(t)}`);
      moveTo(s.index);
      msg.textContent = `${t} is index ${s.index}`;
    } catch (e) {
      msg.textContent = `Cannot go to ${t}: ${e.message}`;
    }
  }
  const form = h("form", { id: "tl-filters", class: "filters", onsubmit: (ev) => {
    ev.preventDefault(); at = null; page = 0; ctx.setParams(params()); load(false);
  } },
  FILTERS.map((f) => h("span", { class: "field" }, h("label", { for: `tl-${f}` }, f), inputs[f])),
  h("button", { type: "submit", id: "tl-apply" }, "Apply filters"));
  const markBtn = (k) => h("button", { type: "button", id: `tl-mark-${k}`, onclick: () => { marks[k] = String(at); ctx.setParams(params()); drawAxis(); showDiff(); } }, `Mark ${k.toUpperCase()} here`);
  replace(root,
    h("h1", {}, "Timeline"),
    form, msg, axis,
    h("div", { class: "row" }, h("label", { for: "tl-cursor" }, "Log index"), cursor, cursorText, markBtn("a"), markBtn("b"),
      h("button", { type: "button", id: "tl-now", onclick: () => moveTo(lastIndex) }, "Now")),
    h("form", { id: "tl-goto-form", class: "row", onsubmit: jumpToTime },
      h("label", { for: "tl-goto" }, "Go to time"), gotoTime, h("button", { type: "submit", id: "tl-goto-submit" }, "Go")),
    h("div", { class: "cols" }, past, h("div", {}, explain, diff)),
    h("div", { class: "row" }, h("label", { for: "tl-show" }, "Show"), show),
    list,
    h("button", { type: "button", id: "tl-older", onclick: () => { if (cont) load(true); } }, "Load older records"));
  load(false);
}
