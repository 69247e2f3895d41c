// fedraft console: the Policies view. Every placement document written through the
// Kubernetes-compatible door (Karmada's propagation and override policies, KubeFed's federated
// types and ReplicaSchedulingPreferences) with what it declares and, from the applied state,
// which objects it actually selects and where each was placed (`GET /v1/policies`, paged and
// filtered by the server, refetched on live changes). Native objects carry their placement
// inline and are in the Workloads view. Operators and admins only: placements name clusters.

import { h, replace, ServerPager, debounce } from "./dom.js";
import { api } from "./api.js";
import { declaredPlacement } from "./door.js";

const PAGE = 50;
const ROLE = {
  places: "places (propagation)",
  overrides: "overrides (per-cluster changes)",
  federates: "federates (KubeFed)",
  divides: "divides replicas (RSP)",
  bounds: "bounds the namespace (KubeFed)",
};

export function placementText(p) {
  const parts = Object.entries(p || {}).filter(([, n]) => n > 0).map(([c, n]) => `${c}:${n}`);
  return parts.length ? parts.join(" ") : "none";
}

function policyKey(d) {
  return `${d.kind}/${d.namespace ? d.namespace + "/" : ""}${d.name}`;
}

// The objects a policy selects, each with its placement and a link to its details.
function boundCell(d) {
  if (!d.bound.length) return h("span", { class: "muted" }, "selects nothing now");
  return h("ul", { class: "bound" },
    d.bound.map((b) => {
      const key = `${b.namespace}/${b.name}`;
      const pl = b.exists ? placementText(b.placement) : "not created";
      return h("li", { "data-bound": key, "data-placement": pl },
        h("a", { href: `#/workloads?obj=${encodeURIComponent(key)}&q=${encodeURIComponent(b.name)}` }, key),
        ` → ${pl}`,
        b.exists && b.decision ? h("div", { class: "muted" }, b.decision) : null);
    }),
    d.boundCount > d.bound.length ? h("li", { class: "muted" }, `and ${d.boundCount - d.bound.length} more`) : null);
}

export function policiesView(root, ctx) {
  const p = ctx.route.params;
  const pager = new ServerPager(api, "/v1/policies", PAGE, p.get("from") || "");
  const filter = h("input", { id: "pol-filter", type: "search", value: p.get("q") || "", placeholder: "kind, namespace or name" });
  const table = h("div", { id: "pol-table" });

  function params() {
    const o = {};
    if (filter.value) o.q = filter.value;
    if (pager.token()) o.from = pager.token();
    return o;
  }

  async function load() {
    try {
      if (!(await pager.load({ q: filter.value.trim() }))) return;
    } catch (e) {
      replace(table, h("p", { class: "error", role: "alert" }, `Policies unavailable: ${e.message}`));
      return;
    }
    replace(table, pager.table({
      caption: "Placement policies and what they placed where (from the applied state)",
      onMove: () => { ctx.setParams(params()); load(); },
      rowAttrs: (d) => ({ "data-policy": policyKey(d) }),
      columns: [
        { title: "Kind", cell: (d) => d.kind },
        { title: "Policy", cell: (d) => h("strong", {}, d.namespace ? `${d.namespace}/${d.name}` : d.name) },
        { title: "Role", cell: (d) => ROLE[d.role] || d.role },
        { title: "Declares", cell: (d) => declaredPlacement({ spec: d.spec }) },
        { title: "Selected objects and their placement", cell: boundCell },
      ],
    }));
  }

  filter.addEventListener("input", debounce(() => { pager.reset(); ctx.setParams(params()); load(); }, 150));
  replace(root,
    h("h1", {}, "Policies"),
    h("div", { class: "row" }, h("label", { for: "pol-filter" }, "Filter policies"), filter),
    table);
  ctx.refresh = () => load();
  replace(table, h("p", {}, "Loading…"));
  load();
}
