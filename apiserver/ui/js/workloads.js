// fedraft console: the Workloads view. Federated objects with placement per cluster, desired vs
// ready, conditions and shortfall, and the last decision, one page at a time as the server
// filters and pages them (`/v1/objects?q=&limit=&continue=`, refetched on live changes). One
// object's details (read alone) add the scheduler's reasons, a chart of ready vs desired per
// cluster, ready vs desired and the replicas per cluster over time (both from the audit
// archive's history of the object) and the template with its overrides.

import { h, replace, fmtTime, readable, ServerPager, debounce } from "./dom.js";
import { api } from "./api.js";
import { readyChart, historyChart, linesChart } from "./charts.js";
import { templateOf, doorDocuments, doorTable } from "./door.js";

const PAGE = 100;

function placementText(o) {
  const p = Object.entries((o.status && o.status.placement) || {}).filter(([, n]) => n > 0);
  return p.length ? p.map(([c, n]) => `${c}:${n}`).join(" ") : "none";
}

// Conditions whose True is the bad news; for the others, anything but True is.
const NEGATIVE = new Set(["Unschedulable", "Degraded", "ReplicaFailure", "Stalled"]);
const isProblem = (c) => (NEGATIVE.has(c.type) ? c.status === "True" : c.status !== "True");

function problems(o) {
  return ((o.status && o.status.conditions) || []).filter(isProblem);
}

// The manifest each member cluster receives, as the server rendered it (Secret values redacted
// there, never here).
function renderedDetails(rendered) {
  const body = !rendered ? [h("p", {}, "Loading…")]
    : rendered.error ? [h("p", { class: "muted" }, `Unavailable: ${rendered.error}`)]
    : !(rendered.clusters || []).length ? [h("p", { class: "muted" }, "Placed on no cluster.")]
    : rendered.clusters.flatMap((c) => [
      h("h4", {}, `${c.cluster} (${c.replicas} replicas)`),
      c.error ? h("p", { class: "warn" }, c.error) : h("pre", { "data-cluster": c.cluster }, JSON.stringify(c.manifest, null, 2)),
    ]);
  return h("details", { id: "wl-rendered" }, h("summary", {}, "Rendered per cluster"), ...body);
}

