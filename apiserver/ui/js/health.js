// fedraft console: fedraft's own health. Every raft member as this node reaches it over the peer
// transport (GET /v1/status/nodes): role, term, commit and applied index, lag behind the leader's
// commit, state hash, and bytes on disk of the raft log, the audit archive, snapshots and the WAL.
// The members' state hashes are compared at one index (the lowest applied among them; members
// ahead answer from their archive), and a difference there is shown as an alarm. Two charts
// follow the write rate (the leader's commit index over time) and each member's apply lag, from
// the samples this page took since it was loaded (kept across views, not across reloads).

import { h, replace, bytes } from "./dom.js";
import { api } from "./api.js";
import { linesChart } from "./charts.js";

const REFRESH_MS = 3000;
// About ten minutes of samples at the refresh rate.
const MAX_SAMPLES = 200;
// { t (ms), commit (leader's commit index), lag: { nodeId: entries } }, oldest first.
const samples = [];

function sample(leaderCommit, members) {
  const lag = {};
  for (const m of members) if (m.reachable) lag[m.nodeId] = Math.max(0, leaderCommit - m.raftAppliedIndex);
  samples.push({ t: Date.now(), commit: leaderCommit, lag });
  if (samples.length > MAX_SAMPLES) samples.shift();
}

function rateAndLagCharts() {
  const t0 = samples.length ? samples[0].t : 0;
  const secs = (t) => `${Math.round((t - t0) / 1000)} s`;
  const rate = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].t - samples[i - 1].t) / 1000;
    if (dt > 0) rate.push([samples[i].t, Math.max(0, samples[i].commit - samples[i - 1].commit) / dt]);
  }
  const nodes = [...new Set(samples.flatMap((x) => Object.keys(x.lag)))].sort();
  return h("div", { class: "cols" },
    h("div", {}, h("h2", {}, "Write rate"),
      linesChart({ id: "chart-write-rate", title: "committed entries per second", series: [{ label: "entries/s", points: rate }], xLabel: secs })),
    h("div", {}, h("h2", {}, "Apply lag"),
      linesChart({
        id: "chart-apply-lag",
        title: "entries committed but not applied, per member",
        series: nodes.map((n) => ({ label: `node ${n}`, points: samples.filter((x) => n in x.lag).map((x) => [x.t, x.lag[n]]) })),
        xLabel: secs,
      })));
}

const short = (hash) => (hash ? `${hash.slice(0, 16)}…` : "—");

// The alarm (or the all-clear) of the comparison of state hashes at one index.
function comparisonView(c) {
  if (!c) return h("p", { id: "health-compare", class: "warn", "data-agree": "unknown" }, "No member answered: nothing to compare.");
  const ids = Object.keys(c.hashes);
  const unknown = Object.entries(c.unknown || {});
  if (!c.agree) {
    return h("div", { id: "health-compare", class: "alarm", role: "alert", "data-agree": "false" },
      h("strong", {}, `ALARM: state hashes differ at index ${c.index}. `),
      "Replicas of the same log disagree about the state; stop writes and compare the audit archives (fedraft audit verify).",
      h("ul", {}, ids.map((id) => h("li", { class: "hash" }, `node ${id}: ${c.hashes[id]}`))));
  }
  return h("div", { id: "health-compare", class: "ok", "data-agree": "true", "data-index": c.index },
    `${ids.length} member${ids.length === 1 ? "" : "s"} agree on the state hash at index ${c.index}`,
    ids.length ? h("span", { class: "hash" }, ` (${short(c.hashes[ids[0]])})`) : null,
    unknown.length ? h("div", { class: "warn" }, unknown.map(([id, why]) => `node ${id} cannot tell: ${why}`).join("; ")) : null);
}

export function healthView(root, ctx) {
  const body = h("div", { id: "health-body" }, h("p", {}, "Loading…"));
  replace(root, h("h1", {}, "fedraft health"), body);
  ctx.refresh = null;
  const tick = async () => {
    if (!document.contains(body)) return;
    await render().catch((e) => replace(body, h("p", { class: "error", role: "alert" }, e.message)));
    if (document.contains(body)) setTimeout(tick, REFRESH_MS);
  };

  async function render() {
    const [s, all] = await Promise.all([api("/v1/status?stale=true"), api("/v1/status/nodes")]);
    const members = all.members || [];
    const leader = members.find((m) => m.isLeader);
    const leaderCommit = leader ? leader.commitIndex : Math.max(0, ...members.map((m) => m.commitIndex || 0));
    sample(leaderCommit, members);
    const row = (m) => {
      const lag = m.reachable ? Math.max(0, leaderCommit - m.raftAppliedIndex) : null;
      const d = m.disk || {};
      const cells = m.reachable ? [
        m.nodeId === all.leaderId ? "leader" : all.leaderId ? "follower" : "no leader",
        String(m.term),
        String(m.commitIndex),
        String(m.raftAppliedIndex),
        h("span", { class: lag > 100 ? "warn" : "" }, String(lag)),
        h("span", { class: "hash", title: m.stateHash }, `#${m.stateIndex} ${short(m.stateHash)}`),
        bytes(d.logBytes), bytes(d.archiveBytes), bytes(d.snapshotBytes), bytes(d.walBytes),
        `${bytes(d.freeBytes)} of ${bytes(d.capacityBytes)}`,
      ] : [h("span", { class: "error" }, `unreachable: ${m.error}`), "", "", "", "", "", "", "", "", "", ""];
      return h("tr", { "data-node": m.nodeId, "data-reachable": String(!!m.reachable) },
        h("th", { scope: "row" }, `node ${m.nodeId}${m.nodeId === all.askedNode ? " (this console)" : ""}`),
        h("td", {}, m.voter ? "voter" : "learner"),
        h("td", {}, m.peerAddr || ""),
        cells.map((c) => h("td", {}, c)));
    };
    replace(body,
      comparisonView(all.compared),
      h("dl", { class: "facts" },
        h("dt", {}, "Cluster"), h("dd", {}, s.clusterId),
        h("dt", {}, "Leader"), h("dd", { id: "health-leader" }, all.leaderId ? `node ${all.leaderId}` : "none"),
        h("dt", {}, "Term"), h("dd", {}, String(all.term)),
        h("dt", {}, "Leader's commit index"), h("dd", {}, String(leaderCommit)),
        h("dt", {}, "Log time"), h("dd", {}, new Date(s.logTimeMs).toISOString())),
      h("div", { class: "scroll" }, h("table", { class: "grid", id: "health-nodes" },
        h("caption", {}, "Raft members, each answering for itself over the peer transport (lag: entries the leader committed that the member has not applied)"),
        h("thead", {}, h("tr", {}, ["Node", "Membership", "Peer address", "Role", "Term", "Commit", "Applied", "Lag", "State hash",
          "Raft log", "Audit archive", "Snapshots + checkpoints", "WAL", "Disk free"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, members.map(row)))),
      rateAndLagCharts());
  }
  tick();
}
