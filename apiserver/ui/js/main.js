// fedraft console: login, the shell (navigation, banner, live connection) and hash routing.
// The route is `#/VIEW?key=value&...`, so a view with its index and filters is a shareable link.

import { h, replace, keepFocus } from "./dom.js";
import { api, token, whoami, Live } from "./api.js";
import { fleetView } from "./fleet.js";
import { workloadsView } from "./workloads.js";
import { policiesView } from "./policies.js";
import { timelineView } from "./timeline.js";
import { healthView } from "./health.js";

const VIEWS = {
  fleet: { title: "Fleet", roles: ["admin", "operator"], render: fleetView },
  workloads: { title: "Workloads", roles: ["admin", "operator", "tenant"], render: workloadsView },
  policies: { title: "Policies", roles: ["admin", "operator"], render: policiesView },
  timeline: { title: "Timeline", roles: ["admin", "operator", "tenant"], render: timelineView },
  health: { title: "fedraft health", roles: ["admin", "operator"], render: healthView },
};

const ctx = {
  role: null,
  live: null,
  route: { view: "", params: new URLSearchParams() },
  // Re-renders the current view's live parts; views set it and keep their own scroll and focus.
  refresh: null,
  navigate(view, params) {
    const q = new URLSearchParams(params || {}).toString();
    location.hash = `#/${view}${q ? "?" + q : ""}`;
  },
  // Replaces the URL's parameters without re-rendering (a cursor moved, a filter typed).
  setParams(params) {
    const q = new URLSearchParams(params).toString();
    history.replaceState(null, "", `#/${ctx.route.view}${q ? "?" + q : ""}`);
    ctx.route.params = new URLSearchParams(q);
  },
};

function parseHash() {
  const m = /^#\/([a-z]*)\??(.*)$/.exec(location.hash || "");
  return { view: m ? m[1] : "", params: new URLSearchParams(m ? m[2] : "") };
}

// A sign-in link (`/ui/#token=...`, as `fedraft demo` prints it): the fragment never reaches a
// server, and it is taken out of the address bar and history at once.
function takeTokenFromLink() {
  const m = /^#token=([^&]+)$/.exec(location.hash || "");
  if (!m) return;
  token.set(decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search + "#/");
}

function main() {
  takeTokenFromLink();
  if (!token.get()) return login();
  start().catch((e) => {
    if (e.status === 401) { token.clear(); login("That token was not accepted."); } else showError(e);
  });
}

function login(message) {
  if (ctx.live) { ctx.live.stop(); ctx.live = null; }
  replace(document.getElementById("nav"));
  replace(document.getElementById("who"));
  const input = h("input", { id: "login-token", type: "password", autocomplete: "off", required: true, "aria-describedby": "login-help" });
  const form = h("form", { id: "login", class: "card narrow", onsubmit: (ev) => {
    ev.preventDefault();
    token.set(input.value.trim());
    main();
  } },
  h("h1", {}, "Sign in to fedraft"),
  message ? h("p", { class: "error", role: "alert" }, message) : null,
  h("label", { for: "login-token" }, "API token"),
  input,
  h("p", { id: "login-help", class: "muted" }, "The bearer token from the node's token file. It is kept in this tab's session storage only."),
  h("button", { type: "submit", id: "login-submit" }, "Sign in"));
  replace(document.getElementById("main"), form);
  input.focus();
}

async function start() {
  ctx.role = await whoami();
  const who = document.getElementById("who");
  replace(who, h("span", { id: "role" }, ctx.role), " ",
    h("button", { type: "button", id: "logout", onclick: () => { token.clear(); login(); } }, "Sign out"));
  ctx.live = new Live(scheduleRefresh, setConn);
  ctx.live.run();
  if (!ctx.routing) { window.addEventListener("hashchange", route); ctx.routing = true; }
  statusLoop();
  route();
}

// Live changes arrive in bursts (heartbeats, status reports): views re-render at most every
// 300 ms, keeping focus where it was.
let pending = false;
function scheduleRefresh() {
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; if (ctx.refresh) keepFocus(ctx.refresh); }, 300);
}

function setConn(state) {
  const el = document.getElementById("conn");
  el.dataset.state = state;
  el.textContent = { live: "● live", disconnected: "○ reconnecting…", unauthorized: "token refused" }[state] || state;
  if (state === "unauthorized") { token.clear(); login("The token is no longer accepted."); }
}

function route() {
  const r = parseHash();
  const allowed = Object.keys(VIEWS).filter((v) => VIEWS[v].roles.includes(ctx.role));
  if (!allowed.includes(r.view)) {
    ctx.navigate(allowed[0]);
    return;
  }
  ctx.route = r;
  replace(document.getElementById("nav"), allowed.map((v) => h("a", {
    href: `#/${v}`, id: `nav-${v}`, "aria-current": v === r.view ? "page" : false,
  }, VIEWS[v].title)));
  ctx.refresh = null;
  const main = document.getElementById("main");
  replace(main);
  document.title = `${VIEWS[r.view].title} · fedraft`;
  try {
    VIEWS[r.view].render(main, ctx);
  } catch (e) {
    showError(e);
  }
}

// The banner: this node without a leader, or applying behind what is committed. Tenants may not
// read /v1/status, so they get the public readiness answer.
async function statusLoop() {
  const banner = document.getElementById("banner");
  while (ctx.live) {
    let text = "";
    try {
      if (ctx.role === "tenant") {
        const r = await fetch("/readyz");
        const doc = await r.json();
        if (!doc.leaderId) text = `Node ${doc.nodeId} has no leader (term ${doc.term}): what you see may be stale and changes will fail.`;
      } else {
        const s = await api("/v1/status?stale=true");
        const lag = (s.commitIndex || 0) - (s.raftAppliedIndex || 0);
        if (s.leaderId === null || s.leaderId === undefined) text = `Node ${s.nodeId} has no leader (term ${s.term}): what you see may be stale and changes will fail.`;
        else if (lag > 100) text = `Node ${s.nodeId} lags: ${lag} committed entries not yet applied.`;
      }
    } catch (e) {
      text = e.status === 401 ? "" : `This node does not answer its status: ${e.message}`;
    }
    banner.textContent = text;
    banner.hidden = !text;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function showError(e) {
  replace(document.getElementById("main"), h("p", { class: "error", role: "alert" }, `Error: ${e.message}`));
}

// A sign-in link opened in a tab that already shows the console changes the fragment only.
window.addEventListener("hashchange", () => { if (/^#token=/.test(location.hash)) location.reload(); });
main();