export function workloadsView(root, ctx) {
  const p = ctx.route.params;
  let selected = p.get("obj") || "";
  const pager = new ServerPager(api, "/v1/objects", PAGE, p.get("from") || "");
  const filter = h("input", { id: "wl-filter", type: "search", value: p.get("q") || "", placeholder: "namespace/name" });
  const table = h("div", { id: "wl-table" });
  const detail = h("section", { id: "wl-detail", "aria-label": "object details" });

  function params() {
    const o = {};
    if (filter.value) o.q = filter.value;
    if (pager.token()) o.from = pager.token();
    if (selected) o.obj = selected;
    return o;
  }

  async function load() {
    try {
      if (!(await pager.load({ q: filter.value.trim() }))) return;
    } catch (e) {
      replace(table, h("p", { class: "error", role: "alert" }, `Objects unavailable: ${e.message}`));
      return;
    }
    render();
  }

  function render() {
    replace(table, pager.table({
      caption: "Federated objects",
      onMove: () => { ctx.setParams(params()); load(); },
      rowAttrs: (o) => ({ "data-object": `${o.namespace}/${o.name}`, class: selected === `${o.namespace}/${o.name}` ? "selected" : "" }),
      columns: [
        { title: "Object", cell: (o) => h("button", { type: "button", class: "link", "aria-label": `details of ${o.namespace}/${o.name}`,
          onclick: () => select(`${o.namespace}/${o.name}`) }, `${o.namespace}/${o.name}`) },
        { title: "Kind", cell: (o) => {
          const t = templateOf(o.name);
          const kind = (o.template && o.template.kind) || "";
          return t ? h("span", { "data-door-template": t.name }, kind, h("div", { class: "muted" }, "resource template (Kubernetes API)")) : kind;
        } },
        { title: "Ready / desired", cell: (o) => `${o.status.readyReplicas} / ${o.status.desiredReplicas ?? "—"}` },
        { title: "Placement", cell: (o) => h("span", { "data-placement": placementText(o) }, placementText(o)) },
        { title: "Conditions", cell: (o) => problems(o).map((c) => h("div", { class: "warn" }, `${c.type}: ${readable(c.message)}`)) },
        { title: "Shortfall", cell: (o) => o.status.shortfall ? `${o.status.shortfall.replicas}: ${o.status.shortfall.message}` : "—" },
        { title: "Last decision", cell: (o) => o.status.lastDecision ? readable(o.status.lastDecision.summary) : "" },
      ],
    }));
    if (selected) renderDetail(false);
  }

  function select(key) {
    selected = key;
    ctx.setParams(params());
    render();
    renderDetail(true);
    detail.focus();
  }

  let history = null;
  let historyFor = "";
  let rendered = null;
  // The selected object is read on its own (the page holds no copy of the state); its history
  // and rendered manifests when it is selected or `fetchMore` asks.
  async function renderDetail(fetchMore) {
    const want = selected;
    const [ns, name] = want.split("/");
    const path = `/v1/namespaces/${encodeURIComponent(ns)}/objects/${encodeURIComponent(name)}`;
    let o;
    // Templates of the Kubernetes door (`deployment.apps:web`) are read at the same path.
    try { o = await api(`${path}?stale=true`); } catch { o = null; }
    if (want !== selected) return;
    if (!o) { replace(detail, h("p", {}, `${selected} does not exist (or is not yours to see).`)); return; }
    if (fetchMore || historyFor !== selected) {
      historyFor = selected;
      history = null;
      rendered = null;
      try { rendered = await api(`${path}/rendered`); } catch (e) { rendered = { error: e.message }; }
      try { history = await api(`/v1/audit/explain/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`); } catch (e) { history = { error: e.message }; }
      if (want !== selected) return;
    }
    const st = o.status;
    const clusters = Object.entries(st.clusters || {});
    const dec = st.lastDecision || {};
    replace(detail,
      h("h2", { tabindex: "-1" }, selected),
      h("div", { class: "cols" },
        h("div", {},
          h("h3", {}, "Per cluster"),
          h("table", { class: "grid", id: "wl-clusters" },
            h("thead", {}, h("tr", {}, ["Cluster", "Replicas", "Ready", "Applied", "Message", "Reported"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, clusters.map(([c, v]) => h("tr", { "data-cluster": c },
              h("td", {}, c), h("td", {}, String(v.replicas)), h("td", {}, String(v.readyReplicas)),
              h("td", {}, v.applied ? "yes" : "no"), h("td", {}, v.message || ""), h("td", {}, fmtTime(v.reportedMs)))))),
          h("h3", {}, "Conditions"),
          h("ul", {}, (st.conditions || []).map((c) => h("li", { class: isProblem(c) ? "warn" : "" }, `${c.type} ${c.status}${c.message ? ": " + readable(c.message) : ""}`))),
          st.shortfall ? h("p", { class: "warn" }, `Shortfall ${st.shortfall.replicas}: ${st.shortfall.message}`) : null,
          h("h3", {}, "Last decision"),
          h("p", { id: "wl-decision" }, `${readable(dec.summary)} (log index ${dec.decidedIndex ?? "—"})`),
          (dec.dropped || []).length ? h("ul", {}, dec.dropped.map((d) => h("li", {}, `${d.cluster}: ${readable(d.reasonText || d.reason)}`))) : null),
        h("div", {},
          h("h3", {}, "Ready vs desired per cluster"),
          readyChart(clusters.map(([c, v]) => ({ label: c, want: v.replicas, have: v.readyReplicas }))),
          h("h3", {}, "Ready vs desired over time"),
          history && history.readiness ? linesChart({
            id: "chart-readiness",
            title: "ready vs desired over time",
            series: [
              { label: "desired", points: history.readiness.map((r) => [r.index, r.desired]) },
              { label: "ready", points: history.readiness.map((r) => [r.index, r.ready]) },
            ],
            xLabel: (i) => `#${i}`,
          }) : h("p", { class: "muted" }, history && history.error ? "History unavailable." : "Loading…"),
          h("h3", {}, "Replicas per cluster over time"),
          history && history.error ? h("p", { class: "muted" }, `History unavailable: ${history.error}`)
            : history ? historyChart(history.changes || []) : h("p", {}, "Loading…"),
          history && history.changes ? h("p", {}, h("a", { href: `#/timeline?object=${encodeURIComponent(selected)}` }, "This object on the timeline")) : null)),
      h("details", {}, h("summary", {}, "Template and overrides"),
        h("p", { class: "muted" }, "What fedraft applies to each cluster is this template with the overrides for that cluster; credentials never appear here."),
        h("pre", {}, JSON.stringify({ template: o.template, overrides: o.overrides, placement: o.placement }, null, 2))),
      renderedDetails(rendered));
  }

  // The door's placement documents, read when the section is opened (and again on live changes
  // while it is open).
  const doorBody = h("div", { id: "wl-door-body" }, h("p", {}, "Loading…"));
  const door = h("details", { id: "wl-door" },
    h("summary", {}, "Karmada and KubeFed placement documents"), doorBody);
  let doorBusy = false;
  async function loadDoor() {
    if (!door.open || doorBusy) return;
    doorBusy = true;
    try { replace(doorBody, doorTable(await doorDocuments())); } catch (e) { replace(doorBody, h("p", { class: "error" }, e.message)); }
    doorBusy = false;
  }
  door.addEventListener("toggle", loadDoor);

  filter.addEventListener("input", debounce(() => { pager.reset(); ctx.setParams(params()); load(); }, 150));
  replace(root,
    h("h1", {}, "Workloads"),
    h("div", { class: "row" }, h("label", { for: "wl-filter" }, "Filter objects"), filter),
    table, door, detail);
  detail.setAttribute("tabindex", "-1");
  ctx.refresh = () => { load(); loadDoor(); };
  replace(table, h("p", {}, "Loading…"));
  load().then(() => { if (selected) renderDetail(true); });
}
