// fedraft console: the Fleet view. Every cluster with health (since when), cordon and drain,
// taints, region and zone, capacity, and the replicas fedraft placed there; a grid by region and
// zone showing where replicas run and which clusters are dark. Operators and admins (the only
// roles that see this view) may cordon, uncordon and drain, each after a confirmation. The table
// is one page at a time as the server filters and pages it (`/v1/clusters?q=&health=&limit=`);
// the grid is the first 2,000 clusters of the same filter and the replica counts one sum per
// cluster (`/v1/placement/clusters`), all refetched when the watch reports a change.

import { h, replace, fmtTime, ago, readable, ServerPager, confirmDialog, debounce } from "./dom.js";
import { api } from "./api.js";

const PAGE = 100;
const REGION = ["topology.kubernetes.io/region", "region"];
const ZONE = ["topology.kubernetes.io/zone", "zone"];
const HEALTH = { ready: "Ready", notready: "NotReady", unknown: "Unknown" };

function label(c, keys) {
  for (const k of keys) if (c.labels && c.labels[k]) return c.labels[k];
  return "";
}

// Tiles drawn at most: filtering narrows a larger fleet.
const GRID_MAX = 2000;

function capacityText(c) {
  const cap = c.status && c.status.capacity;
  if (!cap) return "not reported";
  const a = cap.allocatable || {};
  const v = cap.available || {};
  const cpu = `${((a.cpuMillis - v.cpuMillis) / 1000).toFixed(1)}/${(a.cpuMillis / 1000).toFixed(1)} CPU`;
  const pods = `${a.pods - v.pods}/${a.pods} pods`;
  return `${cpu}, ${pods} in use`;
}

