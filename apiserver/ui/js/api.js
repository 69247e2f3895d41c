// fedraft console: the API client. The token lives in sessionStorage only (gone with the tab)
// and goes out as `Authorization: Bearer` on every /v1 call. The watch stream is read with
// fetch and a stream reader, because EventSource cannot send that header.

const KEY = "fedraft.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
  }
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Authorization: `Bearer ${token.get() || ""}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let doc = null;
  const text = await resp.text();
  try { doc = text ? JSON.parse(text) : null; } catch { doc = null; }
  if (!resp.ok) throw new ApiError(resp.status, doc);
  return doc;
}

// What the principal may do, learnt from the API itself (the console offers nothing the role
// cannot do): operators and admins read clusters and status; only admins read membership.
export async function whoami() {
  // One item is enough to learn that the token works; the whole list may be thousands.
  await api("/v1/objects?limit=1&stale=true");
  let role = "tenant";
  try {
    await api("/v1/status?stale=true");
    role = "operator";
    try { await api("/v1/admin/members"); role = "admin"; } catch (e) { if (e.status !== 403) throw e; }
  } catch (e) {
    if (e.status !== 403) throw e;
  }
  return role;
}

// Follows `GET /v1/watch` from the log position of a one-item list, so the stream carries only
// what changes from then on: no copy of the state crosses to the page, and the first paint of a
// view waits for one page of its own list, not for every object in the federation. Views read
// their pages from the list endpoints and refetch them when `onChange` says something changed.
// After a break the stream resumes from the last resource version; after 410 Gone (the node's
// history no longer reaches back that far) it starts again from now, and views refetch.
export class Live {
  constructor(onChange, onConn) {
    this.rv = null;
    this.synced = false;
    this.onChange = onChange;
    this.onConn = onConn;
    this.stopped = false;
    this.ctrl = null;
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async run() {
    let backoff = 500;
    while (!this.stopped) {
      try {
        await this.once();
        backoff = 500;
      } catch (e) {
        if (this.stopped) return;
        if (e.status === 401) { this.onConn("unauthorized"); return; }
        if (e.status === 410) { this.rv = null; }
      }
      if (this.stopped) return;
      this.onConn("disconnected");
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  async once() {
    const fresh = this.rv === null;
    if (fresh) {
      // Every principal may list objects (tenants see theirs); the list's resourceVersion is
      // this node's applied index, which its watch history holds.
      const page = await api("/v1/objects?limit=1&stale=true");
      this.rv = page.resourceVersion;
    }
    this.ctrl = new AbortController();
    const resp = await fetch(`/v1/watch?resourceVersion=${this.rv}`, {
      headers: { Authorization: `Bearer ${token.get() || ""}` },
      signal: this.ctrl.signal,
    });
    if (!resp.ok) throw new ApiError(resp.status, null);
    const first = !this.synced;
    this.synced = true;
    this.onConn("live");
    // A view drawn before this stream started may have missed changes: it reloads once.
    if (fresh && !first) this.onChange();
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let nl;
      let changed = false;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) changed = this.event(JSON.parse(line)) || changed;
      }
      if (changed) this.onChange();
    }
  }

  // Whether the event changed anything a view shows.
  event(ev) {
    if (ev.type === "ERROR") {
      const code = ev.object && ev.object.code;
      throw new ApiError(code || 500, null);
    }
    this.rv = ev.resourceVersion;
    return ev.type !== "BOOKMARK";
  }
}
