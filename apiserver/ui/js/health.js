// fedraft console: fedraft's own health. The raft group as this node sees it (voters, learners,
// leader, term), this node's commit and applied index and state hash, each follower's matched
// index when this node leads (its lag), and the data directory's disk figures from /metrics.
// Other nodes' own hashes are on their own consoles: the console talks to its origin only.

import { h, replace, bytes } from "./dom.js";
import { api } from "./api.js";

// The samples of the Prometheus text format whose name is `name` (labels ignored, summed).
export function metric(text, name) {
  let sum = null;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== " " && rest[0] !== "{") continue;
    const v = Number(line.trim().split(/\s+/).pop());
    if (!Number.isNaN(v)) sum = (sum || 0) + v;
  }
  return sum;
}

export function healthView(root, ctx) {
  const body = h("div", { id: "health-body" }, h("p", {}, "Loading…"));
  replace(root, h("h1", {}, "fedraft health"), body);
  let alive = true;
  ctx.refresh = null;
  const tick = async () => {
    if (!alive || !document.contains(body)) { alive = false; return; }
    await render().catch((e) => replace(body, h("p", { class: "error" }, e.message)));
    setTimeout(tick, 2000);
  };

  async function render() {
    const s = await api("/v1/status?stale=true");
    let members = null;
    if (ctx.role === "admin") { try { members = await api("/v1/admin/members"); } catch { members = null; } }
    let sys = null;
    try { sys = await (await fetch("/v1/system/state")).json(); } catch { sys = null; }
    let metrics = "";
    try { metrics = await (await fetch("/metrics")).text(); } catch { metrics = ""; }
    const ids = [...new Set([...(s.voters || []), ...(s.learners || [])])].sort((a, b) => a - b);
    const matched = s.replication || {};
    const nodeRow = (id) => {
      const self = id === s.nodeId;
      const m = matched[id];
      const lag = s.isLeader && m !== undefined && m !== null ? Math.max(0, s.commitIndex - m) : null;
      return h("tr", { "data-node": id },
        h("td", {}, `node ${id}${self ? " (this console)" : ""}`),
        h("td", {}, (s.learners || []).includes(id) ? "learner" : "voter"),
        h("td", {}, id === s.leaderId ? "leader" : s.leaderId ? "follower" : "no leader"),
        h("td", {}, members && members.peerAddrs ? members.peerAddrs[id] || "" : ""),
        h("td", {}, self ? String(s.raftAppliedIndex) : m !== undefined && m !== null ? `matched ${m}` : "—"),
        h("td", {}, self ? String(s.commitIndex - s.raftAppliedIndex) : lag !== null ? String(lag) : "—"),
        h("td", { class: "hash" }, self ? s.stateHash.slice(0, 16) : "—"));
    };
    replace(body,
      h("dl", { class: "facts" },
        h("dt", {}, "Cluster"), h("dd", {}, s.clusterId),
        h("dt", {}, "Leader"), h("dd", { id: "health-leader" }, s.leaderId ? `node ${s.leaderId}` : "none"),
        h("dt", {}, "Term"), h("dd", {}, String(s.term)),
        h("dt", {}, "Committed index"), h("dd", {}, String(s.commitIndex)),
        h("dt", {}, "Applied index (state)"), h("dd", {}, String(s.appliedIndex)),
        h("dt", {}, "Log time"), h("dd", {}, new Date(s.logTimeMs).toISOString()),
        h("dt", {}, "State hash"), h("dd", { class: "hash" }, s.stateHash),
        sys ? [h("dt", {}, "Public fingerprint"), h("dd", { class: "hash" }, `#${sys.appliedIndex ?? sys.index ?? ""} ${String(sys.stateHash || sys.hash || "").slice(0, 16)}`)] : null),
      h("table", { class: "grid", id: "health-nodes" },
        h("caption", {}, "Raft members (lag: entries committed but not yet applied here, or not yet matched by a follower)"),
        h("thead", {}, h("tr", {}, ["Node", "Membership", "Role", "Peer address", "Applied / matched", "Lag", "State hash"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, ids.map(nodeRow))),
      h("h2", {}, "Disk (this node)"),
      h("dl", { class: "facts", id: "health-disk" },
        h("dt", {}, "RocksDB tables (log, snapshots, audit archive)"), h("dd", {}, bytes(metric(metrics, "fedraft_store_sst_bytes"))),
        h("dt", {}, "Free on the data directory's file system"), h("dd", {}, bytes(metric(metrics, "fedraft_store_disk_free_bytes"))),
        h("dt", {}, "File system capacity"), h("dd", {}, bytes(metric(metrics, "fedraft_store_disk_capacity_bytes")))));
  }
  tick();
}
