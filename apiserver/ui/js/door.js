// fedraft console: what came in through the Kubernetes-compatible door, beside the native objects.
// Resource templates are federated objects named `kind.group:name` (`deployment.apps:web`), so the
// Workloads table already shows their placement per cluster; this module names their kind and
// lists the placement documents the door keeps as written: Karmada's four policy kinds and
// KubeFed's federated types and ReplicaSchedulingPreferences, read from the door's own list
// endpoints with the same token. Lists the principal may not read are left out, not guessed.

import { h } from "./dom.js";
import { api } from "./api.js";

const GROUPS = ["policy.karmada.io", "types.kubefed.io", "scheduling.kubefed.io"];

// `deployment.apps:web` -> { kind: "deployment", group: "apps", name: "web" }; null for a native
// object (its name holds no ':').
export function templateOf(name) {
  const i = name.indexOf(":");
  if (i < 0) return null;
  const [kind, ...group] = name.slice(0, i).split(".");
  return { kind, group: group.join("."), name: name.slice(i + 1) };
}

// Where a document says its objects go: Karmada's cluster affinity and static weights, or
// KubeFed's placement and RSP's per-cluster weights.
export function declaredPlacement(doc) {
  const spec = doc.spec || {};
  const p = spec.placement || {};
  const names = (p.clusterAffinity && p.clusterAffinity.clusterNames)
    || (p.clusters && p.clusters.map((c) => c.name))
    || (spec.clusters && Object.keys(spec.clusters));
  const weights = p.replicaScheduling && p.replicaScheduling.weightPreference
    && p.replicaScheduling.weightPreference.staticWeightList;
  const parts = [];
  if (names && names.length) parts.push(`clusters ${names.join(", ")}`);
  if (weights && weights.length) {
    parts.push(`weights ${weights.map((w) => `${((w.targetCluster || {}).clusterNames || []).join("+")}:${w.weight}`).join(" ")}`);
  }
  if (p.clusterSelector || (p.clusterAffinity && p.clusterAffinity.labelSelector)) parts.push("by cluster labels");
  if (spec.overrideRules || spec.overrides) parts.push("overrides");
  return parts.join("; ") || "every cluster";
}

function selects(doc) {
  const sel = (doc.spec && doc.spec.resourceSelectors) || [];
  if (sel.length) return sel.map((s) => `${s.kind}${s.name ? " " + s.name : ""}`).join(", ");
  if (doc.spec && doc.spec.template) return `${(doc.kind || "").replace(/^Federated/, "")} template`;
  return "";
}

// Every placement document of the door the principal may list, as { kind, key, doc }.
export async function doorDocuments() {
  const out = [];
  for (const g of GROUPS) {
    let group;
    try { group = await api(`/apis/${g}`); } catch { continue; }
    const version = group.preferredVersion && group.preferredVersion.groupVersion;
    if (!version) continue;
    let res;
    try { res = await api(`/apis/${version}`); } catch { continue; }
    for (const r of res.resources || []) {
      if (r.name.includes("/") || !(r.verbs || []).includes("list")) continue;
      let list;
      try { list = await api(`/apis/${version}/${r.name}`); } catch { continue; }
      for (const doc of list.items || []) {
        const m = doc.metadata || {};
        out.push({ kind: r.kind, key: m.namespace ? `${m.namespace}/${m.name}` : m.name, doc });
      }
    }
  }
  return out;
}

// The door's documents as a table (or a line saying there are none).
export function doorTable(docs) {
  if (!docs.length) return h("p", { class: "muted", id: "door-none" }, "No Karmada or KubeFed documents.");
  return h("table", { class: "grid", id: "door-docs" },
    h("caption", {}, "Placement documents written through the Kubernetes-compatible API (Karmada, KubeFed)"),
    h("thead", {}, h("tr", {}, ["Kind", "Name", "Selects", "Declared placement"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, docs.map((d) => h("tr", { "data-door": `${d.kind}/${d.key}` },
      h("td", {}, d.kind), h("td", {}, d.key), h("td", {}, selects(d.doc)), h("td", {}, declaredPlacement(d.doc))))));
}