export function fleetView(root, ctx) {
  const p = ctx.route.params;
  const pager = new ServerPager(api, "/v1/clusters", PAGE, p.get("from") || "");
  const filter = h("input", { id: "fleet-filter", type: "search", value: p.get("q") || "", placeholder: "name, label or health" });
  const table = h("div", { id: "fleet-table" });
  const grid = h("div", { id: "fleet-grid", class: "zones" });
  const msg = h("p", { id: "fleet-msg", role: "status" });
  const canAct = ctx.role === "admin" || ctx.role === "operator";

  async function act(c, verb) {
    const what = { cordon: "No new replicas will be placed on", uncordon: "Placement may use again", drain: "Every replica fedraft placed will be moved off" }[verb];
    const ok = await confirmDialog(`${verb} ${c.name}?`, `${what} ${c.name}.`, `${verb} ${c.name}`);
    if (!ok) return;
    try {
      await api(`/v1/clusters/${encodeURIComponent(c.name)}/${verb}`, { method: "POST" });
      msg.textContent = `${verb} ${c.name}: done`;
    } catch (e) {
      msg.textContent = `${verb} ${c.name} failed: ${e.message}`;
    }
  }

  // A health word filters by health; anything else is a substring of a name or a label.
  function query() {
    const q = filter.value.trim();
    const health = HEALTH[q.toLowerCase()];
    return health ? { health } : { q };
  }

  // The table's page, the grid's clusters and the replica sums, fetched together; a newer load
  // supersedes one still in flight.
  let seq = 0;
  async function load() {
    const mine = ++seq;
    let gridDoc, placedDoc;
    try {
      const q = new URLSearchParams({ stale: "true", limit: String(GRID_MAX) });
      for (const [k, v] of Object.entries(query())) if (v) q.set(k, v);
      const [shown, gd, pd] = await Promise.all([pager.load(query()), api(`/v1/clusters?${q}`), api("/v1/placement/clusters?stale=true")]);
      if (!shown || mine !== seq) return;
      gridDoc = gd;
      placedDoc = pd;
    } catch (e) {
      if (mine !== seq) return;
      replace(table, h("p", { class: "error", role: "alert" }, `Clusters unavailable: ${e.message}`));
      return;
    }
    render(gridDoc.items || [], new Map(Object.entries(placedDoc.replicas || {})));
  }

  function render(shown, placed) {
    const now = Date.now();
    const columns = [
      { title: "Cluster", cell: (c) => h("strong", {}, c.name) },
      { title: "Health", cell: (c) => h("span", { class: `health ${c.status.health}`, "data-health": c.status.health },
        c.status.health, h("span", { class: "muted" }, ` since ${fmtTime(c.status.healthSinceMs)} (${ago(c.status.healthSinceMs, now)})`),
        c.status.health !== "Ready" && c.status.lastHeartbeatMs ? h("div", { class: "muted" }, `last heartbeat ${ago(c.status.lastHeartbeatMs, now)}`) : null,
        c.status.health === "Unknown" && !c.status.lastHeartbeatMs ? h("div", { class: "muted" }, "never heard from") : null,
        // Why, from every node's vantage point: who could not reach it, a broken link held Ready,
        // failover paused by the brake.
        c.status.condition ? h("div", { class: c.status.health === "Ready" ? "muted" : "warn", "data-why": c.name }, readable(c.status.condition)) : null) },
      { title: "Scheduling", cell: (c) => c.drained ? "drained" : c.cordoned ? "cordoned" : "schedulable" },
      { title: "Taints", cell: (c) => (c.taints || []).join(", ") || "—" },
      { title: "Region / zone", cell: (c) => `${label(c, REGION) || "—"} / ${label(c, ZONE) || "—"}` },
      { title: "Capacity", cell: (c) => capacityText(c) },
      { title: "Replicas placed", cell: (c) => String(placed.get(c.name) || 0) },
      { title: "History", cell: (c) => h("a", { href: `#/timeline?cluster=${encodeURIComponent(c.name)}`, "aria-label": `${c.name} on the timeline` }, "timeline") },
    ];
    if (canAct) {
      columns.push({ title: "Actions", cell: (c) => h("span", { class: "row" },
        c.cordoned
          ? h("button", { type: "button", "aria-label": `uncordon ${c.name}`, onclick: () => act(c, "uncordon") }, "Uncordon")
          : h("button", { type: "button", "aria-label": `cordon ${c.name}`, onclick: () => act(c, "cordon") }, "Cordon"),
        h("button", { type: "button", class: "danger", "aria-label": `drain ${c.name}`, disabled: c.drained, onclick: () => act(c, "drain") }, "Drain")) });
    }
    replace(table, pager.table({
      columns, caption: "Member clusters",
      rowAttrs: (c) => ({ "data-cluster": c.name }),
      onMove: () => { ctx.setParams(params()); load(); },
    }));
    renderGrid(shown, placed);
  }

  // Region -> zone -> tiles. Tiles are small; past a few thousand clusters the grid shows the
  // first GRID_MAX (filtering narrows it).
  function renderGrid(all, placed) {
    const regions = new Map();
    for (const c of all.slice(0, GRID_MAX)) {
      const r = label(c, REGION) || "(no region)";
      const z = label(c, ZONE) || "(no zone)";
      if (!regions.has(r)) regions.set(r, new Map());
      const zones = regions.get(r);
      if (!zones.has(z)) zones.set(z, []);
      zones.get(z).push(c);
    }
    replace(grid, [...regions.entries()].sort().map(([r, zones]) => h("section", { class: "region", "aria-label": `region ${r}` },
      h("h3", {}, r),
      [...zones.entries()].sort().map(([z, cs]) => h("div", { class: "zone" },
        h("div", { class: "muted" }, z),
        h("div", { class: "tiles" }, cs.map((c) => {
          const n = placed.get(c.name) || 0;
          const dark = c.status.health !== "Ready";
          return h("div", { class: `tile ${dark ? "dark" : ""} ${c.cordoned ? "cordoned" : ""}`, "data-tile": c.name,
            title: `${c.name}: ${c.status.health}, ${n} replicas` },
          h("div", { class: "tname" }, c.name), h("div", { class: "tcount" }, `${n} replicas`),
          h("div", { class: "tstate" }, dark ? c.status.health : c.cordoned ? "cordoned" : "ready"));
        })))))));
  }

  function params() {
    const o = {};
    if (filter.value) o.q = filter.value;
    if (pager.token()) o.from = pager.token();
    return o;
  }

  filter.addEventListener("input", debounce(() => { pager.reset(); ctx.setParams(params()); load(); }, 150));
  replace(root,
    h("h1", {}, "Fleet"),
    h("div", { class: "row" }, h("label", { for: "fleet-filter" }, "Filter clusters"), filter),
    msg,
    h("h2", {}, "Where replicas run"), grid,
    h("h2", {}, "Clusters"), table);
  ctx.refresh = () => load();
  replace(table, h("p", {}, "Loading…"));
  load();
}
