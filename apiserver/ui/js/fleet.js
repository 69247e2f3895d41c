// fedraft console: the Fleet view. Every cluster with health (since when), cordon and drain,
// taints, region and zone, capacity, and the replicas fedraft placed there; a grid by region and
// zone showing where replicas run and which clusters are dark. Operators and admins (the only
// roles that see this view) may cordon, uncordon and drain, each after a confirmation.

import { h, replace, fmtTime, ago, pagedTable, confirmDialog, debounce } from "./dom.js";
import { api } from "./api.js";

const PAGE = 100;
const REGION = ["topology.kubernetes.io/region", "region"];
const ZONE = ["topology.kubernetes.io/zone", "zone"];

function label(c, keys) {
  for (const k of keys) if (c.labels && c.labels[k]) return c.labels[k];
  return "";
}

// Replicas placed per cluster, summed over every object.
export function placedByCluster(objects) {
  const out = new Map();
  for (const o of objects) {
    const p = (o.status && o.status.placement) || {};
    for (const [c, n] of Object.entries(p)) out.set(c, (out.get(c) || 0) + n);
  }
  return out;
}

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
  let page = Number(p.get("page") || 0);
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

  function render() {
    const now = Date.now();
    const placed = placedByCluster(ctx.live.objects.values());
    const q = filter.value.trim().toLowerCase();
    const all = [...ctx.live.clusters.values()].sort((a, b) => a.name.localeCompare(b.name));
    const rows = all.filter((c) => !q || c.name.toLowerCase().includes(q)
      || (c.status && c.status.health.toLowerCase() === q)
      || Object.entries(c.labels || {}).some(([k, v]) => `${k}=${v}`.toLowerCase().includes(q)));
    const columns = [
      { title: "Cluster", cell: (c) => h("strong", {}, c.name) },
      { title: "Health", cell: (c) => h("span", { class: `health ${c.status.health}`, "data-health": c.status.health },
        c.status.health, h("span", { class: "muted" }, ` since ${fmtTime(c.status.healthSinceMs)} (${ago(c.status.healthSinceMs, now)})`),
        c.status.health !== "Ready" && c.status.lastHeartbeatMs ? h("div", { class: "muted" }, `last heartbeat ${ago(c.status.lastHeartbeatMs, now)}`) : null,
        c.status.health === "Unknown" ? h("div", { class: "muted" }, "never heard from") : null) },
      { title: "Scheduling", cell: (c) => c.drained ? "drained" : c.cordoned ? "cordoned" : "schedulable" },
      { title: "Taints", cell: (c) => (c.taints || []).join(", ") || "—" },
      { title: "Region / zone", cell: (c) => `${label(c, REGION) || "—"} / ${label(c, ZONE) || "—"}` },
      { title: "Capacity", cell: (c) => capacityText(c) },
      { title: "Replicas placed", cell: (c) => String(placed.get(c.name) || 0) },
    ];
    if (canAct) {
      columns.push({ title: "Actions", cell: (c) => h("span", { class: "row" },
        c.cordoned
          ? h("button", { type: "button", "aria-label": `uncordon ${c.name}`, onclick: () => act(c, "uncordon") }, "Uncordon")
          : h("button", { type: "button", "aria-label": `cordon ${c.name}`, onclick: () => act(c, "cordon") }, "Cordon"),
        h("button", { type: "button", class: "danger", "aria-label": `drain ${c.name}`, disabled: c.drained, onclick: () => act(c, "drain") }, "Drain")) });
    }
    replace(table, pagedTable({
      columns, rows, page, pageSize: PAGE, caption: "Member clusters",
      rowAttrs: (c) => ({ "data-cluster": c.name }),
      onPage: (n) => { page = n; ctx.setParams(params()); render(); },
    }));
    renderGrid(all, placed);
  }

  // Region -> zone -> tiles. Tiles are small; past a few thousand clusters the grid shows the
  // first 2,000 (filtering narrows it).
  function renderGrid(all, placed) {
    const regions = new Map();
    for (const c of all.slice(0, 2000)) {
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
    if (page) o.page = page;
    return o;
  }

  filter.addEventListener("input", debounce(() => { page = 0; ctx.setParams(params()); render(); }, 150));
  replace(root,
    h("h1", {}, "Fleet"),
    h("div", { class: "row" }, h("label", { for: "fleet-filter" }, "Filter clusters"), filter),
    msg,
    h("h2", {}, "Where replicas run"), grid,
    h("h2", {}, "Clusters"), table);
  ctx.refresh = () => { if (ctx.live.synced) render(); };
  if (ctx.live.synced) render(); else replace(table, h("p", {}, "Loading…"));
}
